"""A job's CPU wait from its threads' run-queue deltas: all, trainers, loader workers, its pool.

`collect/proc/schedstat.py`'s `SchedReader` reads each thread's schedstat and hands back, per
process, the nanoseconds its threads ran and waited since the last read (and its busy threads);
this module turns them into a job's `CpuWait` (waited / (ran + waited), per group of processes)
and the `JobSample` fields it fills:

    cw = job_wait(waits, trainers={root, ranks}, note=reader.note, throttled=...)
    cw = tree_wait(tree_sample, root, distributed)   # the same from a `procs.TreeSample`
    JobSample(..., **wait_fields(cw))

Pure arithmetic: no file is read here.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from gputop_dl.collect.proc.schedstat import Busy

if TYPE_CHECKING:
    from gputop_dl.collect.proc.procs import TreeSample
    from gputop_dl.snapshot import Distributed

MIN_RUNNABLE_NS = 0  # a group with no runnable time in the interval has no share (None)


@dataclass(frozen=True)
class CpuWait:
    """A job's CPU wait over one interval (None: unknown, `note` says why where a user would ask)."""

    fraction: float | None = None  # all its threads: waited / (ran + waited), 0..1
    trainer: float | None = None  # the trainer (rank) processes' threads
    # the busy threads of the trainer process with the most of them: (wait share, runnable share
    # of the interval) each, the busiest first; () when none is busy or not read per thread
    pool: tuple[tuple[float, float], ...] = ()
    # those threads' median time on a CPU per time slice, ms, and median share of their context
    # switches that were voluntary (None: no pool, or unknown): a thread that spins while it
    # waits runs until it is preempted; one that sleeps gives its CPU up itself
    pool_slice_ms: float | None = None
    pool_yields: float | None = None
    workers: float | None = None  # the other processes' threads (data-loader workers)
    # the CPU cores those other processes used over the interval (None: none, or no delta yet):
    # a loader's work rate, which follows the trainer's pace (analyse/slowdown/pace.py)
    workers_cores: float | None = None
    throttled: float | None = None  # cgroup quota: share of the interval spent throttled
    note: str | None = None


def _share(run: int, wait: int) -> float | None:
    total = run + wait
    return round(wait / total, 4) if total > MIN_RUNNABLE_NS else None


def job_wait(waits: dict[int, tuple[int, int]] | None, trainers: set[int] | frozenset[int],
             note: str | None = None, throttled: float | None = None,
             busy: Busy | None = None) -> CpuWait:
    """A job's CPU wait from `SchedReader.read`'s per-process deltas: all threads, those of the
    `trainers` (the root and the rank processes) and those of every other process (its loader
    workers). None where no thread of the group was runnable in the interval, or no delta yet.
    `busy` (`SchedReader.busy`): the pool is that of the trainer with the most busy threads."""
    if not waits:
        return CpuWait(throttled=throttled, note=note)
    pools = [v for p, v in (busy or {}).items() if p in trainers]
    threads = max(pools, key=len, default=())
    pool = tuple((f, b) for f, b, _, _ in threads)

    def pooled(vals: list[float | None], digits: int) -> float | None:
        """The pool threads' median (None: no pool, or a thread's figure unknown)."""
        known = [v for v in vals if v is not None]
        return (round(statistics.median(known), digits)
                if len(threads) >= 2 and len(known) == len(threads) else None)

    slice_ms = pooled([t[2] for t in threads], 3)
    yields = pooled([t[3] for t in threads], 4)
    tr = [v for p, v in waits.items() if p in trainers]
    wk = [v for p, v in waits.items() if p not in trainers]

    def share(vals: list[tuple[int, int]]) -> float | None:
        return _share(sum(v[0] for v in vals), sum(v[1] for v in vals)) if vals else None

    return CpuWait(fraction=share(list(waits.values())), trainer=share(tr), workers=share(wk),
                   throttled=throttled, note=note, pool=pool, pool_slice_ms=slice_ms,
                   pool_yields=yields)


def trainer_pids(root: int | None, dist: Distributed | None = None) -> set[int]:
    """A job's trainer processes: its root and its ranks (the rest of its tree are its loader
    workers and helpers)."""
    trainers: set[int] = set() if root is None else {root}
    if dist is not None:
        trainers |= {r.pid for r in dist.ranks}
    return trainers


def tree_wait(ts: TreeSample | None, root: int | None, dist: Distributed | None = None) -> CpuWait:
    """A job's `CpuWait` from its tree sample (`procs.TreeSample`, None: gone), its root PID and
    its ranks (`snapshot.Distributed`): the root and the rank processes are its trainers."""
    if ts is None:
        return CpuWait()
    trainers = trainer_pids(root, dist)
    cw = job_wait(ts.waits, trainers, ts.wait_note, ts.throttled, ts.busy)
    if ts.quiet:  # the workers were not read this tick (their next reading spans it)
        return cw
    # the workers' main threads' schedstat ns where read (precise), else their CPU clock ticks
    by_pid = ts.main_cores_by_pid if ts.main_cores_by_pid is not None else ts.cpu_by_pid
    others = [c for p, c in (by_pid or {}).items() if p not in trainers]
    return dataclasses.replace(cw, workers_cores=round(sum(others), 5)) if others else cw


class WaitFields(TypedDict):
    """The `JobSample` fields of a job's CPU wait (see `wait_fields`)."""

    cpu_wait_fraction: float | None
    cpu_wait_trainer: float | None
    cpu_wait_workers: float | None
    cpu_throttled_fraction: float | None
    cpu_wait_note: str | None
    cpu_pool: tuple[tuple[float, float], ...]
    cpu_pool_slice_ms: float | None
    cpu_pool_yields: float | None
    cpu_cores_workers: float | None


def wait_fields(cw: CpuWait) -> WaitFields:
    """The `JobSample` fields of a `CpuWait` (cpu_wait_fraction, ...), as keyword arguments."""
    return {"cpu_wait_fraction": cw.fraction, "cpu_wait_trainer": cw.trainer,
            "cpu_wait_workers": cw.workers, "cpu_throttled_fraction": cw.throttled,
            "cpu_wait_note": cw.note, "cpu_pool": cw.pool, "cpu_pool_slice_ms": cw.pool_slice_ms,
            "cpu_pool_yields": cw.pool_yields, "cpu_cores_workers": cw.workers_cores}
