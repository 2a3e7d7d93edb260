"""The simulator's prediction for a recorded queue: the same jobs, arrivals and policy, beside what happened.

    p = predict_queue(settings, jobs, tick_s=0.5)   # settings and jobs as analyse/queue.py reads them

The live queue acts at its ticks (every `interval` seconds): a job that arrives between two
ticks is queued at the next one, and a job's end is seen at the first tick after it, so a
slot stays held up to one tick longer than the job ran. The prediction models that: arrivals
are moved to the next tick and each expected duration d becomes (floor(d / tick) + 1) x tick
(a process takes some milliseconds to start, so a run of exactly n ticks is seen at n + 1).
Without a tick (None or 0) it is the plain simulator. The error is the mean over the jobs that
ended of |predicted JCT - real JCT| / real JCT.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gputop_dl.sched.model import Job, Machine
from gputop_dl.sched.policies import POLICIES, Policy
from gputop_dl.sched.simulate import simulate


def _on_ticks(job: Job, tick: float) -> Job:
    arrival = math.ceil(job.arrival_s / tick - 1e-9) * tick
    return replace(job, arrival_s=arrival, duration_s=(math.floor(job.duration_s / tick + 1e-9) + 1) * tick)


def predict_queue(settings: dict, jobs: list[dict], *, tick_s: float | None = None,
                  cpu_alpha: float = 1.0, gpu_share: float = 1.0) -> dict | None:
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
                          gpus=int(j.get("gpus") if j.get("gpus") is not None else 1),
                          cpu_cores=float(j.get("cpu_cores") or 0.0), priority=int(j.get("priority") or 0),
                          klass=j.get("klass") or j["name"]))
    machine = Machine(gpus=int(slots), cpus=float(settings.get("cpus") or 1.0), unit=settings.get("unit") or "GPU")
    run = [_on_ticks(j, tick_s) for j in listed] if tick_s else listed
    pol = Policy(policy, ageing_s=float(settings.get("ageing_s") or 600.0), v=float(settings.get("v") or 1.0))
    try:
        out = simulate(pol, run, machine, cpu_aware=bool(settings.get("cpu_aware")), cpu_alpha=cpu_alpha,
                       gpu_share=gpu_share)
    except RuntimeError:  # a job that can never start on the recorded machine
        return None
    arrival = {j.name: j.arrival_s for j in listed}
    per = {o.job.name: {"start_s": o.start_s, "end_s": o.end_s, "wait_s": o.start_s - arrival[o.job.name],
                        "jct_s": o.end_s - arrival[o.job.name]} for o in out}
    errs, abs_s = [], []
    for j in jobs:
        real, pred = j.get("jct_s"), per.get(j["name"], {}).get("jct_s")
        per.setdefault(j["name"], {})["real_jct_s"] = real
        if real and pred is not None:
            errs.append(abs(pred - real) / real)
            abs_s.append(abs(pred - real))
    mean = (lambda xs: sum(xs) / len(xs) if xs else None)
    return {"policy": policy, "tick_s": tick_s or None, "cpu_interference": cpu_alpha, "gpu_share": gpu_share,
            "mean_jct_s": mean([p["jct_s"] for p in per.values() if "jct_s" in p]),
            "mean_wait_s": mean([p["wait_s"] for p in per.values() if "wait_s" in p]),
            "makespan_s": max((p["end_s"] for p in per.values() if "end_s" in p), default=None),
            "jct_mae": mean(errs), "jct_mae_s": mean(abs_s), "jobs_compared": len(errs), "jobs": per}
