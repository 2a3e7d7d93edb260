"""Command line: the monitor, `--once`, `launch`, `queue`, `diagnose`, `serve`, `export`, `sessions`, `models`, `sweep`, `profile`, `simulate`, `machine`, `plan`.

Exit codes: 0 success; 2 bad usage or bad input (one line, no traceback); 1 anything else
(a job failed, an engine error), 130 when interrupted, 141 when the reader of stdout went away
(`gputop-dl schema snapshot | head -1`: the shell's code for a process SIGPIPE ended, no
traceback). The parser (every option and its help) is `cli/parser.py`.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Callable
from typing import Any

from gputop_dl.cli.parser import build_parser
from gputop_dl.errors import UsageError

__all__ = ["EXIT_PIPE", "build_parser", "main"]


def parse_policies(text: str) -> list[str]:
    from gputop_dl.sched import POLICIES

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in POLICIES]
    if not names or bad:
        what = f"unknown policy {bad[0]!r}" if bad else "no policy"
        raise UsageError(f"--policies {text!r}: {what}, expected comma-separated names from "
                         f"{', '.join(POLICIES)}")
    return names


def parse_rates(text: str) -> list[float]:
    try:
        rates = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        rates = []
    if not rates or not all(0 < r < float("inf") for r in rates):
        raise UsageError(f"--rates {text!r}: expected arrival rates per second > 0, "
                         "comma-separated, e.g. 0.25,0.5,1")
    return rates


EXIT_PIPE = 141  # 128 + SIGPIPE: what the shell reports for `yes | head -1`'s `yes`


def interval_of(value: float | None, default: float, lo: float = 0.1, hi: float = 3600.0) -> float:
    """An `--interval` within its bounds (every mode the same), else a UsageError (exit 2)."""
    if value is None:
        return default
    if not lo <= value <= hi:  # also NaN
        raise UsageError(f"--interval {value:g}: expected {lo:g} to {hi:g} seconds")
    return value


def main(argv: list[str] | None = None) -> int:
    """The command line; a closed stdout (its reader exited: `| head -1`) is a quiet EXIT_PIPE."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # what is still buffered fails here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        if not stdout_is_closed():
            raise  # a socket's or a child's pipe: a fault to show
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit's own flush goes nowhere, quietly
        os.close(devnull)
        return EXIT_PIPE


