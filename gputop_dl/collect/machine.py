"""One sample of this machine: host CPU and memory, the GPUs (NVML) and the found training jobs.

The UI-free snapshot API (nvitop's `api/` idea). The engine's tick and `gputop-dl --once` both
sample through it:

    sampler = MachineSampler(Nvml(), found=FoundJobs(stall=True))
    m = sampler.sample(exclude={launched root PIDs}, taken={launched job names})
    m.host, m.gpus, m.gpu_processes, m.found, m.notes, m.log, m.cmap

    snap = snapshot_once(stall_s=2)          # `--once`: two samples `settle_s` apart, as a Snapshot

`found=None` turns discovery off. Discovery that raises is switched off for good with one log
line; a snapshot without jobs is still a snapshot. Nothing here raises for a lost GPU or a
vanished process: they are "not available" values (see nvml/gpus.py, proc/procs.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.proc.affinity import CpuAffinity
from gputop_dl.collect.proc.busiest import BusiestSampler
from gputop_dl.collect.proc.diskio import look_times
from gputop_dl.collect.jobs.found import FoundJobs
from gputop_dl.collect.nvml.gpu_use import GpuUse
from gputop_dl.collect.proc.host import HostSampler
from gputop_dl.collect.proc.procs import children_map
from gputop_dl.snapshot import GpuProcess, GpuSample, HostSample, JobSample, JobSearch, Snapshot, evolve

if TYPE_CHECKING:
    from gputop_dl.collect.nvml.gpus import Nvml

WAITS = 0.05  # a job waits for a CPU this share of its runnable time: read who else runs
BUSY = 0.8  # or the host's allowed cores are this busy (jobs launched here are sampled apart)


@dataclass(frozen=True)
class MachineSample:
    """What one sampling pass saw; `cmap` (PPID -> children) is shared with launched jobs."""

    time: float
    host: HostSample
    gpus: tuple[GpuSample, ...]
    gpu_processes: tuple[GpuProcess, ...]
    gpu_use: GpuUse
    found: tuple[JobSample, ...] = ()
    notes: tuple[str, ...] = ()  # standing notes about found jobs (namespace, py-spy)
    log: tuple[str, ...] = ()  # one-off messages: a job found, discovery stopped
    cmap: dict[int, list[int]] | None = None
    search: JobSearch | None = None  # where the search for found jobs looked (None: no search)


class MachineSampler:
    """Samples host + NVML + found jobs; touched only by the thread that ticks."""

    def __init__(self, nvml: Nvml, *, found: FoundJobs | None = None, host: HostSampler | None = None,
                 affinity: CpuAffinity | None = None) -> None:
        self.nvml = nvml
        self.host = host or HostSampler()
        self.found = found
        self.affinity = affinity or CpuAffinity()  # the GPU processes' CPUs (the NUMA check)
        self.busiest = BusiestSampler()  # who else takes the cores, while a job waits

    def sample(self, exclude: set[int] | frozenset[int] = frozenset(),
               taken: set[str] | frozenset[str] = frozenset(), cmap: bool = False) -> MachineSample:
        """Sample everything once. `exclude`: root PIDs of jobs launched here (never "found");
        `taken`: names in use (a found job with the same name gets its PID added); `cmap`: also
        return a PPID map when discovery is off (launched jobs need one)."""
        now = time.time()
        host = self.host.sample()
        gpus = self.nvml.sample()
        gprocs = self.affinity.annotate(self.nvml.processes())
        use = GpuUse.of(gprocs)
        found: tuple[JobSample, ...] = ()
        notes: tuple[str, ...] = ()
        log: list[str] = []
        ppids = None
        search = None
        if self.found is not None:
            try:
                ppids = self.found.refresh()
                jobs, more = self.found.sample(use, exclude, taken)
                found, notes, search = tuple(jobs), tuple(more), self.found.search
                log += [f"found {f.name} (pid {f.pid}), not launched by gputop-dl"
                        for f in self.found.new_since_last()]
            except Exception as exc:  # noqa: BLE001 - discovery must never stop the sampling
                self.found = None
                log.append(f"discovery of other jobs stopped: {type(exc).__name__}: {exc}")
                found, notes, ppids = (), (), None
        if ppids is None and cmap:
            ppids = children_map()
        host = self._with_busiest(host, found)
        return MachineSample(time=now, host=host, gpus=gpus, gpu_processes=gprocs, gpu_use=use,
                             found=found, notes=notes, log=tuple(log), cmap=ppids, search=search)

    def _with_busiest(self, host: HostSample, found: tuple[JobSample, ...]) -> HostSample:
        """The host with its busiest processes, read only while a job waits for a CPU or the
        host is nearly all busy (collect/proc/busiest.py); else the last pass is dropped."""
        waits = any((j.cpu_wait_fraction or 0.0) >= WAITS for j in found)
        if not waits and (host.cpu_busy or 0.0) < BUSY:
            self.busiest.forget()
            return host
        pids = self.found.pids(self.busiest.proc) if self.found is not None else None
        return evolve(host, busiest=self.busiest.sample(pids))

    def measure_stall(self, seconds: float) -> list[str]:
        """py-spy every found job for `seconds`, all at once, and wait (see FoundJobs)."""
        if self.found is None or seconds <= 0:
            return []
        return self.found.measure_stall(seconds)


# looks at the jobs' states between `--once`'s two samples (the second is the 50th): one second
# of looks is all `--once` has for a job's I/O wait, and ten left it 0.2 or 0.8 for a pair that
# waited about half the time (benchmarks/verdict_memory.py)
PEEKS = 49


def snapshot_once(settle_s: float = 0.5, nvml: Nvml | None = None, stall_s: float = 0.0,
                  found: FoundJobs | None = None) -> Snapshot:
    """`gputop-dl --once`: host, GPUs and the training jobs running here, in one Snapshot; CPU
    figures are averaged over `settle_s` seconds (or over the stall bursts, if longer).

    A found job's data stall needs a py-spy burst: with `stall_s` = 0 (the default) it is unknown
    (None, and a note says why); with `stall_s` > 0 every job's main thread is sampled for that
    long, all jobs at once, and the snapshot waits for it. `found`: a `FoundJobs` (tests inject
    one)."""
    if nvml is None:
        from gputop_dl.collect.nvml.gpus import Nvml

        nvml = Nvml()
    sampler = MachineSampler(nvml, found=found or FoundJobs(stall=False))
    t0 = time.monotonic()
    first = sampler.sample()  # first look: starts the CPU-time deltas
    sampler.busiest.sample()  # and the busiest processes' (named if a job waits at the second)
    errors = sampler.measure_stall(stall_s)
    # fifty looks at the jobs' process states in the second: a job's share of time blocked on
    # I/O from one look would be 0 or 1 (collect/proc/diskio.py)
    for frac in look_times(PEEKS):
        time.sleep(max(0.0, t0 + settle_s * frac - time.monotonic()))
        if sampler.found is not None:
            sampler.found.peek_io()
    time.sleep(max(0.0, settle_s - (time.monotonic() - t0)))
    m = sampler.sample()
    notes = [] if nvml.status == "ok" else [nvml.status_detail]
    notes += [x for x in first.log + m.log if x.startswith("discovery of other jobs stopped")]
    notes += m.notes
    notes += [f"step time of {j.name} unknown: {j.step_time_note}" for j in m.found
              if j.step_time_s is None and j.step_time_note and not j.limited]
    if m.found and stall_s <= 0:
        notes.append("data stall of jobs found running is unknown in a one-shot snapshot "
                     "(it needs a py-spy burst; the live monitor measures it)")
    perm = next((e for e in errors if pyspy.is_permission_error(e)), None)
    if perm:
        notes.append(f"data stall unknown: py-spy may not attach ({perm}); {pyspy.PTRACE_HINT}")
    return Snapshot(time=m.time, gpu_status=nvml.status, gpus=m.gpus, host=m.host, jobs=m.found,
                    gpu_processes=m.gpu_processes, notes=tuple(notes), search=m.search)
