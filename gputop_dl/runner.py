"""Wiring: how a monitor, a launch (TUI or headless), `--once`, an export and a listing start and end.

The only module that builds engines. It loads a workload file (`open_spec`, with the CPU
fallback), builds the engine a mode needs (`monitor_engine`, `launch_engine`: sampler, plan,
recorder and settings as constructor arguments), hands it to a presenter (the Textual TUI or
the headless console), and prints the one post-run summary (`print_summary`). `cli.py` parses
arguments and calls one `run_*` function; presenters only render what they are given.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from gputop_dl.collect.found import FoundJobs
from gputop_dl.collect.machine import MachineSampler, snapshot_once
from gputop_dl.collect.nvml import Nvml
from gputop_dl.collect.stall import STALL_BUDGET
from gputop_dl.config import load_session
from gputop_dl.engine import Engine, LaunchPlan, MonitorPlan, Recorder
from gputop_dl.engine.diagnose_plan import DiagnosePlan
from gputop_dl.errors import UsageError
from gputop_dl.collect.extras import require_train
from gputop_dl.record.store import Store
from gputop_dl.text.console import console
from gputop_dl.text.safe import clean, text
from gputop_dl.workload import SessionSpec

if TYPE_CHECKING:
    from gputop_dl.present.prometheus import MetricsServer

JOIN_TIMEOUT_S = 60.0  # how long quitting waits for an engine to stop its jobs


# --- building engines ----------------------------------------------------------------------------

def open_spec(path: str, nvml: Nvml, only: list[str] | None = None,
              baseline: str | None = None) -> SessionSpec:
    """Load a workload file for this machine: `only` some workloads, the baseline overridden,
    and without CUDA the file's cpu_fallback applied and the reason kept (raises ConfigError)."""
    spec = load_session(path, gpu_count=nvml.device_count(), only=only)
    builtin = [w.name for w in spec.workloads if not w.is_command]
    if builtin:
        require_train(f"{path}: the built-in trainer (workload {builtin[0]!r})")
    if baseline:
        spec = dataclasses.replace(spec, baseline=baseline)
    if not spec.cuda:
        spec = dataclasses.replace(spec, cpu_fallback_reason=nvml.status_detail)
    return spec


def monitor_engine(nvml: Nvml, *, interval: float = 1.0, stall_budget: float = STALL_BUDGET,
                   record: bool = True, store_path: str | None = None,
                   found: FoundJobs | None = None, command: str = "gputop-dl") -> Engine:
    """`gputop-dl`: watch this machine; py-spy may use `stall_budget` of one core."""
    plan = MonitorPlan(command)
    found = found or FoundJobs(stall=plan.stall_found, stall_budget=stall_budget)
    return Engine(plan, sampler=MachineSampler(nvml, found=found),
                  recorder=Recorder(store_path, enabled=record), interval=interval)


def launch_engine(spec: SessionSpec, nvml: Nvml, *, command: str = "",
                  store_path: str | None = None, record: bool = True) -> Engine:
    """`gputop-dl launch`: the workloads of `spec`; jobs found running are shown, never
    py-spied (the co-run being measured is not disturbed) and not recorded."""
    plan = LaunchPlan(spec, command)
    return Engine(plan, sampler=MachineSampler(nvml, found=FoundJobs(stall=plan.stall_found)),
                  recorder=Recorder(store_path, enabled=record), interval=spec.interval)


