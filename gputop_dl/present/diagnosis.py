"""`gputop-dl diagnose` on the console: the jobs it measured, as a table, before the verdict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from gputop_dl.present.verdict_text import METHOD_MARK, slowdown_text
from gputop_dl.text.fmt import DASH, num, pct, secs
from gputop_dl.text.safe import text


def diagnosis_table(result: Mapping[str, Any]) -> Table:
    """One row per job: CPU together and alone, its CPU wait, stall together and alone, step
    times, its one slowdown with its source (the probe's, "(loader)" where the loader workers'
    work rate measured it; else the live estimate) and the live
    estimate beside it (with its confidence) and what that estimate finds it waits on."""
    t = Table(title="Diagnosis (jobs found running)", title_justify="left")
    for col in ("job", "pid", "CPU cores", "alone", "CPU wait", "data-wait", "alone", "step", "alone",
                "slowdown", "estimated", "waits on", "measured alone"):
        t.add_column(col, justify="left" if col in ("job", "measured alone") else "right")
    for j in result.get("jobs", []):
        t.add_row(text(j["name"]), str(j["pid"]), num(j["cpu_cores"], ".2f"),
                  num(j["solo_cpu_cores"], ".2f"), pct(j.get("cpu_wait_fraction")),
                  pct(j["stall_fraction"]),
                  pct(j["solo_stall_fraction"]), secs(j["step_time_s"]),
                  secs(j["solo_step_time_s"]),
                  slowdown_text(j["slowdown"], j.get("slowdown_source"), j.get("slowdown_doubt"))
                  + _by(j.get("slowdown_method")),
                  num(j.get("estimated_slowdown"), ".2f", "×")
                  + (f" ({j['estimate_confidence']:.0%})"
                     if j.get("estimate_confidence") is not None else ""),
                  j.get("waits_on") or DASH,
                  "yes" if j["measured_alone"] else text(j.get("why_not_alone") or DASH))
    return t


def _by(method: str | None) -> str:
    """What read a slowdown, where it is not the kind's usual (py-spy's steps for the probe,
    the wait model for an estimate): " (batches)", " (loader CPU)", " (counter)"."""
    if method is None or method in ("py-spy steps", "wait model", "step times"):
        return ""
    return f" ({METHOD_MARK.get(method, method)})"
