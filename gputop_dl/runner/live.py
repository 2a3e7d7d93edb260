"""The live modes: a launch or a queue (TUI or headless), diagnose and `--once`.

Each `run_*` builds its engine (runner.engines), hands it to a presenter, and prints the one
post-run summary; presenters only render what they are given.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gputop_dl.analyse.live import energy

from gputop_dl.analyse.live import passive
from gputop_dl.collect.machine import snapshot_once
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.engine import Engine
from gputop_dl.errors import UsageError
from gputop_dl.record.store import Store
from gputop_dl.runner.engines import (check_store, diagnose_engine, launch_engine,
                                      open_spec, queue_engine,
                                      stop_on_signals)
from gputop_dl.runner.records import export_for_tui, run_export_tensorboard
from gputop_dl.runner.alerts import attach_alerts
from gputop_dl.runner.remote import start_metrics
from gputop_dl.runner.terminal import require_foreground
from gputop_dl.text.console import console
from gputop_dl.text.safe import clean, text

if TYPE_CHECKING:
    from rich.console import Console

    from gputop_dl.present.tui.app import GputopApp
    from gputop_dl.snapshot import Snapshot

JOIN_TIMEOUT_S = 60.0  # how long quitting waits for an engine to stop its jobs
ONCE_S = 1.0  # `--once`: seconds between its two samples (the CPU wait is read over them)
SUMMARY_ROWS = 100  # the console summary's table shows this many jobs at most


# --- ending ------------------------------------------------------------------------------------

def print_summary(engine: Engine, out: Console | None = None) -> None:
    """After a launch: the per-job results from the store, the verdict and the session line."""
    if not engine.session_id:
        return
    from gputop_dl.analyse.recorded.summary import summarize
    from gputop_dl.analyse.recorded.energy_phases import corun_energy
    from gputop_dl.present.energy_text import corun_text
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
    jobs = summary.jobs
    if engine.recorder.failure:  # the store stopped mid-run: its statuses may be stale
        final = {n: (r.status, r.failure) for n, r in engine.runs.items()}
        jobs = tuple(dataclasses.replace(j, status=final[j.name][0], failure=final[j.name][1])
                     if j.name in final else j for j in jobs)
        out.print("the figures below are what was recorded before recording stopped; the "
                  "statuses are the final ones", markup=False)
    out.print(summary_table(jobs[:SUMMARY_ROWS]))
    said = corun_text(corun_energy([j.energy for j in jobs]))  # beside the verdict's STP
    if said:
        out.print(said, markup=False)
    if len(jobs) > SUMMARY_ROWS:
        out.print(f"... and {len(jobs) - SUMMARY_ROWS} more jobs: `gputop-dl export "
                  f"{engine.session_id} FILE` has them all", markup=False)
    for line in verdict_lines(engine.verdict):
        out.print(line)
    cut = ", recording cut short" if engine.recorder.failure else ""
    out.print(f"session {engine.session_id} ({engine.state}{cut})", markup=False)
    if engine.recorder.failure:
        out.print(text(f"warning: {engine.recorder.failure}"))


def exit_code(engine: Engine) -> int:
    """The engine's exit code; an engine error is also one line on stderr."""
    if engine.error is not None:
        print(f"gputop-dl: engine error: {engine.error}", file=sys.stderr)
    return engine.exit_code()


# --- the modes ---------------------------------------------------------------------------------

