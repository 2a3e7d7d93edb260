"""Session reports: `gputop-dl export OUT.md | OUT.json` and the `gputop-dl sessions` listing.

    data = session_json(store, sid)      # the JSON export (contract: docs/design.md)
    text = render_markdown(data)         # the same content as GitHub-flavoured Markdown
    export_session(None, "run.md")       # latest session -> file, written atomically

The Markdown is rendered from the JSON dict only, so both formats carry the same content and a
saved JSON can be re-rendered. Time series are reduced in SQL to at most `MAX_POINTS` bucket
means, so a 24-hour session exports in about as long as a 2-minute one.

Untrusted text (job names, process command lines, paths, error messages) goes through `md_cell`
/ `md_text` (escapes `|`, backticks, emphasis and link brackets, `< > &`, line breaks) or `fence`
(a code fence longer than any backtick run in the text); chart labels through `mermaid.label`.
"""

from __future__ import annotations

import json
import math
import os
import time

from gputop_dl import __version__
from gputop_dl.analyse.summary import JobResult, SessionSummary, summarize
from gputop_dl.present import mermaid
from gputop_dl.present.markdown import fence, md_cell, md_text, table, write_atomic
from gputop_dl.present.fmt import DASH, num, pct, secs, size
from gputop_dl.record.store import Store, default_db_path

SESSION_SCHEMA = "gputop-dl.session/1"
MAX_POINTS = mermaid.MAX_POINTS
FORMATS = {".md": "md", ".markdown": "md", ".json": "json"}
EPOCH_COLUMNS_MAX = 12  # the per-epoch table shows at most this many epochs (the JSON has all)
SERIES_ROW_CAP = 60_000  # a time series with more rows: bucket means over every k-th second


class ExportError(Exception):
    """An export that cannot be done: one-line message; `exit_code` for the CLI (1)."""

    exit_code = 1


class ExportUsageError(ExportError):
    """Bad usage (unknown extension, unknown or ambiguous session id): exit code 2."""

    exit_code = 2


# --- the JSON document ----------------------------------------------------------------------

def _r(x, digits: int = 4):
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
        return x
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return round(x, digits) if isinstance(x, float) else x


def _peak_mem(j: dict) -> tuple[int | None, str | None]:
    """The memory figure of the results table and what it measures."""
    if j.get("peak_gpu_mem") is not None:
        return j["peak_gpu_mem"], "gpu"
    if j.get("peak_framework_mem") is not None:
        dev = j.get("device") or ""
        kind = "cuda-allocated" if dev.startswith("cuda") else "host-rss-trainer"
        return j["peak_framework_mem"], kind
    if j.get("peak_rss") is not None:
        return j["peak_rss"], "host-rss-tree"
    return None, None


def _event_text(e: dict) -> str:
    ev = e.get("ev")
    if ev == "failed":
        return f"{e.get('cause', 'exception')}: {e.get('message', '')}".strip()
    if ev == "baseline":
        parts = [f"solo step {secs(e.get('step_time_s'))}",
                 f"{num(e.get('samples_per_s'), '.1f')} samples/s",
                 f"data stall {pct(e.get('stall_fraction'))}",
                 f"{num(e.get('cpu_cores'), '.2f')} CPU cores"]
        return ", ".join(parts)
    return str(e.get("message") or "")


def _series(store: Store, sid: str, t_start: float, max_points: int, n_gpus: int,
            n_jobs: int) -> tuple[dict | None, list[int]]:
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

    def grid():
        return [None] * k

    def idx(b):
        return min(max(int(b), 0), k - 1)

    host = {"cpu_busy": grid(), "load1": grid(), "psi_some10": grid(), "throttled": grid(),
            "mem_used": grid()}
    counts = [0] * k
    for b, _t, busy, load1, psi, thr, mem, cnt in store.host_series(sid, t0, width, ev_host):
        i = idx(b)
        host["cpu_busy"][i], host["load1"][i], host["psi_some10"][i] = _r(busy), _r(load1), _r(psi)
        host["throttled"][i], host["mem_used"][i] = _r(thr), None if mem is None else int(mem)
        counts[i] = cnt
    gpus: dict[int, dict] = {}
    for b, g, _t, util, mem, mem_total, temp, power, _n in store.gpu_series(sid, t0, width, ev_gpu):
        d = gpus.setdefault(g, {"index": g, "mem_total": None, "util": grid(), "mem_used": grid(),
                                "temp_c": grid(), "power_w": grid()})
        i = idx(b)
        d["util"][i], d["temp_c"][i], d["power_w"][i] = _r(util), _r(temp, 1), _r(power, 1)
        d["mem_used"][i] = None if mem is None else int(mem)
        if mem_total is not None:
            d["mem_total"] = max(d["mem_total"] or 0, int(mem_total))
    jobs: dict[str, dict] = {}
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