def stdout_is_closed() -> bool:
    """Whether the reader of stdout has gone: flushing it fails, or its pipe reports an error
    (POLLERR: no reader left)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's capture)
        return False


def check_stuck_after(args: argparse.Namespace) -> float | None:
    """`--stuck-after` of the mode given (None: not given), checked against its bounds."""
    prefix = {"launch": "launch_", "serve": "serve_"}.get(args.cmd or "", "")
    got = getattr(args, f"{prefix}stuck_after", None)
    if got is None:
        return None
    from gputop_dl.analyse.live.stuck import STUCK_AFTER_BOUNDS  # given only: the monitor's start is lighter

    lo, hi = STUCK_AFTER_BOUNDS
    if not lo <= got <= hi:  # also NaN
        raise UsageError(f"--stuck-after {got:g}: expected {lo:g} to {hi:g} seconds")
    return float(got)


def alert_hooks(command: str | None, webhook: str | None) -> dict[str, Any]:
    """`--alert-command` and `--alert-webhook`, checked: the runner's keyword arguments."""
    from gputop_dl.runner.alerts import check_webhook, parse_command

    return {"alert_command": parse_command(command) if command is not None else None,
            "alert_webhook": check_webhook(webhook) if webhook is not None else None}


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.json and not args.once:
            raise UsageError("--json goes with --once")
        if args.stall and not args.once:
            raise UsageError("--stall goes with --once (the live monitor samples on its own)")
        if args.stall_budget is not None and (args.once or args.cmd):
            raise UsageError("--stall-budget goes with the live monitor (plain `gputop-dl`)")
        if args.readonly and (args.once or args.cmd):
            raise UsageError("--readonly goes with the live monitor (plain `gputop-dl`)")
        if args.metrics and (args.once or args.cmd):
            raise UsageError("--metrics goes with the live monitor (plain `gputop-dl`); "
                             "`launch` takes its own --metrics")
        for addr in (args.metrics, getattr(args, "launch_metrics", None),
                     getattr(args, "listen", None)):
            if addr is not None:
                from gputop_dl.present.metrics_http import parse_listen

                parse_listen(addr)
        if (args.nodes is not None or args.prometheus is not None) and args.cmd:
            raise UsageError(f"--nodes and --prometheus open the fleet view; they do not go "
                             f"with `{args.cmd}`")
        if args.stall_budget is not None and not 0 <= args.stall_budget <= 100:
            raise UsageError(f"--stall-budget {args.stall_budget:g}: expected a percentage between 0 and 100")
        stuck_after = check_stuck_after(args)
        if stuck_after is not None and (args.once or args.cmd not in (None, "launch", "serve")):
            raise UsageError("--stuck-after goes with the live monitor, `launch` and `serve` "
                             "(--once judges over its own sampling window)")
        if args.cmd in LAB_COMMANDS:
            from gputop_dl.collect.extras import require_train

            require_train(f"gputop-dl {args.cmd}")
            from gputop_dl.lab import commands

            command: Callable[[argparse.Namespace], int] = getattr(commands, LAB_COMMANDS[args.cmd])
            return command(args)
        from gputop_dl import runner

        if args.cmd == "launch":
            only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
            return runner.run_launch(args.file, only=only, baseline=args.baseline,
                                     headless=args.headless, metrics=args.launch_metrics,
                                     tensorboard=args.launch_tensorboard,
                                     stuck_after=stuck_after, bell=not args.launch_no_bell,
                                     **alert_hooks(args.launch_alert_command,
                                                   args.launch_alert_webhook))
        if args.cmd == "queue":
            if args.sbatch:
                from gputop_dl.runner.sbatch import run_sbatch

                return run_sbatch(args.file, args.sbatch, policy=args.policy)
            return runner.run_queue(args.file, policy=args.policy, headless=args.headless)
        if args.cmd == "serve":
            interval_of(args.serve_interval, 1.0)
            pct = args.serve_stall_budget
            if pct is not None and not 0 <= pct <= 100:
                raise UsageError(f"--stall-budget {pct:g}: expected a percentage between 0 and 100")
            return runner.run_serve(args.listen, interval=args.serve_interval,
                                    stall_budget=None if pct is None else pct / 100,
                                    record=args.serve_record, stuck_after=stuck_after,
                                    **alert_hooks(args.serve_alert_command,
                                                  args.serve_alert_webhook))
        if args.cmd == "simulate":
            for key in ("seeds", "jobs"):
                if getattr(args, key) is not None and getattr(args, key) < 1:
                    raise UsageError(f"--{key} {getattr(args, key)}: expected a positive integer")
            return runner.run_simulate(
                args.trace, policies=parse_policies(args.policies) if args.policies else None,
                rates=parse_rates(args.rates) if args.rates else None, seeds=args.seeds,
                jobs=args.jobs, as_json=args.sim_json, out=args.out,
                calibrate=False if args.no_calibrate else args.calibrate)
        if args.cmd == "export":
            if args.shared and args.tensorboard:
                raise UsageError("--shared goes with a .md or .json report, not --tensorboard")
            return runner.run_export(args.session, args.out, tensorboard=args.tensorboard,
                                     shared=args.shared)
        if args.cmd == "machine":
            from gputop_dl.runner.machine import run_machine

            return run_machine(args.data, quick=args.quick, as_json=args.machine_json,
                               out=args.machine_out, show=args.show)
        if args.cmd == "plan":
            from gputop_dl.runner.machine import run_plan

            return run_plan(args.plan_file, as_json=args.plan_json)
        if args.cmd == "sessions":
            return runner.run_sessions(as_json=args.sessions_json)
        if args.cmd == "schema":
            return runner.run_schema(args.schema_name, list_names=args.schema_list)
        if args.cmd == "compare":
            return runner.run_compare(args.a, args.b, as_json=args.compare_json)
        if args.cmd == "diagnose":
            if not 3 <= args.seconds <= 3600:
                raise UsageError(f"--seconds {args.seconds:g}: expected 3 to 3600 seconds")
            pids = None
            if args.diag_pids:
                try:
                    pids = {int(p) for p in args.diag_pids.split(",") if p.strip()}
                except ValueError:
                    raise UsageError(f"--pid {args.diag_pids}: expected comma-separated PIDs") from None
                gone = sorted(p for p in pids if not os.path.exists(f"/proc/{p}"))
                if gone:
                    raise UsageError(f"--pid {','.join(map(str, gone))}: no such process")
            return runner.run_diagnose(seconds=args.seconds, probe=not args.no_probe,
                                       as_json=args.diag_json,
                                       interval=interval_of(args.interval, 1.0, hi=args.seconds / 3),
                                       pids=pids)
        if args.nodes is not None or args.prometheus is not None:
            if args.nodes is not None and args.prometheus is not None:
                raise UsageError("--nodes and --prometheus are two ways to read a fleet: "
                                 "give one")
            if args.stall or args.metrics or args.stall_budget is not None:
                raise UsageError("--stall, --stall-budget and --metrics are for this machine's "
                                 "monitor, not the fleet view")
            if args.once:
                return runner.run_fleet_once(args.nodes, args.json, prometheus=args.prometheus)
            interval = interval_of(args.interval, 2.0, lo=0.2)
            return runner.run_fleet_tui(args.nodes, args.prometheus, interval=interval)
        if args.once:
            if args.interval is not None:
                raise UsageError("--interval is for the live monitor; --once takes two samples "
                                 "1 s apart")
            return runner.run_once(args.stall, args.json)
        budget = None if args.stall_budget is None else args.stall_budget / 100
        return runner.run_monitor(interval=interval_of(args.interval, 1.0), stall_budget=budget,
                                  metrics=args.metrics, readonly=args.readonly,
                                  stuck_after=stuck_after, bell=not args.no_bell)
    except Exception as exc:
        if not (isinstance(exc, UsageError) or is_config_error(exc)):
            raise
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def is_config_error(exc: BaseException) -> bool:
    """A bad input file (tomlcheck.ConfigError), without importing the workload-file parser
    on every start: only a command that imported it can raise one."""
    tomlcheck = sys.modules.get("gputop_dl.tomlcheck")
    return tomlcheck is not None and isinstance(exc, tomlcheck.ConfigError)


LAB_COMMANDS = {"models": "cmd_models", "sweep": "cmd_sweep", "profile": "cmd_profile"}
