"""Per-job step statistics from trainer step events: step time, samples/s, data stall fraction.

Definitions (docs/contracts.md): t_data = time the loop waited for the next batch, t_step = time
from one step's start to the next; stall fraction f = sum(t_data) / sum(t_step). Warm-up steps
(the first `warmup` steps of the run) are left out; figures are over the last `window` steps.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# a recorded step event (record/store.py): t, t_data, t_step, samples, ph ... as stored, JSON
StepEvent = dict[str, Any]


@dataclass(frozen=True)
class StepStats:
    n: int  # steps in the window
    step_time_s: float | None  # median t_step
    data_time_s: float | None  # median t_data
    samples_per_s: float | None  # sum(samples) / sum(t_step); None if a step's batch is unknown
    stall_fraction: float | None  # sum(t_data) / sum(t_step)
    cv: float | None = None  # coefficient of variation of t_step (noise of the estimate)
    mean_step_s: float | None = None  # sum(t_step) / n: what throughput feels, long steps too


EMPTY = StepStats(0, None, None, None, None, None)


def step_stats(steps: Sequence[StepEvent], warmup: int = 3, window: int = 50) -> StepStats:
    """`steps`: step events in order, each with t_data, t_step, samples (None: unknown, as the
    start-up hook reports a batch it cannot size; samples/s is then unknown too)."""
    usable = steps[warmup:] if len(steps) > warmup else []
    usable = usable[-window:] if window else usable
    if not usable:
        return EMPTY
    t_steps = [s["t_step"] for s in usable]
    t_datas = [s["t_data"] for s in usable]
    total = sum(t_steps)
    if total <= 0:
        return EMPTY
    mean = total / len(t_steps)
    cv = statistics.pstdev(t_steps) / mean if len(t_steps) > 1 and mean > 0 else None
    return StepStats(
        n=len(usable),
        step_time_s=statistics.median(t_steps),
        data_time_s=statistics.median(t_datas),
        samples_per_s=(None if any(s.get("samples", 0) is None for s in usable)
                       else sum(s.get("samples", 0) for s in usable) / total),
        stall_fraction=min(1.0, max(0.0, sum(t_datas) / total)),
        cv=cv,
        mean_step_s=mean,
    )


def eta_s(steps_done: int, steps_total: int, step_time_s: float | None) -> float | None:
    """Seconds left at the current median step time, or None if unknown."""
    if step_time_s is None or steps_total <= 0:
        return None
    return max(0, steps_total - steps_done) * step_time_s