def _corun_host(series: dict | None, counts: list[int], window: tuple[float, float] | None,
                t_start: float) -> dict:
    """Host means over the co-run window, from the bucket means (weighted by samples)."""
    out = {"cpu_busy_mean": None, "load1_mean": None, "psi_some10_mean": None,
           "cpu_busy_max": None}
    if not series or window is None:
        return out
    a, b = window[0] - t_start, window[1] - t_start
    half = series["bucket_s"] / 2
    sel = [i for i, t in enumerate(series["t"]) if t + half > a and t - half < b]
    for key, name in (("cpu_busy", "cpu_busy_mean"), ("load1", "load1_mean"),
                      ("psi_some10", "psi_some10_mean")):
        vals = [(series["host"][key][i], counts[i]) for i in sel
                if series["host"][key][i] is not None and counts[i]]
        if vals:
            out[name] = _r(sum(v * c for v, c in vals) / sum(c for _, c in vals))
    busy = [series["host"]["cpu_busy"][i] for i in sel if series["host"]["cpu_busy"][i] is not None]
    out["cpu_busy_max"] = max(busy) if busy else None
    return out


def session_json(store: Store, sid: str | None, *, max_points: int = MAX_POINTS) -> dict:
    """The session export (schema gputop-dl.session/1) of session `sid` (id or unique prefix)."""
    row = store.session(sid)
    if row is None:
        raise ExportUsageError(f"no session {sid!r}" if sid else "no sessions recorded")
    sid = row.id
    summary = summarize(store, sid)
    sampled = summary.sampled
    spec = row.spec or {}
    stats = store.session_stats().get(sid, {})
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
        mem, kind = _peak_mem(j)
        j.update(
            step_stats_sampled=sampled.get(r.name), solo=r.solo, started=r.started,
            ended=r.ended, peak_mem=mem, peak_mem_kind=kind,
            epochs_planned=r.epochs_planned, batch_size=r.batch_size,
            solo_epoch_s_est=(_r(r.median_epoch_s / r.slowdown, 3)
                              if r.median_epoch_s and r.slowdown else None))
        jobs.append(j)

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
        live = [j["name"] for j in jobs if j["status"] in ("running", "starting", "waiting")]
        events.append({"t": end, "job": None, "phase": None, "ev": "interrupted",
                       "text": "gputop-dl stopped recording (its process ended without closing "
                               "the session)" + (f"; still running then: {', '.join(live)}"
                                                 if live else ""), "data": {}})
    events.sort(key=lambda e: (e["t"] is None, e["t"] or 0))

    starts = [e["t"] for j in jobs for e in store.events(sid, job=j["name"], ev="started",
                                                         phase="co-run")[:1]]
    ends = [j["ended"] for j in jobs if j["ended"]]
    corun_started = min(starts) if starts else None
    window = None
    if corun_started is not None:
        window = (corun_started, max(ends) if ends and len(ends) == len(jobs) else end)
    host = {"cpus": env.get("cpus"), **_corun_host(series, counts, window, row.started)}

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
        "jobs": jobs,
        "host": host,
        "events": events,
        "series": series,
        "generator": f"gputop-dl {__version__}",
    }


# --- Markdown -------------------------------------------------------------------------------

