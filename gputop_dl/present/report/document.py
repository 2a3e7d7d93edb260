"""A recorded session as the JSON document of the export (contract: `gputop-dl.session/1`).

    data = session_json(store, sid)      # everything the Markdown report shows, and more

Time series are reduced in SQL to at most `MAX_POINTS` bucket means, so a 24-hour session
exports in about as long as a 2-minute one. The co-run window and its host means come from
`analyse.recorded.window`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from gputop_dl import __version__
from gputop_dl.analyse.recorded.queue import queue_summary
from gputop_dl.analyse.recorded.summary import summarize
from gputop_dl.analyse.recorded.window import corun_host_means, corun_window
from gputop_dl.present.stuck_text import event_text as stuck_event_text
from gputop_dl.present.report.errors import ExportUsageError
from gputop_dl.present.report.mermaid import MAX_POINTS
from gputop_dl.record.store import Store
from gputop_dl.text.fmt import num, pct, secs

SESSION_SCHEMA = "gputop-dl.session/1"

# The session JSON document (schema gputop-dl.session/1, gputop_dl/schemas) and one of its
# `jobs[]`: built here, and read back from a saved export by the Markdown report and `compare`,
# so its values are what JSON holds; the schema, not these names, says which keys are there.
SessionDoc = dict[str, Any]
JobDoc = dict[str, Any]
SERIES_ROW_CAP = 60_000  # a time series with more rows: bucket means over every k-th second
QUEUE_JOB_KEYS = ("arrival_s", "start_s", "end_s", "wait_s", "jct_s")  # null outside a queue
QUEUE_KEYS = ("policy", "slots", "unit", "cpu_aware", "makespan_s", "mean_jct_s", "mean_wait_s",
              "slot_busy_fraction", "slot_busy_measure", "jobs_ended")


def _queue(store: Store, sid: str, jobs: list[JobDoc]) -> dict[str, Any] | None:
    """A queue session's figures (None for any other); adds each job's times (s from the
    session start) to `jobs`, null where a job has none (never started, never ended)."""
    q = queue_summary(store, sid)
    per = {j["name"]: j for j in (q or {}).get("jobs", [])}
    for j in jobs:
        mine = per.get(j["name"], {})
        j.update({k: _r(mine.get(k), 3) for k in QUEUE_JOB_KEYS})
        if q is not None:
            j["queue"] = {k: _r(mine.get(k), 3) for k in ("run_s", "expected_s", "gpus", "on",
                                                           "cpu_cores", "priority", "waited_because")}
    if q is None:
        return None
    return {**{k: _r(q.get(k), 4) for k in QUEUE_KEYS}, "prediction": _prediction(store, sid, q)}


def _prediction(store: Store, sid: str, q: Mapping[str, Any]) -> dict[str, Any] | None:
    """The simulator's prediction for the queue's jobs, arrivals and policy (sched/predict.py),
    at the live queue's recorded ticks (its host samples), with the interference figures of
    this machine's newest co-runs recorded up to the queue's start (as `simulate` calibrates),
    rounded for the export; None when it cannot be made."""
    from gputop_dl.analyse.recorded.interference import cpu_alpha, gpu_share, newest
    from gputop_dl.sched.predict import predict_queue

    row = store.session(sid)
    assert row is not None  # the caller read it
    settings = dict((row.spec or {}).get("queue") or {})
    verdicts = [(r.id, r.verdict) for r in store.sessions() if r.started <= row.started]  # as known then
    alpha, share = newest(verdicts, cpu_alpha), newest(verdicts, gpu_share)
    ticks = [h[0] - row.started for h in store.host_samples(sid)]  # one host sample per tick
    p = predict_queue(settings, q["jobs"], tick_s=(row.spec or {}).get("interval"), ticks=ticks,
                      cpu_alpha=alpha[0] if alpha else 1.0, gpu_share=share[0] if share else 1.0)
    if p is None:
        return None
    p["jobs"] = {n: {k: _r(v, 3) for k, v in j.items()} for n, j in p["jobs"].items()}
    p["calibration"] = {"cpu_interference": f"session {alpha[1]}" if alpha else "default",
                        "gpu_share": f"session {share[1]}" if share else "default"}
    return {k: _r(v, 4) if not isinstance(v, dict) else v for k, v in p.items()}


def _r(x: object, digits: int = 4) -> object:
    """A figure rounded to `digits` (NaN and infinities: None); anything else as it is."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
        return x
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return round(x, digits) if isinstance(x, float) else x


