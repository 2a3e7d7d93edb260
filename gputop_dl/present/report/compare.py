"""`gputop-dl compare A B`: two recorded sessions side by side ("did my fix work?").

    doc = compare_sessions("20261124-1015", "20261124-1130")   # JSON: gputop-dl.comparison/1
    console.print(comparison_table(doc))

Per job (matched by name): step time, samples/s, data wait, CPU wait, slowdown, median epoch
time, CPU cores, GPU joules per sample and the step phases where they were recorded, in A and in
B, and the change (B / A for times and rates, B − A in points for shares); the two sessions' verdicts. A figure a session did
not record is null (shown "–"), never 0. Jobs of only one session are listed with the other side
null; sessions with no job in common say so and are shown anyway. Contract: docs/compare.md.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TYPE_CHECKING

from gputop_dl.analyse.recorded.energy_phases import main_phase
from gputop_dl.analyse.stats.phases import PARTS
from gputop_dl.analyse.recorded.summary import JobResult, summarize
from gputop_dl.present.report.errors import ExportUsageError
from gputop_dl.present.report.export import open_store, resolve_session
from gputop_dl.record.store import Store
from gputop_dl.text.fmt import DASH, joules, num, pct, rate, secs

if TYPE_CHECKING:
    from rich.console import Group, RenderableType
    from rich.table import Table

COMPARISON_SCHEMA = "gputop-dl.comparison/1"
# figure -> how B is compared with A: "ratio" (B / A) or "points" (B − A, shares 0..1)
FIGURES = (("step_time_s", "ratio"), ("samples_per_s", "ratio"), ("stall_fraction", "points"),
           ("cpu_wait_fraction", "points"), ("io_read_bytes_per_s", "ratio"),
           ("io_wait_fraction", "points"), ("memory_wait_fraction", "points"),
           ("slowdown", "ratio"), ("median_epoch_s", "ratio"),
           ("cpu_cores", "ratio"), ("energy_per_sample_j", "ratio"))


def _waits(store: Store, sid: str, name: str) -> dict[str, Any]:
    """A job's mean CPU wait and disk figures over its recorded samples (None: not recorded)."""
    cw = store.job_cpu_wait_means(sid, name)
    disk = store.job_disk_means(sid, name)
    mem = store.job_memory_means(sid, name)
    return {"cpu_wait_fraction": None if cw is None else round(cw[0], 4),
            "io_read_bytes_per_s": None if disk is None or disk[0] is None else round(disk[0]),
            "io_wait_fraction": None if disk is None or disk[2] is None else round(disk[2], 4),
            "memory_wait_fraction": None if mem is None or mem[2] is None else round(mem[2], 4)}


def _figures(r: JobResult, waits: dict[str, Any]) -> dict[str, Any]:
    phases = getattr(r, "phases", None)  # recorded by sessions with step phases
    if phases is not None and hasattr(phases, "to_json"):
        phases = phases.to_json()
    return {"step_time_s": r.step_time_s, "samples_per_s": r.samples_per_s,
            "stall_fraction": r.stall_fraction, **waits,
            "slowdown": r.slowdown, "median_epoch_s": r.median_epoch_s, "cpu_cores": r.cpu_cores,
            "epochs": len(r.epochs), "steps": r.steps, "status": r.status,
            "launched": r.launched, "phases": phases or None, **_energy(r)}


def _figure(fmt: Callable[[float | None], str], key: str, side: dict[str, Any]) -> str:
    """One side's figure as shown; J/sample with "~" where its joules split a shared GPU."""
    if key == "energy_per_sample_j":
        return joules(side.get(key), side.get("energy_estimate"))
    return fmt(side.get(key))


def _energy(r: JobResult) -> dict[str, Any]:
    """The job's GPU joules per sample in its co-run (else its one run) and whether that is an
    estimate (a shared GPU split by time share); null: not recorded (docs/energy.md)."""
    p = main_phase(r.energy)
    spj = p["samples_per_joule"] if p else None
    return {"energy_per_sample_j": round(1.0 / spj, 6) if spj else None,
            "energy_estimate": p["estimate"] if p else None}