def _when(t: float | None, fmt: str = "%Y-%m-%d %H:%M:%S %z") -> str:
    return DASH if t is None else time.strftime(fmt, time.localtime(t))


def _since(t: float | None, t0: float | None) -> str:
    if t is None or t0 is None:
        return DASH
    d = max(0.0, t - t0)
    m, s = divmod(int(d), 60)
    h, m = divmod(m, 60)
    return f"+{h}:{m:02d}:{s:02d}" if h else f"+{m}:{s:02d}"


def _state_text(state: str | None) -> str:
    if state == "interrupted":
        return ("**interrupted**: gputop-dl stopped before the session ended; everything "
                "recorded up to then is shown")
    if state == "running":
        return "**running**: the session is still being recorded; this is a partial report"
    return md_cell(state)


def _gpu_line(env: dict) -> str:
    gpus = env.get("gpus") or []
    if gpus:
        groups: dict[str, int] = {}
        for g in gpus:
            groups[g] = groups.get(g, 0) + 1
        return ", ".join(f"{md_text(n)} × {c}" for n, c in groups.items())
    status = env.get("gpu_status")
    detail = env.get("gpu_status_detail")
    if status in (None, "ok") and not detail:
        return "none recorded"
    reason = detail or status
    text = str(reason)
    if not text.lower().startswith("no nvidia gpu"):
        text = f"no NVIDIA GPU: {text}"
    return md_cell(text)


def _env_section(env: dict) -> str:
    cpu = md_cell(env.get("cpu_model") or "unknown CPU")
    cpus = env.get("cpus")
    logical = env.get("cpus_logical")
    vcpu = f"{cpus} vCPUs" if cpus is not None else "vCPUs unknown"
    if logical and cpus and logical != cpus:
        vcpu += f" usable of {logical}"
    rows = [
        ["CPU", f"{cpu}, {vcpu}"],
        ["Memory", size(env.get("mem_total"))],
        ["GPU", _gpu_line(env)],
        ["Driver / CUDA", f"{md_cell(env.get('driver'))} / {md_cell(env.get('cuda'))}"],
        ["OS / kernel", md_cell(env.get("os"))],
        ["Python", md_cell(env.get("python"))],
        ["torch", md_cell(env.get("torch"))],
        ["torchvision", md_cell(env.get("torchvision"))],
        ["gputop-dl", md_cell(env.get("gputop_dl"))],
    ]
    return "## Environment\n\n" + table(["item", "value"], rows)


def _transforms(t) -> str:
    if t is None:
        return DASH
    if isinstance(t, (list, tuple)):
        return md_cell(", ".join(str(x) for x in t))
    return md_cell(t)


def _devices(j: dict) -> str:
    """Where the job ran: the physical GPUs it was given (the trainer sees them renumbered
    from cuda:0), or the CPU, with the GPUs the file asked for."""
    cfg = j.get("config") or {}
    gpus = cfg.get("gpus") or []
    dev = j.get("device") or ""
    asked = md_text(", ".join(str(g) for g in gpus))
    if gpus and (dev.startswith("cuda") or not dev):
        out = f"GPU {asked}"
    elif gpus:
        out = f"{md_cell(dev)} (asked GPU {asked})"
    else:
        out = md_cell(dev or None)
    nproc = cfg.get("nproc")
    if nproc and nproc > 1:
        out += f", {nproc} processes"
    return out


