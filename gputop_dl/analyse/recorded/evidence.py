"""Evidence for the verdict: co-run figures over the overlap window of recorded series.

The overlap window starts when every job is past its warm-up steps and ends when the first
job ends (or now): the only stretch where all jobs truly ran together.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from gputop_dl.analyse.stats.jobstats import StepEvent, step_stats
from gputop_dl.analyse.verdict_evidence import HostEvidence, JobEvidence
from gputop_dl.snapshot import GpuSample, HostSample


class HostPoint(NamedTuple):
    """One tick's host figures in a co-run series (a tuple: index access still works)."""

    t: float
    busy: float | None
    psi_some10: float | None
    load1: float | None
    throttled: float | None


class GpuPoint(NamedTuple):
    """One tick's figures of one GPU in a co-run series."""

    t: float
    gpu: int
    util: float | None
    throttle: tuple[str, ...]


def host_point(now: float, host: HostSample) -> HostPoint:
    """The HostPoint of a tick's HostSample."""
    return HostPoint(now, host.cpu_busy, host.cpu_pressure_some10, host.load1,
                     host.cgroup_throttled_frac)


def gpu_points(now: float, gpus: Iterable[GpuSample]) -> list[GpuPoint]:
    """The GpuPoints of a tick's GPU samples."""
    return [GpuPoint(now, g.index, g.util, g.throttle_reasons) for g in gpus]


class JobSeries(Protocol):
    """What the evidence reads of one co-run job (the engine's `JobRun` has these fields)."""

    name: str
    config: dict[str, Any]  # Workload.to_dict()
    info: dict[str, Any]  # the job's "started" event (a command's start-up hook: batch_size, num_workers)
    device: str | None
    steps: list[StepEvent]  # step events with t, t_data, t_step, samples
    cpu: list[tuple[float, float]]  # (t, cores)
    ended: float | None
    solo: dict[str, Any] | None  # baseline stats: step_time_s, stall_fraction, cpu_cores
    seen_gpus: set[int]  # NVML indexes its processes were seen on (a command job declares none)


def overlap_window(jobs: list[JobSeries], now: float) -> tuple[float, float] | None:
    starts = []
    for j in jobs:
        warm = int(j.config.get("warmup_steps", 3))
        if len(j.steps) <= warm:
            return None
        starts.append(j.steps[warm - 1]["t"] if warm > 0 else j.steps[0]["t"] - j.steps[0]["t_step"])
    ends = [j.ended if j.ended is not None else now for j in jobs]
    t0, t1 = max(starts), min(ends)
    return (t0, t1) if t1 > t0 else None


def _mean(vals: Sequence[float | None]) -> float | None:
    known = [v for v in vals if v is not None]
    return statistics.fmean(known) if known else None


def _outside(t0: float, t1: float, exclude: Sequence[tuple[float, float]]) -> bool:
    return not any(a < t1 and t0 < b for a, b in exclude)


def gather(jobs: list[JobSeries], host_series: list[HostPoint], gpu_series: list[GpuPoint],
           cpus: int,
           now: float, hot_frames: dict[str, list[tuple[str, float]]] | None = None,
           exclude: Sequence[tuple[float, float]] = ()) -> tuple[list[JobEvidence], HostEvidence]:
    """host_series and gpu_series: one HostPoint per tick, one GpuPoint per GPU and tick.

    `exclude`: spans that are not co-run time (the in-situ probe's windows): a step that
    touches one, and the samples inside one, are left out."""
    win = overlap_window(jobs, now)
    evs = []
    for j in jobs:
        c = j.config
        if win is None:
            steps, cpu = [], []
        else:
            steps = [s for s in j.steps if win[0] < s["t"] <= win[1]
                     and _outside(s["t"] - s["t_step"], s["t"], exclude)]
            cpu = [v for t, v in j.cpu if win[0] <= t <= win[1] and _outside(t, t, exclude)]
        st = step_stats(steps, warmup=0, window=0)
        # the GPUs the file gave it, else those NVML saw its processes on (two command jobs
        # on one GPU were once judged "slowed on separate devices": seen on an H100)
        gpus = tuple(c.get("gpus") or ()) or tuple(sorted(j.seen_gpus))
        emulated = c.get("model") == "synthetic" and float(c.get("step_device_ms") or 0) > 0
        solo = j.solo or {}
        transforms = c.get("transforms")
        if c.get("command"):  # a user's script: what its start-up hook saw, or unknown
            c = {"num_workers": j.info.get("num_workers"), "batch_size": j.info.get("batch_size")}
            transforms = None
        evs.append(JobEvidence(
            name=j.name, device=j.device, gpus=gpus, steps=st.n, step_time_s=st.step_time_s,
            stall=st.stall_fraction, cpu_cores=_mean(cpu),
            solo_step_time_s=solo.get("step_time_s"), solo_stall=solo.get("stall_fraction"),
            solo_cpu_cores=solo.get("cpu_cores"), num_workers=int(c.get("num_workers") or 0),
            transforms=(transforms if isinstance(transforms, str) or transforms is None
                        else "custom"),
            batch_size=c.get("batch_size"), emulated_device=emulated and bool(gpus),
            solo_cv=solo.get("cv"), cv=st.cv, solo_steps=solo.get("steps"), source="hook" if j.config.get("command") else "trainer",
            mean_step_time_s=st.mean_step_s, solo_mean_step_time_s=solo.get("mean_step_time_s"),
            seen_steps=len(j.steps)))
    hs = [h for h in host_series if win and win[0] <= h.t <= win[1]
          and _outside(h.t, h.t, exclude)]
    gs = [g for g in gpu_series if win and win[0] <= g.t <= win[1]
          and _outside(g.t, g.t, exclude)]
    util: dict[int, list[float]] = {}
    thr: dict[int, set[str]] = {}
    for _, idx, u, reasons in gs:
        if u is not None:
            util.setdefault(idx, []).append(u)
        thr.setdefault(idx, set()).update(r for r in reasons if r != "idle")
    host = HostEvidence(
        cpus=cpus, busy=_mean([h.busy for h in hs]), psi_some10=_mean([h.psi_some10 for h in hs]),
        load1=_mean([h.load1 for h in hs]), throttled=_mean([h.throttled for h in hs]),
        gpu_util={g: statistics.fmean(v) for g, v in util.items()},
        gpu_throttle={g: tuple(sorted(v)) for g, v in thr.items() if v},
        hot_frames=hot_frames or {})
    return evs, host
