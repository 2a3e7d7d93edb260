"""Found jobs (training jobs gputop-dl did not start), as `JobSample` rows: discovery + process-tree sampling + py-spy stall.

One `FoundJobs` lives in a `MachineSampler` across ticks:

    cmap = fj.refresh()                                   # the tick's one /proc pass
    jobs, notes = fj.sample(GpuUse.of(gprocs), exclude={launched root PIDs}, taken={names in use})
    errors = fj.measure_stall(2.0)                        # one-shot: py-spy every job now, 2 s

`refresh()` returns the PPID -> children map, which the engine also hands to the samplers of its
launched jobs. `sample()` keeps one `TreeSampler` per discovered root (CPU cores, RSS, threads
need the previous tick's CPU times), sums NVML's per-PID GPU memory over the job's processes,
and, when `stall` is on, schedules background py-spy bursts (`StallSampler`) and reports the
last burst's data-stall fraction (`stall_source="py-spy"`, with its sample count) and, only
when the sample order shows it unambiguously, the step time. Everything unknown stays None.
"""

from __future__ import annotations

import time

from gputop_dl.collect import pyspy
from gputop_dl.collect.discover import Discoverer, Found, outside_note
from gputop_dl.collect.nvml import GpuUse
from gputop_dl.collect.procs import TreeSampler
from gputop_dl.collect.ranks import RankReader, rank_cpu
from gputop_dl.collect.schedstat import tree_wait, wait_fields
from gputop_dl.collect.stall import STALL_BUDGET, StallResult, StallSampler
from gputop_dl.snapshot import JobSample


class FoundJobs:
    """Found jobs with their samplers; touched only by the thread that ticks."""

    def __init__(self, *, stall: bool = True, discoverer: Discoverer | None = None,
                 stall_sampler: StallSampler | None = None, stall_budget: float = STALL_BUDGET):
        """`stall_budget`: the share of one core py-spy may use (0: no bursts, stall unknown)."""
        self.disc = discoverer or Discoverer()
        self.stall = stall_sampler or (StallSampler(cpu_budget=stall_budget) if stall and stall_budget > 0
                                       else None)
        self.off_note = ("data-stall of jobs not launched here is not measured (--stall-budget 0)"
                         if stall and stall_budget <= 0 and stall_sampler is None else None)
        self._trees: dict[tuple[int, int], TreeSampler] = {}
        self._ranks: dict[tuple[int, int], RankReader] = {}  # a torchrun job's ranks
        self.found: list[Found] = []
        self._measured: dict[tuple[int, int], StallResult] = {}  # by `measure_stall`
        self.seen: set[tuple[int, int]] = set()

    def refresh(self) -> dict[int, list[int]] | None:
        """List /proc (new PIDs only); the PPID map, or None where /proc is missing."""
        if not self.disc.ok:
            return None
        return self.disc.refresh()

    def sample(self, gpu: GpuUse = GpuUse(), exclude: set[int] | frozenset[int] = frozenset(),
               taken: set[str] | frozenset[str] = frozenset()) -> tuple[list[JobSample], list[str]]:
        """This tick's discovered jobs and notes. Call `refresh()` first in the same tick."""
        found = self.disc.find(gpu.mem, exclude)
        self.found = found
        cmap = self.disc.job_cmap
        keys = set()
        jobs: list[JobSample] = []
        names = set(taken)
        for f in found:
            key = (f.pid, f.start)
            keys.add(key)
            tree = self._trees.get(key)
            if tree is None:
                tree = self._trees[key] = TreeSampler(f.pid)
                self._ranks[key] = RankReader()
            ts = tree.sample(cmap)
            if ts is None:  # vanished since the listing
                continue
            pids = ts.pids  # sorted, the root included
            mem, sm, gpus = gpu.of_pids(pids)
            res = self._measured.get(key) or (self.stall.result(key) if self.stall else None)
            dist = self._ranks[key].read(f.pid, cmap)
            name = f.name if f.name not in names else f"{f.name} ({f.pid})"
            names.add(name)
            jobs.append(JobSample(
                name=name, pid=f.pid, launched=False, pids=pids, status="running",
                device=("gpu" + ",".join(map(str, gpus))) if gpus else None,
                cpu_cores=ts.cpu_cores, rss=ts.rss, threads=ts.threads,
                stall_fraction=res.fraction if res else None,
                stall_source="py-spy" if res else None,
                stall_samples=res.samples if res else None,
                step_time_s=res.step_time_s if res else None,
                gpu_mem=mem, gpu_sm=sm,
                command=self.disc.describe(f), distributed=dist,
                rank_cpu_cores=rank_cpu(dist, ts, cmap),
                **wait_fields(tree_wait(ts, f.pid, dist)),
                phase_shares=pyspy.phase_shares(dict(res.phases)) if res else (),
                phase_shares_samples=res.phase_samples if res else None))
        for key in [k for k in self._trees if k not in keys]:
            self._trees.pop(key).close()
            del self._ranks[key]
        for key in [k for k in self._measured if k not in keys]:
            del self._measured[key]
        if self.stall is not None:
            self.stall.round([((f.pid, f.start), f.target) for f in found])
        notes = []
        out = self.disc.outside
        if out:
            mems = [m for m in out.values() if m is not None]
            notes.append(outside_note(len(out), sum(mems) if mems else None))
        if self.stall is not None and self.stall.note:
            notes.append(self.stall.note)
        if self.off_note and found:
            notes.append(self.off_note)
        return jobs, notes

    def measure_stall(self, seconds: float, rate: int = 50) -> list[str]:
        """Sample every job found by the last `sample()` with py-spy for `seconds`, all at once,
        and wait; the next `sample()` reports these figures. Returns py-spy's errors."""
        ests, errors = pyspy.spy_all({(f.pid, f.start): f.target for f in self.found}, seconds, rate)
        for key, est in ests.items():
            if est.samples:
                self._measured[key] = StallResult(
                    est.fraction, est.samples, est.step_time_s, time.time(),
                    tuple((p, est.phases.get(p, 0)) for p in pyspy.PHASES) if est.phases else ())
        return errors

    def new_since_last(self) -> list[Found]:
        """Jobs found this tick that were not found before (for a log line)."""
        fresh = [f for f in self.found if (f.pid, f.start) not in self.seen]
        self.seen = {(f.pid, f.start) for f in self.found}
        return fresh