def _workloads_section(jobs: list[dict]) -> str:
    rows, fallback = [], set()
    for j in jobs:
        cfg = j.get("config") or {}
        fallback.update(cfg.get("cpu_fallback_applied") or [])
        if not j.get("launched", True):  # found running by a monitor session
            rows.append([md_cell(j["name"]), "process: " + md_text(j.get("command") or DASH),
                         DASH, DASH, DASH, DASH, DASH, _devices(j)])
            continue
        if cfg.get("command"):  # the file's model/data keys do not apply to the user's script
            model = "command: " + md_text(" ".join(str(a) for a in cfg["command"]))
            rows.append([md_cell(j["name"]), model, md_cell(j.get("batch_size")), DASH, DASH,
                         DASH, DASH, _devices(j)])
            continue
        size_ = cfg.get("input_size")
        rows.append([md_cell(j["name"]), md_cell(cfg.get("model")), md_cell(cfg.get("batch_size")),
                     f"{size_}×{size_}" if isinstance(size_, int) else md_cell(size_),
                     md_cell(cfg.get("dataset")), _transforms(cfg.get("transforms")),
                     md_cell(cfg.get("num_workers")), _devices(j)])
    out = "## Workloads\n\n" + table(
        ["job", "model", "batch", "input", "dataset", "transforms", "workers", "device(s)"],
        rows, "llrrllrl")
    if any((j.get("config") or {}).get("command") for j in jobs):
        out += ("\n\nA `command` job runs its own script: its batch is what gputop-dl's start-up "
                "hook saw in the script's DataLoader; the rest is the script's own business.")
    if fallback:
        out += ("\n\nNo CUDA: the file's `cpu_fallback` settings were applied ("
                + md_text(", ".join(sorted(fallback))) + ").")
    return out


_MEM_LABEL = {"gpu": "GPU", "cuda-allocated": "CUDA alloc", "host-rss-trainer": "host RSS",
              "host-rss-tree": "host RSS, all procs"}


def _status(j: dict, state: str | None) -> str:
    st = j.get("status")
    if state == "interrupted" and st in ("running", "starting", "waiting"):
        return f"{md_cell(st)} when interrupted"
    return md_cell(st)


def _tflops(x: float | None) -> str:
    if x is None:
        return DASH
    return f"{x:.2f} TFLOP/s" if x >= 0.1 else f"{x * 1000:.1f} GFLOP/s"


def _results_section(data: dict) -> str:
    jobs = data["jobs"]
    rows = []
    for j in jobs:
        planned = j.get("epochs_planned")
        done = len(j.get("epochs") or [])
        epochs = f"{done}/{planned}" if planned else str(done)
        if not j.get("launched", True) and not done:
            epochs = DASH  # a process found running: its epochs are not visible from outside
        mem = j.get("peak_mem")
        label = _MEM_LABEL.get(j.get("peak_mem_kind"), "?")
        mem_txt = DASH if mem is None else f"{size(mem)} ({label})"
        rows.append([md_cell(j["name"]), _status(j, data.get("state")), epochs,
                     secs(j.get("median_epoch_s")), secs(j.get("step_time_s")),
                     num(j.get("samples_per_s"), ".1f"), mem_txt, num(j.get("cpu_cores"), ".2f"),
                     pct(j.get("stall_fraction")), secs(j.get("solo_step_time_s")),
                     pct(j.get("solo_stall_fraction")), num(j.get("slowdown"), ".2f", "×"),
                     _tflops(j.get("train_tflops"))])
    monitor = data.get("kind") == "monitor"
    out = ["## Results (jobs seen)" if monitor else "## Results (co-run)", "",
           table(["job", "status", "epochs", "median epoch", "step", "samples/s", "peak mem",
                   "CPU cores", "data stall", "solo step", "solo stall", "slowdown",
                   "compute"], rows, "llrrrrrrrrrrr")]
    notes = []
    kinds = {j.get("peak_mem_kind") for j in jobs} - {None}
    if kinds - {"gpu"}:
        notes.append("Peak mem: GPU = NVML per-process memory; CUDA alloc = torch max allocated; "
                     "host RSS = the trainer's peak resident memory (CPU training).")
    notes.append("Step = median step time after warm-up; data stall = time waiting for the next "
                 "batch / step time; CPU cores = mean CPU-seconds per second of the trainer and "
                 "its loader workers; slowdown = co-run step / solo step; compute = achieved "
                 "training TFLOP/s = 3 × forward FLOPs per image (torch's FlopCounterMode) × "
                 "samples/s.")
    for j in jobs:
        smp = j.get("step_stats_sampled")
        if smp:
            notes.append(f"{md_text(j['name'])}: a long run; its step statistics are over every "
                         f"{smp['every']}th step ({smp['steps']:,} of {smp['of']:,} after "
                         "warm-up).")
    slow = [j["slowdown"] for j in jobs if j.get("slowdown")]
    if slow and len(slow) == len(jobs):
        stp = sum(1 / s for s in slow)
        notes.append(f"System throughput STP = Σ 1/slowdown = {stp:.2f} for {len(slow)} jobs "
                     f"(parallel efficiency {stp / len(slow):.2f}).")
    h = data.get("host") or {}
    if h.get("cpu_busy_mean") is not None:
        parts = [f"CPU {pct(h['cpu_busy_mean'])} busy on average (max bucket "
                 f"{pct(h.get('cpu_busy_max'))}) of {h.get('cpus') or '?'} vCPUs"]
        if h.get("load1_mean") is not None:
            parts.append(f"load {h['load1_mean']:.1f}")
        if h.get("psi_some10_mean") is not None:
            parts.append(f"CPU pressure {pct(h['psi_some10_mean'])}")
        notes.append(("Host during the session: " if monitor else "Host during the co-run: ")
                     + ", ".join(parts) + ".")
    if any(not j.get("launched", True) for j in jobs):
        notes.append("Jobs not launched by gputop-dl (found running): CPU and memory of the "
                     "process and its children; data stall = the mean of py-spy's main-thread "
                     "samples (time inside the DataLoader iterator); their epochs and steps are "
                     "not visible from outside.")
    out += ["", "\n".join(f"- {n}" for n in notes)]
    if monitor:  # no co-run, no baselines: a record of what ran on the machine
        return "\n".join(x for x in out if x is not None)
    out += ["", _epochs_table(jobs), "", _solo_section(jobs, data.get("baseline"))]
    return "\n".join(x for x in out if x is not None)


