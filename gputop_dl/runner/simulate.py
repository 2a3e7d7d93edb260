"""`gputop-dl simulate`: the scheduling policies replayed on a trace, and `--calibrate`."""

from __future__ import annotations

import json
import os
import sys

from gputop_dl.errors import UsageError
from gputop_dl.record.store import Store
from gputop_dl.text.console import console
from gputop_dl.text.fmt import num


def calibrated_alpha(session: str | None) -> tuple[float, str]:
    """`simulate --calibrate [SESSION]`: the CPU interference alpha of a recorded co-run (the
    newest launch whose verdict has slowdowns and a CPU need above the cores, or `session`)."""
    from gputop_dl.analyse.interference import cpu_alpha
    from gputop_dl.record.store import default_db_path

    path = default_db_path(writable=False)
    if not os.path.exists(path):
        raise UsageError(f"--calibrate: no recorded sessions in {path}")
    store = Store(path, readonly=True)
    try:
        rows = [store.session(session)] if session else store.sessions()
        if session and rows[0] is None:
            raise UsageError(f"--calibrate {session}: no such session")
        for row in rows:
            got = cpu_alpha(row.verdict) if row is not None else None
            if got:
                return got[0], f"session {row.id}: {got[1]}"
    finally:
        store.close()
    raise UsageError("--calibrate: no recorded co-run has both measured slowdowns and a CPU need "
                     "above the cores (run a launch with baseline = \"measure\" first)"
                     + (f"; session {session} has not" if session else ""))


def run_simulate(path: str, *, policies: list[str] | None = None, rates: list[float] | None = None,
                 seeds: int | None = None, jobs: int | None = None, as_json: bool = False,
                 out: str | None = None, calibrate: str | bool | None = None) -> int:
    """`gputop-dl simulate TRACE.toml`: every policy at every arrival rate and seed (or the
    listed arrivals once, when the trace lists them and no rates are given); a table or JSON
    on stdout, the Markdown report to `out`. Raises ConfigError for a bad trace."""
    from gputop_dl.present.report.simulation import render_simulation_markdown, simulation_json
    from gputop_dl.sched.policies import Policy
    from gputop_dl.sched.simulate import simulate, summarise, sweep
    from gputop_dl.text.markdown import write_atomic
    from gputop_dl.trace import load_trace, with_overrides

    trace = with_overrides(load_trace(path), policies=tuple(policies) if policies else None,
                           rates=tuple(rates) if rates else None, seeds=seeds, jobs=jobs)
    if calibrate:
        alpha, how = calibrated_alpha(calibrate if isinstance(calibrate, str) else None)
        trace = with_overrides(trace, cpu_interference=alpha)
        print(f"cpu_interference = {alpha:g}, from {how}", file=sys.stderr)
    pols = [Policy(p, ageing_s=trace.ageing_s, v=trace.v) for p in trace.policies]
    opts = dict(cpu_aware=trace.cpu_aware, cpu_alpha=trace.cpu_interference)
    replay = trace.listed and not rates
    if replay:
        results = [summarise(p.name, simulate(p, trace.listed_jobs(), trace.machine, **opts))
                   for p in pols]
    else:
        results = sweep(pols, trace.kinds, trace.machine, trace.rates, range(1, trace.seeds + 1),
                        trace.jobs, **opts)
    rows = [r.to_json() for r in results]
    setup = simulation_setup(trace, replay)
    if as_json:
        print(json.dumps(simulation_json(setup, rows), indent=2))
    else:
        print_simulation(setup, rows)
    if out:
        print(f"wrote {write_atomic(out, render_simulation_markdown(setup, rows))}",
              file=sys.stderr if as_json else sys.stdout)
    return 0


def simulation_setup(trace, replay: bool) -> dict:
    """What the simulation report says about its trace, machine and runs (JSON-friendly)."""
    m = trace.machine
    runs = (f"the {len(trace.kinds)} listed arrivals, once" if replay else
            f"{trace.jobs} Poisson arrivals x {trace.seeds} seed{'s' if trace.seeds > 1 else ''} "
            "per rate, kinds by share")
    place = f"{m.gpus} GPUs" + (f" x {m.jobs_per_gpu} jobs" if m.jobs_per_gpu > 1 else "")
    lines = [("trace", trace.path), ("machine", f"{place}, {m.cpus:g} cores"
                                     + (f", {m.gpu_mem / 1024**3:g} GiB per GPU" if m.gpu_mem else "")),
             ("job kinds", ", ".join(k.job.name for k in trace.kinds)), ("runs", runs),
             ("admission", "CPU-aware" if trace.cpu_aware else "GPUs only (cpu_aware = false)"),
             ("interference", f"CPU overcommit alpha {trace.cpu_interference:g}; shared GPUs time-slice"),
             ("policy settings", f"priority ageing_s {trace.ageing_s:g}, lyapunov v {trace.v:g}")]
    return {"name": trace.name, "path": trace.path, "lines": lines,
            "machine": {"gpus": m.gpus, "cpus": m.cpus, "jobs_per_gpu": m.jobs_per_gpu,
                        "gpu_mem": m.gpu_mem},
            "cpu_aware": trace.cpu_aware, "cpu_interference": trace.cpu_interference,
            "load": {} if replay else {str(r): trace.offered_load(r) for r in trace.rates}}


def print_simulation(setup: dict, rows: list[dict]) -> None:
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