def _event_text(e: Mapping[str, Any]) -> str:
    ev = e.get("ev")
    if ev == "failed":
        return f"{e.get('cause', 'exception')}: {e.get('message', '')}".strip()
    if ev == "baseline":
        parts = [f"solo step {secs(e.get('step_time_s'))}",
                 f"{num(e.get('samples_per_s'), '.1f')} samples/s",
                 f"data stall {pct(e.get('stall_fraction'))}",
                 f"{num(e.get('cpu_cores'), '.2f')} CPU cores"]
        return ", ".join(parts)
    if ev == "stuck":  # analyse/live/stuck.py, recorded by the engine
        return stuck_event_text(e)
    if ev == "unstuck":
        return "moves again"
    return str(e.get("message") or "")


def _series(store: Store, sid: str, t_start: float, max_points: int, n_gpus: int,
            n_jobs: int) -> tuple[dict[str, Any] | None, list[int]]:
    """Bucketed host/GPU/job time series on one shared time axis (bucket means, in SQL).

    A table whose rows in this session would exceed SERIES_ROW_CAP is read every k-th
    second only ("every_s" in the result), which bounds a 24-hour session's export time.
    Also returns the host samples per bucket (weights for co-run means)."""
    span = store.sample_span(sid)
    if span is None:
        return None, []
    t0, t1, n = span
    k = max(1, min(max_points, n))
    width = (t1 - t0) / k * (1 + 1e-9) if t1 > t0 else 1.0
    ticks_per_s = n / max(t1 - t0, 1.0)

    def every(rows_per_tick: int) -> int:
        rows = n * max(1, rows_per_tick)
        return 1 if rows <= SERIES_ROW_CAP else math.ceil(rows / SERIES_ROW_CAP / ticks_per_s)

    ev_host, ev_gpu, ev_job = every(1), every(n_gpus), every(n_jobs)

    def grid() -> list[object]:
        return [None] * k

    def idx(b: float) -> int:
        return min(max(int(b), 0), k - 1)

    host = {"cpu_busy": grid(), "load1": grid(), "psi_some10": grid(), "throttled": grid(),
            "mem_used": grid()}
    counts = [0] * k
    for b, _t, busy, load1, psi, thr, mem, cnt in store.host_series(sid, t0, width, ev_host):
        i = idx(b)
        host["cpu_busy"][i], host["load1"][i], host["psi_some10"][i] = _r(busy), _r(load1), _r(psi)
        host["throttled"][i], host["mem_used"][i] = _r(thr), None if mem is None else int(mem)
        counts[i] = cnt
    gpus: dict[int, dict[str, Any]] = {}
    for b, g, _t, util, mem, mem_total, temp, power, _n in store.gpu_series(sid, t0, width, ev_gpu):
        d = gpus.setdefault(g, {"index": g, "mem_total": None, "util": grid(), "mem_used": grid(),
                                "temp_c": grid(), "power_w": grid()})
        i = idx(b)
        d["util"][i], d["temp_c"][i], d["power_w"][i] = _r(util), _r(temp, 1), _r(power, 1)
        d["mem_used"][i] = None if mem is None else int(mem)
        if mem_total is not None:
            d["mem_total"] = max(d["mem_total"] or 0, int(mem_total))
    jobs: dict[str, dict[str, Any]] = {}
    for b, job, _t, cores, stall, step, sps, _rss, _gm, _n in store.job_series(sid, t0, width,
                                                                                 ev_job):
        d = jobs.setdefault(job, {"name": job, "cpu_cores": grid(), "stall": grid(),
                                  "step_time_s": grid(), "samples_per_s": grid()})
        i = idx(b)
        d["cpu_cores"][i], d["stall"][i] = _r(cores, 3), _r(stall, 3)
        d["step_time_s"][i], d["samples_per_s"][i] = _r(step), _r(sps, 2)
    series = {
        "points": k, "bucket_s": _r(width, 3), "t0": t0,
        "every_s": {"host": ev_host, "gpus": ev_gpu, "jobs": ev_job},
        "t": [_r(t0 + (i + 0.5) * width - t_start, 2) for i in range(k)],  # seconds since start
        "host": host, "gpus": [gpus[g] for g in sorted(gpus)], "jobs": list(jobs.values()),
    }
    return series, counts


