"""Per-job results of a recorded session, computed from the store (for summaries and reports)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from gputop_dl.analyse.recorded.energy_phases import PhaseEnergy, phase_energy
from gputop_dl.analyse.stats.jobstats import step_stats
from gputop_dl.analyse.stats.phases import (PARTS, PhaseMeans, RankJson, StragglerJson, mean_phases,
                                      phase_class)
from gputop_dl.workload import command_line
from gputop_dl.snapshot import LIVE_STATUSES


@dataclass(frozen=True)
class JobResult:
    name: str
    status: str
    failure: str | None
    device: str | None
    config: dict[str, Any]  # Workload.to_dict(), as stored
    epochs: tuple[tuple[int, float], ...] = ()  # (epoch, seconds), co-run
    epoch_quality: tuple[tuple[float | None, float | None], ...] = ()  # (loss, train accuracy)
    median_epoch_s: float | None = None
    step_time_s: float | None = None
    samples_per_s: float | None = None
    stall_fraction: float | None = None
    steps: int = 0
    cpu_cores: float | None = None  # mean over the co-run after warm-up
    peak_rss: int | None = None
    peak_gpu_mem: int | None = None  # NVML, summed over the job's GPUs
    peak_framework_mem: int | None = None  # torch peak (CUDA allocated, or CPU max RSS)
    solo: dict[str, Any] | None = None  # the baseline's stats, as stored
    slowdown: float | None = None
    stderr_tail: tuple[str, ...] = ()
    started: float | None = None
    ended: float | None = None
    fwd_flops: float | None = None  # forward FLOPs per image (FlopCounterMode), from the trainer
    reported: dict[str, Any] = field(default_factory=dict)  # the co-run "started" event (batch_size, epochs)
    launched: bool = True  # False: a job a monitor session found running (not started by us)
    command: str | None = None  # such a job's command line
    distributed: dict[str, Any] | None = None  # its run and ranks on this node (Distributed.to_json)
    phases: PhaseMeans | None = None  # mean seconds per co-run step by phase (analyse/stats/phases.py)
    ranks: list[RankJson] | None = None  # a distributed job's ranks with their phases, at its end
    straggler: StragglerJson | None = None  # its late rank: {rank, cause, excess_s}
    energy: tuple[PhaseEnergy, ...] = ()  # its GPU energy per phase (analyse/live/energy.py)

    def peak_mem(self) -> tuple[int | None, str | None]:
        """The one memory figure the summary and the reports show, and what it measures:
        NVML's GPU memory, else the framework's peak (CUDA allocated, or the trainer's RSS),
        else the sampled RSS of the job's process tree."""
        if self.peak_gpu_mem is not None:
            return self.peak_gpu_mem, "gpu"
        if self.peak_framework_mem is not None:
            kind = "cuda-allocated" if (self.device or "").startswith("cuda") else "host-rss-trainer"
            return self.peak_framework_mem, kind
        if self.peak_rss is not None:
            return self.peak_rss, "host-rss-tree"
        return None, None

    @property
    def is_command(self) -> bool:
        return bool(self.config.get("command"))

    @property
    def batch_size(self) -> int | None:
        """The batch: the file's, or for a command job what its start-up hook saw (or None)."""
        return self.reported.get("batch_size") if self.is_command else self.config.get("batch_size")

    @property
    def epochs_planned(self) -> int | None:
        return self.reported.get("epochs") if self.is_command else self.config.get("epochs")

    @property
    def train_tflops(self) -> float | None:
        """Achieved training compute: 3 × forward FLOPs per image × samples/s, in TFLOP/s."""
        if not self.fwd_flops or not self.samples_per_s:
            return None
        return 3 * self.fwd_flops * self.samples_per_s / 1e12

    def to_json(self) -> dict[str, Any]:
        """The job object of the session export (contract: docs/contracts.md)."""
        return {
            "name": self.name, "status": self.status, "failure": self.failure,
            "device": self.device,
            "epochs": [{"epoch": e, "time_s": t, "loss": q[0], "train_accuracy": q[1]}
                       for (e, t), q in zip(self.epochs, self.epoch_quality or
                                            [(None, None)] * len(self.epochs))],
            "median_epoch_s": self.median_epoch_s, "step_time_s": self.step_time_s,
            "samples_per_s": self.samples_per_s, "stall_fraction": self.stall_fraction,
            "steps": self.steps,
            "solo_step_time_s": (self.solo or {}).get("step_time_s"),
            "solo_stall_fraction": (self.solo or {}).get("stall_fraction"),
            "solo_cpu_cores": (self.solo or {}).get("cpu_cores"),
            "slowdown": self.slowdown, "cpu_cores": self.cpu_cores, "peak_rss": self.peak_rss,
            "peak_gpu_mem": self.peak_gpu_mem, "peak_framework_mem": self.peak_framework_mem,
            "launched": self.launched, "command": self.command,
            "fwd_gflops": None if self.fwd_flops is None else self.fwd_flops / 1e9,
            "train_tflops": self.train_tflops,
            "stderr_tail": list(self.stderr_tail),
            "distributed": self.distributed,
            "energy": list(self.energy) or None,  # per phase; null: none recorded
            # step phases (docs/phases.md)
            "phases": self.phases,
            "solo_phases": _six((self.solo or {}).get("solo_phases")),
            "phase_class": phase_class(self.phases, self.steps - int(self.config.get(
                "warmup_steps", 3))),
            "ranks": self.ranks, "straggler": self.straggler,
            "config": self.config,
        }



def command_of(cfg: Mapping[str, Any]) -> str | None:
    """A launched `command` workload's command line (its config, redacted as stored); None for
    the built-in trainer."""
    cmd = cfg.get("command")
    if not isinstance(cmd, list) or not cmd:
        return None
    return cmd[0] if cfg.get("shell") and len(cmd) == 1 else command_line(cmd)

def _six(phases: Mapping[str, Any] | None) -> PhaseMeans | None:
    """The six phase keys of a baseline's solo_phases (without its step count)."""
    return {f"{p}_s": phases.get(f"{p}_s") for p in PARTS} if phases else None


@dataclass(frozen=True)
class SessionSummary:
    jobs: tuple[JobResult, ...] = ()
    events: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # failures / notes, in time order
    sampled: dict[str, dict[str, int]] = field(default_factory=dict)  # job -> step statistics subsampled


STEP_SAMPLE_CAP = 5_000  # a job with more co-run steps: step statistics over every k-th step
NOTABLE = ("failed", "note", "baseline", "stuck", "unstuck")


def verdict_slowdowns(verdict: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Each judged job's slowdown, as the verdict measured it over the overlap window: the one
    slowdown every view shows (docs/verdict.md)."""
    return {j["name"]: j.get("slowdown") for j in (verdict or {}).get("jobs") or ()}


def _job_result(store: Any, sid: str, job: dict[str, Any], slowdowns: dict[str, float | None],
                corun: dict[tuple[str, str], list[dict[str, Any]]] | None = None
                ) -> tuple[JobResult, dict[str, int] | None]:
    """One job's results from aggregated reads (SQL), so that a 24-hour session does not load
    every step event and sample into Python.

    Definitions: co-run step events after the warm-up steps; CPU cores = mean of the co-run
    samples from the first step after warm-up; peaks = max over co-run samples. A job with more
    than STEP_SAMPLE_CAP usable steps gets its step statistics from every k-th step (the count
    stays exact), and the second value returned says so: {"steps": n used, "of": n, "every": k}.
    `corun`: the session's co-run "epoch" and "started" events by (job, ev), read once for
    all jobs (`corun_events`); else read here.
    """
    name = job["name"]
    cfg = job.get("config") or {}
    warmup = int(cfg.get("warmup_steps", 3))
    # a job of a monitor session was not launched here: its samples are phase "monitor", and
    # its stall is the mean of the py-spy figures in them
    phase = "co-run" if job.get("launched", True) else "monitor"
    n = store.step_count(sid, name, phase)
    usable = max(0, n - warmup)
    every = max(1, math.ceil(usable / STEP_SAMPLE_CAP))
    rows = store.step_rows(sid, name, phase, offset=warmup, every=every) if usable else []
    st = step_stats([{"t_step": ts, "t_data": td or 0.0, "samples": sa}
                     for _t, ts, td, sa in rows if ts is not None], warmup=0, window=0)
    t_warm = rows[0][0] if rows else None
    cores, peak_rss, peak_gpu, sampled_stall = store.job_sample_stats(sid, name, phase, t_warm)
    if corun is None:
        corun = corun_events(store, sid, name)
    epochs = corun.get((name, "epoch"), [])
    ep = tuple((int(e["epoch"]), float(e["time_s"])) for e in epochs)
    info = job.get("info") or {}
    solo = info.get("solo")
    slowdown = slowdowns.get(name)
    fw = [e["peak_mem"] for e in epochs if e.get("peak_mem") is not None]
    started = corun.get((name, "started"), [])
    result = JobResult(
        name=name, status=job["status"], failure=job.get("failure"), device=job.get("device"),
        config=cfg, epochs=ep,
        epoch_quality=tuple((e.get("loss"), e.get("accuracy")) for e in epochs),
        median_epoch_s=statistics.median([t for _, t in ep]) if ep else None,
        step_time_s=st.step_time_s, samples_per_s=st.samples_per_s,
        stall_fraction=st.stall_fraction if n or phase == "co-run" else sampled_stall,
        steps=n,
        cpu_cores=round(cores, 3) if cores is not None else None,
        peak_rss=peak_rss, peak_gpu_mem=peak_gpu, peak_framework_mem=max(fw) if fw else None,
        solo=solo, slowdown=slowdown, stderr_tail=tuple(info.get("stderr_tail") or ()),
        started=job.get("started"), ended=job.get("ended"),
        fwd_flops=started[0].get("fwd_flops") if started else None,
        reported={k: v for k, v in (started[0] if started else {}).items()
                  if k not in ("t", "ev", "job", "phase")},
        launched=phase == "co-run",
        command=command_of(cfg) if phase == "co-run" else info.get("command"),
        distributed=info.get("distributed"),
        phases=mean_phases(store.phase_rows(sid, name, phase, offset=warmup, every=every))
        if usable and hasattr(store, "phase_rows") else None,
        ranks=info.get("ranks"), straggler=info.get("straggler"),
        energy=phase_energy(store.job_energy(sid, name)) if hasattr(store, "job_energy") else ())
    sampled = {"steps": len(rows), "of": usable, "every": every} if every > 1 else None
    return result, sampled


def status_after(status: str, session_state: str | None) -> str:
    """A job's status as every export and summary shows it: a job still live in the store of
    an interrupted session (gputop-dl was killed; its watchdog stopped the jobs) is
    "interrupted", never "running". The one mapping for JSON, Markdown and the console."""
    if session_state == "interrupted" and status in LIVE_STATUSES:
        return "interrupted"
    return status


def corun_events(store: Any, sid: str, job: str | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The co-run "epoch" and "started" events of a session (or of one `job`) by (job, ev),
    each list in time order: one read for the whole session."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    if job is not None:
        for ev in ("epoch", "started"):
            out[(job, ev)] = store.events(sid, job=job, ev=ev, phase="co-run")
        return out
    for e in store.events_of(sid, ("epoch", "started")):  # in rowid order
        if e.get("phase") == "co-run":
            out.setdefault((e["job"], e["ev"]), []).append(e)
    for evs in out.values():  # time order, as `Store.events` gives (stable: rowid breaks ties)
        evs.sort(key=lambda e: (e["t"] is None, e["t"] or 0.0))
    return out


def summarize(store: Any, sid: str) -> SessionSummary:
    """Every job's results and the notable events (failures, notes, baselines) of a session."""
    results, sampled = [], {}
    row = store.session(sid)
    slowdowns = verdict_slowdowns(row.verdict if row else None)
    corun = corun_events(store, sid)
    state = row.state if row else None
    for j in store.jobs(sid):
        r, smp = _job_result(store, sid, j, slowdowns, corun)
        if status_after(r.status, state) != r.status:
            r = dataclasses.replace(r, status=status_after(r.status, state))
        results.append(r)
        if smp:
            sampled[r.name] = smp
    return SessionSummary(jobs=tuple(results), events=tuple(store.events_of(sid, NOTABLE)),
                          sampled=sampled)
