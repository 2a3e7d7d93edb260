"""The `gputop-dl simulate` report: the JSON document (contract) and its Markdown with charts.

Input: the simulator's results as dicts (`Result.to_json()`: policy, rate, seed, mean_jct_s,
p95_jct_s, makespan_s, mean_wait_s, jobs) and a `setup` dict describing the trace and machine.
Markdown tables give the mean over seeds per policy and arrival rate; one Mermaid chart per
figure draws a line per policy over the rates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gputop_dl.present.report.mermaid import lines_chart
from gputop_dl.text.fmt import num
from gputop_dl.text.markdown import md_cell, md_text, table

SIMULATION_SCHEMA = "gputop-dl.simulation/1"
FIGURES = (("mean_jct_s", "Mean job completion time", "mean JCT"),
           ("p95_jct_s", "p95 job completion time", "p95 JCT"),
           ("makespan_s", "Makespan", "makespan"), ("mean_wait_s", "Mean wait", "mean wait"))
_ROW_KEYS = ("policy", "rate", "seed", "mean_jct_s", "p95_jct_s", "makespan_s", "mean_wait_s")


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def simulation_json(setup: dict[str, Any], results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The `--json` document: {"schema", "setup", "results": [{policy, rate, seed, mean_jct_s,
    p95_jct_s, makespan_s, mean_wait_s, jobs}]} (no NaN: unknown is null)."""
    rows = [{k: (_finite(r[k]) if k.endswith("_s") else r[k]) for k in (*_ROW_KEYS, "jobs")}
            for r in results]
    return {"schema": SIMULATION_SCHEMA, "setup": setup, "results": rows}


def means_over_seeds(results: Sequence[dict[str, Any]], key: str
                     ) -> tuple[list[str], list[float | None], dict[tuple[str, float | None], float]]:
    """Policies (first-seen order), rates (ascending), {(policy, rate): mean over seeds}."""
    policies = list(dict.fromkeys(r["policy"] for r in results))
    rates = sorted({r["rate"] for r in results if r["rate"] is not None})
    if any(r["rate"] is None for r in results):
        rates.append(None)
    sums: dict[tuple[str, float | None], list[float]] = {}
    for r in results:
        v = _finite(r[key])
        if v is not None:
            sums.setdefault((r["policy"], r["rate"]), []).append(v)
    return policies, rates, {k: sum(v) / len(v) for k, v in sums.items()}


def _rate_label(rate: float | None) -> str:
    return "listed arrivals" if rate is None else f"{rate:g}/s"


def render_simulation_markdown(setup: dict[str, Any], results: Sequence[dict[str, Any]]) -> str:
    """The Markdown report: setup, one table and one chart per figure, the best policy per rate."""
    out = [f"# Simulated job queue: {md_text(setup.get('name', 'trace'))}", ""]
    for key, text in setup.get("lines", []):
        out.append(f"- **{md_text(key)}**: {md_text(text)}")
    out.append("")
    if not results:
        return "\n".join(out + ["No results.", ""])
    policies, rates, jct = means_over_seeds(results, "mean_jct_s")
    loads = setup.get("load", {})
    out += ["## Best policy per arrival rate (mean JCT)", ""]
    rows = []
    for rate in rates:
        known = [(jct[(p, rate)], p) for p in policies if (p, rate) in jct]
        if known:
            best_v, best_p = min(known)
            load = loads.get(str(rate))
            rows.append([_rate_label(rate), num(load), md_cell(best_p),
                         f"{best_v:.1f} s"])
    out += [table(["arrival rate", "offered load", "best policy", "mean JCT"], rows, "lrlr"), ""]
    for key, title, _ in FIGURES:
        policies, rates, means = means_over_seeds(results, key)
        out += [f"## {title} (s, mean over seeds)", ""]
        header = ["policy"] + [_rate_label(r) for r in rates]
        body = [[md_cell(p)] + [f"{means[(p, r)]:.1f}" if (p, r) in means else "–" for r in rates]
                for p in policies]
        out += [table(header, body, "l" + "r" * len(rates)), ""]
        if len(rates) > 1:
            chart = lines_chart(f"{title} by arrival rate", [_rate_label(r) for r in rates],
                                [[means.get((p, r)) for r in rates] for p in policies], "seconds")
            if chart:
                out += [chart, "", "Lines, in order: " + ", ".join(md_text(p) for p in policies)
                        + ".", ""]
    return "\n".join(out)
