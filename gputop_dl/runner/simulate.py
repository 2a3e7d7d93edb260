"""`gputop-dl simulate`: the scheduling policies replayed on a trace or a queue's workload file, calibrated."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from gputop_dl.errors import UsageError
from gputop_dl.record.store import Store
from gputop_dl.text.console import console
from gputop_dl.text.fmt import num

if TYPE_CHECKING:
    from gputop_dl.config.trace import Trace


def calibrated_alpha(session: str | None) -> tuple[float, str]:
    """`simulate --calibrate [SESSION]`: the CPU interference alpha of a recorded co-run (the
    newest launch whose verdict has slowdowns and a CPU need above the cores, or `session`)."""
    from gputop_dl.analyse.recorded.interference import cpu_alpha
    from gputop_dl.record.paths import default_db_path

    path = default_db_path(writable=False)
    if not os.path.exists(path):
        raise UsageError(f"--calibrate: no recorded sessions in {path}")
    store = Store(path, readonly=True)
    try:
        rows = [store.session(session)] if session else store.sessions()
        if session and rows[0] is None:
            raise UsageError(f"--calibrate {session}: no such session")
        for row in rows:
            if row is None:
                continue
            got = cpu_alpha(row.verdict)
            if got:
                return got[0], f"session {row.id}: {got[1]}"
    finally:
        store.close()
    raise UsageError("--calibrate: no recorded co-run has both measured slowdowns and a CPU need "
                     "above the cores (run a launch with baseline = \"measure\" first)"
                     + (f"; session {session} has not" if session else ""))


def _recorded_verdicts(session: str | None = None) -> list[tuple[str, dict[str, Any] | None]]:
    """(session id, verdict) of the recorded sessions, newest first (only `session` if given);
    [] when this machine has recorded nothing."""
    from gputop_dl.record.paths import default_db_path

    path = default_db_path(writable=False)
    if not os.path.exists(path):
        return []
    store = Store(path, readonly=True)
    try:
        rows = [store.session(session)] if session else store.sessions()
        return [(r.id, r.verdict) for r in rows if r is not None]
    finally:
        store.close()


def calibration(trace: Trace, explicit: str | bool | None) -> tuple[Trace, dict[str, str]]:
    """The trace with the interference figures this machine has recorded, and per figure where
    it came from. `explicit` True or SESSION (`--calibrate`): the CPU coefficient must come from
    a recording (UsageError otherwise); False (`--no-calibrate`): the trace's figures; None:
    recorded ones where there are, else the trace's."""
    from gputop_dl.analyse.recorded.interference import gpu_share, newest
    from gputop_dl.config.trace import with_overrides

    why = "--no-calibrate" if explicit is False else "no recorded co-run on this machine gave one"
    where = {"cpu_interference": f"{trace.cpu_interference:g}, the file's or the default ({why})",
             "gpu_share": f"{trace.gpu_share:g}, the file's or the default ({why})"}
    if explicit is False:
        return trace, where
    if explicit:
        alpha, how = calibrated_alpha(explicit if isinstance(explicit, str) else None)
        trace = with_overrides(trace, cpu_interference=alpha)
        where["cpu_interference"] = f"{alpha:g}, from {how}"
        verdicts = _recorded_verdicts(explicit if isinstance(explicit, str) else None)
    else:
        from gputop_dl.analyse.recorded.interference import cpu_alpha

        verdicts = _recorded_verdicts()
        got = newest(verdicts, cpu_alpha)
        if got:
            trace = with_overrides(trace, cpu_interference=got[0])
            where["cpu_interference"] = f"{got[0]:g}, from session {got[1]}: {got[2]}"
    got = newest(verdicts, gpu_share)
    if got:
        trace = with_overrides(trace, gpu_share=got[0])
        where["gpu_share"] = f"{got[0]:g}, from session {got[1]}: {got[2]}"
    return trace, where


def load_any(path: str) -> tuple[Trace, dict[str, str]]:
    """A trace, or the workload file `queue` runs as one (`runner.workload_trace`): the Trace
    and, for a workload file, where each job's duration and CPU need came from."""
    from gputop_dl.runner.workload_trace import file_kind, workload_trace
    from gputop_dl.config.trace import load_trace

    if file_kind(path) == "trace":
        return load_trace(path), {}
    from gputop_dl.collect.environment import environment
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.record.paths import default_db_path

    nvml = Nvml()
    db = default_db_path(writable=False)
    store = Store(db, readonly=True) if os.path.exists(db) else None
    try:
        return workload_trace(path, nvml, store.baseline if store else None,
                              dict(environment(nvml)))
    finally:
        if store is not None:
            store.close()


