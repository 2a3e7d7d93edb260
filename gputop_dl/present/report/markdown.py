"""The session report as GitHub-flavoured Markdown, rendered from the JSON document only.

    text = render_markdown(session_json(store, sid))    # or from a saved JSON export

Untrusted text (job names, process command lines, paths, error messages) goes through `md_cell`
/ `md_text` (escapes `|`, backticks, emphasis and link brackets, `< > &`, line breaks) or `fence`
(a code fence longer than any backtick run in the text); chart labels through `mermaid.label`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from gputop_dl.present.energy_text import energy_notes
from gputop_dl.present.report.charts_md import charts_section
from gputop_dl.present.report.phases_md import phases_section
from gputop_dl.present.report.queue_md import queue_section
from gputop_dl.present.report.resources_md import cpu_wait_section, disk_section, memory_section
from gputop_dl.present.report.verdict_md import verdict_section
from gputop_dl.text.fmt import DASH, epochs_done, num, pct, rank_list, secs, size
from gputop_dl.text.markdown import fence, md_cell, md_text, table

if TYPE_CHECKING:
    from gputop_dl.present.report.document import JobDoc, SessionDoc


EPOCH_COLUMNS_MAX = 12  # the per-epoch table shows at most this many epochs (the JSON has all)


def when(t: float | None, fmt: str = "%Y-%m-%d %H:%M:%S %z") -> str:
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


def _gpu_line(env: Mapping[str, Any]) -> str:
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


def _env_section(env: Mapping[str, Any]) -> str:
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


def _transforms(t: object) -> str:
    if t is None:
        return DASH
    if isinstance(t, (list, tuple)):
        return md_cell(", ".join(str(x) for x in t))
    return md_cell(t)


def _devices(j: JobDoc) -> str:
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
    nproc, nnodes = cfg.get("nproc"), cfg.get("nnodes")
    if nproc and nproc > 1:
        out += f", {nproc} processes" + (" per node" if nnodes and nnodes > 1 else "")
    if nnodes and nnodes > 1:
        out += f", {nnodes} nodes"
    return out


def _workloads_section(jobs: list[JobDoc]) -> str:
    rows: list[list[str]] = []
    fallback: set[str] = set()
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


def _distributed_section(jobs: list[JobDoc]) -> str:
    """The distributed jobs: their run, this node's place in it and the ranks it ran."""
    rows = []
    for j in jobs:
        d = j.get("distributed")
        if not d:
            continue
        rows.append([md_cell(j["name"]), md_cell(d.get("run_id")), md_cell(d.get("nnodes")),
                     md_cell(d.get("group_rank")), md_cell(d.get("world_size")),
                     md_cell(rank_list(d.get("ranks") or ()))])
    if not rows:
        return ""
    return ("## Distributed jobs\n\n" + table(
        ["job", "run id", "nodes", "this node", "world size", "ranks on this node"], rows,
        "llrrrl") + "\n\nFrom each rank's environment (torchrun's RANK, LOCAL_RANK, WORLD_SIZE, "
        "GROUP_RANK, TORCHELASTIC_RUN_ID). Each node's gputop-dl records its own ranks; the "
        "step figures below are those of this node's first rank.")


def _status(j: JobDoc, state: str | None) -> str:
    """The job's status as the JSON has it (analyse.recorded.summary.status_after mapped it)."""
    return md_cell(j.get("status"))


def _tflops(x: float | None) -> str:
    if x is None:
        return DASH
    return f"{x:.2f} TFLOP/s" if x >= 0.1 else f"{x * 1000:.1f} GFLOP/s"


def _results_section(data: SessionDoc) -> str:
    jobs = data["jobs"]
    rows = []
    for j in jobs:
        planned = j.get("epochs_planned")
        done = len(j.get("epochs") or [])
        epochs = epochs_done(done, planned, j.get("steps"))
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
    if len(slow) > 1 and len(slow) == len(jobs):  # one job alone: no co-run, no STP
        stp = sum(1 / s for s in slow)
        notes.append(f"System throughput STP = Σ 1/slowdown = {stp:.2f} for {len(slow)} jobs "
                     f"(parallel efficiency {stp / len(slow):.2f}).")
    notes += [md_text(n) for n in energy_notes(jobs)]  # each job's joules; co-run against alone
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


def _epochs_table(jobs: list[JobDoc]) -> str:
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


def _solo_section(jobs: list[JobDoc], baseline: str | None) -> str:
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


def _verdict_changes_section(data: SessionDoc) -> str:
    """When the verdict's kind changed; "not recorded" for a session (or a saved export) from
    before the changes were kept: never "none" where the store could not know."""
    out = ["## Verdict over time", ""]
    changes = data.get("verdict_changes") or []
    if not data.get("verdict_changes_recorded"):
        return "\n".join(out + ["Not recorded in this session: it was recorded by a gputop-dl "
                                "that kept only the latest verdict, so when it changed is not "
                                "known."])
    if not changes:
        return "\n".join(out + ["No verdict was reached in this session, so none changed."
                                if not data.get("verdict") else
                                "No change recorded with the verdict above (it was stored without one)."])
    t0 = data.get("started")
    rows = [[when(c["t"], "%H:%M:%S"), _since(c["t"], t0),
             md_cell(c.get("from") or "(none)"), md_cell(c["to"]),
             num(c.get("worst_slowdown"), ".2f", "×"), md_cell(c.get("reason"))]
            for c in changes]
    out.append(table(["time", "since start", "from", "to", "worst slowdown", "reason"], rows,
                     "lrllrl"))
    out += ["", "Each change of the verdict's kind, as it was judged while the session ran (a "
            "live verdict is estimated; a launch's is measured over the overlap window). Worst "
            "slowdown: the largest of the new verdict's per-job slowdowns."]
    return "\n".join(out)


def _events_section(data: SessionDoc) -> str:
    t0 = data.get("started")
    evs = data.get("events") or []
    out = ["## Events", ""]
    if evs:
        rows = [[when(e.get("t"), "%H:%M:%S"), _since(e.get("t"), t0), md_cell(e.get("job")),
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


def render_markdown(data: SessionDoc) -> str:
    """The report as GitHub-flavoured Markdown, from a `session_json` dict (or its JSON file)."""
    v = data.get("verdict")
    head = [
        f"# gputop-dl report: {md_text(data.get('name') or data.get('id'))}", "",
        f"- **Session:** {md_cell(data.get('id'))}",
        f"- **State:** {_state_text(data.get('state'))}",
        f"- **Date:** {when(data.get('started'))}",
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
             _workloads_section(data["jobs"]), _distributed_section(data["jobs"]),
             _results_section(data), phases_section(data["jobs"]),
             cpu_wait_section(data["jobs"]), disk_section(data["jobs"]),
             memory_section(data["jobs"]), queue_section(data),
             verdict_section(v), _verdict_changes_section(data), charts_section(data),
             _events_section(data),
             f"---\n\n*{md_text(data.get('generator') or 'gputop-dl')}; the JSON export "
             f"(`gputop-dl export OUT.json --session {md_text(data.get('id'))}`) has the same "
             "content.*"]
    return "\n\n".join(p for p in parts if p) + "\n"
