"""A recorded queue's figures: per job arrival, start, end, wait, run time and JCT; makespan, means, busy slots.

    q = queue_summary(store, sid)    # None unless the session is a `gputop-dl queue` run

Read from what `QueuePlan` records: the queue's settings in the session's spec (`"queue"`),
and per job a "queued", a "queue-start" and a "queue-end" event whose `*_s` values are
seconds from the queue's start (the session's start, within milliseconds).

`slot_busy_fraction` is measured where the queue ran on GPUs and the session recorded their
utilisation: the mean GPU busy fraction over the makespan (`slot_busy_measure` "gpu-util");
otherwise (slots without CUDA) the slot-seconds held by jobs over slots x makespan, an
allocation ("allocation").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

QUEUE_EVENTS = ("queued", "queue-start", "queue-end")


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def queue_figures(settings: Mapping[str, Any], events: Sequence[Mapping[str, Any]],
                  gpu_util: Sequence[tuple[float, int, float | None]] | None = None
                  ) -> dict[str, Any]:
    """The queue's figures from its settings and its events (any order); `gpu_util`: the
    recorded (seconds from the start, GPU index, busy 0..1 or None) of a queue on GPUs."""
    jobs: dict[str, dict[str, Any]] = {}
    for e in events:
        j = jobs.setdefault(e["job"], {"name": e["job"]})
        if e["ev"] == "queued":
            j.update(arrival_s=e.get("arrival_s"), expected_s=e.get("expected_s"),
                     gpus=e.get("gpus"), cpu_cores=e.get("cpu_cores"), priority=e.get("priority"),
                     klass=e.get("klass"))
        elif e["ev"] == "queue-start":
            j.update(start_s=e.get("start_s"), on=e.get("on"), waited_because=e.get("waited_because"))
        elif e["ev"] == "queue-end":
            j.update(end_s=e.get("end_s"), status=e.get("status"))
    for j in jobs.values():
        a, s, t = j.get("arrival_s"), j.get("start_s"), j.get("end_s")
        j["wait_s"] = s - a if a is not None and s is not None else None
        j["run_s"] = t - s if s is not None and t is not None else None
        j["jct_s"] = t - a if a is not None and t is not None else None
    ended = [j for j in jobs.values() if j["jct_s"] is not None]
    makespan = max((j["end_s"] for j in ended), default=None)
    slots = settings.get("slots")
    busy, measure = None, None
    if makespan and slots:
        held = sum(j["run_s"] * max(j.get("gpus") or 0, 0) for j in ended)
        busy, measure = held / (slots * makespan), "allocation"
        used = [u for t, _g, u in gpu_util or () if u is not None and 0 <= t <= makespan]
        if settings.get("unit") == "GPU" and used:
            busy, measure = sum(used) / len(used), "gpu-util"
    return {"policy": settings.get("policy"), "slots": slots, "unit": settings.get("unit"),
            "cpu_aware": settings.get("cpu_aware"), "cpus": settings.get("cpus"),
            "makespan_s": makespan, "mean_jct_s": _mean([j["jct_s"] for j in ended]),
            "mean_wait_s": _mean([j["wait_s"] for j in ended]),
            "slot_busy_fraction": busy, "slot_busy_measure": measure, "jobs_ended": len(ended),
            "jobs": list(jobs.values())}


def queue_summary(store: Any, sid: str) -> dict[str, Any] | None:
    """The figures of session `sid` (a `record.store.Store` holds it) if it is a queue run, else None."""
    row = store.session(sid)
    settings = (row.spec or {}).get("queue") if row is not None else None
    if settings is None:
        return None
    gpu = [(t - row.started, g, u) for t, g, u, *_ in store.gpu_samples(row.id)] \
        if settings.get("unit") == "GPU" else None
    return queue_figures(settings, store.events_of(row.id, QUEUE_EVENTS), gpu)