def queue_engine(spec: SessionSpec, nvml: Nvml, *, policy: str | None = None, command: str = "",
                 store_path: str | None = None, record: bool = True) -> Engine:
    """`gputop-dl queue`: the workloads of `spec` as jobs arriving over time, started by a
    scheduling policy (`policy` overrides the file's) on the GPUs, or on `slots` without CUDA."""
    from gputop_dl.config import usable_cpus
    from gputop_dl.engine.queue_plan import QueuePlan
    from gputop_dl.sched.model import Machine
    from gputop_dl.sched.policies import Policy

    cpus = usable_cpus()
    if spec.cuda:
        machine = Machine(gpus=nvml.device_count(), cpus=float(cpus), unit="GPU")
    else:
        machine = Machine(gpus=spec.slots or cpus, cpus=float(cpus), unit="slot")
    plan = QueuePlan(spec, None, Policy(policy or spec.policy, ageing_s=spec.ageing_s, v=spec.v),
                     machine, cpu_aware=spec.cpu_aware, command=command)
    return Engine(plan, sampler=MachineSampler(nvml, found=FoundJobs(stall=False)),
                  recorder=Recorder(store_path, enabled=record), interval=spec.interval)


def diagnose_engine(nvml: Nvml, *, seconds: float = 30.0, probe: bool = True,
                    interval: float = 1.0, store_path: str | None = None,
                    record: bool = True, pids: set[int] | None = None) -> Engine:
    """`gputop-dl diagnose`: the found jobs observed, py-spied together and probed alone."""
    return Engine(DiagnosePlan(seconds, probe, command="gputop-dl " + " ".join(sys.argv[1:]),
                               pids=pids),
                  sampler=MachineSampler(nvml, found=FoundJobs(stall=False)),
                  recorder=Recorder(store_path, enabled=record), interval=interval)


class Launcher:
    """What the monitor's launcher screen calls: load a workload file, start an engine for it."""

    def __init__(self, nvml: Nvml):
        self.nvml = nvml

    def load(self, path: str, only: list[str] | None = None) -> SessionSpec:
        return open_spec(path, self.nvml, only=only)

    def start(self, spec: SessionSpec) -> Engine:
        return launch_engine(spec, Nvml(), command=f"gputop-dl (monitor launcher) {spec.path}")


def run_file(path: str, *, nvml: Nvml | None = None, store_path: str | None = None,
             **overrides) -> Engine:
    """Load a workload file, run the whole session without a presenter, return the engine
    (tests and benchmarks)."""
    nvml = nvml or Nvml()
    spec = dataclasses.replace(open_spec(path, nvml), **overrides)
    engine = launch_engine(spec, nvml, store_path=store_path, command=f"run_file {path}")
    engine.start()
    engine.join()
    return engine


def check_store(path: str | None = None) -> None:
    """Before an engine starts: the data directory and the database can be written (a damaged
    database is moved aside here, with its line); else StoreError, one line, exit 2."""
    Store(path).close()


# --- ending ------------------------------------------------------------------------------------

def print_summary(engine: Engine, out=None) -> None:
    """After a launch: the per-job results from the store, the verdict and the session line."""
    if not engine.session_id:
        return
    from gputop_dl.analyse.summary import summarize
    from gputop_dl.present.headless import summary_table, verdict_lines

    out = out or console()
    try:
        store = Store(engine.store_path, readonly=True)
        try:
            summary = summarize(store, engine.session_id)
        finally:
            store.close()
    except Exception as exc:  # the summary is a courtesy; the session is recorded either way
        print(clean(f"session {engine.session_id} ({engine.state}); summary unavailable: {exc}"))
        return
    out.print(summary_table(summary.jobs))
    for line in verdict_lines(engine.verdict):
        out.print(line)
    out.print(f"session {engine.session_id} ({engine.state})", markup=False)
    if engine.recorder.failure:
        out.print(text(f"warning: {engine.recorder.failure}"))


def exit_code(engine: Engine) -> int:
    """The engine's exit code; an engine error is also one line on stderr."""
    if engine.error is not None:
        print(f"gputop-dl: engine error: {engine.error}", file=sys.stderr)
    return engine.exit_code()


def _stop_on_signals(engine: Engine) -> None:
    def handler(signum, _frame):
        engine.request_stop("interrupted")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


# --- the modes ---------------------------------------------------------------------------------

