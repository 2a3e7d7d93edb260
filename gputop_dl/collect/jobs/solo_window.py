"""What ran beside a job while the probe timed it alone: its CPU wait and the busiest others.

The probe (engine/diagnose_plan.py) pauses every other job, but the rest of the box runs on: a
compile, a notebook, another user's busy loop. `SoloWatch.start(pids)` before the solo window
and `stop()` after it read, over the window, the job's threads' run and run-queue wait
(`/proc/PID/task/TID/schedstat`, summed over the threads seen at its start, each as last read)
and the busiest processes that are not the job's (collect/proc/busiest.py: one pass at each
end). What the wait costs the solo figure is analyse/live/outside_load.py's `solo_outside`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from gputop_dl.collect.proc.busiest import BusiestSampler
from gputop_dl.collect.proc.procfs import read_proc
from gputop_dl.collect.proc.schedstat import parse_schedstat
from gputop_dl.snapshot import ProcLoad


@dataclass(frozen=True)
class SoloReading:
    """The job over its solo window (None: not read)."""

    seconds: float
    wait: float | None  # its threads' run-queue wait over their runnable time, 0..1
    cores: float | None  # the cores its threads ran on
    outside: tuple[ProcLoad, ...] | None  # the busiest processes that are not the job's


def tree_schedstat(pids: Iterable[int], proc: str = "/proc") -> dict[int, tuple[int, int, int]]:
    """Each thread of these processes: (ran ns, waited ns, time slices) so far."""
    out: dict[int, tuple[int, int, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"{proc}/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                got = parse_schedstat(read_proc(f"{proc}/{pid}/task/{tid}/schedstat", 128))
            except OSError:
                continue
            if got is not None and tid.isdigit():
                out[int(tid)] = got
    return out


class SoloWatch:
    """`start(pids)` as a job's solo window opens, `mark()` at each tick while it is open,
    `stop(exclude)` as it closes.

    Each thread counts with the last values it was read with, so a thread that ends inside the
    window (a loader worker at an epoch's end) keeps what it ran. A job that ended inside the
    window is read up to its last mark (`stop(ended=True)`): counting the time after it, and
    its threads gone, read a job that waited for a CPU as one that hardly ran (0.14 cores
    where it ran 0.6-0.7 until it ended)."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self._busiest = BusiestSampler(proc)
        self._pids: list[int] = []
        self._t0 = 0.0
        self._s0: dict[int, tuple[int, int, int]] = {}
        self._t1 = 0.0  # the last mark
        self._s1: dict[int, tuple[int, int, int]] = {}  # each thread as last read

    def start(self, pids: Iterable[int]) -> None:
        self._pids = list(pids)
        self._busiest.forget()
        self._busiest.sample()  # the first pass: the rates are over the window
        self._t0 = self._t1 = time.monotonic()
        self._s0 = tree_schedstat(self._pids, self.proc)
        self._s1 = dict(self._s0)

    def mark(self) -> None:
        """Read the job's threads now (the job is alive): the window reaches this far."""
        self._s1.update(tree_schedstat(self._pids, self.proc))
        self._t1 = time.monotonic()

    def stop(self, exclude: Collection[int] = (), ended: bool = False) -> SoloReading:
        """The window since `start`, up to now or (`ended`: the job ended inside it) up to the
        last mark; `exclude`: PIDs that are not outside load (the job's own, the paused
        jobs')."""
        if not ended:
            self.mark()
        busy = self._busiest.sample()
        dt = self._t1 - self._t0
        ran = sum(self._s1[t][0] - s0[0] for t, s0 in self._s0.items())
        waited = sum(self._s1[t][1] - s0[1] for t, s0 in self._s0.items())
        mine = set(self._pids) | set(exclude)
        known = dt > 0 and ran + waited > 0
        return SoloReading(
            seconds=round(dt, 2),
            wait=round(waited / (ran + waited), 4) if known else None,
            cores=round(ran / 1e9 / dt, 3) if known else None,
            outside=None if busy is None else tuple(p for p in busy if p.pid not in mine))
