"""A queue run on the console: per job arrival, start, wait, run time and JCT, then the queue's means."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from gputop_dl.text.fmt import DASH, num, pct, secs


def _s(x: float | None) -> str:
    return num(x, ".1f")


def queue_table(q: Mapping[str, Any]) -> Table:
    """The per-job rows of `analyse.recorded.queue.queue_figures`, by arrival."""
    t = Table(title=f"Queue ({q.get('policy')}, {q.get('slots')} {q.get('unit') or 'slot'}s)",
              header_style="bold", title_justify="left")
    for col in ("job", "status", "arrival s", "start s", "end s", "wait s", "run s", "JCT s",
                "expected s", "waited because"):
        t.add_column(col, justify="left" if col in ("job", "status", "waited because") else "right")
    for j in sorted(q["jobs"], key=lambda j: (j.get("arrival_s") is None, j.get("arrival_s") or 0)):
        t.add_row(j["name"], j.get("status") or ("not started" if j.get("start_s") is None
                                                  else "not ended"),
                  _s(j.get("arrival_s")), _s(j.get("start_s")), _s(j.get("end_s")),
                  _s(j.get("wait_s")), _s(j.get("run_s")), _s(j.get("jct_s")),
                  _s(j.get("expected_s")), j.get("waited_because") or DASH)
    return t


def queue_line(q: Mapping[str, Any]) -> str:
    """One line: makespan, mean JCT, mean wait and busy slots over the jobs that ended."""
    unit = q.get("unit") or "slot"
    return (f"queue: {q.get('jobs_ended', 0)} of {len(q['jobs'])} jobs ended · makespan "
            f"{secs(q.get('makespan_s'))} · mean JCT {secs(q.get('mean_jct_s'))} · mean wait "
            f"{secs(q.get('mean_wait_s'))} · {unit}s busy {pct(q.get('slot_busy_fraction'))}")
