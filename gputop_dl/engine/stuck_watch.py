"""The engine's watch for stuck jobs: each tick's rows to the judge, py-spy dumps when due.

`StuckWatch.annotate` feeds `analyse/live/stuck.py`'s `StuckJudge` one look a live job a tick;
once a job has made no progress for half its threshold it dumps the job's stacks (its trainers'
and its loader workers', `collect/pyspy/dump.py`, non-blocking) in a thread of its own, one job
at a time, every `dump_every` seconds; a job the judge calls stuck leaves with status "stuck"
and its `Stuck`. `changes()` hands over the jobs that became stuck or moved again since the
last call, for the log, the store and alerts.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Hashable

from gputop_dl.analyse.live.stuck import Dump, StuckJudge, look_of
from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.pyspy.dump import dump_stacks
from gputop_dl.snapshot import JobSample, evolve
from gputop_dl.stuck import Stuck, ThreadStack

MAX_WORKERS = 8  # loader workers dumped a job
DumpFn = Callable[[int], tuple[tuple[ThreadStack, ...] | None, str | None]]


def targets(j: JobSample) -> tuple[list[int], list[int], tuple[tuple[int, int], ...]]:
    """A job's trainers (its ranks, else its root), its loader workers, its (rank, pid)s."""
    dist = j.distributed
    ranks = tuple((r.rank, r.pid) for r in dist.ranks) if dist is not None else ()
    trainers = [pid for _, pid in ranks] or ([j.pid] if j.pid is not None else [])
    workers = [p.pid for p in j.procs if p.role == "worker" and p.ppid in trainers]
    return trainers, workers[:MAX_WORKERS], ranks


def dump_job(dump: DumpFn, trainers: list[int], workers: list[int],
             ranks: tuple[tuple[int, int], ...], t: float) -> tuple[Dump, str | None]:
    """The main threads of a job's trainers and loader workers, as one `Dump` at `t`; and why
    py-spy may not read them at all (no rights, not installed), else None."""
    mains: list[ThreadStack] = []
    wmains: list[ThreadStack] = []
    err = denied = None
    for pid in trainers + workers:
        try:
            got, why = dump(pid)
        except Exception as exc:  # noqa: BLE001 - a broken dump must not break the monitor
            got, why = None, f"py-spy failed: {exc}"
        main = next((s for s in got or () if s.main), None)
        if main is not None:
            (mains if pid in trainers else wmains).append(main)
            continue
        if why and (pyspy.is_permission_error(why) or "not installed" in why):
            denied = why
        if pid in trainers:
            err = why or "no stack"
    return Dump(t, tuple(mains), tuple(wmains), ranks, err if not mains else None), denied


class StuckWatch:
    """Judges the live jobs of each tick; touched by the engine thread (the dumps by its own)."""

    def __init__(self, judge: StuckJudge | None = None, dump: DumpFn | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.judge = judge or StuckJudge()
        self._dump: DumpFn = dump or (lambda pid: dump_stacks(pid))
        self.clock = clock
        self._lock = threading.Lock()
        self._done: list[tuple[Hashable, Dump]] = []
        self._busy: threading.Thread | None = None
        self._stuck: dict[Hashable, Stuck] = {}
        self._changes: list[tuple[JobSample, Stuck | None]] = []
        # jobs py-spy may not read (another user's, without root): never dumped again, so never
        # judged stuck; `denied` is the last reason
        self._denied: set[Hashable] = set()
        self.denied: str | None = None

    def annotate(self, wall: float, jobs: list[JobSample]) -> list[JobSample]:
        """The rows, a stuck job's with status "stuck" and its `Stuck`."""
        now, judge = self.clock(), self.judge
        with self._lock:
            done, self._done = self._done, []
        for key, d in done:
            judge.dumped(key, d)
        keys, out = [], []
        for j in jobs:
            if j.status not in ("running", "stuck") or j.pid is None:
                out.append(j)
                continue
            key = (j.launched, j.name, j.pid)
            keys.append(key)
            judge.look(key, look_of(j, now))
            if judge.dump_due(key, now):
                self._start_dump(key, j, now)
            st = judge.judge(key, now, wall)
            was = self._stuck.get(key)
            age = judge.progress_age(key, now)
            # one copy of the row a tick (this runs for every live job, every tick)
            j = (evolve(j, progress_age_s=age, status="stuck", stuck=st) if st is not None
                 else evolve(j, progress_age_s=age))
            if st is not None:
                self._stuck[key] = st
                if was is None:
                    self._changes.append((j, st))
            elif was is not None:
                del self._stuck[key]
                self._changes.append((j, None))
            out.append(j)
        judge.forget(keys)
        for k in [k for k in self._stuck if k not in keys]:
            del self._stuck[k]
        with self._lock:
            self._denied &= set(keys)
        return out

    def changes(self) -> list[tuple[JobSample, Stuck | None]]:
        """The jobs that became stuck (with their `Stuck`) or moved again (None) since the
        last call."""
        out, self._changes = self._changes, []
        return out

    def _start_dump(self, key: Hashable, j: JobSample, now: float) -> None:
        with self._lock:
            if self._busy is not None and self._busy.is_alive() or key in self._denied:
                return
        trainers, workers, ranks = targets(j)
        t = threading.Thread(target=self._run, args=(key, trainers, workers, ranks), daemon=True,
                             name=f"stack-dump-{j.pid}")
        self._busy = t
        t.start()

    def _run(self, key: Hashable, trainers: list[int], workers: list[int],
             ranks: tuple[tuple[int, int], ...]) -> None:
        t0 = self.clock()
        d, denied = dump_job(self._dump, trainers, workers, ranks, t0)
        d = dataclasses.replace(d, t=(t0 + self.clock()) / 2)  # read somewhere in between
        with self._lock:
            if denied is not None:
                self._denied.add(key)
                self.denied = denied
            self._done.append((key, d))

    def join(self, timeout: float | None = None) -> None:
        t = self._busy
        if t is not None:
            t.join(timeout)
