"""Discrete-event simulation of a job queue: the policies of policies.py on job profiles.

Jobs arrive (a Poisson stream drawn from job kinds, or a fixed list), wait in the policy's
queue, and run at a speed set by an interference model for co-located jobs:

- CPU oversubscription: when the running jobs' summed solo CPU need D exceeds the usable cores
  C, every job with a CPU need runs slower by 1 + alpha * (D - C) / C (alpha = 1: in proportion
  to the overcommitted cores, as if the cores were shared fairly);
- a shared GPU time-slices: the jobs on one GPU whose solo GPU busy fractions sum to U > 1 each
  run slower by gpu_share x U (gpu_share = 1: a fair time-slice with no switching cost; a
  recorded GPU-contended co-run gives its own), a multi-GPU job by its slowest GPU;
- a job's slowdown is the larger of the two (its pipeline runs at its bottleneck).

Between two events (an arrival, a job's end) the speeds are constant, so the next end is
computed, not stepped to: the cost is O(events x running jobs) plus the policy's decisions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gputop_dl.sched.model import Job, JobQueue, Machine, Running, Start
from gputop_dl.sched.policies import Policy, decide


@dataclass(frozen=True)
class JobKind:
    """A kind of job in a trace: arrivals draw kinds in proportion to `share`."""

    job: Job  # the profile; its name is the kind's name, arrival ignored
    share: float = 1.0


@dataclass(frozen=True)
class Outcome:
    """One simulated job: when it started and ended (seconds), on which GPU indexes."""

    job: Job
    start_s: float
    end_s: float
    gpus: tuple[int, ...] = ()

    @property
    def wait_s(self) -> float:
        return self.start_s - self.job.arrival_s

    @property
    def jct_s(self) -> float:
        return self.end_s - self.job.arrival_s


@dataclass(frozen=True)
class Result:
    """A policy's figures over one simulated stream of jobs."""

    policy: str
    rate: float | None  # arrivals per second; None for a fixed list of jobs
    seed: int | None
    jobs: int
    mean_jct_s: float
    p95_jct_s: float
    makespan_s: float
    mean_wait_s: float

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "rate": self.rate, "seed": self.seed,
                "mean_jct_s": self.mean_jct_s, "p95_jct_s": self.p95_jct_s,
                "makespan_s": self.makespan_s, "mean_wait_s": self.mean_wait_s, "jobs": self.jobs}


def poisson_jobs(kinds: Sequence[JobKind], rate: float, n: int, seed: int) -> list[Job]:
    """`n` jobs arriving as a Poisson stream of `rate` per second, kinds drawn by share;
    the same seed gives the same stream for every policy (common random numbers)."""
    if rate <= 0:
        raise ValueError(f"rate {rate}: expected arrivals per second > 0")
    rng = random.Random(seed)
    weights = [k.share for k in kinds]
    picks = rng.choices(range(len(kinds)), weights=weights, k=n)
    t, out = 0.0, []
    for i, k in enumerate(picks):
        t += rng.expovariate(rate)
        base = kinds[k].job
        out.append(replace(base, name=f"{base.name}#{i}", arrival_s=t,
                           klass=base.klass or base.name))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks."""
    s = sorted(values)
    if not s:
        return math.nan
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def slowdowns(running: Sequence[Running], machine: Machine, cpu_alpha: float = 1.0,
              gpu_share: float = 1.0) -> list[float]:
    """The interference model: each running job's slowdown beside the others (>= 1)."""
    demand = sum(r.job.cpu_cores for r in running)
    over = max(0.0, demand - machine.cpus) / max(machine.cpus, 1e-9)
    s_cpu = 1.0 + cpu_alpha * over
    util: dict[int, float] = {}
    for r in running:
        for g in r.gpus:
            util[g] = util.get(g, 0.0) + r.job.gpu_util
    out = []
    for r in running:
        s = s_cpu if r.job.cpu_cores > 0 else 1.0
        for g in r.gpus:
            if util[g] > 1.0:
                s = max(s, gpu_share * util[g])
        out.append(max(1.0, s))
    return out


