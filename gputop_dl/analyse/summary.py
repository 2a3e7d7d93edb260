"""Per-job results of a recorded session, computed from the store (for summaries and reports)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from gputop_dl.analyse.jobstats import step_stats


@dataclass(frozen=True)
class JobResult:
    name: str
    status: str
    failure: str | None
    device: str | None
    config: dict
    epochs: tuple[tuple[int, float], ...] = ()  # (epoch, seconds), co-run
    median_epoch_s: float | None = None
    step_time_s: float | None = None
    samples_per_s: float | None = None
    stall_fraction: float | None = None
    steps: int = 0
    cpu_cores: float | None = None  # mean over the co-run after warm-up
    peak_rss: int | None = None
    peak_gpu_mem: int | None = None  # NVML, summed over the job's GPUs
    peak_framework_mem: int | None = None  # torch peak (CUDA allocated, or CPU max RSS)
    solo: dict | None = None
    slowdown: float | None = None
    stderr_tail: tuple[str, ...] = ()
    started: float | None = None
    ended: float | None = None

    def to_json(self) -> dict:
        """The job object of the session export (contract: docs/design.md)."""
        return {
            "name": self.name, "status": self.status, "failure": self.failure,
            "device": self.device,
            "epochs": [{"epoch": e, "time_s": t} for e, t in self.epochs],
            "median_epoch_s": self.median_epoch_s, "step_time_s": self.step_time_s,
            "samples_per_s": self.samples_per_s, "stall_fraction": self.stall_fraction,
            "steps": self.steps,
            "solo_step_time_s": (self.solo or {}).get("step_time_s"),
            "solo_stall_fraction": (self.solo or {}).get("stall_fraction"),
            "solo_cpu_cores": (self.solo or {}).get("cpu_cores"),
            "slowdown": self.slowdown, "cpu_cores": self.cpu_cores, "peak_rss": self.peak_rss,
            "peak_gpu_mem": self.peak_gpu_mem, "peak_framework_mem": self.peak_framework_mem,
            "stderr_tail": list(self.stderr_tail),
            "config": self.config,
        }


@dataclass(frozen=True)
class SessionSummary:
    jobs: tuple[JobResult, ...] = ()
    events: tuple[dict, ...] = field(default_factory=tuple)  # failures / notes, in time order


def _job_result(store, sid: str, job: dict) -> JobResult:
    name = job["name"]
    cfg = job.get("config") or {}
    warmup = int(cfg.get("warmup_steps", 3))
    steps = store.events(sid, job=name, ev="step", phase="co-run")
    epochs = store.events(sid, job=name, ev="epoch", phase="co-run")
    st = step_stats(steps, warmup=warmup, window=0)
    t_warm = steps[warmup]["t"] if len(steps) > warmup else None
    samples = store.job_samples(sid, name)
    corun = [s for s in samples if s[2] == "co-run"]
    cores = [s[3] for s in corun if s[3] is not None and (t_warm is None or s[0] >= t_warm)]
    rss = [s[4] for s in corun if s[4] is not None]
    gmem = [s[6] for s in corun if s[6] is not None]
    ep = tuple((int(e["epoch"]), float(e["time_s"])) for e in epochs)
    info = job.get("info") or {}
    solo = info.get("solo")
    slowdown = None
    if solo and solo.get("step_time_s") and st.step_time_s:
        slowdown = round(st.step_time_s / solo["step_time_s"], 3)
    fw = [e.get("peak_mem") for e in epochs if e.get("peak_mem") is not None]
    return JobResult(
        name=name, status=job["status"], failure=job.get("failure"), device=job.get("device"),
        config=cfg, epochs=ep,
        median_epoch_s=statistics.median([t for _, t in ep]) if ep else None,
        step_time_s=st.step_time_s, samples_per_s=st.samples_per_s,
        stall_fraction=st.stall_fraction, steps=len(steps),
        cpu_cores=round(statistics.fmean(cores), 3) if cores else None,
        peak_rss=max(rss) if rss else None, peak_gpu_mem=max(gmem) if gmem else None,
        peak_framework_mem=max(fw) if fw else None, solo=solo, slowdown=slowdown,
        stderr_tail=tuple(info.get("stderr_tail") or ()), started=job.get("started"),
        ended=job.get("ended"))


def summarize(store, sid: str) -> SessionSummary:
    jobs = tuple(_job_result(store, sid, j) for j in store.jobs(sid))
    notable = [e for e in store.events(sid) if e["ev"] in ("failed", "note", "baseline")]
    return SessionSummary(jobs=jobs, events=tuple(notable))