def _epochs_table(jobs: list[dict]) -> str:
    n = max((len(j.get("epochs") or []) for j in jobs), default=0)
    if n == 0:
        return "No epoch finished in the co-run."
    shown = min(n, EPOCH_COLUMNS_MAX)
    rows = []
    for j in jobs:
        by = {e["epoch"]: e["time_s"] for e in j.get("epochs") or []}
        eps = sorted(by)[:shown]
        cells = [secs(by[e]) for e in eps] + [DASH] * (shown - len(eps))
        rows.append([md_cell(j["name"])] + cells + [secs(j.get("solo_epoch_s_est"))])
    head = ["job"] + [f"epoch {i}" for i in range(1, shown + 1)] + ["solo (est.)"]
    out = "### Epoch times\n\n" + table(head, rows, "l" + "r" * (shown + 1))
    out += ("\n\nSolo (est.) = median co-run epoch / slowdown: the epoch time at solo step speed.")
    if n > shown:
        out += f" The first {shown} of {n} epochs are shown; the JSON export has all."
    return out


def _solo_section(jobs: list[dict], baseline: str | None) -> str:
    rows = []
    for j in jobs:
        s = j.get("solo")
        if not s:
            continue
        rows.append([md_cell(j["name"]), secs(s.get("step_time_s")),
                     num(s.get("samples_per_s"), ".1f"), pct(s.get("stall_fraction")),
                     num(s.get("cpu_cores"), ".2f"), md_cell(s.get("steps")),
                     pct(s.get("cv"), 1) if s.get("cv") is not None else DASH,
                     "cached" if s.get("cached") else "measured", md_cell(s.get("device"))])
    head = "### Solo baselines\n\n"
    if not rows:
        why = ("baseline = none in the workload file" if baseline == "none"
               else "no solo baseline was recorded")
        return head + f"No solo baselines: {why}, so slowdowns are unknown."
    return head + table(["job", "step", "samples/s", "data stall", "CPU cores", "steps",
                          "step CV", "source", "device"], rows, "lrrrrrrll")


def _fmt_evidence(v) -> str:
    if isinstance(v, bool) or v is None:
        return md_cell(v)
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, dict):
        return md_cell(", ".join(f"{k} {_plain(x)}" for k, x in v.items()) or "none")
    if isinstance(v, (list, tuple)):
        return md_cell(", ".join(_plain(x) for x in v) or "none")
    return md_cell(v)


