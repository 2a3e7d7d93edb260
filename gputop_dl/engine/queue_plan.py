"""The queue's plan: workloads arrive over time and a scheduling policy starts them as slots free up.

Each tick (in the engine thread, after the jobs were polled): runs that ended leave the
running set, workloads whose `arrival` has come join the policy's queue, and
`sched.policies.decide` (the same code the simulator runs) says which to start now and on
which GPU indexes (slots on a box without CUDA); `Engine.start_run` starts them. The plan
keeps each job's arrival, start and end (seconds from the queue's start) and the reason each
waiting job waits. On a stop request the engine stops the running jobs; jobs still waiting
never start and are recorded as stopped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from gputop_dl.engine.plan import Plan
from gputop_dl.sched.model import Job, Machine, Running
from gputop_dl.sched.policies import Policy, decide
from gputop_dl.snapshot import JobSample
from gputop_dl.workload import SessionSpec


class QueuePlan(Plan):
    """`spec`'s workloads as queued jobs: `jobs` (by workload name) says when each arrives and
    what it asks for; `policy` decides on `machine` (its `gpus` are the slots)."""

    kind = "queue"

    def __init__(self, spec: SessionSpec, jobs: Sequence[Job], policy: Policy, machine: Machine,
                 *, cpu_aware: bool = True, command: str = ""):
        self.spec, self.policy, self.machine = spec, policy, machine
        self.cpu_aware, self.command = cpu_aware, command
        self.jobs = {j.name: j for j in jobs}
        self.workloads = {w.name: w for w in spec.workloads}
        if set(self.jobs) != set(self.workloads):
            raise ValueError("one queued job per workload, by name")
        self.queue = policy.queue()
        self.t0: float | None = None
        self.times: dict[str, dict] = {n: {"arrival_s": j.arrival_s} for n, j in self.jobs.items()}
        self.reasons: dict[str, str] = {}
        self._pending = sorted(jobs, key=lambda j: j.arrival_s)  # not arrived yet
        self._running: dict[str, Running] = {}

    # --- the engine's calls ----------------------------------------------------------------------
    def run(self, engine) -> str:
        engine.recorder.open_launch(self.spec, self.command, engine.env)
        engine.phase = "queue"
        engine.say(f"queue: {len(self.jobs)} jobs, policy {self.policy.name}, "
                   f"{self.machine.gpus} {self.machine.unit}s")
        self.t0 = time.time()
        self._schedule(engine, self.t0)
        engine.loop(lambda: not self._pending and not len(self.queue) and not self._running)
        if engine.stopping:
            for name in [j.name for j in self.queue] + [j.name for j in self._pending]:
                engine.recorder.job_status(self.workloads[name], "stopped")
            return "interrupted"
        return "finished"

    def after_tick(self, engine, now: float, machine) -> None:
        if self.t0 is not None and not engine.stopping:
            self._schedule(engine, now)

    def rows(self, engine, launched: list[JobSample]) -> list[JobSample]:
        jobs = list(launched)
        for name, w in self.workloads.items():
            if name not in engine.runs:
                jobs.append(JobSample(name=name, pid=None, launched=True, status="waiting",
                                      batch_size=w.batch_size, model=w.model))
        order = {name: i for i, name in enumerate(self.workloads)}
        jobs.sort(key=lambda j: order.get(j.name, 1 << 30))
        return jobs

    def taken(self, engine) -> set[str]:
        return set(engine.runs) | set(self.workloads)

    def notes(self) -> tuple[str, ...]:
        return tuple(f"{name} waits: {why}" for name, why in self.reasons.items())

    # --- scheduling ------------------------------------------------------------------------------
    def _schedule(self, engine, now: float) -> None:
        t = now - self.t0
        for name, r in list(self._running.items()):
            run = engine.runs.get(name)
            if run is not None and not run.alive:
                self.times[name]["end_s"] = (run.ended or now) - self.t0
                del self._running[name]
        while self._pending and self._pending[0].arrival_s <= t:
            self.queue.add(self._pending.pop(0))
        if not len(self.queue):
            self.reasons = {}
            return
        d = decide(self.policy, self.queue, list(self._running.values()), self.machine, t,
                   cpu_aware=self.cpu_aware, explain=True)
        for s in d.starts:
            w = self.workloads[s.job.name]
            if self.spec.cuda:
                w = w.with_(gpus=s.gpus)
            self.queue.remove(s.job)
            engine.start_run(w, "queue", self.spec.cuda)
            self._running[s.job.name] = Running(s.job, t, s.gpus)
            self.times[s.job.name]["start_s"] = t
            engine.say(f"queue: start {s.job.name} on {self.machine.unit} "
                       f"{','.join(map(str, s.gpus)) or '-'} after {t - s.job.arrival_s:.1f} s")
        self.reasons = d.reasons

    # --- results ---------------------------------------------------------------------------------
    def summary(self) -> dict:
        """Per job arrival, start, end, wait and JCT (s from the queue's start), and the queue's
        policy, slots, makespan, mean JCT and mean wait over the jobs that ended."""
        jobs = {}
        for name, t in self.times.items():
            row = dict(t)
            if "start_s" in t:
                row["wait_s"] = t["start_s"] - t["arrival_s"]
            if "end_s" in t:
                row["jct_s"] = t["end_s"] - t["arrival_s"]
            jobs[name] = row
        done = [r for r in jobs.values() if "jct_s" in r]
        mean = (lambda xs: sum(xs) / len(xs) if xs else None)
        return {"policy": self.policy.name, "slots": self.machine.gpus,
                "makespan_s": max((r["end_s"] for r in done), default=None),
                "mean_jct_s": mean([r["jct_s"] for r in done]),
                "mean_wait_s": mean([r["wait_s"] for r in done]), "jobs": jobs}