def run_launch(path: str, *, only: list[str] | None = None, baseline: str | None = None,
               headless: bool = False, metrics: str | None = None,
               tensorboard: str | None = None, stuck_after: float | None = None,
               alert_command: list[str] | None = None, alert_webhook: str | None = None,
               bell: bool = True) -> int:
    """`gputop-dl launch FILE`: the TUI on a terminal, else (or with `headless`) the console;
    with `metrics` (HOST:PORT) its snapshots are served on /metrics meanwhile; with
    `tensorboard` (DIR) the recorded session is written there as TensorBoard runs at the end.
    `stuck_after`: the stuck threshold's floor (s); a job that becomes stuck or fails is told
    to `alert_command` and `alert_webhook` (runner/alerts.py), and in the TUI with `bell`."""
    nvml = Nvml()
    spec = open_spec(path, nvml, only=only, baseline=baseline)
    check_store()
    from gputop_dl.runner.machine import launch_fit_warning

    warn = launch_fit_warning(spec, nvml)
    if warn:
        print(f"gputop-dl: {warn}", file=sys.stderr)
    if tensorboard:
        from gputop_dl.present.report.export import check_tensorboard_target

        check_tensorboard_target(tensorboard)  # before the run, not after it
    if not headless and sys.stdout.isatty():
        require_foreground("run it in the foreground, with `timeout --foreground`, or add "
                           "--headless")
    engine = launch_engine(spec, nvml, command="gputop-dl " + " ".join(sys.argv[1:]),
                           stuck_after=stuck_after)
    if metrics:  # served until this process exits: the last snapshot stays scrapeable
        start_metrics(engine, metrics, "launch")
    alerter = attach_alerts(engine, alert_command, alert_webhook)
    code = None
    if not headless and sys.stdout.isatty():
        app_class = tui_app()
        if app_class is not None:
            code = run_launch_tui(engine, app_class, bell=bell)
    if code is None:
        code = run_headless(engine)
    if alerter is not None:
        alerter.close()
    if tensorboard and engine.session_id:
        tb = run_export_tensorboard(engine.session_id, tensorboard)
        code = code or tb
    return code


def run_queue(path: str, *, policy: str | None = None, headless: bool = False) -> int:
    """`gputop-dl queue FILE`: like a launch, the TUI on a terminal, else the console; then
    the queue's per-job times and means. Ctrl-C stops running and waiting jobs (exit 130)."""
    nvml = Nvml()
    spec = open_spec(path, nvml, place=False)  # the queue places `gpus = N` as jobs start
    across = next((w for w in spec.workloads if w.multinode), None)
    if across is not None:  # its other nodes would have to start it at the same moment
        from gputop_dl.config import ConfigError  # here: not on the monitor's start-up

        raise ConfigError(path, f"nnodes = {across.nnodes} in a queue",
                          where=f"[[workload]] '{across.name}' key 'nnodes'",
                          expected="jobs on this node only in `gputop-dl queue`",
                          hint="start a job across nodes with `gputop-dl launch` on each node")
    if not headless and sys.stdout.isatty():
        require_foreground("run it in the foreground, with `timeout --foreground`, or add "
                           "--headless")
    engine = queue_engine(spec, nvml, policy=policy, command="gputop-dl " + " ".join(sys.argv[1:]))
    if not headless and sys.stdout.isatty():
        app_class = tui_app()
        if app_class is not None:
            code = run_launch_tui(engine, app_class)
            print_queue(engine)
            return code
    return run_headless(engine, after=print_queue)


def tui_app() -> type[GputopApp] | None:
    """The TUI's app class; None without a usable Textual (the console still works)."""
    try:
        from gputop_dl.present.tui.app import GputopApp
    except ImportError:
        return None
    return GputopApp


def print_queue(engine: Engine, out: Console | None = None) -> None:
    """After a queue: its per-job times and means, from the store."""
    if not engine.session_id:
        return
    from gputop_dl.analyse.recorded.queue import queue_summary
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


def run_headless(engine: Engine, after: Callable[[Engine, Console], None] | None = None) -> int:
    """A launch on the console: header, live table or progress lines, then the summary."""
    from gputop_dl.present.headless import Headless, header_lines

    view = Headless(console())
    engine.subscribe(view.feed)
    stop_on_signals(engine)
    engine.start()
    while engine.session_id is None and engine.running:
        engine.join(0.05)
    try:  # the reader may go after the header's first line (`| head -1`), as well as later
        for line in (header_lines(engine.spec, engine.session_id,
                                  engine.env.get("gpu_status_detail"))
                     if engine.spec is not None else []):
            view.console.print(line)
        view.run(engine)
    except BrokenPipeError:  # the reader went away: stop the jobs, keep the session, exit 141
        engine.request_stop("interrupted")
        engine.join()
        raise
    engine.join()
    print_summary(engine, view.console)
    if after is not None:
        after(engine, view.console)
    return exit_code(engine)