def _plain(x) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    if isinstance(x, (dict, list)):
        return json.dumps(x, separators=(",", ":"), default=str)
    return str(x)


def _verdict_section(v: dict | None) -> str:
    if not v:
        return "## Verdict\n\nNo verdict recorded."
    out = ["## Verdict", ""]
    title = md_text(v.get("title") or v.get("kind") or "verdict")
    meta = [f"kind: {md_text(v['kind'])}"] if v.get("kind") else []
    conf = v.get("confidence")
    if conf is not None:
        meta.append(f"confidence: {pct(conf)}" if isinstance(conf, float) and 0 <= conf <= 1
                    else f"confidence: {md_text(conf)}")
    out.append(f"**{title}**" + (f" ({'; '.join(meta)})" if meta else ""))
    if v.get("reason"):
        out += ["", md_text(v["reason"])]
    out += ["", "*The verdict's co-run figures are taken over the overlap window (every job past "
            "its warm-up, none finished yet); the results table uses all co-run steps after "
            "warm-up, so the two can differ a little.*"]
    if v.get("evidence_lines"):
        out += ["", "**Evidence**", ""] + [f"- {md_text(x)}" for x in v["evidence_lines"]]
    vjobs = [j for j in v.get("jobs") or [] if isinstance(j, dict)]
    if vjobs:
        out += ["", "**Per job**", ""]
        for j in vjobs:
            name, line = str(j.get("name") or ""), j.get("line")
            if line is None:
                line = ", ".join(f"{k} {val}" for k, val in j.items() if k != "name")
            line = str(line)
            out.append(f"- {md_text(line)}" if line.startswith(name) and name
                       else f"- **{md_text(name)}**: {md_text(line)}")
    if v.get("recommendations"):
        out += ["", "**Recommendations**", ""]
        out += [f"{i}. {md_text(r)}" for i, r in enumerate(v["recommendations"], 1)]
    ev = v.get("evidence")
    if isinstance(ev, dict) and ev:
        out += ["", "**Evidence (numbers)**", "", table(["evidence", "value"],
                           [[md_cell(k), _fmt_evidence(val)] for k, val in ev.items()], "lr")]
    return "\n".join(out)


def _time_unit(duration: float) -> tuple[str, float]:
    if duration < 300:
        return "s", 1.0
    if duration < 3 * 3600:
        return "min", 60.0
    return "h", 3600.0


def _charts_section(data: dict) -> str:
    jobs = data["jobs"]
    out = ["## Charts", ""]
    names = [j["name"] for j in jobs if j.get("median_epoch_s") is not None]
    if names:
        sel = [j for j in jobs if j.get("median_epoch_s") is not None]
        has_solo = any(j.get("solo_epoch_s_est") for j in sel)
        chart = mermaid.bar_line_chart(
            "Epoch time (s): bars co-run median, line solo est." if has_solo
            else "Epoch time (s), co-run median",
            names, [j["median_epoch_s"] for j in sel],
            [j.get("solo_epoch_s_est") for j in sel] if has_solo else None, "seconds")
        if chart:
            out += ["Epoch time per job, co-run (bars) against the solo estimate (line):", "",
                    chart, ""]
    s = data.get("series")
    if s and s.get("t"):
        unit, div = _time_unit(data.get("duration_s") or s["t"][-1])
        t_end = (s["t"][-1] + s["bucket_s"] / 2) / div
        busy = [None if v is None else v * 100 for v in s["host"]["cpu_busy"]]
        chart = mermaid.time_chart("Host CPU busy (percent)", t_end, [busy], "busy, percent",
                                   unit, 100)
        if chart:
            sub = {k: v for k, v in (s.get("every_s") or {}).items() if v and v > 1}
            note = "".join(f"; {k} read every {v} s" for k, v in sub.items())
            out += [f"Host CPU busy over time ({s['points']} points, bucket means of "
                    f"{s['bucket_s']:.3g} s{note}):", "", chart, ""]
        if s.get("jobs"):
            chart = mermaid.time_chart("CPU cores per job", t_end,
                                       [js["cpu_cores"] for js in s["jobs"]], "cores", unit,
                                       fill="zero")
            if chart:
                order = ", ".join(md_text(js["name"]) for js in s["jobs"])
                out += [f"CPU cores per job over time (one line per job, in order: {order}; "
                        "0 while it was not running; solo baselines included):", "", chart, ""]
        if s.get("gpus"):
            order = ", ".join(str(g["index"]) for g in s["gpus"])
            chart = mermaid.time_chart(
                "GPU utilisation (percent)", t_end,
                [[None if v is None else v * 100 for v in g["util"]] for g in s["gpus"]],
                "util, percent", unit, 100)
            if chart:
                out += [f"GPU utilisation over time (one line per GPU: {order}):", "", chart, ""]
            chart = mermaid.time_chart(
                "GPU memory used (GiB)", t_end,
                [[None if v is None else v / 1024**3 for v in g["mem_used"]] for g in s["gpus"]],
                "GiB", unit)
            if chart:
                out += [f"GPU memory used over time (one line per GPU: {order}):", "", chart, ""]
        else:
            env = data.get("environment") or {}
            why = env.get("gpu_status_detail") if not env.get("gpus") else None
            out += ["No GPU charts: no GPU samples were recorded."
                    + (f" {md_text(why)}" if why else ""), ""]
    elif len(out) == 2:
        out += ["No samples recorded.", ""]
    return "\n".join(out).rstrip()


