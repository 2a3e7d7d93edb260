"""The simulator's prediction for a recorded queue: the same jobs, arrivals and policy, beside what happened.

    p = predict_queue(settings, jobs, ticks=[0.0, 0.5, ...])   # settings, jobs as analyse/recorded/queue.py reads them

The live queue acts only at its ticks: a job that arrives between two ticks is queued at the
next one, and a job's end is seen at the first tick after it, so a slot stays held until
then. Given the recorded tick times (`ticks`, seconds from the queue's start: when the engine
actually sampled, which on a busy machine is later and less regular than `interval`), the
prediction replays the queue tick by tick with the same `decide` and the simulator's
interference model (`sched.simulate.slowdowns`): at each tick the jobs whose solo work is done
end, the arrivals so far join the queue, and the policy starts what it picks. A process is
taken to need `STARTUP_S` more than its expected duration (so a run of exactly n ticks is
seen at the next). With `tick_s` and no recorded ticks, the ticks are every `tick_s`; with
neither it is the plain event-driven simulator. The error is the mean over the jobs that
ended of |predicted JCT - real JCT| / real JCT.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gputop_dl.sched.model import Job, Machine, Running
from gputop_dl.sched import POLICIES
from gputop_dl.sched.policies import Policy
from gputop_dl.sched.simulate import arrive_and_start, simulate, slowdowns

STARTUP_S = 0.01  # a process's start beyond its expected duration
MAX_EXTRA_TICKS = 1_000_000  # after the recorded ticks: a queue that never empties stops here


def tick_times(recorded: Sequence[float], tick_s: float) -> Iterator[float]:
    """0 (the queue decides once as it starts), the recorded tick times, then more every
    `tick_s` (a stopped queue's jobs never ended)."""
    t = 0.0
    yield t
    for t in sorted(x for x in recorded if x > 0):
        yield t
    for k in range(1, MAX_EXTRA_TICKS):
        yield t + k * tick_s


def replay_on_ticks(policy: Policy, jobs: Sequence[Job], machine: Machine, ticks: Iterator[float], *,
                    cpu_aware: bool, cpu_alpha: float = 1.0, gpu_share: float = 1.0
                    ) -> dict[str, tuple[float, float, tuple[int, ...]]]:
    """Per job (start, end, GPUs) as the live queue would run `jobs`, acting only at `ticks`."""
    pending = sorted(jobs, key=lambda j: j.arrival_s)
    queue = policy.queue()
    running: list[Running] = []
    left: dict[str, float] = {}  # solo seconds of work left
    out: dict[str, tuple[float, float, tuple[int, ...]]] = {}
    i, prev = 0, None
    for t in ticks:
        if prev is not None and running:
            for r, slow in zip(running, slowdowns(running, machine, cpu_alpha, gpu_share)):
                left[r.job.name] -= (t - prev) / slow
        prev = t
        still = []
        for r in running:
            if left[r.job.name] <= 1e-9:
                out[r.job.name] = (r.start_s, t, r.gpus)
            else:
                still.append(r)
        running = still
        i, started = arrive_and_start(policy, queue, pending, i, t, running, machine, cpu_aware)
        for s in started:
            left[s.job.name] = s.job.duration_s + STARTUP_S
        if i == len(pending) and not running:
            break  # all done, or what waits can never start

    return out


def predict_queue(settings: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], *,
                  tick_s: float | None = None, ticks: Sequence[float] = (), cpu_alpha: float = 1.0,
                  gpu_share: float = 1.0) -> dict[str, Any] | None:
    """Per job the predicted start, end, wait and JCT (seconds from the queue's start, JCT
    from the listed arrival), the means, and the error against the recorded JCTs; None when
    the record lacks what a prediction needs (the policy, slots, or a job's arrival or expected
    duration)."""
    policy, slots = settings.get("policy"), settings.get("slots")
    if policy not in POLICIES or not slots or not jobs:
        return None
    listed = []
    for j in jobs:
        if j.get("arrival_s") is None or not j.get("expected_s"):
            return None
        listed.append(Job(name=j["name"], arrival_s=j["arrival_s"], duration_s=j["expected_s"],
                          gpus=int(j["gpus"]) if j.get("gpus") is not None else 1,
                          cpu_cores=float(j.get("cpu_cores") or 0.0), priority=int(j.get("priority") or 0),
                          klass=j.get("klass") or j["name"]))
    machine = Machine(gpus=int(slots), cpus=float(settings.get("cpus") or 1.0), unit=settings.get("unit") or "GPU")
    pol = Policy(policy, ageing_s=float(settings.get("ageing_s") or 600.0), v=float(settings.get("v") or 1.0))
    cpu_aware = bool(settings.get("cpu_aware"))
    if tick_s or ticks:
        got = replay_on_ticks(pol, listed, machine, tick_times(ticks, tick_s or 1.0),
                              cpu_aware=cpu_aware, cpu_alpha=cpu_alpha, gpu_share=gpu_share)
        if len(got) < len(listed):  # a job that can never start on the recorded machine
            return None
        starts = [(n, s, e) for n, (s, e, _g) in got.items()]
    else:
        try:
            starts = [(o.job.name, o.start_s, o.end_s) for o in simulate(pol, listed, machine, cpu_aware=cpu_aware,
                                                                        cpu_alpha=cpu_alpha, gpu_share=gpu_share)]
        except RuntimeError:  # a job that can never start on the recorded machine
            return None
    arrival = {j.name: j.arrival_s for j in listed}
    # per job: the predicted figures (floats) and the recorded JCT (as the record has it)
    per: dict[str, dict[str, Any]] = {
        n: {"start_s": s, "end_s": e, "wait_s": s - arrival[n], "jct_s": e - arrival[n]}
        for n, s, e in starts}
    errs, abs_s = [], []
    for j in jobs:
        real, pred = j.get("jct_s"), per.get(j["name"], {}).get("jct_s")
        per.setdefault(j["name"], {})["real_jct_s"] = real
        if real and pred is not None:
            errs.append(abs(pred - real) / real)
            abs_s.append(abs(pred - real))
    return {"policy": policy, "tick_s": tick_s or None,
            "ticks": "recorded" if ticks else ("every tick_s" if tick_s else None), "cpu_interference": cpu_alpha, "gpu_share": gpu_share,
            "mean_jct_s": mean([p["jct_s"] for p in per.values() if "jct_s" in p]),
            "mean_wait_s": mean([p["wait_s"] for p in per.values() if "wait_s" in p]),
            "makespan_s": max((p["end_s"] for p in per.values() if "end_s" in p), default=None),
            "jct_mae": mean(errs), "jct_mae_s": mean(abs_s), "jobs_compared": len(errs), "jobs": per}


def mean(xs: Sequence[float]) -> float | None:
    """The mean, or None of nothing."""
    return sum(xs) / len(xs) if xs else None
