"""The report's "Step phases" section: each job's phases per step, solo against co-run, with a
chart per job (docs/phases.md). From a `session_json` dict's jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputop_dl.analyse.stats.phases import PARTS
from gputop_dl.present.report import mermaid
from gputop_dl.text.fmt import DASH
from gputop_dl.text.markdown import md_cell, table

if TYPE_CHECKING:
    from gputop_dl.present.report.document import JobDoc


def _ms(v: float | None) -> str:
    return DASH if v is None else f"{v * 1000:.1f}"


def phases_section(jobs: list[JobDoc]) -> str:
    """A table (ms per step by phase, co-run and solo) and one chart per job; "" when no job
    has phases."""
    rows, charts, late = [], [], []
    for j in jobs:
        st = j.get("straggler")
        if st:
            late.append(f"- **{md_cell(j['name'])}**: rank {md_cell(st.get('rank'))} is late, "
                        f"{md_cell(st.get('cause'))} +{_ms(st.get('excess_s'))} ms per step "
                        "over the other ranks' median (its own work before the all-reduce)")
        now, solo = j.get("phases"), j.get("solo_phases")
        if not now:
            continue
        cls = {"input-bound": "input-bound", "compute-bound": "not input-bound"}.get(
            j.get("phase_class") or "", "no class (too few steps)")
        for label, ph in (("co-run", now), ("solo", solo)):
            if not ph:
                continue
            total = sum(ph.get(f"{p}_s") or 0.0 for p in PARTS)
            rows.append([md_cell(j["name"]), label, *(_ms(ph.get(f"{p}_s")) for p in PARTS),
                         _ms(total), cls if label == "co-run" else ""])
        chart = mermaid.bar_line_chart(
            f"{j['name']}: ms per step by phase (bars co-run, line solo)", list(PARTS),
            [None if now.get(f"{p}_s") is None else now[f"{p}_s"] * 1000 for p in PARTS],
            [None if not solo or solo.get(f"{p}_s") is None else solo[f"{p}_s"] * 1000
             for p in PARTS] if solo else None, "ms per step")
        if chart:
            charts.append(chart)
    if not rows:
        return ""
    return ("## Step phases\n\n" + table(
        ["job", "run", "data", "h2d", "forward", "backward", "optimizer", "other", "step",
         "class"], rows, "llrrrrrrrl")
        + "\n\nMean milliseconds per step (co-run steps after warm-up; solo: the baseline). "
        "data = waiting for the next batch, h2d = copying it to the device, forward/backward = "
        "the model's passes, optimizer = its step(s), other = the rest; – = not seen "
        "(an inference loop has no backward). Input-bound: data is at least 20 % of the step. "
        "See docs/phases.md.\n\n" + ("\n".join(late) + "\n\n" if late else "")
        + "\n\n".join(charts))