def _events_section(data: dict) -> str:
    t0 = data.get("started")
    evs = data.get("events") or []
    out = ["## Events", ""]
    if evs:
        rows = [[_when(e.get("t"), "%H:%M:%S"), _since(e.get("t"), t0), md_cell(e.get("job")),
                 md_cell(e.get("phase")), md_cell(e.get("ev")), md_cell(e.get("text"))]
                for e in evs]
        out.append(table(["time", "since start", "job", "phase", "event", "detail"], rows,
                          "lrllll"))
    else:
        out.append("No events recorded.")
    for j in data["jobs"]:
        if j.get("status") not in ("failed", "stopped"):
            continue
        out += ["", f"### {md_text(j['name'])}: {md_text(j['status'])}", ""]
        if j.get("failure"):
            out.append(md_text(j["failure"]))
        tail = j.get("stderr_tail") or []
        if tail:
            out += ["", f"Last {len(tail)} lines of its output:", "",
                    fence("\n".join(tail), "text")]
    return "\n".join(out)


def render_markdown(data: dict) -> str:
    """The report as GitHub-flavoured Markdown, from a `session_json` dict (or its JSON file)."""
    v = data.get("verdict")
    head = [
        f"# gputop-dl report: {md_text(data.get('name') or data.get('id'))}", "",
        f"- **Session:** {md_cell(data.get('id'))}",
        f"- **State:** {_state_text(data.get('state'))}",
        f"- **Date:** {_when(data.get('started'))}",
        f"- **Duration:** {secs(data.get('duration_s'))}",
        f"- **Workload file:** {md_cell(data.get('file'))}",
        f"- **Solo baselines:** {md_cell(data.get('baseline'))}",
        "- **Verdict:** " + (md_text(v.get("title") or v.get("kind") or "?") if v
                             else "no verdict recorded"),
    ]
    if data.get("command"):
        head += ["", "Command line:", "", fence(data["command"], "sh")]
    if data.get("cuda") is False:
        head += ["", "> **No CUDA**: every workload trained on the CPU. "
                 + _gpu_line(data.get("environment") or {})]
    parts = ["\n".join(head), _env_section(data.get("environment") or {}),
             _workloads_section(data["jobs"]), _results_section(data),
             _verdict_section(v), _charts_section(data), _events_section(data),
             f"---\n\n*{md_text(data.get('generator') or 'gputop-dl')}; the JSON export "
             f"(`gputop-dl export OUT.json --session {md_text(data.get('id'))}`) has the same "
             "content.*"]
    return "\n\n".join(parts) + "\n"


# --- files ----------------------------------------------------------------------------------

