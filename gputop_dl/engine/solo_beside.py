"""What ran beside a job's measured solo baseline: its CPU wait and the busiest other processes.

A launch with `baseline = "measure"` runs each job alone before the co-run, but "alone" only
among the jobs: a compile, a notebook or another user's tests may share the box meanwhile, and
then the solo step time is slow and every slowdown measured against it too small. `SoloRunWatch`
reads, from the end of the job's warm-up to the end of its solo run, the job's threads'
run-queue wait (from the ticks' schedstat readings of its tree) and the busiest
processes that are not the job's (collect/proc/busiest.py: a pass each tick, their mean
cores). The reading is kept with the baseline (`beside`, cached with it);
analyse/live/outside_load.py's `not_alone` judges it as it does the probe's solo windows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, TypedDict

from gputop_dl.analyse.live.outside_load import (Consumer, OutsideWindow, SoloWindow,
                                                 consumer_json, solo_outside)
from gputop_dl.analyse.thresholds import SLOW
from gputop_dl.collect.proc.busiest import KEEP, BusiestSampler
from gputop_dl.engine.jobrun import JobRun, SoloBaseline
from gputop_dl.snapshot import ProcLoad


class SoloBeside(TypedDict):
    """A baseline's `beside`: its solo run from the end of warm-up (seconds), its threads'
    CPU wait share and cores, and the busiest processes outside it (None: not read)."""

    seconds: float
    wait: float | None
    cores: float | None
    consumers: list[Consumer] | None


class _Tick(NamedTuple):
    """One tick of a solo run: when, the ns its threads ran and waited runnable since the tick
    before (its tree's schedstat), and the busiest processes since the pass before."""

    t: float
    ran: int
    waited: int
    busiest: tuple[ProcLoad, ...] | None


class SoloRunWatch:
    """`tick()` after each engine tick of a solo run (`until(done)` wraps an engine loop's
    condition), `reading()` once it has ended.

    Each tick of the run is kept with its time; the reading takes those after the warm-up by
    the steps' own clock (`JobRun.warm_at`). Not from the tick that first reads a step past the
    warm-up: the steps' events come in batches, and a job that ends within a flush of its
    warm-up would leave no tick after that one."""

    def __init__(self, run: JobRun, proc: str = "/proc") -> None:
        self.run = run
        self._busiest = BusiestSampler(proc, every=1)
        self._ticks: list[_Tick] = []
        self._pids: set[int] = set()  # every process of the job seen (its workers come and go)

    def tick(self) -> None:
        ts = self.run.tree_sample
        if ts is not None:
            self._pids.update(ts.pids)
        if self.run.alive:
            waits = ts.waits.values() if ts is not None and ts.waits else ()
            self._ticks.append(_Tick(time.time(), sum(v[0] for v in waits),
                                     sum(v[1] for v in waits), self._busiest.sample()))

    def until(self, done: Callable[[], bool]) -> Callable[[], bool]:
        """`done`, with a tick of the watch before each look."""
        def check() -> bool:
            self.tick()
            return done()
        return check

    def reading(self) -> SoloBeside | None:
        """The baseline's `beside`: {seconds, wait, cores, consumers (None: not read)}; None
        where the run never got past its warm-up."""
        t0 = self.run.warm_at()
        if t0 is None:
            return None
        mine = self._pids | {os.getpid()}  # the job's own, and gputop-dl's
        after = [k for k in self._ticks if k.t > t0]
        read = [tuple(p for p in k.busiest if p.pid not in mine) for k in after
                if k.busiest is not None]
        window = OutsideWindow(window=max(1, len(read)))
        for procs in read:
            window.add(procs)
        consumers = window.consumers(top=KEEP)
        # its threads' run-queue wait over their runnable time; a reading handed on between two
        # reads counts twice: the share stays
        ran, waited = sum(k.ran for k in after), sum(k.waited for k in after)
        return {"seconds": round(max(0.0, after[-1].t - t0), 2) if after else 0.0,
                "wait": round(waited / (ran + waited), 4) if ran + waited > 0 else None,
                "cores": self.run.measured_cpu_cores(),
                "consumers": None if consumers is None else [consumer_json(p) for p in consumers]}


def window_of(name: str, base: SoloBaseline) -> SoloWindow | None:
    """A baseline's solo run as outside_load reads a probe window (None: not read)."""
    b = base.get("beside")
    if not b or b.get("seconds") is None:
        return None
    cons = b.get("consumers")
    device = str(base.get("device") or "")
    on_gpu = bool(device) and not device.startswith("cpu")
    return SoloWindow(name, b["seconds"], b.get("wait"), b.get("cores"),
                      None if cons is None else tuple(ProcLoad(**c) for c in cons),
                      step_s=base.get("step_time_s"),
                      stall=base.get("stall_fraction") if on_gpu else None)


def windows(solo: Mapping[str, SoloBaseline], names: Iterable[str]) -> list[SoloWindow]:
    """The solo runs of these jobs that have a reading of what ran beside them."""
    return [w for w in (window_of(n, solo[n]) for n in names if n in solo) if w is not None]


def slowed_by_outside(name: str, base: SoloBaseline, cpus: int) -> float | None:
    """How much faster the baseline's solo run would have been on an idle box, where that is
    more than SLOW (a cached baseline so slowed is measured again); None otherwise."""
    w = window_of(name, base)
    if w is None:
        return None
    out = None if w.outside is None else sum(p.cores for p in w.outside)
    s = solo_outside(w.wait, w.cores, out, cpus, w.stall)
    return s if s is not None and s > SLOW else None
