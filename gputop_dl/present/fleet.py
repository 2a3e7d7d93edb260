"""`gputop-dl --nodes ... --once`: the fleet as two tables, one row per node and all jobs with their node."""

from __future__ import annotations

from rich.table import Table

from gputop_dl.text.fmt import DASH, num, pct, secs, size
from gputop_dl.text.safe import text


def nodes_table(nodes) -> Table:
    t = Table(title="Nodes", title_justify="left")
    for col in ("node", "host", "state", "GPUs", "GPU util", "CPU busy", "load", "jobs",
                "verdict"):
        t.add_column(col, justify="right" if col in ("GPUs", "GPU util", "CPU busy", "load",
                                                     "jobs") else "left")
    for n in nodes:
        if not n.ok:
            t.add_row(text(n.address), DASH, text(n.error or "unreachable"), DASH, DASH, DASH,
                      DASH, DASH, DASH, style="red")
            continue
        utils = [g["util"] for g in n.gpus if g.get("util") is not None]
        state = "ok" if n.age_s is None or n.age_s < 10 else f"stale {n.age_s:.0f} s"
        verdict = DASH if not n.verdict else (
            f"{n.verdict}" + (f" ({n.confidence:.0%})" if n.confidence is not None else ""))
        t.add_row(text(n.address), text(n.hostname or DASH), state, str(len(n.gpus)),
                  pct(sum(utils) / len(utils)) if utils else DASH, pct(n.cpu_busy),
                  num(n.load1, ".1f"), str(len(n.jobs)), text(verdict))
    return t


def fleet_jobs_table(nodes) -> Table:
    t = Table(title="Jobs (all nodes)", title_justify="left")
    for col in ("node", "job", "pid", "status", "CPU cores", "data-wait", "step", "slowdown",
                "GPU mem"):
        t.add_column(col, justify="left" if col in ("node", "job", "status") else "right")
    for n in nodes:
        for j in n.jobs:
            t.add_row(text(n.hostname or n.address), text(j.name), DASH if j.pid is None else str(j.pid),
                      text(j.status or DASH), num(j.cpu_cores, ".2f"), pct(j.stall_fraction),
                      secs(j.step_time_s), num(j.slowdown, ".2f", "×"),
                      size(int(j.gpu_mem)) if j.gpu_mem is not None else DASH)
    return t
