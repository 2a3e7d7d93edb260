"""Scheduling policies as pure code: which waiting jobs to start now, and why the others wait.

One entry point, `decide(policy, queue, running, machine, now)`, called the same way by the
simulator and by a live queue. Policies (docs/scheduling.md has the reasoning):

- `fifo`: arrival order; the first job that does not fit blocks every job behind it;
- `fifo-backfill`: arrival order; jobs behind a blocked head may start if they do not delay
  the head's reservation (EASY backfilling);
- `sjf`: shortest expected solo duration first, with the same backfilling;
- `priority`: highest `priority + waited / ageing_s` first (so nothing starves), backfilling;
- `lyapunov`: drift-plus-penalty over one virtual queue per job class, CPU overcommit as the
  penalty, traded against the backlog by `v`.

CPU-aware admission (`cpu_aware`, all but lyapunov, whose penalty term is that check made
soft): a job does not start while the running jobs' summed solo CPU need plus its own would
exceed the usable cores, unless nothing runs (else a job needing more than the machine has
could never start).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gputop_dl.sched import POLICIES
from gputop_dl.sched.model import (Decision, Job, JobQueue, Machine, Running, SortKey,
                                  Start)

BACKFILL_DEPTH = 200  # jobs a backfill pass looks at past the blocked head (like Slurm's bf_max_job_test)
EPS = 1e-9


@dataclass(frozen=True)
class Policy:
    """A policy by name with its parameters: `ageing_s` (priority: seconds of waiting worth one
    priority level) and `v` (lyapunov: weight of the CPU-overcommit penalty against the backlog)."""

    name: str
    ageing_s: float = 600.0
    v: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"unknown policy {self.name!r}: expected one of {', '.join(POLICIES)}")
        if not self.ageing_s > 0:
            raise ValueError(f"ageing_s = {self.ageing_s}: expected seconds > 0")
        if not self.v >= 0:
            raise ValueError(f"v = {self.v}: expected a number 0 or more")

    @property
    def backfill(self) -> bool:
        return self.name in ("fifo-backfill", "sjf", "priority")

    def key(self, job: Job) -> SortKey:
        """The job's place in the waiting order; static, so a queue can keep it sorted. Linear
        ageing keeps it static: priority + (now - arrival)/ageing_s orders as priority -
        arrival/ageing_s at every `now`."""
        if self.name == "sjf":
            return (job.duration_s, job.arrival_s)
        if self.name == "priority":
            return (-(job.priority - job.arrival_s / self.ageing_s), job.arrival_s)
        return (job.arrival_s,)

    def queue(self) -> JobQueue:
        """An empty waiting queue ordered for this policy."""
        return JobQueue(self.key)


def _gpu_list(unit: str, gpus: Sequence[int]) -> str:
    return f"{unit} {gpus[0]}" if len(gpus) == 1 else f"{unit}s " + ", ".join(map(str, gpus))


class _Free:
    """What is free on the machine, updated as a decision starts jobs."""

    def __init__(self, machine: Machine, running: Sequence[Running]):
        self.m = machine
        self.places = [machine.jobs_per_gpu] * machine.gpus
        self.mem = [machine.gpu_mem] * machine.gpus
        self.cpu_used = 0.0
        self.n_free = machine.gpus  # GPUs with a free place
        self.n_running = len(running)
        for r in running:
            self._take(r.job, r.gpus)

    def _take(self, job: Job, gpus: Sequence[int]) -> None:
        for g in gpus:
            self.places[g] -= 1
            self.mem[g] -= job.gpu_mem
            self.n_free -= self.places[g] == 0
        self.cpu_used += job.cpu_cores

    def take(self, job: Job, gpus: Sequence[int]) -> None:
        self._take(job, gpus)
        self.n_running += 1

    def place(self, job: Job) -> tuple[int, ...] | None:
        """GPU indexes for `job` (least loaded first, then lowest index), or None."""
        if job.gpus == 0:
            return ()
        if job.gpus > self.n_free:
            return None
        if job.pin:
            ok_pin = all(self.places[g] > 0 and (not self.m.gpu_mem or job.gpu_mem <= self.mem[g])
                         for g in job.pin)
            return tuple(sorted(job.pin)) if ok_pin else None
        ok = [g for g, p in enumerate(self.places)
              if p > 0 and (not self.m.gpu_mem or job.gpu_mem <= self.mem[g])]
        if len(ok) < job.gpus:
            return None
        if self.m.jobs_per_gpu > 1:
            ok.sort(key=lambda g: (-self.places[g], g))
        return tuple(sorted(ok[:job.gpus]))

    def cpu_short(self, job: Job) -> float:
        """Cores missing for `job` at full speed beside the running jobs (0 when nothing runs)."""
        if self.n_running == 0:
            return 0.0
        return max(0.0, self.cpu_used + job.cpu_cores - self.m.cpus)

    def overcommit_added(self, job: Job) -> float:
        """Cores of CPU overcommit that starting `job` adds."""
        cpus = self.m.cpus
        return max(0.0, self.cpu_used + job.cpu_cores - cpus) - max(0.0, self.cpu_used - cpus)

    def why_no_place(self, job: Job) -> str:
        unit, n = self.m.unit, self.m.gpus
        free = [g for g, p in enumerate(self.places) if p > 0]
        if job.pin:
            busy = [g for g in job.pin if self.places[g] <= 0]
            if busy:
                return f"pinned to {_gpu_list(unit, job.pin)}; {_gpu_list(unit, busy)} busy"
        if not free:
            return f"all {n} {unit}s busy" if n > 1 else f"the {unit} is busy"
        fits = [g for g in free if not self.m.gpu_mem or job.gpu_mem <= self.mem[g]]
        if len(fits) < len(free) and len(free) >= job.gpus:
            short = (job.gpu_mem - max(self.mem[g] for g in free)) / 1024**3
            return f"{_gpu_list(unit, free)} free, but {short:.1f} GiB of {unit} memory short"
        return f"needs {job.gpus} {unit}s, {len(fits)} free ({_gpu_list(unit, fits)})"

    def why_cpu(self, gpus: tuple[int, ...], short: float) -> str:
        cores = f"{short:.1f} cores short"
        return f"{_gpu_list(self.m.unit, gpus)} free, but {cores}" if gpus else cores


class _Reservation:
    """EASY backfilling: when the blocked head `job` can start (running jobs end as expected),
    and what is left over for jobs that would still run then."""

    def __init__(self, job: Job, free: _Free, running: Sequence[Running], now: float,
                 cpu_aware: bool):
        places = list(free.places)
        cpu, n = free.cpu_used, free.n_running
        self.job, self.cpu_aware = job, cpu_aware
        self.t, self.extra_gpus, self.extra_cpu = math.inf, 0, 0.0
        cpus = free.m.cpus
        for r in sorted(running, key=lambda r: r.expected_end_s):
            for g in r.gpus:
                places[g] += 1
            cpu -= r.job.cpu_cores
            n -= 1
            have = sum(p > 0 for p in places)
            cpu_ok = not cpu_aware or n == 0 or cpu + job.cpu_cores <= cpus + EPS
            fits = all(places[g] > 0 for g in job.pin) if job.pin else have >= job.gpus
            if fits and cpu_ok:
                self.t = max(now, r.expected_end_s)
                # a pinned head needs its own GPUs: nothing may run past its reservation on them
                self.extra_gpus = 0 if job.pin else have - job.gpus
                self.extra_cpu = cpus - cpu - job.cpu_cores
                return

    def allows(self, job: Job, now: float) -> bool:
        """May `job` start now without delaying the head? (Uses the leftover if it runs past.)"""
        if now + job.duration_s <= self.t + EPS:
            return True
        if job.gpus <= self.extra_gpus and (not self.cpu_aware or job.cpu_cores <= self.extra_cpu + EPS):
            self.extra_gpus -= job.gpus
            self.extra_cpu -= job.cpu_cores
            return True
        return False


def decide(policy: Policy, queue: JobQueue, running: Sequence[Running], machine: Machine,
           now: float, *, cpu_aware: bool = True, explain: bool = False) -> Decision:
    """Which waiting jobs of `queue` (ordered by `policy.key`) to start now on `machine`, beside
    `running`. With `explain`, `reasons` says for each job left waiting why (one line)."""
    free = _Free(machine, running)
    if policy.name == "lyapunov":
        return _lyapunov(policy, queue, free, explain)
    d = Decision()
    if not explain and not free.n_free and queue.cpu_only == 0:
        return d
    started: list[Running] = []
    blocked: Job | None = None
    res: _Reservation | None = None
    looked = 0
    failed: set[tuple[int, float, int, tuple[int, ...]]] = set()  # shapes that found no place or cores since the last start
    for job in queue:
        if blocked is not None and not policy.backfill:
            if not explain:
                break
            d.reasons[job.name] = f"behind {blocked.name} (first come, first served)"
            continue
        shape = (job.gpus, job.cpu_cores, job.gpu_mem, job.pin)
        if not explain and shape in failed:  # it cannot fit either: only count it as looked at
            looked += 1
            if looked > BACKFILL_DEPTH:
                break
            continue
        gpus = free.place(job)
        short = free.cpu_short(job) if cpu_aware and gpus is not None else 0.0
        ok = gpus is not None and short <= EPS
        if ok and res is not None and not res.allows(job, now):
            if explain:
                d.reasons[job.name] = (f"would delay {res.job.name}, which has {machine.unit}s "
                                       f"reserved in {res.t - now:.0f} s")
            continue
        if ok:
            assert gpus is not None  # ok says so
            d.starts.append(Start(job, gpus))
            free.take(job, gpus)
            started.append(Running(job, now, gpus))
            failed.clear()
            continue
        failed.add(shape)
        if blocked is None:
            blocked = job
            if policy.backfill:
                res = _Reservation(job, free, list(running) + started, now, cpu_aware)
        if explain:
            why = free.why_no_place(job) if gpus is None else free.why_cpu(gpus, short)
            if job is blocked and res is not None and math.isfinite(res.t):
                why += f"; reserved in {res.t - now:.0f} s"
            d.reasons[job.name] = why
        else:
            looked += 1
            if looked > BACKFILL_DEPTH or (not free.n_free and queue.cpu_only == 0):
                break
    return d


def _lyapunov(policy: Policy, queue: JobQueue, free: _Free, explain: bool) -> Decision:
    """Drift-plus-penalty, greedily: among the class heads that fit, start the one with the
    highest score Z_c * d_mean / (d_j * max(g_j, 1)) - V * overcommit_j / cpus while that score
    is positive (or nothing runs). Z_c = the class's waiting jobs (its virtual queue), d_j the
    head's expected duration, d_mean the mean over the heads, overcommit_j the cores of CPU
    overcommit that starting it adds."""
    d = Decision()
    classes = queue.class_entries()
    pos = {c: 0 for c in classes}
    z = {c: len(lst) for c, lst in classes.items()}
    cpus = max(free.m.cpus, EPS)
    held: dict[str, str] = {}
    while True:
        heads = [(c, classes[c][pos[c]][2]) for c in classes if pos[c] < len(classes[c])]
        if not heads:
            break
        d_mean = sum(j.duration_s for _, j in heads) / len(heads)
        best = None
        for c, job in heads:
            gpus = free.place(job)
            if gpus is None:
                held[c] = free.why_no_place(job)
                continue
            over = free.overcommit_added(job) if free.n_running else 0.0
            score = z[c] * d_mean / (max(job.duration_s, EPS) * max(job.gpus, 1)) - policy.v * over / cpus
            if score <= 0 and free.n_running:
                held[c] = (f"held: it would overcommit {over:.1f} cores and class "
                           f"{c or 'default'}'s backlog of {z[c]} does not outweigh v = {policy.v:g} yet")
                continue
            if best is None or score > best[0]:
                best = (score, c, job, gpus)
        if best is None:
            break
        _, c, job, gpus = best
        d.starts.append(Start(job, gpus))
        free.take(job, gpus)
        pos[c] += 1
        z[c] -= 1
        held.pop(c, None)
    if explain:
        for c, lst in classes.items():
            for i in range(pos[c], len(lst)):
                job = lst[i][2]
                d.reasons[job.name] = (held.get(c, "waiting") if i == pos[c]
                                       else f"behind {lst[pos[c]][2].name} in class {c or 'default'}")
    return d
