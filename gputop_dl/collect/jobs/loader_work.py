"""The work a job's data-loader workers have done so far: CPU time, switches and write calls.

    w = read_work([4121, 4122])      # the job's loader worker processes (role "worker")
    ... later ...
    rate = work_rate(w, read_work([4121, 4122]))

A loader worker makes one batch after another for the trainer and blocks when the trainer's
queue is full, so what it does per batch depends little on how fast the trainer consumes
them: its rates are about the job's step rate times a constant, read from outside without its
step times (an intra-op pool that spins burns CPU in the trainer, not in its
loader). The write calls it hands each batch over in (the pickled batch to the queue's pipe,
the tensors' file descriptors to the trainer) are the same number every batch (PyTorch's
dcgan: 9, alone and beside a copy); its CPU time and voluntary switches a batch move with the
load beside it (dcgan: 0.109 s of CPU a batch alone, 0.154 s beside a copy).
`analyse/slowdown/loader_rate.py` turns two rates into a slowdown.

Each worker process is read over all its threads: `/proc/PID/task/TID/schedstat` (ns on a
CPU), `/proc/PID/task/TID/status` (voluntary switches), and `/proc/PID/io` (`syscw`, the
process's write calls; readable for one's own processes only). A worker that is gone, or a set
of workers that changed between two readings far apart (a new epoch starts new workers unless
`persistent_workers`), gives no rate across that step: `chain_rate` adds a run of close
readings through new workers, and `WorkWatch` takes them while the caller waits elsewhere.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import psutil

from gputop_dl.collect.proc import procs
from gputop_dl.collect.proc.diskio import parse_io
from gputop_dl.collect.proc.procfs import read_proc
from gputop_dl.collect.proc.schedstat import parse_schedstat, parse_switches


@dataclass(frozen=True)
class LoaderWork:
    """One reading of a job's loader workers: per worker PID, (ns on a CPU, voluntary switches)
    so far; `t` on the monotonic clock."""

    t: float
    workers: tuple[tuple[int, int, int], ...]  # (pid, ns on a CPU, voluntary switches)
    # (pid, write calls so far: syscw of /proc/PID/io) of the workers whose io was readable
    writes: tuple[tuple[int, int], ...] = ()

    @property
    def pids(self) -> frozenset[int]:
        return frozenset(p for p, _, _ in self.workers)


@dataclass(frozen=True)
class WorkRate:
    """What the loader workers did between two readings: CPU cores and voluntary switches a
    second, over `seconds`, from `switches` switches and `cpu_s` CPU-seconds in all."""

    seconds: float
    cpu_s: float
    switches: int
    # write calls in all, a fixed number a batch handed to the trainer (None: some worker's
    # io was not readable)
    writes: int | None = None

    @property
    def cores(self) -> float:
        return self.cpu_s / self.seconds

    @property
    def switches_per_s(self) -> float:
        return self.switches / self.seconds


def _process(pid: int, proc: str) -> tuple[int, int] | None:
    """(ns on a CPU, voluntary switches) of all a process's threads; None when it is gone. A
    thread that exits meanwhile counts in neither reading."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return None
    ran = vol = 0
    for tid in tids:
        base = f"{proc}/{pid}/task/{tid}"
        try:
            st, switches = (parse_schedstat(read_proc(f"{base}/schedstat", 128)),
                            parse_switches(read_proc(f"{base}/status")))
        except OSError:
            continue
        if st is not None and switches is not None:
            ran, vol = ran + st[0], vol + switches[0]
    return ran, vol


def _writes(pid: int, proc: str) -> int | None:
    """A process's write calls so far (None: its io is not readable: another user's)."""
    try:
        io = parse_io(read_proc(f"{proc}/{pid}/io"))
    except OSError:
        return None
    return None if io is None else io[2]


def read_work(pids: Iterable[int], proc: str = "/proc",
              clock: Callable[[], float] = time.monotonic) -> LoaderWork | None:
    """The loader workers' work so far; None when the job has none (it loads in its main
    process) or none could be read."""
    rows, writes = [], []
    for pid in sorted(set(pids)):
        got = _process(pid, proc)
        if got is not None:
            rows.append((pid, *got))
            w = _writes(pid, proc)
            if w is not None:
                writes.append((pid, w))
    return LoaderWork(clock(), tuple(rows), tuple(writes)) if rows else None