def _cpu_wait(store: Store, sid: str, job: str) -> dict[str, Any] | None:
    """CPU wait: the job's mean shares over its samples that have one (`mean`, `max`,
    `trainer`, `workers`, `throttled`, `samples`); null when none was recorded."""
    m = store.job_cpu_wait_means(sid, job)
    if m is None:
        return None
    mean, trainer, workers, throttled, top, n = m
    return {"mean": _r(mean), "max": _r(top), "trainer": _r(trainer), "workers": _r(workers),
            "throttled": _r(throttled), "samples": n}


def _disk(store: Store, sid: str, job: str) -> dict[str, Any] | None:
    """Disk I/O: the job's mean and peak bytes/s from storage, its mean I/O wait
    share and major faults/s over its samples; null when none was recorded."""
    m = store.job_disk_means(sid, job)
    if m is None:
        return None
    read, top, wait, faults, n = m
    return {"read_bytes_per_s": _r(read, 0), "max_read_bytes_per_s": _r(top, 0),
            "io_wait": _r(wait), "major_faults_per_s": _r(faults, 2), "samples": n}


def _memory(store: Store, sid: str, job: str) -> dict[str, Any] | None:
    """Memory: the mean and peak bytes/s of page-cache refaults in the job's cgroup
    and its mean wait on re-reads of evicted pages; null when none was recorded."""
    m = store.job_memory_means(sid, job)
    if m is None:
        return None
    refault, top, wait, n = m
    return {"refault_bytes_per_s": _r(refault, 0), "max_refault_bytes_per_s": _r(top, 0),
            "memory_wait": _r(wait), "samples": n}


def _verdict_changes(store: Store, sid: str) -> dict[str, Any]:
    """`verdict_changes`, each change of the verdict's kind in time order (`from` null: the
    first verdict), and `verdict_changes_recorded`: false for a session recorded before they
    were kept, whose `[]` means "not known", not "none"."""
    changes = store.verdict_changes(sid)
    return {"verdict_changes": [{"t": c["t"], "from": c["from_"], "to": c["to"],
                                 "reason": c["reason"], "worst_slowdown": _r(c["worst_slowdown"], 3)}
                                for c in changes or ()],
            "verdict_changes_recorded": changes is not None}