def run_simulate(path: str, *, policies: list[str] | None = None, rates: list[float] | None = None,
                 seeds: int | None = None, jobs: int | None = None, as_json: bool = False,
                 out: str | None = None, calibrate: str | bool | None = None) -> int:
    """`gputop-dl simulate FILE.toml` (a trace, or the workload file `queue` runs): every policy
    at every arrival rate and seed (or the listed arrivals once, when the file lists them and no
    rates are given); a table or JSON on stdout, the Markdown report to `out`. Interference
    figures are calibrated from this machine's recordings unless `calibrate` is False; where
    each figure came from is said (stderr with `as_json`, else the notes under the table).
    Raises ConfigError for a bad file."""
    from gputop_dl.present.report.simulation import render_simulation_markdown, simulation_json
    from gputop_dl.sched.policies import Policy
    from gputop_dl.sched.simulate import simulate, summarise, sweep
    from gputop_dl.text.markdown import write_atomic
    from gputop_dl.config.trace import with_overrides

    loaded, sources = load_any(path)
    trace = with_overrides(loaded, policies=tuple(policies) if policies else None,
                           rates=tuple(rates) if rates else None, seeds=seeds, jobs=jobs)
    trace, where = calibration(trace, calibrate)
    if as_json:  # the table's notes say it otherwise
        for key, how in where.items():
            print(f"{key} = {how}", file=sys.stderr)
        for name, how in sources.items():
            print(f"job {name}: {how}", file=sys.stderr)
    pols = [Policy(p, ageing_s=trace.ageing_s, v=trace.v) for p in trace.policies]
    replay = trace.listed and not rates
    if replay:
        results = [summarise(p.name, simulate(p, trace.listed_jobs(), trace.machine,
                                              cpu_aware=trace.cpu_aware,
                                              cpu_alpha=trace.cpu_interference,
                                              gpu_share=trace.gpu_share))
                   for p in pols]
    else:
        results = sweep(pols, trace.kinds, trace.machine, trace.rates, range(1, trace.seeds + 1),
                        trace.jobs, cpu_aware=trace.cpu_aware, cpu_alpha=trace.cpu_interference,
                        gpu_share=trace.gpu_share)
    rows = [r.to_json() for r in results]
    setup = simulation_setup(trace, replay, where, sources)
    if as_json:
        print(json.dumps(simulation_json(setup, rows), indent=2))
    else:
        print_simulation(setup, rows)
    if out:
        print(f"wrote {write_atomic(out, render_simulation_markdown(setup, rows))}",
              file=sys.stderr if as_json else sys.stdout)
    return 0


def simulation_setup(trace: Trace, replay: bool, where: dict[str, str] | None = None,
                     sources: dict[str, str] | None = None) -> dict[str, Any]:
    """What the simulation report says about its trace, machine and runs (JSON-friendly)."""
    m = trace.machine
    runs = (f"the {len(trace.kinds)} listed arrivals, once" if replay else
            f"{trace.jobs} Poisson arrivals x {trace.seeds} seed{'s' if trace.seeds > 1 else ''} "
            "per rate, kinds by share")
    place = f"{m.gpus} {m.unit}{'s' if m.gpus != 1 else ''}" + (
        f" x {m.jobs_per_gpu} jobs" if m.jobs_per_gpu > 1 else "")
    lines = [("trace" if not sources else "workload file", trace.path),
             ("machine", f"{place}, {m.cpus:g} cores" + (f", {m.gpu_mem / 1024**3:g} GiB per GPU" if m.gpu_mem else "")),
             ("job kinds", ", ".join(k.job.name for k in trace.kinds)), ("runs", runs),
             ("admission", "CPU-aware" if trace.cpu_aware else "GPUs only (cpu_aware = false)"),
             ("interference", f"CPU overcommit alpha {trace.cpu_interference:g}; shared GPUs time-slice"
                              f" x {trace.gpu_share:g}"),
             *((k, how) for k, how in (where or {}).items()),
             *((f"job {n}", how) for n, how in (sources or {}).items()),
             ("policy settings", f"priority ageing_s {trace.ageing_s:g}, lyapunov v {trace.v:g}")]
    return {"name": trace.name, "path": trace.path, "lines": lines,
            "machine": {"gpus": m.gpus, "cpus": m.cpus, "jobs_per_gpu": m.jobs_per_gpu,
                        "gpu_mem": m.gpu_mem},
            "cpu_aware": trace.cpu_aware, "cpu_interference": trace.cpu_interference,
            "gpu_share": trace.gpu_share, "calibration": dict(where or {}), "job_sources": dict(sources or {}),
            "load": {} if replay else {str(r): trace.offered_load(r) for r in trace.rates}}


def print_simulation(setup: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """The results as a console table: per rate and policy, the means over seeds."""
    from rich.table import Table

    from gputop_dl.present.report.simulation import FIGURES, means_over_seeds

    t = Table(title=f"{setup['name']}: seconds, mean over seeds", title_justify="left")
    for col in ("rate/s", "load", "policy", *(short for _, _, short in FIGURES)):
        t.add_column(col, justify="left" if col == "policy" else "right")
    means = {key: means_over_seeds(rows, key) for key, _, _ in FIGURES}
    policies, rates, _ = means_over_seeds(rows, "mean_jct_s")
    for rate in rates:
        load = setup["load"].get(str(rate))
        for p in policies:
            t.add_row("listed" if rate is None else f"{rate:g}", num(load), p,
                      *(f"{means[k][2][(p, rate)]:.1f}" if (p, rate) in means[k][2] else "–"
                        for k, _, _ in FIGURES))
    console().print(t)
    for key, line in setup["lines"]:
        print(f"{key}: {line}")
