"""The machine profile and the plan as tables: a Rich screen and Markdown, from the same rows.

`machine_sections(profile)` turns a gputop-dl.machine/1 dict into titled tables; `plan_rows`
turns a `sched.fit.FitPlan` into the plan's table. `print_*` render them with Rich (untrusted
text as `Text`), `*_markdown` as GitHub tables. Unknown figures are an en dash.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gputop_dl.text.fmt import DASH, rate, size
from gputop_dl.text.markdown import md_cell, md_text, table
from gputop_dl.text.safe import clean

if TYPE_CHECKING:
    from gputop_dl.sched.fit import FitPlan

Section = tuple[str, list[str], list[list[str]]]


def _gbs(bps: float | None) -> str:
    return DASH if bps is None else f"{bps / 1e9:.1f} GB/s"


def _link(gen: int | None, width: int | None) -> str:
    return DASH if gen is None or width is None else f"gen{gen} x{width}"


def _copies(g: dict[str, Any]) -> list[list[str]]:
    rows = []
    for c in g.get("copies") or ():
        if c.get("error"):
            rows.append([f"GPU {g['index']} ({c.get('from')})", "failed: " + str(c["error"]),
                         "", "", "", "", ""])
            continue
        rows.append([f"GPU {g['index']} ({c.get('from')} CPUs {c.get('cpus') or DASH})",
                     _gbs(c.get("h2d_pinned_bps")), _gbs(c.get("d2h_pinned_bps")),
                     _gbs(c.get("h2d_pageable_bps")), _gbs(c.get("d2h_pageable_bps")),
                     _gbs(c.get("d2d_peer_bps")) + (f" (→ GPU {c['peer']})" if "peer" in c else ""),
                     _gbs(g.get("link_peak_bps"))])
    return rows


def machine_sections(p: dict[str, Any]) -> list[Section]:
    c, m = p.get("cpus") or {}, p.get("memory") or {}
    cp = m.get("copy") or {}
    quota = DASH if c.get("quota_cpus") is None else f"{c['quota_cpus']:g} CPUs ({c.get('quota_source')})"
    numa = "; ".join(f"node {n['node']}: CPUs {n['cpus']}, {size(n.get('mem_total'))}"
                     for n in c.get("numa") or ()) or DASH
    out: list[Section] = [("CPU and memory", ["", "value"], [
        ["CPU model", str(c.get("model") or DASH)],
        ["cores / threads", f"{c.get('cores') or DASH} / {c.get('threads') or DASH}"],
        ["usable by jobs", f"{c.get('usable_cpus', 0):g} (CPUs {c.get('allowed') or DASH}; quota {quota})"],
        ["NUMA", numa],
        ["memory total / available", f"{size(m.get('total'))} / {size(m.get('available'))}"],
        ["memory copy, 1 process", f"{_gbs(cp.get('single_bps'))} (memcpy {cp.get('buffer_mib', DASH)} MiB, "
         f"{cp.get('seconds', DASH)} s)"],
        ["memory copy, all CPUs", f"{_gbs(cp.get('all_bps'))} ({cp.get('procs', DASH)} processes at once)"],
    ])]
    rows = []
    for s in p.get("storage") or ():
        dev = s.get("name") or s.get("source") or DASH
        if s.get("rotational") is not None:
            dev += " (rotational)" if s["rotational"] else " (SSD)"
        bypass = {True: "yes (O_DIRECT)", False: "no", None: DASH}[s.get("page_cache_bypassed")]
        rows.append([", ".join(s.get("paths") or ()), f"{dev}, {s.get('fstype') or DASH} on {s.get('mount') or DASH}",
                     rate(s.get("seq_bps")), rate(s.get("rand_bps")),
                     DASH if s.get("rand_iops") is None else f"{s['rand_iops']:.0f}", bypass])
    out.append(("Storage (128 KiB reads)", ["path", "device, filesystem", "sequential", "random",
                                             "random IOPS", "page cache bypassed"], rows))
    gpus = p.get("gpus") or ()
    if gpus:
        out.append(("GPUs", ["GPU", "model", "memory", "PCIe now", "PCIe max", "link peak (per direction)",
                             "NUMA node", "near CPUs", "in use by"], [
            [str(g["index"]), str(g.get("name") or DASH), size(g.get("mem_total")),
             _link(g.get("link_gen"), g.get("link_width")),
             _link(g.get("link_gen_max"), g.get("link_width_max")),
             f"{_gbs(g.get('link_peak_bps'))} (max {_gbs(g.get('link_peak_max_bps'))})",
             DASH if g.get("numa_node") is None else str(g["numa_node"]),
             str(g.get("cpu_affinity") or DASH),
             ", ".join(f"PID {x}" for x in g.get("busy_pids") or ()) or "nothing"] for g in gpus]))
        copies = [r for g in gpus for r in _copies(g)]
        if copies:
            out.append(("GPU copies, measured (median of 10 × 256 MiB)",
                        ["GPU (from)", "H2D pinned", "D2H pinned", "H2D pageable", "D2H pageable",
                         "GPU→GPU", "link peak"], copies))
    return out


def _when(p: dict[str, Any]) -> str:
    t = p.get("created")
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if isinstance(t, (int, float)) else DASH
    return (f"{p.get('host') or DASH} · {stamp} · "
            f"{'quick (short measurements, no GPU copies)' if p.get('quick') else 'full'} · "
            f"took {p.get('took_s', DASH)} s")


def print_machine(con: Console, p: dict[str, Any]) -> None:
    con.print(Text(f"gputop-dl machine · {clean(_when(p))}", style="bold"))
    for title, header, rows in machine_sections(p):
        t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for h in header:
            t.add_column(h)
        for r in rows:
            t.add_row(*(Text(clean(x)) for x in r))
        if not rows:
            t.add_row(*(["nothing measured"] + [""] * (len(header) - 1)))
        con.print(t)
    for n in p.get("notes") or ():
        con.print(Text("note: " + clean(n)))


def machine_markdown(p: dict[str, Any]) -> str:
    parts = ["# Machine profile", "", md_text(_when(p)), ""]
    for title, header, rows in machine_sections(p):
        parts += [f"## {title}", "", table([md_cell(h) for h in header],
                                           [[md_cell(x) for x in r] for r in rows]), ""]
    notes = p.get("notes") or ()
    if notes:
        parts += ["## Notes", ""] + [f"- {md_text(n)}" for n in notes] + [""]
    m = (p.get("memory") or {}).get("copy") or {}
    if m.get("method"):
        parts += [f"Memory copy: {md_text(m['method'])}. Storage: one sequential pass and random "
                  "128 KiB reads of a test file (or an existing file), O\\_DIRECT where the "
                  "filesystem allows.", ""]
    return "\n".join(parts)


def _amount(unit: str, v: float | None) -> str:
    if v is None:
        return DASH
    if unit == "cores":
        return f"{v:.2f}"
    return rate(v) if unit == "bytes/s" else size(v)


def plan_rows(plan: FitPlan) -> tuple[list[str], list[list[str]]]:
    header = ["resource", "this box", "all jobs need", *(j.name for j in plan.jobs), "jobs that fit"]
    rows = []
    for r in plan.resources:
        per = [_amount(r.unit, j.demand.get(r.key)) for j in plan.jobs]
        rows.append([r.label, f"{_amount(r.unit, r.capacity)} ({r.capacity_source})"
                     if r.capacity is not None else f"{DASH} ({r.capacity_source})",
                     _amount(r.unit, r.total), *per,
                     DASH if r.fit is None else f"{r.fit} of {len(plan.jobs)}"])
    return header, rows


def plan_lines(plan: FitPlan) -> list[str]:
    lines = [f"{j.name}: {j.source}" for j in plan.jobs]
    if plan.binding is None:
        lines.append(f"all {plan.asked} jobs fit at once (every known resource's summed solo "
                     "demand is within what this box has)")
    else:
        label = next(r.label for r in plan.resources if r.key == plan.binding)
        alone = " (one alone needs more than this box has)" if plan.fit == 0 else ""
        lines.append(f"fit at once: {plan.fit} of {plan.asked} jobs at solo speed{alone}; the "
                     f"{label} run out first (binding resource)")
    return lines


def plan_json(path: str, where: str, plan: FitPlan) -> dict[str, Any]:
    """The `gputop-dl.plan/1` document of `plan FILE --json` (gputop_dl/schemas/plan.json)."""
    return {"schema": "gputop-dl.plan/1", "file": path, "profile": where, "fit": plan.fit,
            "asked": plan.asked, "binding": plan.binding,
            "jobs": [{"name": j.name, "demand": dict(j.demand), "source": j.source,
                      "gpus": list(j.gpus)} for j in plan.jobs],
            "resources": [dict(r.__dict__) for r in plan.resources], "lines": plan_lines(plan)}


def print_plan(con: Console, title: str, plan: FitPlan) -> None:
    header, rows = plan_rows(plan)
    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for h in header:
        t.add_column(clean(h))
    for r in rows:
        t.add_row(*(Text(clean(x)) for x in r))
    con.print(t)
    for line in plan_lines(plan):
        con.print(Text(clean(line)))
