"""What the measured judge reads: each job's co-run and solo figures, and the host's signals.

`JobEvidence` is one job's figures over the overlap window beside its solo baseline's;
`HostEvidence` the host's CPU signals (thresholds below, tested at their boundaries in
tests/test_verdict.py) and its GPUs' utilisation and throttle reasons over the same window.
`analyse/recorded/evidence.py` gathers them from a launch's co-run, `analyse/slowdown/diagnosis.py`
from `diagnose`'s readings and `analyse/live/passive.py` from the live rows; `judge`
(analyse/verdict.py) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gputop_dl.analyse.slowdown.figure import Method

BUSY = 0.90  # host busy fraction of allowed cores
PSI = 0.10  # /proc/pressure/cpu some avg10
LOAD_PER_CORE = 1.0
THROTTLED = 0.05
# where a job's steps come from: the built-in trainer's events, the start-up hook in a user's
# script, or py-spy's sample order of its main thread (`diagnose`); the model's method for each
StepSource = Literal["trainer", "hook", "py-spy"]
STEP_METHOD: dict[StepSource, Method] = {"trainer": "step times", "hook": "step times",
                                         "py-spy": "py-spy steps"}


@dataclass(frozen=True)
class JobEvidence:
    """What was measured for one job: solo baseline (may be None) and co-run figures."""

    name: str
    device: str | None  # "cpu", "cuda:0", ...
    gpus: tuple[int, ...]  # physical GPUs (or emulated ones, see `emulated_device`)
    steps: int  # co-run steps in the overlap window
    step_time_s: float | None
    stall: float | None
    cpu_cores: float | None  # mean in the overlap window
    solo_step_time_s: float | None = None
    solo_stall: float | None = None
    solo_cpu_cores: float | None = None
    num_workers: int = 0
    transforms: str | None = None
    batch_size: int | None = None
    emulated_device: bool = False  # synthetic job whose device work is emulated per GPU index
    solo_cv: float | None = None  # step-time coefficient of variation of the solo baseline
    cv: float | None = None  # step-time coefficient of variation in the overlap window
    solo_steps: int | None = None  # steps the solo baseline's figures come from
    source: StepSource = "trainer"  # where its steps come from
    mean_step_time_s: float | None = None  # co-run mean step (long steps weigh in)
    solo_mean_step_time_s: float | None = None
    # a slowdown measured by another rate than step times, where those are unknown (diagnose's
    # probe: the loader workers' work rate alone over together, analyse/slowdown/loader_rate.py)
    rate_slowdown: float | None = None
    seen_steps: int | None = None  # its steps in the whole session (None: not counted)

    @property
    def mean_slowdown(self) -> float | None:
        """The ratio of mean step times: the throughput lost, which the median ratio
        understates when step times are bimodal (a loader that falls behind every few steps)."""
        if self.mean_step_time_s and self.solo_mean_step_time_s:
            return self.mean_step_time_s / self.solo_mean_step_time_s
        return None

    @property
    def slowdown(self) -> float | None:
        if self.step_time_s and self.solo_step_time_s:
            return self.step_time_s / self.solo_step_time_s
        return self.rate_slowdown

    @property
    def on_cpu(self) -> bool:
        return (self.device or "cpu").startswith("cpu") and not self.emulated_device


@dataclass(frozen=True)
class HostEvidence:
    """Host CPU signals averaged over the overlap window (None = not available)."""

    cpus: int
    busy: float | None = None
    psi_some10: float | None = None
    load1: float | None = None
    throttled: float | None = None
    gpu_util: dict[int, float] = field(default_factory=dict)
    gpu_throttle: dict[int, tuple[str, ...]] = field(default_factory=dict)
    hot_frames: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # job -> frames

    def cpu_signals(self) -> list[str]:
        """The CPU-saturation signals that fire, as evidence strings."""
        out = []
        if self.busy is not None and self.busy >= BUSY:
            out.append(f"host CPU busy {self.busy:.0%} of {self.cpus} cores (≥ {BUSY:.0%})")
        if self.psi_some10 is not None and self.psi_some10 >= PSI:
            out.append(f"CPU pressure (PSI some) {self.psi_some10:.0%} (≥ {PSI:.0%})")
        if self.load1 is not None and self.cpus and self.load1 / self.cpus > LOAD_PER_CORE:
            out.append(f"load {self.load1:.1f} on {self.cpus} cores ({self.load1 / self.cpus:.2f} per core)")
        if self.throttled is not None and self.throttled >= THROTTLED:
            out.append(f"cgroup CPU throttling {self.throttled:.0%} of the time")
        return out


def shared_gpus(jobs: list[JobEvidence]) -> dict[int, list[str]]:
    """GPU index -> the jobs placed on it, for GPUs with more than one job (real or emulated)."""
    users: dict[int, list[str]] = {}
    for j in jobs:
        if j.on_cpu:
            continue
        for g in j.gpus:
            users.setdefault(g, []).append(j.name)
    return {g: names for g, names in users.items() if len(names) > 1}