def run_launch(path: str, *, only: list[str] | None = None, baseline: str | None = None,
               headless: bool = False, metrics: str | None = None,
               tensorboard: str | None = None) -> int:
    """`gputop-dl launch FILE`: the TUI on a terminal, else (or with `headless`) the console;
    with `metrics` (HOST:PORT) its snapshots are served on /metrics meanwhile; with
    `tensorboard` (DIR) the recorded session is written there as TensorBoard runs at the end."""
    nvml = Nvml()
    spec = open_spec(path, nvml, only=only, baseline=baseline)
    check_store()
    if tensorboard:
        from gputop_dl.present.report.export import check_tensorboard_target

        check_tensorboard_target(tensorboard)  # before the run, not after it
    engine = launch_engine(spec, nvml, command="gputop-dl " + " ".join(sys.argv[1:]))
    if metrics:  # served until this process exits: the last snapshot stays scrapeable
        start_metrics(engine, metrics, "launch")
    code = None
    if not headless and sys.stdout.isatty():
        try:
            from gputop_dl.present.tui.app import GputopApp
        except ImportError:  # no usable Textual: the console still works
            GputopApp = None
        if GputopApp is not None:
            code = run_launch_tui(engine, GputopApp)
    if code is None:
        code = run_headless(engine)
    if tensorboard and engine.session_id:
        tb = run_export_tensorboard(engine.session_id, tensorboard)
        code = code or tb
    return code


def run_queue(path: str, *, policy: str | None = None, headless: bool = False) -> int:
    """`gputop-dl queue FILE`: like a launch, the TUI on a terminal, else the console; then
    the queue's per-job times and means. Ctrl-C stops running and waiting jobs (exit 130)."""
    nvml = Nvml()
    spec = open_spec(path, nvml)
    engine = queue_engine(spec, nvml, policy=policy, command="gputop-dl " + " ".join(sys.argv[1:]))
    if not headless and sys.stdout.isatty():
        try:
            from gputop_dl.present.tui.app import GputopApp
        except ImportError:
            GputopApp = None
        if GputopApp is not None:
            code = run_launch_tui(engine, GputopApp)
            print_queue(engine)
            return code
    return run_headless(engine, after=print_queue)


def print_queue(engine: Engine, out=None) -> None:
    """After a queue: its per-job times and means, from the store."""
    if not engine.session_id:
        return
    from gputop_dl.analyse.queue import queue_summary
    from gputop_dl.present.queue_table import queue_line, queue_table
    from gputop_dl.record.store import Store

    out = out or console()
    store = Store(engine.store_path)
    try:
        q = queue_summary(store, engine.session_id)
    finally:
        store.close()
    if q is not None:
        out.print(queue_table(q))
        out.print(queue_line(q), markup=False)


def run_headless(engine: Engine, after=None) -> int:
    """A launch on the console: header, live table or progress lines, then the summary."""
    from gputop_dl.present.headless import Headless, header_lines

    view = Headless(console())
    engine.subscribe(view.feed)
    _stop_on_signals(engine)
    engine.start()
    while engine.session_id is None and engine.running:
        engine.join(0.05)
    for line in header_lines(engine.spec, engine.session_id, engine.env.get("gpu_status_detail")):
        view.console.print(line)
    view.run(engine)
    engine.join()
    print_summary(engine, view.console)
    if after is not None:
        after(engine, view.console)
    return exit_code(engine)


def run_launch_tui(engine: Engine, app_class) -> int:
    """A launch in the TUI; the summary is printed once the screen is gone."""
    app = app_class(engine, mode="launch", spec=engine.spec, handle_signals=True,
                    exporter=export_for_tui)
    try:
        app.run()
    finally:
        if engine.running:
            engine.request_stop("interrupted")
        engine.join()
    print_summary(engine)
    return exit_code(engine)


def diagnose_for_tui(nvml: Nvml, seconds: float = 20.0) -> dict:
    """The monitor's `d`: one diagnosis of the found jobs, recorded; its result dict."""
    engine = diagnose_engine(nvml, seconds=seconds, interval=0.5)
    engine.start()
    engine.join()
    if engine.error is not None:
        raise RuntimeError(str(engine.error))
    return dict(engine.plan.result(), session=engine.session_id)


