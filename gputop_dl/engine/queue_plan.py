"""The queue's plan: workloads arrive over time and a scheduling policy starts them as slots free up.

Each tick (in the engine thread, after the jobs were polled): runs that ended leave the
running set, workloads whose `arrival` has come join the policy's queue, and
`sched.policies.decide` (the same code the simulator runs) says which to start now and on
which GPU indexes (slots on a box without CUDA); `Engine.start_run` starts them. The plan
keeps each job's arrival, start and end (seconds from the queue's start) and the reason each
waiting job waits. Whenever two or more jobs run together they are judged as a launch's co-run
is (parallel or only concurrent, and why), with slowdowns where cached solo baselines exist. On a stop request the engine stops the running jobs; jobs still waiting
never start and are recorded as stopped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from gputop_dl.analyse.recorded.evidence import GpuPoint, HostPoint, JobSeries, gather, gpu_points, host_point
from gputop_dl.analyse.verdict import judge
from gputop_dl.collect.jobs.fingerprint import fingerprint
from gputop_dl.engine.jobrun import SoloBaseline
from gputop_dl.engine.plan import Plan, QueueJson, VerdictJson
from gputop_dl.sched.model import Job, Machine, Running
from gputop_dl.sched.numa import NumaPlacer
from gputop_dl.sched.policies import Policy, decide
from gputop_dl.snapshot import JobSample
from gputop_dl.workload import SessionSpec, Workload

if TYPE_CHECKING:
    from gputop_dl.collect.machine import MachineSample
    from gputop_dl.engine.core import Engine

UNKNOWN_DURATION_S = 60.0  # what a job with neither duration_s nor a solo profile is expected to take


class QueueTimes(TypedDict):
    """A queued job's times, seconds from the queue's start (`QueuePlan.times`)."""

    arrival_s: float
    start_s: NotRequired[float]  # once started
    end_s: NotRequired[float]  # once ended


class QueueJobSummary(QueueTimes):
    """A queued job's line of `QueuePlan.summary`: its times, wait and completion time."""

    wait_s: NotRequired[float]  # start - arrival, once started
    jct_s: NotRequired[float]  # end - arrival (job completion time), once ended


class QueueSummary(TypedDict):
    """`QueuePlan.summary`: the policy, slots, makespan, mean JCT and wait (over the jobs
    that ended; None when none did), and each job's times."""

    policy: str
    slots: int
    makespan_s: float | None
    mean_jct_s: float | None
    mean_wait_s: float | None
    jobs: dict[str, QueueJobSummary]


class QueueSettings(TypedDict):
    """A queue's settings, recorded with its session and shown in its live view."""

    policy: str
    slots: int  # GPUs, or slots without CUDA (`unit`)
    unit: str
    cpus: float
    cpu_aware: bool
    ageing_s: float
    v: float


class _Group(TypedDict):
    """A set of jobs that ran together, and its last judgement (`QueuePlan.groups`)."""

    jobs: list[str]
    kind: str
    confidence: str
    reason: str
    slowdowns: Any  # the verdict's evidence "slowdowns", as recorded
    verdict: VerdictJson