def arrive_and_start(policy: Policy, queue: JobQueue, arrivals: Sequence[Job], i: int, t: float,
                     running: list[Running], machine: Machine, cpu_aware: bool) -> tuple[int, list[Start]]:
    """At time `t`: the arrivals from index `i` on that have come join `queue`, and the jobs the
    policy picks leave it and join `running`. Returns the next arrival's index and the starts."""
    while i < len(arrivals) and arrivals[i].arrival_s <= t:
        queue.add(arrivals[i])
        i += 1
    if not len(queue):
        return i, []
    started = decide(policy, queue, running, machine, t, cpu_aware=cpu_aware).starts
    for s in started:
        queue.remove(s.job)
        running.append(Running(s.job, t, s.gpus))
    return i, started


def simulate(policy: Policy, jobs: Sequence[Job], machine: Machine, *, cpu_aware: bool = True,
             cpu_alpha: float = 1.0, gpu_share: float = 1.0) -> list[Outcome]:
    """Run `jobs` (any order; sorted by arrival here) through `policy` on `machine`."""
    arrivals = sorted(jobs, key=lambda j: j.arrival_s)
    queue = policy.queue()
    running: list[Running] = []
    left: list[float] = []  # solo seconds of work left, per running job
    slow: list[float] = []
    starts: dict[str, float] = {}
    out: list[Outcome] = []
    t, i, n = 0.0, 0, len(arrivals)
    while i < n or running or len(queue):
        t_arr = arrivals[i].arrival_s if i < n else math.inf
        t_end, k_end = math.inf, -1
        for k in range(len(running)):
            te = t + left[k] * slow[k]
            if te < t_end:
                t_end, k_end = te, k
        if t_arr == math.inf and t_end == math.inf:
            raise RuntimeError(f"{policy.name}: {len(queue)} jobs wait and none can ever start")
        t_next = min(t_arr, t_end)
        dt = t_next - t
        if dt > 0:
            for k in range(len(running)):
                left[k] -= dt / slow[k]
        t = t_next
        changed = False
        if t_end <= t_arr:
            ended = [k for k in range(len(running)) if k == k_end or left[k] <= 1e-9]
            for k in reversed(ended):
                r = running.pop(k)
                left.pop(k)
                slow.pop(k)
                out.append(Outcome(r.job, starts.pop(r.job.name), t, r.gpus))
            changed = True
        i, started = arrive_and_start(policy, queue, arrivals, i, t, running, machine, cpu_aware)
        for s in started:
            left.append(s.job.duration_s)
            slow.append(1.0)
            starts[s.job.name] = t
            changed = True
        if changed:
            slow = slowdowns(running, machine, cpu_alpha, gpu_share)
    return out


def summarise(policy: str, outcomes: Sequence[Outcome], rate: float | None = None,
              seed: int | None = None) -> Result:
    """Mean and p95 JCT, makespan (last end, from t = 0) and mean wait of `outcomes`."""
    jct = [o.jct_s for o in outcomes]
    return Result(policy=policy, rate=rate, seed=seed, jobs=len(outcomes),
                  mean_jct_s=sum(jct) / len(jct) if jct else math.nan,
                  p95_jct_s=percentile(jct, 95),
                  makespan_s=max((o.end_s for o in outcomes), default=0.0),  # from t = 0
                  mean_wait_s=sum(o.wait_s for o in outcomes) / len(outcomes) if outcomes else math.nan)


def sweep(policies: Sequence[Policy], kinds: Sequence[JobKind], machine: Machine,
          rates: Sequence[float], seeds: Sequence[int], n_jobs: int, *, cpu_aware: bool = True,
          cpu_alpha: float = 1.0, gpu_share: float = 1.0) -> list[Result]:
    """Every policy at every arrival rate and seed (the arrival-density stress test)."""
    out = []
    for rate in rates:
        for seed in seeds:
            jobs = poisson_jobs(kinds, rate, n_jobs, seed)
            for p in policies:
                oc = simulate(p, jobs, machine, cpu_aware=cpu_aware, cpu_alpha=cpu_alpha,
                              gpu_share=gpu_share)
                out.append(summarise(p.name, oc, rate, seed))
    return out
