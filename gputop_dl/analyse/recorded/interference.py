"""The simulator's CPU interference coefficient, read off a recorded co-run's verdict evidence.

The simulator (sched/simulate.py) slows every job with a CPU need by 1 + alpha * (D - C) / C
when the running jobs need D cores at solo speed on C usable cores. A recorded launch whose
verdict has measured slowdowns and a measured solo CPU need gives alpha directly:

    alpha = (median slowdown - 1) / ((D - C) / C)

only when D > C (an undersubscribed co-run says nothing about overcommit).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def cpu_alpha(verdict: Mapping[str, Any] | None) -> tuple[float, str] | None:
    """(alpha, how it was read) from a verdict, or None when the evidence cannot give it."""
    ev = (verdict or {}).get("evidence") or {}
    need, cpus = ev.get("solo_cpu_need_cores"), ev.get("cpus")
    slows = [s for s in (ev.get("slowdowns") or {}).values() if s]
    if not need or not cpus or not slows or need <= cpus:
        return None
    over = (need - cpus) / cpus
    med = statistics.median(slows)
    alpha = max(0.0, (med - 1.0) / over)
    return round(alpha, 3), (f"median slowdown {med:.2f} with {need:.1f} cores needed on {cpus} "
                             f"(overcommit {over:.2f})")


def gpu_share(verdict: Mapping[str, Any] | None) -> tuple[float, str] | None:
    """(factor, how it was read) of the simulator's shared-GPU time-slice model from a verdict
    whose jobs shared a GPU (`evidence.shared_gpus`) with measured slowdowns, or None.

    The model slows each of k jobs on one GPU by factor x U, U their summed solo busy fractions
    (taken as 1 each: a solo baseline records no GPU busy fraction), so factor = the median over
    those jobs of slowdown / k (1: a fair time-slice; above 1: switching costs)."""
    ev = (verdict or {}).get("evidence") or {}
    shared = ev.get("shared_gpus") or {}
    slows = ev.get("slowdowns") or {}
    ratios, parts = [], []
    for g, names in shared.items():
        k = len(names or ())
        got = [slows[n] for n in names or () if slows.get(n)]
        if k < 2 or not got:
            continue
        ratios += [s / k for s in got]
        parts.append(f"{k} jobs on GPU {g}, median slowdown {statistics.median(got):.2f}")
    if not ratios:
        return None
    return round(statistics.median(ratios), 3), "; ".join(parts)


def newest(verdicts: Iterable[tuple[str, Mapping[str, Any] | None]],
           read: Callable[[Mapping[str, Any] | None], tuple[float, str] | None]) -> tuple[float, str, str] | None:
    """The first (newest) of `verdicts` ((session id, verdict) pairs) that `read` (cpu_alpha or
    gpu_share) gives a figure for: (figure, session id, how)."""
    for sid, verdict in verdicts:
        got = read(verdict)
        if got:
            return got[0], sid, got[1]
    return None