def run_launch_tui(engine: Engine, app_class: type[GputopApp], bell: bool = True) -> int:
    """A launch in the TUI; the summary is printed once the screen is gone."""
    app = app_class(engine, mode="launch", spec=engine.spec, handle_signals=True,
                    exporter=export_for_tui, bell=bell)
    try:
        app.run()
    finally:
        if engine.running:
            engine.request_stop("interrupted")
        engine.join()
    print_summary(engine)
    return exit_code(engine)


def diagnose_for_tui(nvml: Nvml, seconds: float = 20.0, probe: bool = True,
                     progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The monitor's `d`: one diagnosis of the found jobs, recorded; its result dict.
    `progress(message)`: called with each new message of the diagnosis, as it says it."""
    engine = diagnose_engine(nvml, seconds=seconds, probe=probe, interval=0.5)
    if progress is not None:
        said: list[tuple[float, str] | None] = [None]  # the last message told

        def tell(snap: Snapshot) -> None:
            if snap.log and snap.log[-1] != said[0]:
                said[0] = snap.log[-1]
                progress(snap.log[-1][1])

        engine.subscribe(tell)
    engine.start()
    engine.join()
    if engine.error is not None:
        raise RuntimeError(str(engine.error))
    return dict(diagnosis(engine), session=engine.session_id)


def run_diagnose(*, seconds: float = 30.0, probe: bool = True, as_json: bool = False,
                 interval: float = 1.0, pids: set[int] | None = None) -> int:
    """`gputop-dl diagnose`: progress on stderr, then the jobs table and the verdict (or JSON)."""
    from gputop_dl.present.diagnosis import diagnosis_table
    from gputop_dl.present.headless import verdict_lines

    engine = diagnose_engine(Nvml(), seconds=seconds, probe=probe, interval=max(0.2, interval),
                             pids=pids)
    stop_on_signals(engine)
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
    result = diagnosis(engine)
    result["session"] = engine.session_id
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        out = console()
        if result["jobs"]:
            out.print(diagnosis_table(result))
        for vline in verdict_lines(engine.verdict):
            out.print(vline)
        for note in result["notes"]:
            out.print(f"note: {note}", markup=False)
        if engine.session_id:
            out.print(f"session {engine.session_id} ({engine.state})", markup=False)
    return exit_code(engine)


def diagnosis(engine: Engine) -> dict[str, Any]:
    """The diagnosis a diagnose engine ran (`DiagnosePlan.result`: gputop-dl.diagnosis/1)."""
    from gputop_dl.engine.diagnose_plan import DiagnosePlan

    plan = engine.plan
    if not isinstance(plan, DiagnosePlan):
        raise TypeError(f"not a diagnose engine: its plan is {plan.kind!r}")
    return plan.result()


def run_once(stall_s: float = 0.0, as_json: bool = False) -> int:
    """`gputop-dl --once [--json] [--stall S]`."""
    if stall_s < 0 or stall_s > 60:
        raise UsageError(f"--stall {stall_s:g}: expected seconds between 0 and 60")
    # two samples ONCE_S apart: the CPU wait (schedstat) is a difference of two readings
    from gputop_dl.engine.box_profile import load_peaks

    from gputop_dl.runner.once_stuck import stuck_once

    began = time.time()
    snap = passive.once(energy.once(snapshot_once(settle_s=ONCE_S, stall_s=stall_s)), load_peaks())
    snap = stuck_once(snap, began)
    if as_json:
        print(json.dumps(snap.to_json(), indent=2))
    else:
        from gputop_dl.present.once import print_once

        print_once(snap, console())
    return 0