def work_rate(a: LoaderWork | None, b: LoaderWork | None) -> tuple[WorkRate | None, str | None]:
    """What the workers did from reading `a` to `b`, or None and why."""
    if a is None or b is None:
        return None, NO_WORKERS
    return chain_rate([a, b])


NO_WORKERS = "it has no data-loader worker processes (or they could not be read)"
MAX_GAP_S = 2.0  # a worker gone between readings further apart loses too much of its work


def chain_rate(readings: Sequence[LoaderWork | None]) -> tuple[WorkRate | None, str | None]:
    """What the workers did over a run of readings, through new epochs' workers: each step
    adds what the workers of both readings did between them, and the whole count of a worker
    new in the second (it started after the first). A worker that ended between two readings
    loses what it did after the first, so a step more than `MAX_GAP_S` long across which a
    worker ended breaks the run; the longest unbroken part is rated. None, and why, when no
    part spans two readings."""
    rows = [r for r in readings if r is not None]
    if not rows:
        return None, NO_WORKERS
    best: WorkRate | None = None
    start, ran, vol, wr, known = rows[0], 0, 0, 0, True
    for a, b in zip(rows, rows[1:] + [None]):
        if b is not None and not (a.pids - b.pids and b.t - a.t > MAX_GAP_S):
            first = {p: (r, v) for p, r, v in a.workers}
            ran += sum(r - first.get(p, (0, 0))[0] for p, r, _ in b.workers)
            vol += sum(v - first.get(p, (0, 0))[1] for p, _, v in b.workers)
            wrote = dict(a.writes)
            wr += sum(w - wrote.get(p, 0) for p, w in b.writes)
            known = known and len(b.writes) == len(b.workers) and len(a.writes) == len(a.workers)
            continue
        dt = a.t - start.t  # the run ends at `a`
        if dt > 0 and (best is None or dt > best.seconds):
            best = WorkRate(dt, max(0, ran) / 1e9, max(0, vol), max(0, wr) if known else None)
        if b is not None:
            start, ran, vol, wr, known = b, 0, 0, 0, True
    if best is None:
        return None, ("its loader workers were replaced meanwhile (a new epoch's workers)"
                      if len(rows) > 1 else "its loader workers were read once")
    return best, None


LOADER_NAME = procs.LOADER_NAME.decode()  # what torch names a DataLoader worker process (2.x)


def workers_of(root: int, not_workers: Iterable[int] = ()) -> list[int]:
    """A job's loader worker processes now: the processes under `root` less `not_workers`
    (its ranks, as the last tick named them), and of those only the ones torch named
    `pt_data_worker` where any is (a compiler's worker pool is not a loader); [] when the
    job is gone."""
    skip = set(not_workers) | {root}
    named: list[int] = []
    rest: list[int] = []
    try:
        for p in psutil.Process(root).children(recursive=True):
            if p.pid in skip:
                continue
            try:
                (named if p.name() == LOADER_NAME else rest).append(p.pid)
            except psutil.Error:
                continue  # gone meanwhile
    except psutil.Error:
        return []
    return sorted(named or rest)


class WorkWatch:
    """Reads a job's loader work every `every_s` seconds in a thread, until `stop()`: the
    readings of a window the caller spends elsewhere (diagnose's py-spy burst)."""

    def __init__(self, workers: Callable[[], Iterable[int]], every_s: float = 0.5):
        self._workers, self._every = workers, every_s
        self.readings: list[LoaderWork | None] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="gdl-loader-work")

    def _run(self) -> None:
        while True:
            self.readings.append(read_work(self._workers()))
            if self._done.wait(self._every):
                return

    def start(self) -> WorkWatch:
        self._thread.start()
        return self

    def stop(self) -> list[LoaderWork | None]:
        """The last reading, and all of them."""
        self._done.set()
        self._thread.join()
        self.readings.append(read_work(self._workers()))
        return self.readings