def planned_steps(w: Workload) -> int | None:
    """The training steps a built-in job runs (None for a command, or when unknown)."""
    if w.is_command:
        return None
    per_epoch = w.steps_per_epoch or (w.dataset_size // w.batch_size if w.dataset_size else None)
    return w.epochs * per_epoch if per_epoch else None


def job_for(w: Workload, base: SoloBaseline | None, cuda: bool) -> tuple[Job, str]:
    """The queue's view of workload `w` and where its expected duration came from.

    GPUs: `gpus = N` asks for N (any); an explicit list pins those indexes on CUDA (on a box
    without CUDA it asks for as many slots); none (or `[]`) asks for one. Expected duration: `duration_s`, else steps x the cached solo
    step time, else UNKNOWN_DURATION_S. Solo CPU need: the cached baseline's, else 0 (unknown)."""
    pin: tuple[int, ...]
    if w.gpu_count:
        gpus, pin = w.gpu_count, ()
    elif w.gpus:
        gpus, pin = len(w.gpus), (tuple(w.gpus) if cuda else ())
    else:
        gpus, pin = 1, ()
    steps = planned_steps(w)
    if w.duration_s:
        duration, source = w.duration_s, "duration_s"
    elif base and base.get("step_time_s") and steps:
        duration = steps * base["step_time_s"]
        source = f"{steps} steps x solo {base['step_time_s']:.3f} s"
    else:
        duration, source = UNKNOWN_DURATION_S, "unknown (no duration_s, no cached solo baseline)"
    cpu = float((base or {}).get("cpu_cores") or 0.0)
    job = Job(name=w.name, arrival_s=w.arrival, duration_s=duration, gpus=gpus, cpu_cores=cpu,
              priority=w.priority, klass=w.name if w.is_command else w.model, pin=pin)
    return job, source


def _shape(reason: str) -> str:
    """A reason without its numbers: the log says a reason again only when this changes."""
    return re.sub(r"\d+(\.\d+)?", "#", reason)


class QueuePlan(Plan["Engine"]):
    """`spec`'s workloads as queued jobs: `jobs` (by workload name) says when each arrives and
    what it asks for; `policy` decides on `machine` (its `gpus` are the slots)."""

    kind = "queue"

    def __init__(self, spec: SessionSpec, jobs: Sequence[Job] | None, policy: Policy,
                 machine: Machine, *, cpu_aware: bool | None = True, command: str = "",
                 numa: NumaPlacer | None = None):
        """`jobs` None: built from the workloads when the queue starts, each job's expected
        duration and CPU need from its cached solo baseline (`job_for`); `cpu_aware` None: on
        when any job has a cached CPU need."""
        self.spec: SessionSpec = spec
        self.policy, self.machine = policy, machine
        self.cpu_aware, self.command = cpu_aware, command
        self.numa = numa or NumaPlacer(())  # several nodes: a job on one node's CPUs (sched/numa.py)
        self._gpu_node: dict[int, int | None] = {}  # GPU index -> its NUMA node (NVML)
        self.workloads = {w.name: w for w in spec.workloads}
        self.queue = policy.queue()
        self.t0: float | None = None
        self.reasons: dict[str, str] = {}
        self.sources: dict[str, str] = {}  # job -> where its expected duration came from
        self._said: dict[str, str] = {}  # job -> the shape of the reason last logged
        self._first_reason: dict[str, str] = {}  # job -> why it waited first (recorded at its start)
        self._running: dict[str, Running] = {}
        self.solos: dict[str, SoloBaseline] = {}  # job -> its cached solo baseline (slowdowns need it)
        self.verdict: VerdictJson | None = None  # the jobs running together now (or last together)
        self.groups: list[_Group] = []  # earlier sets of jobs that ran together, judged
        self._group: tuple[str, ...] = ()
        self._host: list[HostPoint] = []  # one per tick
        self._gpu: list[GpuPoint] = []  # one per GPU and tick
        self._set_jobs(jobs or [])

    def _set_jobs(self, jobs: Sequence[Job]) -> None:
        self.jobs = {j.name: j for j in jobs}
        if jobs and set(self.jobs) != set(self.workloads):
            raise ValueError("one queued job per workload, by name")
        self.times: dict[str, QueueTimes] = {n: {"arrival_s": j.arrival_s} for n, j in self.jobs.items()}
        self._pending = sorted(jobs, key=lambda j: j.arrival_s)  # not arrived yet

    def profile(self, cached: Callable[[str], SoloBaseline | None], env: dict[str, Any]) -> None:
        """Build the jobs from the workloads and their cached solo baselines (`cached` looks
        one up by `collect.jobs.fingerprint`)."""
        jobs = []
        for w in self.spec.workloads:
            base = cached(fingerprint(w, self.spec.cuda, env))
            if base and base.get("step_time_s"):
                self.solos[w.name] = dict(base, cached=True)
            job, self.sources[w.name] = job_for(w, base, self.spec.cuda)
            jobs.append(job)
        self._set_jobs(jobs)
        if self.cpu_aware is None:
            self.cpu_aware = any(j.cpu_cores > 0 for j in jobs)

    def settings(self) -> QueueSettings:
        """The queue's settings as recorded with the session."""
        return {"policy": self.policy.name, "slots": self.machine.gpus, "unit": self.machine.unit,
                "cpus": self.machine.cpus, "cpu_aware": bool(self.cpu_aware),
                "ageing_s": self.policy.ageing_s, "v": self.policy.v}

    # --- the engine's calls ----------------------------------------------------------------------
    def run(self, engine: Engine) -> str:
        if not self.jobs:
            self.profile(engine.recorder.cached_baseline_any, engine.env)
        self.t0 = time.time()  # the session's start (within milliseconds)
        engine.recorder.open_launch(self.spec, self.command, engine.env, kind="queue",
                                    extra={"queue": self.settings()})
        engine.phase = "queue"
        m = self.machine
        engine.say(f"queue: {len(self.jobs)} jobs, policy {self.policy.name}, {m.gpus} {m.unit}s, "
                   + (f"CPU-aware ({m.cpus:g} cores)" if self.cpu_aware and self.policy.name != "lyapunov"
                      else "not CPU-aware" if self.policy.name != "lyapunov"
                      else f"CPU overcommit weighed with v = {self.policy.v:g}"))
        if self.numa.active:
            engine.say(f"queue: {len(self.numa.nodes)} NUMA nodes ("
                       + ", ".join(f"{n.node}: {len(n.cpus)} CPUs" for n in self.numa.nodes)
                       + "): a job whose solo CPU need fits one node's free cores runs there")
        for name, src in self.sources.items():
            j = self.jobs[name]
            engine.say(f"queue: {name} expects {j.duration_s:.1f} s ({src}), "
                       f"{j.cpu_cores:.1f} cores, {j.gpus} {m.unit}(s)")
        self._schedule(engine, self.t0)
        engine.loop(lambda: not self._pending and not len(self.queue) and not self._running)
        if engine.stopping:
            for name in [j.name for j in self.queue] + [j.name for j in self._pending]:
                engine.recorder.job_status(self.workloads[name], "stopped")
            return "interrupted"
        return "finished"

    def after_tick(self, engine: Engine, now: float, machine: MachineSample) -> None:
        self._gpu_node = {g.index: g.numa_node for g in machine.gpus}
        if self.t0 is not None and self.jobs and not engine.stopping:
            self._schedule(engine, now)
        h = machine.host
        self._host.append(host_point(now, h))
        self._gpu.extend(gpu_points(now, machine.gpus))
        self._judge(engine, now)

    def _keep_group(self) -> None:
        """The set of jobs that ran together has changed: keep its last judgement."""
        v = self.verdict
        if len(self._group) > 1 and v and v["evidence"].get("together") == list(self._group):
            self.groups.append({"jobs": list(self._group), "kind": v["kind"],
                                "confidence": v["confidence"], "reason": v["reason"],
                                "slowdowns": v["evidence"].get("slowdowns"), "verdict": v})

    def close(self, engine: Engine) -> None:
        """The session's verdict: the largest set of jobs that ran together (the latest of
        equals), with every set's judgement listed in its evidence."""
        self._keep_group()
        self._group = ()
        if not self.groups:
            return
        best = max(enumerate(self.groups), key=lambda ig: (len(ig[1]["jobs"]), ig[0]))[1]
        v = dict(best["verdict"])
        v["evidence"] = dict(v["evidence"], groups=[
            {k: g[k] for k in ("jobs", "kind", "confidence", "reason", "slowdowns")}
            for g in self.groups])
        self.verdict = v
        engine.recorder.verdict(v)

    def _judge(self, engine: Engine, now: float) -> None:
        """The verdict of the jobs running together now, as a launch judges its co-run: over
        the window in which all of them ran past their warm-up. When the set changes, the last
        judgement of the old set is kept in `groups`; at the end the largest set's verdict is the
        session's (`close`)."""
        group = tuple(sorted(n for n, r in engine.runs.items() if r.alive))
        if group != self._group:
            self._keep_group()
            self._group = group
        if len(group) < 2:
            return
        runs: list[JobSeries] = [engine.runs[n] for n in group]
        jobs, host = gather(runs, self._host, self._gpu, engine.env.get("cpus") or 1, now)
        judged = judge(jobs, host, "cache")
        if judged.kind == "insufficient-data" and self.verdict is not None:
            return  # keep showing the last judgement until this set has enough steps
        judged = judged.with_evidence(together=list(group)).replace(
            evidence_lines=(f"judged while {', '.join(group)} ran together",)
            + judged.evidence_lines)
        v = judged.to_json()
        self.verdict = v
        engine.recorder.verdict(v, now)

    def rows(self, engine: Engine, launched: list[JobSample]) -> list[JobSample]:
        jobs = list(launched)
        for name, w in self.workloads.items():
            if name not in engine.runs:
                jobs.append(JobSample(name=name, pid=None, launched=True, status="waiting",
                                      batch_size=w.batch_size, model=w.model))
        order = {name: i for i, name in enumerate(self.workloads)}
        jobs.sort(key=lambda j: order.get(j.name, 1 << 30))
        return jobs

    def taken(self, engine: Engine) -> set[str]:
        return set(engine.runs) | set(self.workloads)

    def notes(self) -> tuple[str, ...]:
        return tuple(f"{name} waits: {why}" for name, why in self.reasons.items())

    def queue_state(self) -> QueueJson | None:
        """What the queue view shows: the settings, and per job its state (pending: not
        arrived yet; waiting; running; ended), times and the reason it waits."""
        if self.t0 is None:
            return None
        now = time.time() - self.t0
        running = set(self._running)
        waiting = {j.name for j in self.queue}
        jobs = []
        order = [j.name for j in self.queue] + [n for n in self.jobs if n not in waiting]
        for name in order:  # the waiting jobs in the policy's order first
            job, t = self.jobs[name], self.times[name]
            state = ("waiting" if name in waiting else "running" if name in running
                     else "ended" if "end_s" in t else "pending" if "start_s" not in t else "running")
            row: dict[str, Any] = {"name": name, "state": state, "arrival_s": t["arrival_s"],
                   "expected_s": job.duration_s, "gpus": job.gpus}
            if state == "waiting":
                row.update(waited_s=max(0.0, now - t["arrival_s"]), reason=self.reasons.get(name))
            for k in ("start_s", "end_s"):
                if k in t:
                    row[k] = t[k]
            jobs.append(row)
        return {**self.settings(), "elapsed_s": now, "jobs": jobs}

    # --- scheduling ------------------------------------------------------------------------------
    def _schedule(self, engine: Engine, now: float) -> None:
        t0 = self.t0
        if t0 is None:  # run() sets it before the first tick that schedules
            return
        t = now - t0
        rec = engine.recorder
        for name in list(self._running):
            run = engine.runs.get(name)
            if run is not None and not run.alive:
                end = self.times[name]["end_s"] = (run.ended or now) - t0
                rec.queue_event(name, "queue-end", t0 + end, end_s=end, status=run.status)
                del self._running[name]
                self.numa.release(name)
        while self._pending and self._pending[0].arrival_s <= t:
            job = self._pending.pop(0)
            self.queue.add(job)
            rec.queue_event(job.name, "queued", t0 + job.arrival_s, arrival_s=job.arrival_s,
                            expected_s=job.duration_s, cpu_cores=job.cpu_cores, gpus=job.gpus,
                            priority=job.priority, klass=job.klass)
        if not len(self.queue):
            self.reasons = {}
            return
        d = decide(self.policy, self.queue, list(self._running.values()), self.machine, t,
                   cpu_aware=bool(self.cpu_aware), explain=True)
        for s in d.starts:
            w = self.workloads[s.job.name]
            if self.spec.cuda:
                w = w.with_(gpus=s.gpus)
            self.queue.remove(s.job)
            near = {self._gpu_node.get(g) for g in s.gpus} if self.spec.cuda else set()
            pl = self.numa.place(s.job.name, s.job.cpu_cores,
                                 near=next(iter(near)) if len(near) == 1 else None)
            engine.start_run(w, "co-run", self.spec.cuda, solo=self.solos.get(w.name),
                             cpus=pl.cpus or None)
            self._running[s.job.name] = Running(s.job, t, s.gpus)
            self.times[s.job.name]["start_s"] = t
            why = self._first_reason.get(s.job.name)
            rec.queue_event(s.job.name, "queue-start", now, start_s=t, on=list(s.gpus),
                            wait_s=t - s.job.arrival_s, waited_because=why, cpus=pl.cpulist)
            engine.say(f"queue: start {s.job.name} on {self.machine.unit} "
                       f"{','.join(map(str, s.gpus)) or '-'} after {t - s.job.arrival_s:.1f} s"
                       + (f" (waited: {why})" if why else "")
                       + (f"; {pl.why}" if self.numa.active else ""))
        for name, why in d.reasons.items():
            self._first_reason.setdefault(name, why)
            if self._said.get(name) != _shape(why):
                self._said[name] = _shape(why)
                engine.say(f"queue: {name} waits: {why}")
        self.reasons = d.reasons

    # --- results ---------------------------------------------------------------------------------
    def summary(self) -> QueueSummary:
        """Per job arrival, start, end, wait and JCT (s from the queue's start), and the queue's
        policy, slots, makespan, mean JCT and mean wait over the jobs that ended."""
        jobs: dict[str, QueueJobSummary] = {}
        for name, t in self.times.items():
            row: QueueJobSummary = {"arrival_s": t["arrival_s"]}
            if "start_s" in t:
                row["start_s"] = t["start_s"]
            if "end_s" in t:
                row["end_s"] = t["end_s"]
            if "start_s" in t:
                row["wait_s"] = t["start_s"] - t["arrival_s"]
            if "end_s" in t:
                row["jct_s"] = t["end_s"] - t["arrival_s"]
            jobs[name] = row
        done = [r for r in jobs.values() if "jct_s" in r]
        def mean(xs: list[float]) -> float | None:
            return sum(xs) / len(xs) if xs else None
        return {"policy": self.policy.name, "slots": self.machine.gpus,
                "makespan_s": max((r["end_s"] for r in done), default=None),
                "mean_jct_s": mean([r["jct_s"] for r in done]),
                "mean_wait_s": mean([r["wait_s"] for r in done]), "jobs": jobs}
