"""The sweep worker's result line (its marker and its row) and test hook, shared with the torch-free parent."""

from __future__ import annotations

from typing import TypedDict

RESULT_KEY = "gputop_dl_sweep"
# Test hook: batches >= this value raise torch.cuda.OutOfMemoryError in their first step.
ENV_FAKE_OOM = "GPUTOP_DL_SWEEP_FAKE_OOM"


class SweepRow(TypedDict, total=False):
    """One batch size of a sweep: what its worker reported (or why there is no result), when
    it ran, and what `sweepfit.annotate` adds (a row of `gputop-dl.sweep/1`'s `rows`)."""

    batch: int
    status: str  # ok, oom, error, skipped
    message: str
    model: str
    torch: str
    device: str
    threads: int
    step_s: float  # median step time
    step_mean_s: float
    step_min_s: float
    step_max_s: float
    step_cpu_s: float
    steps: int
    warmup: int
    peak_mem: int
    mem_kind: str  # cuda-allocated or host-rss-delta
    reserved_mem: int
    nvml_mem: int | None
    peak_rss: int
    start_rss: int
    started: float
    ended: float
    samples_per_s: float  # added by sweepfit.annotate
    epoch_s: float
    mem_growth: float | None
    time_change: float | None
