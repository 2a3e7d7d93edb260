"""A trainer's intra-op pool wider than the cores it gets: which jobs, the threads each fits in,
and the fix a verdict gives them first.

An operator is split across every thread of the pool and done only when its last part is: a
pool wider than the cores it gets waits, operator after operator, for a thread that is off a
CPU, spinning or not. A 2-thread PyTorch trainer on the 2-core box ran 15 steps/s beside one
busy loop and 201 with one thread (363 alone); two such trainers 11 each, and 200 and 207 with
one thread each (docs/validation.md, "An intra-op pool wider than its cores"). The pools are
read live only (collect/proc/schedstat.py): the live judge gives the fix (`wide`,
`with_width_fix`, analyse/live/passive.py), `diagnose` and a launch put it on their measured
verdicts (`WidePools`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputop_dl.analyse.live.cpu_wait_model import Pool
from gputop_dl.analyse.verdict_types import Fix, Verdict

if TYPE_CHECKING:
    from gputop_dl.analyse.live.job_estimate import Estimate

POOL_WAITS = 0.2  # a pool whose threads wait this share of their runnable time or more (mean)


def pool_cores(pool: Pool) -> float:
    """The cores a pool's busy threads got together: each `runnable * (1 - wait)`."""
    return sum(b * (1.0 - f) for f, b in pool)


def pool_width(pool: Pool) -> int | None:
    """The intra-op threads a trainer's pool fits in now: as many as the cores its busy threads
    got together (at least 1), where the pool is wider than that and its threads wait for a
    CPU; None: it fits, or no pool."""
    if len(pool) < 2 or sum(f for f, _ in pool) / len(pool) < POOL_WAITS:
        return None
    k = max(1, int(pool_cores(pool) + 0.25))
    return k if k < len(pool) else None


def wide(est: Iterable[Estimate]) -> list[tuple[str, Pool]]:
    """The judged jobs (name, pool) whose pools are wider than their cores at this reading."""
    return [(e.name, e.last.pool) for e in est
            if e.slowdown is not None and pool_width(e.last.pool) is not None]


def width_fix(jobs: Sequence[tuple[str, Pool]]) -> str:
    """The fix for jobs whose intra-op pools are wider than the cores they get (`jobs`: name
    and pool, each with a `pool_width`); jobs alike (threads, cores, the threads they fit in)
    in one clause."""
    alike: dict[tuple[int, str, int | None], list[str]] = {}
    for name, pool in jobs:
        alike.setdefault((len(pool), f"{pool_cores(pool):.1f}", pool_width(pool)), []).append(name)
    return "; ".join(
        (f"{names[0]}: its intra-op pool has {n} threads on ≈ {cores} cores" if len(names) == 1
         else f"{', '.join(names)}: their intra-op pools have {n} threads each, on ≈ {cores} "
              "cores each")
        + f", and every operator waits for the thread that is off a CPU: start "
          f"{'it' if len(names) == 1 else 'them'} with OMP_NUM_THREADS={k} "
          f"(torch.set_num_threads({k})) while the box is this busy"
        for (n, cores, k), names in alike.items())


def with_width_fix(v: Verdict, jobs: Sequence[tuple[str, Pool]]) -> Verdict:
    """`v` with the `pool-width` fix of these jobs (name, pool) first and `wide_pools` (job:
    the threads it fits in) in its evidence; unchanged for none, or where it has that fix
    already."""
    if not jobs or any(f.kind == "pool-width" for f in v.fixes):
        return v
    fix = Fix("pool-width", tuple(n for n, _ in jobs), width_fix(jobs))
    return v.with_fix_first(fix).with_evidence(wide_pools={n: pool_width(p) for n, p in jobs})


@dataclass
class WidePools:
    """The jobs whose pools were wider than their cores over a run's live readings (`add` each
    reading's estimates): those so in half of their judged readings or more, each with its
    last such pool; `on(v)` puts their fix on a measured verdict. A launch's last live verdict
    alone named one of a pair whose pools were both that wide most of the run."""

    _judged: dict[str, int] = field(default_factory=dict)
    _wide: dict[str, int] = field(default_factory=dict)
    _pools: dict[str, Pool] = field(default_factory=dict)

    def add(self, est: Iterable[Estimate]) -> None:
        est = list(est)
        for e in est:
            if e.slowdown is not None:
                self._judged[e.name] = self._judged.get(e.name, 0) + 1
        for name, pool in wide(est):
            self._wide[name] = self._wide.get(name, 0) + 1
            self._pools[name] = pool

    def on(self, v: Verdict) -> Verdict:
        return with_width_fix(v, [(n, p) for n, p in self._pools.items()
                                  if 2 * self._wide[n] >= self._judged[n]])