def session_json(store: Store, sid: str | None, *, max_points: int = MAX_POINTS) -> dict[str, Any]:
    """The session export (schema gputop-dl.session/1) of session `sid` (id or unique prefix)."""
    row = store.session(sid)
    if row is None:
        raise ExportUsageError(f"no session {sid!r}" if sid else "no sessions recorded")
    sid = row.id
    summary = summarize(store, sid)
    sampled = summary.sampled
    spec = row.spec or {}
    stats: Mapping[str, Any] = store.session_stats().get(sid) or {}
    env0 = row.environment or {}
    series, counts = _series(store, sid, row.started, max_points, len(env0.get("gpus") or []),
                             len(summary.jobs))
    if series:  # job series in the jobs' order (the chart's lines are listed in this order)
        order = {j.name: i for i, j in enumerate(summary.jobs)}
        series["jobs"].sort(key=lambda d: order.get(d["name"], len(order)))
    last_sample = (series["t0"] + (series["t"][-1] + series["bucket_s"] / 2)) if series else None
    if row.ended is not None:
        end = row.ended
    else:
        end = max(x for x in (stats.get("heartbeat"), last_sample, row.started) if x is not None)
        if row.state == "running":
            end = max(end, time.time())

    env = dict(row.environment or {})
    for key in ("cpu_model", "cpus", "gpus", "driver", "torch"):
        env.setdefault(key, [] if key == "gpus" else None)

    jobs = []
    for r in summary.jobs:
        j = r.to_json()
        mem, kind = r.peak_mem()
        j.update(
            step_stats_sampled=sampled.get(r.name), solo=r.solo, started=r.started,
            ended=r.ended, peak_mem=mem, peak_mem_kind=kind,
            epochs_planned=r.epochs_planned, batch_size=r.batch_size,
            solo_epoch_s_est=(_r(r.median_epoch_s / r.slowdown, 3)
                              if r.median_epoch_s and r.slowdown else None))
        j["cpu_wait"] = _cpu_wait(store, sid, r.name)
        j["disk"] = _disk(store, sid, r.name)
        j["memory"] = _memory(store, sid, r.name)
        jobs.append(j)

    queue = _queue(store, sid, jobs)

    events = []
    for e in summary.events:
        data = {k: v for k, v in e.items() if k not in ("t", "job", "phase", "ev")}
        events.append({"t": e.get("t"), "job": e.get("job"), "phase": e.get("phase"),
                       "ev": e.get("ev"), "text": _event_text(e), "data": data})
    failed_ev = {e["job"] for e in events if e["ev"] == "failed" and e["phase"] == "co-run"}
    for j in jobs:
        if j["status"] == "failed" and j["name"] in failed_ev:
            continue  # the trainer's own "failed" event says it (with the cause)
        if j["status"] in ("failed", "stopped", "done") and j["ended"]:
            events.append({"t": j["ended"], "job": j["name"], "phase": "co-run",
                           "ev": j["status"], "text": j["failure"] or "", "data": {}})
    if row.state == "interrupted":
        live = [j["name"] for j in jobs if j["status"] == "interrupted"]
        events.append({"t": end, "job": None, "phase": None, "ev": "interrupted",
                       "text": "gputop-dl stopped recording (its process ended without closing "
                               "the session)" + (f"; still running then: {', '.join(live)}"
                                                 if live else ""), "data": {}})
    events.sort(key=lambda e: (e["t"] is None, e["t"] or 0))

    starts = [e["t"] for j in jobs for e in store.events(sid, job=j["name"], ev="started",
                                                         phase="co-run")[:1]]
    corun_started, window = corun_window(starts, [j["ended"] for j in jobs if j["ended"]],
                                         len(jobs), end)
    means = corun_host_means(series, counts, window, row.started)
    host = {"cpus": env.get("cpus"), **{k: v if k == "cpu_busy_max" else _r(v)
                                         for k, v in means.items()}}

    return {
        "schema": SESSION_SCHEMA,
        "id": sid, "name": row.name, "state": row.state, "kind": row.kind,
        "file": row.file, "command": row.command,
        "started": row.started, "ended": row.ended, "duration_s": _r(end - row.started, 2),
        "corun_started": corun_started,
        "baseline": spec.get("baseline"), "interval": spec.get("interval"),
        "cuda": spec.get("cuda"),
        "environment": env,
        "verdict": row.verdict,
        **_verdict_changes(store, sid),
        "queue": queue,
        "jobs": jobs,
        "host": host,
        "events": events,
        "series": series,
        "generator": f"gputop-dl {__version__}",
    }