def run_diagnose(*, seconds: float = 30.0, probe: bool = True, as_json: bool = False,
                 interval: float = 1.0, pids: set[int] | None = None) -> int:
    """`gputop-dl diagnose`: progress on stderr, then the jobs table and the verdict (or JSON)."""
    from gputop_dl.present.diagnosis import diagnosis_table
    from gputop_dl.present.headless import verdict_lines

    engine = diagnose_engine(Nvml(), seconds=seconds, probe=probe, interval=max(0.2, interval),
                             pids=pids)
    _stop_on_signals(engine)
    engine.start()
    shown = 0.0
    while True:
        done = engine.join(0.2)
        for t, line in list(engine.log):
            if t > shown:
                print(f"gputop-dl: {clean(line)}", file=sys.stderr)
                shown = t
        if done:
            break
    result = engine.plan.result()
    result["session"] = engine.session_id
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        out = console()
        if result["jobs"]:
            out.print(diagnosis_table(result))
        for line in verdict_lines(engine.verdict):
            out.print(line)
        for note in result["notes"]:
            out.print(f"note: {note}", markup=False)
        if engine.session_id:
            out.print(f"session {engine.session_id} ({engine.state})", markup=False)
    return exit_code(engine)


def run_monitor(*, interval: float = 1.0, stall_budget: float | None = None,
                metrics: str | None = None) -> int:
    """`gputop-dl`: the live monitor; on quitting, the sessions it recorded. With `metrics`
    (HOST:PORT) the monitor's snapshots are served on /metrics while it runs."""
    from gputop_dl.present.tui.app import GputopApp

    check_store()
    nvml = Nvml()
    engine = monitor_engine(nvml, interval=max(0.1, interval),
                            stall_budget=STALL_BUDGET if stall_budget is None else stall_budget)
    if metrics:  # served until this process exits
        start_metrics(engine, metrics, "monitor")
    app = GputopApp(engine, mode="monitor", launcher=Launcher(nvml), handle_signals=True,
                    exporter=export_for_tui, diagnoser=lambda: diagnose_for_tui(nvml))
    try:
        app.run()
    finally:
        for src in app.sources:
            src.request_stop("interrupted")
        for src in app.sources:
            src.join(JOIN_TIMEOUT_S)
    for i, src in enumerate(app.sources):
        if src.session_id:  # the launches, and the monitor's own once it saw a training job
            print(f"session {src.session_id} ({src.state})"
                  + (": the training jobs this monitor saw" if i == 0 else ""))
    return 1 if engine.error is not None else 0


def start_metrics(engine: Engine, listen: str, mode: str) -> MetricsServer:
    """Serve `engine`'s latest snapshot as Prometheus metrics on `listen` (HOST:PORT) until
    the returned server is stopped; raises UsageError when the address cannot be bound."""
    from gputop_dl.collect.nvml import REASON_LABELS
    from gputop_dl.present.prometheus import MetricsServer, SnapshotCollector

    collector = SnapshotCollector(reasons=REASON_LABELS, mode=mode)
    server = MetricsServer(collector, listen).start()
    engine.subscribe(collector.feed)
    print(f"gputop-dl: serving {server.url}", file=sys.stderr, flush=True)
    return server


def run_serve(listen: str | None = None, *, interval: float = 1.0,
              stall_budget: float | None = None, record: bool = False) -> int:
    """`gputop-dl serve`: the monitor's engine without a UI, its snapshots on /metrics."""
    from gputop_dl.present.prometheus import DEFAULT_HOST, DEFAULT_PORT

    engine = monitor_engine(Nvml(), interval=max(0.1, interval), record=record,
                            stall_budget=STALL_BUDGET if stall_budget is None else stall_budget,
                            command="gputop-dl " + " ".join(sys.argv[1:]))
    server = start_metrics(engine, listen or f"{DEFAULT_HOST}:{DEFAULT_PORT}", "serve")
    _stop_on_signals(engine)
    engine.start()
    try:
        while not engine.join(0.5):
            pass
    finally:
        server.stop()
    if engine.session_id:
        print(f"session {engine.session_id} ({engine.state}): the training jobs it saw")
    return 1 if engine.error is not None else 0


