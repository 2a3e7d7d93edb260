"""One job's live estimate: its slowdown from its waits at each tick, smoothed over a window.

`tick_estimates` turns one tick's samples into each job's `Tick` (its CPU estimate on its
critical path, its shared-GPU estimate, its disk and memory readings); `smooth` takes the median
of a job's last ticks, with a confidence, and names its cause. The models: analyse/live/passive.py's
docstring and docs/verdict.md; analyse/live/passive.py combines the jobs into the set's verdict.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from gputop_dl.analyse.live.cpu_wait_model import (clip_wait, cpu_speedup, demand, pool_speedup,
                                              set_share)
from gputop_dl.analyse.live.gpu_share import gpu_estimates, gpu_shares
from gputop_dl.analyse.live.io_share import io_ratios, io_slowdown
from gputop_dl.analyse.live.memory_share import THRASH, domains, memory_shares, memory_slowdown
from gputop_dl.analyse.slowdown.pace import Pace
from gputop_dl.analyse.thresholds import SLOW
from gputop_dl.analyse.verdict_confidence import student_t_cdf
from gputop_dl.snapshot import GpuProcess, GpuSample, HostSample, JobSample, ProcLoad

MIN_TICKS = 2  # ticks with a known CPU wait before a job is judged
MODEL_SE = 0.10  # the model's own error on ln(s): about 10 %, however steady the ticks
STALL_GATE = 0.05  # a GPU job's data stall below this: its loader keeps up; workers' wait is off the path


@dataclass(frozen=True)
class Tick:
    """One job at one tick: what the estimate is made of, and the estimate."""

    t: float
    cpu: float | None  # s_cpu on its critical path (None: CPU wait unknown)
    gpu: float | None  # s_gpu (None: not on a shared busy GPU)
    cpu_wait: float | None
    critical_wait: float | None
    gpu_wait: float | None
    cpu_cores: float | None
    on_cpu: bool
    stall_known: bool
    set_share: float = 1.0  # the share of its CPU competitors that are the other jobs
    note: str | None = None  # why the CPU wait is unknown (None with cpu_wait None: a first reading)
    stall: float | None = None  # its data stall, where known
    # disk (analyse/live/io_share.py): the share of looks this tick blocked on I/O (D, none running); the
    # fetch speed-up alone R / r_i (None: not on a busy device another job reads from too)
    io_blocked: float | None = None
    io_ratio: float | None = None
    io_read_bps: int | None = None
    io_device: str | None = None
    # memory (analyse/live/memory_share.py): the share of its domain's storage reads that re-read
    # evicted pages (None: refaults unknown), whether another job reads in that domain, its name
    mem_q: float | None = None
    mem_shared: bool = False
    mem_domain: str | None = None
    pool: tuple[tuple[float, float], ...] = ()  # its trainer's busy threads (JobSample.cpu_pool)
    pool_speedup: float | None = None  # the pool's critical path, where it set s_cpu
    pool_slice_ms: float | None = None  # its threads' time per slice (JobSample.cpu_pool_slice_ms)
    pool_yields: float | None = None  # their voluntary switches' share (JobSample.cpu_pool_yields)
    # how much faster its critical path would run without the load from outside the jobs, the
    # other jobs still beside it (its wait's outside part, 1 - set_share: >= 1; None: unknown)
    outside: float | None = None
    # whether it has data-loader workers (processes beside its trainers, read this tick): the
    # loader's fixes are for such jobs only
    workers: bool = False
    autogroup: str | None = None  # its session's autogroup, where autogroups apply (JobSample)

    @property
    def slowdown(self) -> float | None:
        vals = [v for v in (self.cpu, self.gpu) if v is not None]
        return max(vals) if vals else None


def outside_procs(jobs: Sequence[JobSample], host: HostSample | None
                  ) -> tuple[ProcLoad, ...] | None:
    """The host's busiest processes that are not the jobs' own (None: not read this tick)."""
    if host is None or host.busiest is None:
        return None
    mine = {pid for j in jobs for pid in (j.pids or (j.pid,))}
    return tuple(p for p in host.busiest if p.pid not in mine)


def critical_speedup(j: JobSample, on_gpu: bool, cpus: int, share: float
                     ) -> tuple[float | None, float | None]:
    """s_cpu on the job's critical path, its CPU wait put down to the other jobs by `share`
    (1: every wait, as on a box with nothing but this job), an intra-op pool's critical path
    where that is as large; and that pool figure where it set s_cpu (else None). None: its
    CPU wait is unknown."""
    f, stall = j.cpu_wait_fraction, j.stall_fraction
    if f is None:
        return None, None
    if on_gpu and stall is not None:
        # only the data wait can shrink: the workers' cores, up to the stall itself
        if stall < STALL_GATE:
            return 1.0, None
        fw = j.cpu_wait_workers if j.cpu_wait_workers is not None else f
        return max(1.0, min(cpu_speedup(fw, j.cpu_cores, cpus, share) or 1.0,
                            1.0 / (1.0 - clip_wait(stall)))), None
    s_cpu = cpu_speedup(f, j.cpu_cores, cpus, share)
    s_pool = None if on_gpu else pool_speedup(j.cpu_pool, share)
    if s_pool is not None and s_cpu is not None and s_pool >= s_cpu:
        return s_pool, s_pool
    return s_cpu, None


def tick_estimates(jobs: Sequence[JobSample], host: HostSample | None,
                   gprocs: Sequence[GpuProcess] = (), gpus: Sequence[GpuSample] = (),
                   t: float = 0.0, runnable: float | None = None) -> dict[str, Tick]:
    """Each job's estimate at this tick (pure: from one tick's samples). `runnable`: the host's
    runnable threads, averaged by the caller; else its 1-minute load average."""
    cpus = host.cpus if host is not None else 1
    if runnable is None:
        runnable = host.load1 if host is not None else None
    shares = {j.name: gpu_shares(j, gprocs) for j in jobs}
    gpu = gpu_estimates(shares, gpus)
    ratios = io_ratios(jobs, host)
    doms = domains(jobs, host)
    mem = memory_shares(jobs, host, doms)
    demands = {j.name: demand(j.cpu_wait_fraction, j.cpu_cores) for j in jobs}
    set_demand = sum(d for d in demands.values() if d is not None)
    busy = outside_procs(jobs, host)
    outside = sum(p.cores for p in busy) if busy is not None else None
    out = {}
    for j in jobs:
        on_gpu = bool(shares[j.name]) or bool(j.device and not j.device.startswith("cpu"))
        stall = j.stall_fraction
        f = j.cpu_wait_fraction
        crit: float | None = f
        share = set_share(demands[j.name], set_demand, runnable, outside)
        if f is not None and on_gpu and stall is not None:
            crit = (j.cpu_wait_workers if j.cpu_wait_workers is not None else f) \
                if stall >= STALL_GATE else 0.0
        s_cpu, s_pool = critical_speedup(j, on_gpu, cpus, share)
        # the outside load's part of the wait, the other jobs' part kept (they stay): not
        # s_all / s_cpu, which credits the outside with the product of both parts
        s_out, _ = critical_speedup(j, on_gpu, cpus, 1.0 - share)
        if s_pool is not None:
            crit = round(1.0 - 1.0 / s_pool, 4)  # the share the pool stood still
        g = gpu.get(j.name)
        out[j.name] = Tick(t=t, cpu=s_cpu, gpu=g[0] if g else None, cpu_wait=f,
                           critical_wait=crit, gpu_wait=g[1] if g else None,
                           cpu_cores=j.cpu_cores, on_cpu=not on_gpu,
                           stall_known=stall is not None, set_share=share,
                           note=None if f is not None else j.cpu_wait_note, stall=stall,
                           io_blocked=j.io_blocked, io_ratio=ratios.get(j.name),
                           io_read_bps=j.io_read_bytes_per_s, io_device=j.io_device_label,
                           mem_q=mem[j.name][0], mem_shared=mem[j.name][1],
                           mem_domain=doms[j.name].name, pool=j.cpu_pool, pool_speedup=s_pool,
                           pool_slice_ms=j.cpu_pool_slice_ms, pool_yields=j.cpu_pool_yields,
                           outside=s_out, workers=has_workers(j), autogroup=j.autogroup)
    return out


def has_workers(j: JobSample) -> bool:
    """Whether the job has data-loader workers: processes beside its trainers whose CPU wait
    or cores were read, or worker processes in its tree (nanoGPT's train.py has none)."""
    return (j.cpu_wait_workers is not None or j.cpu_cores_workers is not None
            or any(p.role == "worker" for p in j.procs))


@dataclass(frozen=True)
class Estimate:
    """One job's smoothed estimate over the window (None: abstain, with `why`)."""

    name: str
    slowdown: float | None
    confidence: float | None
    cause: str | None  # "cpu" | "gpu" | "io" | None (not slowed, or unknown)
    ticks: int
    last: Tick
    why: str | None = None
    io: float | None = None  # s_io over the window (None: not on a shared busy device)
    io_wait: float | None = None  # share of the window it waited on I/O
    mem: float | None = None  # s_mem over the window (None: its data not re-read beside others)
    mem_q: float | None = None  # the share of its reads that re-read evicted pages (window)
    mem_wait: float | None = None  # the part of io_wait spent on those re-reads
    outside: float | None = None  # how much faster without the load from outside the jobs
    outside_confidence: float | None = None  # how sure `outside` sits on its side of SLOW
    # what its estimate comes from, slowed or not: `cause` once above SLOW (a job the live
    # verdict's hysteresis keeps slowed below SLOW is grouped by it)
    leans: str | None = None
    # its loader's pace beside the others against its pace alone (analyse/slowdown/pace.py; None:
    # not read), and whether `slowdown` is that pace rather than the CPU-wait estimate
    pace: Pace | None = None
    pace_used: bool = False
    # why `slowdown`, an estimate, can be far from the truth (None: no known reason)
    doubt: str | None = None


def smooth(ticks: Sequence[Tick], name: str, min_ticks: int = MIN_TICKS) -> Estimate:
    """The median of a job's last ticks, with a confidence: how sure it sits on its side of
    SLOW, from the spread of the ticks (Student's t on ln s), the ticks seen, and whether its
    critical path was identified (on the CPU, or its data stall known)."""
    last = ticks[-1]
    known = [k for k in ticks if k.slowdown is not None]
    if len(known) < min_ticks:
        why = last.note or (f"{len(known)} of {min_ticks} readings of its CPU wait so far")
        return Estimate(name, None, None, None, len(known), last, why)
    vals = [v for k in known if (v := k.slowdown) is not None]
    s = statistics.median(vals)
    cpu = statistics.median([k.cpu or 1.0 for k in known])
    gpu = statistics.median([k.gpu or 1.0 for k in known])
    s_io, w_io = io_window(ticks)
    s_mem, q = memory_window(ticks, w_io)
    s_data = s_mem if s_mem is not None else s_io
    if s_data is not None and s_data > s:
        s = s_data
    data_cause = "memory" if s_mem is not None and q is not None and q >= THRASH else "io"
    leans = (data_cause if s_data is not None and s_data >= max(cpu, gpu, s)
             else "cpu" if cpu >= gpu else "gpu")
    cause = None if s <= SLOW else leans
    conf = _confidence([s_data] * len(vals) if cause in ("io", "memory") and s_data else vals, s,
                       known, cause)
    outs = [v for k in known if (v := k.outside) is not None]
    s_out = statistics.median(outs) if outs else None
    return Estimate(name, round(s, 3), conf, cause, len(known), last, io=s_io, io_wait=w_io,
                    leans=leans,
                    mem=s_mem, mem_q=q,
                    mem_wait=None if q is None or w_io is None else round(w_io * q, 3),
                    outside=None if s_out is None else round(s_out, 3),
                    outside_confidence=None if s_out is None
                    else _confidence(outs, s_out, known, "cpu"))


def memory_window(ticks: Sequence[Tick], w: float | None) -> tuple[float | None, float | None]:
    """(s_mem, q): the median re-read share of its reads over the window (None: unknown) and,
    where another job read in its memory domain in at least half of the ticks, the slowdown
    the lost page cache costs it (analyse/live/memory_share.py)."""
    qs = [k.mem_q for k in ticks if k.mem_q is not None]
    if not qs or w is None:
        return None, None if not qs else round(statistics.median(qs), 3)
    q = statistics.median(qs)
    shared = [k for k in ticks if k.mem_shared and k.mem_q is not None]
    if len(shared) * 2 < len(ticks) or q <= 0:
        return None, round(q, 3)
    return round(memory_slowdown(w, q, window_ratio(ticks)), 3), round(q, 3)


def window_ratio(ticks: Sequence[Tick]) -> float | None:
    """The fetch speed-up alone over the window, `R / r_i` of the window's reads summed: the
    jobs' bytes over its own bytes in the ticks where it shared a busy device (None: it did in
    fewer than half of them). Not the median of the ticks' ratios: a tick holds two or three of
    a slow reader's steps, so its share jumps from tick to tick, and R / r_i is steep in the
    share (a 40 % tick reads 2.5, a 60 % one 1.67): the window's bytes weigh each tick by what
    was read in it."""
    shared = [k for k in ticks if k.io_ratio is not None]
    if len(shared) * 2 < len(ticks):
        return None
    own = sum(k.io_read_bps or 0 for k in shared)
    if own <= 0:
        return statistics.median([k.io_ratio or 1.0 for k in shared])
    return sum((k.io_read_bps or 0) * (k.io_ratio or 1.0) for k in shared) / own


def io_window(ticks: Sequence[Tick]) -> tuple[float | None, float | None]:
    """(s_io, w): the job's I/O wait share over the window (ticks blocked on I/O; on a GPU at
    most its data stall, where known) and, where it read from a busy device another job reads from in at
    least half of them, the slowdown that sharing costs it (analyse/live/io_share.py)."""
    seen = [k for k in ticks if k.io_blocked is not None]
    if not seen:
        return None, None
    w = sum(k.io_blocked or 0.0 for k in seen) / len(seen)
    stalls = [k.stall for k in ticks if k.stall is not None]
    if stalls and not ticks[-1].on_cpu:
        # on a GPU, a trainer asleep in a CUDA wait while its workers read looks blocked on
        # I/O too: only its data stall can be I/O wait. On the CPU the states say it (py-spy's
        # stall of a job that waits on a throttled disk was seen at 59 % beside 100 % blocked)
        w = min(w, statistics.median(stalls))
    ratio = window_ratio(ticks)
    if ratio is None:
        return None, round(w, 3)
    return round(io_slowdown(w, ratio), 3), round(w, 3)


def _pstdev(xs: list[float]) -> float:
    """The population standard deviation in floats (statistics.pstdev works in exact fractions:
    ~75 µs a call, once per job per tick)."""
    mean = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / len(xs))


def _confidence(vals: list[float], s: float, known: Sequence[Tick], cause: str | None) -> float:
    logs = [math.log(v) for v in vals]
    n = len(logs)
    sd = _pstdev(logs) if n > 1 else 0.25
    se = math.sqrt(sd ** 2 / n + MODEL_SE ** 2)  # the ticks' spread, and the model's own
    p = student_t_cdf(abs(math.log(s) - math.log(SLOW)) / se, max(1, n - 1))
    last = known[-1]
    if cause == "io":
        model = 0.8  # its wait is sampled once a tick; the device's share is measured
    elif cause == "memory":
        model = 0.7  # as for I/O, and the re-read share is its domain's, not its own
    elif cause == "gpu":
        model = 0.6  # NVML's per-process shares say little of how a job's kernels queue
    elif last.on_cpu or last.stall_known:
        model = 0.9
    else:
        model = 0.7  # on a GPU with the data stall unknown: the critical path is a guess
    return round(p * model, 2)
