"""The CPU-wait model of the live verdict: how much faster a job's CPU work would run alone.

Pure functions over one tick's figures (collect/schedstat.py reads them): a job's CPU wait `f`
(the share of its threads' runnable time spent waiting for a CPU), the cores it used `c`, and
the share of its competitors that are the other judged jobs. The model and its blind spots:
docs/verdict.md.
"""

from __future__ import annotations

MAX_WAIT = 0.95  # a wait share is clipped here (1 / (1 - f) would run away)


def clip_wait(f: float) -> float:
    return min(max(f, 0.0), MAX_WAIT)


def demand(f: float | None, cores: float | None) -> float | None:
    """The cores' worth of time a job's threads were runnable: c / (1 - f)."""
    if f is None or cores is None:
        return None
    return cores / (1.0 - clip_wait(f))


def set_share(d_i: float | None, set_demand: float, runnable: float | None,
              outside: float | None = None) -> float:
    """The share of job i's competitors for a CPU that are the other judged jobs, not load
    from outside them (which would still be there with the job alone): the others' demand over
    everything else runnable on the host. Outside the jobs is the larger of what the host's
    runnable threads leave (`runnable` less the jobs' demand) and the cores the processes that
    are not jobs were seen to use (`outside`, collect/busiest.py). 1 when both are unknown
    (every wait is put down to the jobs)."""
    if d_i is None or (runnable is None and outside is None):
        return 1.0
    others = max(0.0, set_demand - d_i)
    rest = max(runnable - set_demand if runnable is not None else 0.0, outside or 0.0, 0.0)
    return others / (others + rest) if others + rest > 0 else 1.0


def cpu_speedup(f: float | None, cores: float | None, cpus: int,
                share: float = 1.0) -> float | None:
    """How much faster a job's CPU work would run alone (at least 1; None: wait unknown).

    Its threads were runnable D = c / (1 - f) cores' worth of the time, over n = round(D)
    threads (at least one), each runnable b = min(1, D / n) of the wall time and waiting f of
    that: each lost f * b of the wall time, which alone it would not. So s = 1 / (1 - f * b),
    at most cpus / c (alone it still has only the cores allowed). A thread that sleeps most of
    the time (b small) loses little however long its few runs wait."""
    if f is None:
        return None
    f = clip_wait(f)
    b = 1.0  # cores unknown: as if its threads were always runnable
    if cores is not None:  # 0 cores: it ran (and so waited) for no time worth counting
        demand = cores / (1.0 - f)
        b = min(1.0, demand / max(1, round(demand)))
    s = 1.0 / (1.0 - clip_wait(f * b * share))
    if cores is not None and cores > 0 and cpus:
        s = min(s, max(1.0, cpus / cores))
    return max(1.0, s)