def _change(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, how in FIGURES:
        x = a.get(key) if a else None
        y = b.get(key) if b else None
        if x is None or y is None:
            out[key] = None
        elif how == "ratio":
            out[key] = y / x if x else None
        else:
            out[key] = y - x
    return out


def _config_changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The job's recorded settings (the workload, redacted) that differ: key -> [A, B]; None
    where either session recorded none (a found job)."""
    if not a or not b:
        return None
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b))
            if k != "name" and a.get(k) != b.get(k)}


def _what_changed(jobs: list[dict[str, Any]]) -> str | None:
    """One line per distinct change of settings, with the jobs it applies to; a line saying the
    settings are the same; or None where no job in both sessions has recorded settings."""
    known = [j for j in jobs if j.get("config_changes") is not None]
    if not known:
        return None
    groups: dict[str, list[str]] = {}
    for j in known:
        for k, (x, y) in j["config_changes"].items():
            groups.setdefault(f"{k}: {_setting(x)} → {_setting(y)}", []).append(j["name"])
    if not groups:
        return "settings: the same in A and B for " + ", ".join(j["name"] for j in known)
    return "\n".join(f"changed: {change} ({', '.join(names)})" for change, names in groups.items())


def _setting(v: object) -> str:
    return DASH if v is None else str(v)


def _session(store: Store, sid: str) -> dict[str, Any]:
    row = store.session(sid)
    assert row is not None  # resolved by the caller
    v = row.verdict or None
    ended = row.ended if row.ended is not None else None
    return {"id": sid, "name": row.name, "file": row.file, "started": row.started,
            "duration_s": None if ended is None else max(0.0, ended - row.started),
            "state": row.state,
            "verdict": None if not v else {"kind": v.get("kind"), "title": v.get("title"),
                                           "confidence": v.get("confidence"),
                                           "reason": v.get("reason")}}


def compare_sessions(a: str, b: str, store_path: str | None = None) -> dict[str, Any]:
    """The comparison document; ExportUsageError (one line, exit 2) for an unknown or ambiguous
    session or the same session twice."""
    store = open_store(store_path)
    try:
        sa, sb = resolve_session(store, a), resolve_session(store, b)
        if sa == sb:
            raise ExportUsageError(f"compare: {a!r} and {b!r} are the same session ({sa}): "
                                   "give two different sessions")
        ja = {r.name: r for r in summarize(store, sa).jobs}
        jb = {r.name: r for r in summarize(store, sb).jobs}
        docs = [_session(store, sa), _session(store, sb)]
        ca = {j["name"]: j["config"] for j in store.jobs(sa)}
        cb = {j["name"]: j["config"] for j in store.jobs(sb)}
        wa = {n: _waits(store, sa, n) for n in ja}
        wb = {n: _waits(store, sb, n) for n in jb}
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a damaged page found while reading (as export)
        raise ExportUsageError(f"{store.path}: cannot read the session database ({exc})") from None
    finally:
        store.close()
    names = list(ja) + [n for n in jb if n not in ja]
    jobs = []
    for n in names:
        fa = _figures(ja[n], wa[n]) if n in ja else None
        fb = _figures(jb[n], wb[n]) if n in jb else None
        jobs.append({"name": n, "a": fa, "b": fb, "change": _change(fa, fb),
                     "config_changes": _config_changes(ca.get(n), cb.get(n))})
    common = sum(1 for n in names if n in ja and n in jb)
    return {"schema": COMPARISON_SCHEMA, "a": docs[0], "b": docs[1], "jobs": jobs,
            "common_jobs": common,
            "note": None if common else "the two sessions have no job in common (by name): "
                                        "each is shown on its own"}


def _phase_table(jobs: list[dict[str, Any]]) -> Table:
    """Mean seconds per step of each phase, A → B and B / A, for the jobs with phases in A or B."""
    from rich.table import Table
    from rich.text import Text

    from gputop_dl.text.safe import clean

    def phase(side: dict[str, Any] | None, k: str) -> float | None:
        v = ((side or {}).get("phases") or {}).get(f"{k}_s")
        return v if isinstance(v, (int, float)) else None

    keys = [k for k in PARTS if any(phase(j[s], k) is not None for j in jobs for s in "ab")]
    t = Table(header_style="bold", title="step phases, mean per step: A → B (change)",
              title_justify="left")
    t.add_column("job", no_wrap=True)
    for k in keys:
        t.add_column(k, justify="right", no_wrap=True)
    for j in jobs:
        cells = []
        for k in keys:
            x, y = phase(j["a"], k), phase(j["b"], k)
            change = DASH if x is None or y is None or x <= 0 else f"×{y / x:.2f}"
            cells.append(f"{_phase_secs(x)} → {_phase_secs(y)}\n{change}")
        t.add_row(Text(clean(j["name"])), *cells)
    return t


def _phase_secs(v: float | None) -> str:
    """A phase's mean: under 1 ms in µs, under 10 ms with a decimal (a copy to the GPU on the CPU
    is a few µs)."""
    if v is None:
        return DASH
    if v < 0.001:
        return f"{v * 1e6:.0f} µs"
    return f"{v * 1000:.1f} ms" if v < 0.01 else secs(v)


def _change_text(key: str, v: float | None) -> str:
    if v is None:
        return DASH
    if dict(FIGURES)[key] == "points":
        return f"{v * 100:+.0f} pts"
    return f"×{v:.2f}"


def comparison_table(doc: dict[str, Any]) -> Group:
    """A Rich renderable: the two verdicts, then per job the figures of A and B and the change."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from gputop_dl.text.safe import clean

    def verdict(s: dict[str, Any]) -> str:
        v = s["verdict"]
        if not v:
            return "no verdict"
        conf = "" if v.get("confidence") is None else f" ({v['confidence']:.0%})"
        return f"{v.get('title') or v.get('kind')}{conf}"

    head = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("", "session", "name", "state", "verdict"):
        head.add_column(col, no_wrap=col != "verdict")
    for label, s in (("A", doc["a"]), ("B", doc["b"])):
        head.add_row(label, Text(clean(s["id"])), Text(clean(s["name"] or DASH)),
                     Text(s["state"] or DASH), Text(clean(verdict(s))))
    t = Table(header_style="bold", title="per job: A → B (change)", title_justify="left")
    t.add_column("job", no_wrap=True)
    labels = {"step_time_s": "step", "samples_per_s": "samples/s", "stall_fraction": "data-wait",
              "cpu_wait_fraction": "CPU wait", "io_read_bytes_per_s": "disk read",
              "io_wait_fraction": "I/O wait", "memory_wait_fraction": "re-read wait",
              "slowdown": "slowdown", "median_epoch_s": "epoch",
              "cpu_cores": "CPU cores", "energy_per_sample_j": "J/sample"}
    fmts: dict[str, Callable[[float | None], str]] = {"step_time_s": secs, "samples_per_s": lambda v: num(v, ".1f"), "stall_fraction": pct,
            "cpu_wait_fraction": pct, "io_read_bytes_per_s": rate, "io_wait_fraction": pct,
            "memory_wait_fraction": pct, "slowdown": lambda v: num(v, ".2f", "×"),
            "median_epoch_s": secs, "cpu_cores": lambda v: num(v, ".2f"),
            "energy_per_sample_j": joules}
    shown = [k for k, _ in FIGURES
             if any((j["a"] or {}).get(k) is not None or (j["b"] or {}).get(k) is not None
                    for j in doc["jobs"])]
    for k in shown:
        t.add_column(labels[k], justify="right", no_wrap=True)
    for j in doc["jobs"]:
        cells = []
        for k in shown:
            x = _figure(fmts[k], k, j["a"]) if j["a"] else "not in A"
            y = _figure(fmts[k], k, j["b"]) if j["b"] else "not in B"
            cells.append(f"{x} → {y}\n{_change_text(k, j['change'][k])}")
        t.add_row(Text(clean(j["name"])), *cells)
    phased = [j for j in doc["jobs"] if (j["a"] or {}).get("phases") or (j["b"] or {}).get("phases")]
    parts: list[RenderableType] = [head]
    changed = _what_changed(doc["jobs"])
    if changed:
        parts.append(Text(clean(changed)))
    parts.append(t)
    if not doc["jobs"]:
        parts.append(Text("neither session has a job", style="yellow"))
    if doc["note"]:
        parts.append(Text(doc["note"], style="yellow"))
    if phased:
        parts.append(_phase_table(phased))
    if not shown and doc["jobs"]:
        parts.append(Text("no step, data-wait, CPU-wait, slowdown or epoch figure was recorded in "
                          "either session", style="yellow"))
    return Group(*parts)
