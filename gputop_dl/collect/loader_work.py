"""The work a job's data-loader workers have done so far: their CPU time and voluntary switches.

    w = read_work([4121, 4122])      # the job's loader worker processes (role "worker")
    ... later ...
    rate = work_rate(w, read_work([4121, 4122]))

A loader worker makes one batch after another for the trainer and blocks when the trainer's
queue is full, so the CPU time it spends and the times it gives up its CPU (voluntary context
switches: a blocked `put`, a file read, a lock) per batch do not depend on how fast the
trainer consumes them: their rates are the job's step rate up to a constant, read from
outside without its step times (issue 33: an intra-op pool that spins burns CPU in the
trainer, not in its loader). `analyse/loader_rate.py` turns two rates into a slowdown.

Each worker process is read over all its threads: `/proc/PID/task/TID/schedstat` (ns on a
CPU) and `/proc/PID/task/TID/status` (voluntary switches). A worker that is gone, or a set
of workers that changed between two readings (a new epoch starts new workers unless
`persistent_workers`), gives no rate: its work before and after cannot be added.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gputop_dl.collect.procfs import read_proc

_VOL = b"\nvoluntary_ctxt_switches:"


@dataclass(frozen=True)
class LoaderWork:
    """One reading of a job's loader workers: per worker PID, (ns on a CPU, voluntary switches)
    so far; `t` on the monotonic clock."""

    t: float
    workers: tuple[tuple[int, int, int], ...]  # (pid, ns on a CPU, voluntary switches)

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

    @property
    def cores(self) -> float:
        return self.cpu_s / self.seconds

    @property
    def switches_per_s(self) -> float:
        return self.switches / self.seconds


def _process(pid: int, proc: str) -> tuple[int, int] | None:
    """(ns on a CPU, voluntary switches) of all a process's threads; None when it is gone."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return None
    ran = vol = 0
    for tid in tids:
        base = f"{proc}/{pid}/task/{tid}"
        try:
            ran += int(read_proc(f"{base}/schedstat").split()[0])
            status = read_proc(f"{base}/status")
        except (OSError, ValueError, IndexError):
            continue  # a thread that just exited: its work stays in neither reading
        at = status.rfind(_VOL)
        if at >= 0:
            try:
                vol += int(status[at + len(_VOL):].split(None, 1)[0])
            except (ValueError, IndexError):
                pass
    return ran, vol


def read_work(pids: Iterable[int], proc: str = "/proc",
              clock: Callable[[], float] = time.monotonic) -> LoaderWork | None:
    """The loader workers' work so far; None when the job has none (it loads in its main
    process) or none could be read."""
    rows = []
    for pid in sorted(set(pids)):
        got = _process(pid, proc)
        if got is not None:
            rows.append((pid, *got))
    return LoaderWork(clock(), tuple(rows)) if rows else None


def work_rate(a: LoaderWork | None, b: LoaderWork | None) -> tuple[WorkRate | None, str | None]:
    """What the workers did from reading `a` to `b`, or None and why."""
    if a is None or b is None:
        return None, "it has no data-loader worker processes (or they could not be read)"
    if a.pids != b.pids:
        return None, "its loader workers were replaced meanwhile (a new epoch's workers)"
    dt = b.t - a.t
    if dt <= 0:
        return None, "no time between the readings"
    first = {p: (r, v) for p, r, v in a.workers}
    ran = sum(r - first[p][0] for p, r, _ in b.workers)
    vol = sum(v - first[p][1] for p, _, v in b.workers)
    return WorkRate(dt, max(0, ran) / 1e9, max(0, vol)), None
