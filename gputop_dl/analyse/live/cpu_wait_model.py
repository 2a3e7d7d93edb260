"""The CPU-wait model of the live verdict: how much faster a job's CPU work would run alone.

Pure functions over one tick's figures (collect/proc/schedstat.py reads them): a job's CPU wait `f`
(the share of its threads' runnable time spent waiting for a CPU), the cores it used `c`, and
the share of its competitors that are the other judged jobs; and, for a trainer with an
intra-op thread pool, each busy thread's wait (`pool_speedup`: the pool's critical path). The
model and its blind spots: docs/verdict.md.
"""

from __future__ import annotations

from typing import Sequence

Pool = Sequence[tuple[float, float]]  # a trainer's busy threads: (wait share, runnable share)

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
    are not jobs were seen to use (`outside`, collect/proc/busiest.py). 1 when both are unknown
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


SPIN_RUNNABLE = 0.9  # every thread of a pool runnable this share of the time: they spin
# how a pool's threads leave their CPU, medians over the pool (measured on the 2-core box,
# docs/validation.md, "Multi-threaded jobs" and "An intra-op pool wider than its cores"): a
# thread that spins at a barrier runs 1.59-3.8 ms on a CPU per slice (0-11 % of its switches
# voluntary with OMP_WAIT_POLICY=ACTIVE or beside copies of itself, but 22-36 % with the
# default policy beside a busy loop: libgomp spins less once threads outnumber the CPUs);
# one that sleeps (OMP_WAIT_POLICY=PASSIVE) 0.07-1.21 ms (25-98 % voluntary). Either sign
# of a spin is enough: every pool measured is then told right.
SPIN_SLICE_MS = 1.4  # it spins at this time per slice or more
SPIN_YIELDS = 0.2  # or below this share of voluntary switches


def pool_speedup(pool: Pool, share: float = 1.0) -> float | None:
    """How much faster a job's intra-op pool would run alone (None: no pool, fewer than two
    busy threads).

    `pool`: the trainer's busy threads, (wait share f_i, runnable share b_i) each. An OpenMP or
    MKL pool splits each operator across its threads and waits for the last one: an operator is
    done only when every thread got its part onto a CPU. With operators far shorter than a
    scheduler's time slice, a thread that finished its part waits (spins, then sleeps) for a
    peer that waits for a CPU, so the pool moves only while all its threads run at once. The
    threads wait for a CPU independently of each other: thread i is off a CPU f_i * b_i of the
    time it would run alone, so the pool's critical path runs at the product of the threads'
    rates, s = prod 1 / (1 - f_i * b_i * share), not at the mean thread's (one thread's
    1 / (1 - f * b)). A thread busy only part of the time (b_i < 1: it sleeps through the
    serial parts) weighs less. No `cpus / c` cap: a pool's spinning is CPU time that does no
    work, so its CPU time together exceeds its CPU time alone."""
    if len(pool) < 2:
        return None
    s = 1.0
    for f, b in pool:
        s /= 1.0 - clip_wait(f * min(1.0, b) * share)
    return max(1.0, min(s, 1.0 / (1.0 - MAX_WAIT)))


def spins(pool: Pool, slice_ms: float | None = None, yields: float | None = None) -> bool:
    """Whether a pool's threads spin while they wait for each other (OpenMP's busy-wait: a
    waiting thread stays on its CPU until it is preempted). From their time on a CPU per time
    slice (`slice_ms`) and the share of their context switches that were voluntary
    (`yields`), where known: either sign is enough; else every thread runnable nearly all the
    time (the crudest sign: a sleeping pool on a busy box can be too)."""
    if len(pool) < 2:
        return False
    signs = ([] if slice_ms is None else [slice_ms >= SPIN_SLICE_MS]) + (
        [] if yields is None else [yields < SPIN_YIELDS])
    if signs:
        return any(signs)
    return all(b >= SPIN_RUNNABLE for _, b in pool)


# where a spinning pool's cost can be measured (diagnose's probe drops it from its own lines)
DIAGNOSE_HINT = ("; where the job has DataLoader workers, its own pace measures it live if it "
                 "(or a copy of it, its twin) ran alone before the others came, or ran alone "
                 "under a recording gputop-dl before, and `gputop-dl diagnose` does, pausing "
                 "the other jobs a few seconds each")


def pool_line(name: str, pool: Pool, s: float, slice_ms: float | None = None,
              yields: float | None = None) -> str:
    """An evidence line: a job's intra-op pool, its threads' waits, whether they spin, and the
    pool's critical-path estimate `s`."""
    spun = spins(pool, slice_ms, yields)
    on_cpu = ("" if slice_ms is None else f", on a CPU {slice_ms:.2f} ms per time slice") + (
        "" if yields is None else f", {yields:.0%} of their switches their own")
    return (f"{name}: {len(pool)} busy threads in its trainer (an intra-op pool), each waiting "
            + "/".join(f"{f:.0%}" for f, _ in pool) + " of its runnable time"
            + (" and runnable " + "/".join(f"{b:.0%}" for _, b in pool) + f" of the time{on_cpu}: "
               "they spin while they wait for each other" if spun else on_cpu)
            + f"; an operator needs them all on a CPU at once, so their waits multiply "
              f"({s:.2f}× on its critical path"
            + ("; a spinning pool's true cost also depends on how often the scheduler runs its "
               "threads together, which these readings cannot see: it can be several times "
               "this" + DIAGNOSE_HINT if spun else "") + ")")


def spin_fix(names: Sequence[str]) -> str:
    """The fix for jobs whose intra-op pools spin beside each other."""
    return (f"{', '.join(names)}: {'its' if len(names) == 1 else 'their'} intra-op "
            f"{'pool spins' if len(names) == 1 else 'pools spin'} while waiting for a CPU "
            "(OpenMP's busy-wait), burning the cores the other jobs need: start "
            f"{'it' if len(names) == 1 else 'them'} with OMP_WAIT_POLICY=PASSIVE, or with fewer "
            "intra-op threads (OMP_NUM_THREADS=1, torch.set_num_threads(1))")

