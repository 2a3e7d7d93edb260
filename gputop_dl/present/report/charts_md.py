"""The report's "Charts" section: epoch times, host CPU, CPU per job and GPU use over the session
as Mermaid charts, and each job's step time, data wait and CPU as sparklines, with the moments
the verdict changed kind marked on their time axis. From a `session_json` dict's jobs, `series`
and `verdict_changes`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gputop_dl.present.report import mermaid
from gputop_dl.text.fmt import DASH, num, pct, secs
from gputop_dl.text.markdown import md_cell, md_text, table
from gputop_dl.text.spark import spark

if TYPE_CHECKING:
    from gputop_dl.present.report.document import JobDoc, SessionDoc


def _time_unit(duration: float) -> tuple[str, float]:
    if duration < 300:
        return "s", 1.0
    if duration < 3 * 3600:
        return "min", 60.0
    return "h", 3600.0


MARK = "┃"  # a verdict change in a sparkline's row of marks
CLEAR_MARK = "╎"  # ... a change back to parallel: a slowdown's end (the TUI's charts alike)


def change_marks(data: SessionDoc) -> list[tuple[float, str, float, str]]:
    """The verdict's changes from one kind to another (not the first verdict), as (fraction
    0..1 of the series' time axis, "old → new", seconds since the session's start, the new
    kind), those inside the sampled span only."""
    s = data.get("series")
    if not s or not s.get("t") or not s.get("bucket_s"):
        return []
    span = s["points"] * s["bucket_s"]
    out = []
    for c in data.get("verdict_changes") or ():
        f = (c["t"] - s["t0"]) / span
        if c.get("from") and 0.0 <= f <= 1.0:
            out.append((f, f"{c['from']} → {c['to']}", c["t"] - data["started"], c["to"]))
    return out


def charts_section(data: SessionDoc) -> str:
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
        changes = change_marks(data)
        marks = [f for f, _, _, _ in changes]
        if changes:
            out += ["Full-height bars on the time charts, and " + MARK + " in the per-job "
                    "lines (" + CLEAR_MARK + " where it went back to parallel), mark where the "
                    "verdict changed: " + "; ".join(
                        f"{md_text(what)} at {since / div:.3g} {unit}" for _, what, since, _ in changes)
                    + " (see Verdict over time).", ""]
        busy = [None if v is None else v * 100 for v in s["host"]["cpu_busy"]]
        chart = mermaid.time_chart("Host CPU busy (percent)", t_end, [busy], "busy, percent",
                                   unit, 100, marks=marks)
        if chart:
            sub = {k: v for k, v in (s.get("every_s") or {}).items() if v and v > 1}
            note = "".join(f"; {k} read every {v} s" for k, v in sub.items())
            out += [f"Host CPU busy over time ({s['points']} points, bucket means of "
                    f"{s['bucket_s']:.3g} s{note}):", "", chart, ""]
        if s.get("jobs"):
            chart = mermaid.time_chart("CPU cores per job", t_end,
                                       [js["cpu_cores"] for js in s["jobs"]], "cores", unit,
                                       fill="zero", marks=marks)
            if chart:
                order = ", ".join(md_text(js["name"]) for js in s["jobs"])
                out += [f"CPU cores per job over time (one line per job, in order: {order}; "
                        "0 while it was not running; solo baselines included):", "", chart, ""]
            ends = [f for f, _, _, to in changes if to == "parallel"]
            out += _job_lines(s["jobs"], t_end, unit, marks, ends)
        if s.get("gpus"):
            order = ", ".join(str(g["index"]) for g in s["gpus"])
            chart = mermaid.time_chart(
                "GPU utilisation (percent)", t_end,
                [[None if v is None else v * 100 for v in g["util"]] for g in s["gpus"]],
                "util, percent", unit, 100, marks=marks)
            if chart:
                out += [f"GPU utilisation over time (one line per GPU: {order}):", "", chart, ""]
            chart = mermaid.time_chart(
                "GPU memory used (GiB)", t_end,
                [[None if v is None else v / 1024**3 for v in g["mem_used"]] for g in s["gpus"]],
                "GiB", unit, marks=marks)
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


SPARK_W = 48  # characters per sparkline in the per-job table


def _spark_cell(values: list[float | None], fmt: Callable[[float], str]) -> str:
    """A sparkline of bucket means (blank: no sample) and the range it spans, or a dash."""
    pts = mermaid.downsample(values, SPARK_W)
    known = [v for v in pts if v is not None]
    if not known:
        return DASH
    return f"`{spark(pts, SPARK_W)}` {fmt(min(known))}–{fmt(max(known))}"


def _job_lines(jobs: list[JobDoc], t_end: float, unit: str, marks: list[float],
               ends: Sequence[float] = ()) -> list[str]:
    """Each job's step time, data wait and CPU over the session as sparklines: when it slowed
    down and whether it recovered, at a glance, with the gaps where nothing was measured; a
    first row marks where the verdict changed, on the same axis (`ends`, those of `marks` back
    to parallel: CLEAR_MARK where no other change shares the point)."""
    rows = [[md_cell(j["name"]), _spark_cell(j["step_time_s"], lambda v: secs(v)),
             _spark_cell(j["stall"], pct), _spark_cell(j["cpu_cores"], lambda v: num(v, ".2f"))]
            for j in jobs]
    if all(c == DASH for r in rows for c in r[1:]):
        return []
    width = len(mermaid.downsample(jobs[0]["step_time_s"], SPARK_W))
    at = mermaid.mark_points(marks, width)
    other = set(mermaid.mark_points([f for f in marks if f not in ends], width))
    if at:
        line = "`" + "".join((MARK if i in other else CLEAR_MARK) if i in at else "·"
                             for i in range(width)) + "`"
        rows.insert(0, ["*verdict changed*", line, line, line])
    return [f"Per job over the session (0 → {t_end:.3g} {unit}; each line spans its own range, "
            "low to high, shown beside it; a blank: no sample):", "",
            table(["job", "step time", "data wait", "CPU cores"], rows), ""]
