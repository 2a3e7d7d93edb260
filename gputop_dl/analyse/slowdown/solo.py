"""A job's solo baseline from the steps of its run alone: the reference of a measured slowdown.

`launch` runs each job alone first (baseline = "measure"); the steps its start-up hook or
trainer reported after warm-up give the figures the co-run's are divided by (analyse/verdict.py):
step time, samples a second, data stall, CPU need, spread, device and the step phases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputop_dl.analyse.stats.jobstats import StepEvent, step_stats
from gputop_dl.analyse.stats.phases import solo_phases


def solo_baseline(steps: Sequence[StepEvent], warmup: int, cpu_cores: float | None,
                  device: str | None) -> dict[str, Any] | None:
    """A finished solo run's baseline (None: no step past its warm-up); `cpu_cores`: its mean
    cores after warm-up, `device` where it ran. A JSON document: cached in the store."""
    st = step_stats(steps, warmup=warmup, window=0)
    if not st.n:
        return None
    return {"step_time_s": st.step_time_s, "samples_per_s": st.samples_per_s,
            "stall_fraction": st.stall_fraction, "steps": st.n,
            "cpu_cores": cpu_cores, "cv": st.cv, "mean_step_time_s": st.mean_step_s,
            "device": device, "solo_phases": solo_phases(steps[warmup:])}
