"""Command line: `gputop-dl` (monitor), `launch FILE`, `export OUT`, `sessions`, `--once [--json]`.

Exit codes: 0 success; 2 bad usage or bad input (one line, no traceback); 1 anything else
(a job failed, an engine error), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys

from gputop_dl import __version__

EPILOG = """\
examples:
  gputop-dl                                         live monitor of this machine
  gputop-dl --once --json                           one snapshot as JSON, for scripts
  gputop-dl launch workloads/mobilenet_trio.toml    run the workloads, live, recorded
  gputop-dl launch FILE --headless --only bs32,bs64 without the TUI, two of the jobs
  gputop-dl export report.md                        the latest session as a Markdown report
  gputop-dl sessions                                list recorded sessions

data: sessions are kept in $GPUTOP_DL_HOME (default: the user data dir, e.g.
~/.local/share/gputop-dl/sessions.db)."""


class UsageError(Exception):
    """Bad usage: printed as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gputop-dl", description="Terminal monitor and profiler for deep-learning training.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"gputop-dl {__version__}")
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--json", action="store_true", help="with --once: print the snapshot as JSON")
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="monitor: seconds between samples (default 1)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    lp = sub.add_parser("launch", help="start the workloads of a TOML file, live and recorded",
                        description="Start the workloads in FILE: solo baselines (per the file's "
                        "[session] baseline), then all together; live view; recorded session.")
    lp.add_argument("file", metavar="FILE.toml")
    lp.add_argument("--headless", action="store_true",
                    help="console output instead of the TUI (for ssh, nohup, CI)")
    lp.add_argument("--only", metavar="NAMES", help="comma-separated workload names to start")
    lp.add_argument("--baseline", choices=("measure", "cache", "none"),
                    help="override the file's [session] baseline")
    ep = sub.add_parser("export", help="write a recorded session as a Markdown or JSON report",
                        description="Write the latest session (or --session ID) to OUT: "
                        "OUT.md is a GitHub-flavoured Markdown report, OUT.json the same content "
                        "as JSON (schema gputop-dl.session/1).")
    ep.add_argument("out", metavar="OUT.md|OUT.json")
    ep.add_argument("--session", metavar="ID", help="session id or a unique prefix of it "
                    "(default: the latest; see `gputop-dl sessions`)")
    sub.add_parser("sessions", help="list recorded sessions", description="List recorded "
                   "sessions, newest first: id, name, start, duration, jobs, verdict, state.")
    return p


def _install_stop_handlers(engine) -> None:
    def handler(signum, _frame):
        engine.request_stop("interrupted")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def cmd_launch(args) -> int:
    from gputop_dl.collect.nvml import Nvml
    from gputop_dl.config import load_session
    from gputop_dl.engine import Engine

    nvml = Nvml()
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    spec = load_session(args.file, gpu_count=nvml.device_count(), only=only)
    if args.baseline:
        spec = dataclasses.replace(spec, baseline=args.baseline)
    if not spec.cuda:
        spec = dataclasses.replace(spec, cpu_fallback_reason=nvml.status_detail)
    engine = Engine(spec, nvml=nvml, command="gputop-dl " + " ".join(sys.argv[1:]))
    if not args.headless and sys.stdout.isatty():
        try:
            from gputop_dl.present.tui.app import run_launch_tui
        except ImportError:
            run_launch_tui = None
        if run_launch_tui is not None:
            return run_launch_tui(engine, spec)
    return run_headless(engine, spec)


def run_headless(engine, spec) -> int:
    from gputop_dl.analyse.summary import summarize
    from gputop_dl.present.headless import Headless, header_lines, summary_table, verdict_lines
    from gputop_dl.record.store import Store

    view = Headless()
    engine.subscribe(view.feed)
    _install_stop_handlers(engine)
    engine.start()
    while engine.session_id is None and engine.running:
        engine.join(0.05)
    for line in header_lines(spec, engine.session_id, engine.env.get("gpu_status_detail")):
        view.console.print(line)
    view.run(engine)
    engine.join()
    if engine.session_id:
        store = Store()
        try:
            summary = summarize(store, engine.session_id)
        finally:
            store.close()
        view.console.print(summary_table(summary.jobs))
        for line in verdict_lines(engine.verdict):
            view.console.print(line)
        view.console.print(f"session {engine.session_id} ({engine.state})")
    return engine.exit_code()


def cmd_export(args) -> int:
    from gputop_dl.present.report import ExportError, export_session

    try:
        path = export_session(args.session, args.out)
    except ExportError as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {path}")
    return 0


def cmd_sessions(args) -> int:
    from rich.console import Console

    from gputop_dl.present.report import list_sessions, sessions_table
    from gputop_dl.record.store import default_db_path

    rows = list_sessions()
    if not rows:
        print(f"no sessions recorded yet (in {default_db_path()}): run "
              "`gputop-dl launch FILE.toml` first")
        return 0
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    console.print(sessions_table(rows))
    return 0


def cmd_once(args) -> int:
    from gputop_dl.present.once import print_once, take_snapshot

    snap = take_snapshot()
    if args.json:
        print(json.dumps(snap.to_json(), indent=2))
    else:
        print_once(snap)
    return 0


def main(argv: list[str] | None = None) -> int:
    from gputop_dl.config import ConfigError

    args = build_parser().parse_args(argv)
    try:
        if args.json and not args.once:
            raise UsageError("--json goes with --once")
        if args.cmd == "launch":
            return cmd_launch(args)
        if args.cmd == "export":
            return cmd_export(args)
        if args.cmd == "sessions":
            return cmd_sessions(args)
        if args.once:
            return cmd_once(args)
        from gputop_dl.present.tui.app import run_monitor_tui

        return run_monitor_tui(interval=args.interval)
    except (ConfigError, UsageError) as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
