"""GPU sharing in the live verdict: NVML's per-process SM shares of a busy GPU that jobs share.

Pure functions over one tick's `GpuProcess` and `GpuSample` values. On a GPU that two or more
jobs use and that is busy (their SM shares, or NVML's device utilisation, sum to GPU_BUSY or
more), job i waits for the others' kernels: `s_gpu = min(1 / (1 - o_i), U / u_i)`, `o_i` the
others' share, `U` the GPU's, `u_i` its own. NVML's per-process split is not a job's time on
the GPU under time-slicing (docs/validation.md: 57 %/19 % between two identical processes).
"""

from __future__ import annotations

from typing import Sequence

from gputop_dl.analyse.live.cpu_wait_model import MAX_WAIT
from gputop_dl.snapshot import GpuProcess, GpuSample, JobSample

GPU_BUSY = 0.8  # summed SM share of a shared GPU above which its jobs queue for it


def gpu_shares(job: JobSample, gprocs: Sequence[GpuProcess]) -> dict[int, float]:
    """GPU index -> the job's SM share on it (NVML per-process samples of its processes)."""
    pids = set(job.pids) | ({job.pid} if job.pid is not None else set())
    out: dict[int, float] = {}
    for p in gprocs:
        if p.pid in pids:
            out[p.gpu_index] = out.get(p.gpu_index, 0.0) + (p.sm_util or 0.0)
    return out


def gpu_estimates(shares: dict[str, dict[int, float]],
                  gpus: Sequence[GpuSample] = ()) -> dict[str, tuple[float, float]]:
    """job -> (s_gpu, others' share) for jobs on a GPU that another job uses too and that is
    busy (their SM shares, or NVML's device utilisation, sum to GPU_BUSY or more)."""
    util = {g.index: g.util for g in gpus if g.util is not None}
    users: dict[int, dict[str, float]] = {}
    for name, per in shares.items():
        for g, u in per.items():
            users.setdefault(g, {})[name] = u
    out: dict[str, tuple[float, float]] = {}
    for g, jobs in users.items():
        if len(jobs) < 2:
            continue
        total = max(sum(jobs.values()), util.get(g) or 0.0)
        if total < GPU_BUSY:
            continue
        for name, u in jobs.items():
            others = min(total - u, MAX_WAIT) if total > u else 0.0
            s = 1.0 / (1.0 - others)
            if u > 0:
                s = min(s, total / u)
            s = max(1.0, s)
            if s > out.get(name, (0.0, 0.0))[0]:
                out[name] = (s, round(others, 3))
    return out