def run_fleet_once(nodes: str, as_json: bool = False, timeout: float = 2.0) -> int:
    """`gputop-dl --nodes A:9402,B:9402 --once [--json]`: every node's /metrics read once; an
    unreachable node is a row that says so. Exit 1 when no node answered."""
    from gputop_dl.collect.fleet import parse_nodes, read_fleet

    fleet = read_fleet(parse_nodes(nodes), timeout=timeout)
    if as_json:
        print(json.dumps({"schema": "gputop-dl.fleet/1", "time": time.time(),
                          "nodes": [n.to_json() for n in fleet]}, indent=2))
    else:
        from gputop_dl.present.fleet import fleet_jobs_table, nodes_table

        out = console()
        out.print(nodes_table(fleet))
        if any(n.jobs for n in fleet):
            out.print(fleet_jobs_table(fleet))
    return 0 if any(n.ok for n in fleet) else 1


def run_once(stall_s: float = 0.0, as_json: bool = False) -> int:
    """`gputop-dl --once [--json] [--stall S]`."""
    if stall_s < 0 or stall_s > 60:
        raise UsageError(f"--stall {stall_s:g}: expected seconds between 0 and 60")
    snap = snapshot_once(stall_s=stall_s)
    if as_json:
        print(json.dumps(snap.to_json(), indent=2))
    else:
        from gputop_dl.present.once import print_once

        print_once(snap, console())
    return 0


def export_for_tui(session_id: str, path: str, store_path: str | None = None) -> str:
    """The TUI's `e` key: the session as Markdown (runs in a worker thread)."""
    from gputop_dl.present.report import export_session

    return export_session(session_id, path, store_path=store_path)


def run_export(session_id: str | None, out: str, tensorboard: bool = False) -> int:
    """`gputop-dl export OUT.md|OUT.json [--session ID]`; `export DIR --tensorboard`."""
    from gputop_dl.present.report import ExportError, export_session

    if tensorboard:
        return run_export_tensorboard(session_id, out)
    try:
        path = export_session(session_id, out)
    except ExportError as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {path}")
    return 0


def run_export_tensorboard(session_id: str | None, out: str) -> int:
    """`gputop-dl export DIR --tensorboard [--session ID]`: one TensorBoard run per job."""
    from gputop_dl.present.report import ExportError
    from gputop_dl.present.report.export import export_tensorboard_session

    try:
        runs = export_tensorboard_session(session_id, out)
    except ExportError as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    for path, n in runs:
        print(f"wrote {path} ({n} scalars)")
    if not runs:
        print(f"the session has no jobs: nothing written to {out}")
    else:
        print(f"open with: tensorboard --logdir {out}")
    return 0


def run_sessions() -> int:
    """`gputop-dl sessions`."""
    from gputop_dl.present.report import list_sessions, sessions_table
    from gputop_dl.record.store import default_db_path

    rows = list_sessions()
    if not rows:
        print(f"no sessions recorded yet (in {default_db_path(writable=False)}): run "
              "`gputop-dl launch FILE.toml` first")
        return 0
    console().print(sessions_table(rows))
    return 0


# --- the queue simulator -----------------------------------------------------------------------

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
            t.add_row("listed" if rate is None else f"{rate:g}", "–" if load is None else f"{load:.2f}", p,
                      *(f"{means[k][2][(p, rate)]:.1f}" if (p, rate) in means[k][2] else "–"
                        for k, _, _ in FIGURES))
    console().print(t)
    for key, line in setup["lines"]:
        print(f"{key}: {line}")