def _finite(obj):
    """NaN and infinities (invalid JSON) become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _open_store(store_path: str | None) -> Store:
    path = store_path or default_db_path()
    if not os.path.exists(path):
        raise ExportError(f"no sessions recorded yet (no {path}): run `gputop-dl launch FILE.toml` "
                          "first")
    return Store(path)


def _resolve(store: Store, session_id: str | None) -> str:
    if session_id is None:
        row = store.session(None)
        if row is None:
            raise ExportError("no sessions recorded yet: run `gputop-dl launch FILE.toml` first")
        return row.id
    matches = [s.id for s in store.sessions() if s.id.startswith(session_id)]
    if session_id in matches:
        return session_id
    if not matches:
        raise ExportUsageError(f"no session {session_id!r} (see `gputop-dl sessions`)")
    if len(matches) > 1:
        raise ExportUsageError(f"session id {session_id!r} is ambiguous: "
                               + ", ".join(matches[:5]) + (" ..." if len(matches) > 5 else ""))
    return matches[0]


def export_session(session_id: str | None, path: str, store_path: str | None = None) -> str:
    """Write session `session_id` (None: the latest) to `path` (.md or .json); returns the path."""
    fmt = FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise ExportUsageError(f"{path}: unknown report format, expected a .md or .json file name")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ExportError(f"{path}: no such directory {d}")
    store = _open_store(store_path)
    try:
        sid = _resolve(store, session_id)
        row = store.session(sid)
        if row.kind == "sweep":
            text = _sweep_text(store, sid, row, fmt)
        else:
            data = session_json(store, sid)
            text = (render_markdown(data) if fmt == "md"
                    else json.dumps(_finite(data), indent=2, ensure_ascii=False) + "\n")
    finally:
        store.close()
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def _sweep_text(store: Store, sid: str, row, fmt: str) -> str:
    """A recorded `gputop-dl sweep`: the same report the sweep wrote (no torch imported)."""
    from gputop_dl.lab import sweep, sweep_report

    res = sweep.result_from_store(store, sid)
    if fmt == "md":
        return sweep_report.markdown(res, row.command or "", row.environment)
    data = dict(res.to_json(), id=sid, state=row.state, environment=row.environment)
    return json.dumps(_finite(data), indent=2, ensure_ascii=False) + "\n"


# --- sessions listing -----------------------------------------------------------------------

def list_sessions(store_path: str | None = None) -> list[dict]:
    """Recorded sessions, newest first: id, name, started, duration_s, jobs, verdict, state."""
    path = store_path or default_db_path()
    if not os.path.exists(path):
        return []
    store = Store(path)
    try:
        stats = store.session_stats()
        out = []
        now = time.time()
        for s in store.sessions():
            st = stats.get(s.id, {})
            if s.ended is not None:
                end = s.ended
            elif s.state == "running":
                end = now
            else:
                end = st.get("heartbeat") or s.started
            v = s.verdict or {}
            out.append({"id": s.id, "name": s.name, "started": s.started,
                        "duration_s": max(0.0, end - s.started), "jobs": st.get("jobs", 0),
                        "verdict": v.get("title") or v.get("kind") if v else None,
                        "verdict_kind": v.get("kind") if v else None, "state": s.state,
                        "file": s.file})
        return out
    finally:
        store.close()


def sessions_table(rows: list[dict]):
    """The `gputop-dl sessions` table (Rich)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(header_style="bold", title="Recorded sessions (newest first)", title_justify="left")
    for col, just in (("id", "left"), ("name", "left"), ("start", "left"), ("duration", "right"),
                      ("jobs", "right"), ("verdict", "left"), ("state", "left")):
        t.add_column(col, justify=just, no_wrap=col in ("id", "start"))
    style = {"finished": "green", "interrupted": "yellow", "running": "cyan"}
    for r in rows:
        t.add_row(Text(r["id"]), Text(r["name"] or ""), _when(r["started"], "%Y-%m-%d %H:%M"),
                  secs(r["duration_s"]), str(r["jobs"]), Text(r["verdict"] or DASH),
                  Text(r["state"], style=style.get(r["state"], "")))
    return t
