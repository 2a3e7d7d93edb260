"""The simulator's CPU interference coefficient, read off a recorded co-run's verdict evidence.

The simulator (sched/simulate.py) slows every job with a CPU need by 1 + alpha * (D - C) / C
when the running jobs need D cores at solo speed on C usable cores. A recorded launch whose
verdict has measured slowdowns and a measured solo CPU need gives alpha directly:

    alpha = (median slowdown - 1) / ((D - C) / C)

only when D > C (an undersubscribed co-run says nothing about overcommit).
"""

from __future__ import annotations

import statistics


def cpu_alpha(verdict: dict | None) -> tuple[float, str] | None:
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
