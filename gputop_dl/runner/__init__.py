"""Wiring: how each mode (launch, queue, diagnose, monitor, serve, fleet, export, simulate) starts and ends.

The only package that builds engines (`engines`). `cli.py` parses arguments and calls one
`run_*` function; presenters only render what they are given. One module per kind of mode:
`monitor` (plain `gputop-dl`: its first frame before the engine, `deferred`), `live` (launch,
queue, diagnose, --once), `remote` (serve, the fleet), `records` (export, sessions, compare),
`simulate`. Each name is imported from its module on first use, so that the monitor's start
imports none of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputop_dl.runner.engines import (Launcher, check_store, diagnose_engine, launch_engine,
                                          monitor_engine, open_spec, queue_engine, run_file)
    from gputop_dl.runner.live import (diagnose_for_tui, exit_code, print_queue, print_summary,
                                       run_diagnose, run_headless, run_launch, run_launch_tui,
                                       run_once, run_queue)
    from gputop_dl.runner.monitor import run_monitor
    from gputop_dl.runner.records import (export_for_tui, run_compare, run_export,
                                          run_export_tensorboard, run_sessions)
    from gputop_dl.runner.remote import run_fleet_once, run_fleet_tui, run_serve, start_metrics
    from gputop_dl.runner.simulate import calibrated_alpha, run_simulate

_MODULE = {
    **dict.fromkeys(["Launcher", "check_store", "diagnose_engine", "launch_engine",
                     "monitor_engine", "open_spec", "queue_engine", "run_file"], "engines"),
    **dict.fromkeys(["diagnose_for_tui", "exit_code", "print_queue", "print_summary",
                     "run_diagnose", "run_headless", "run_launch", "run_launch_tui", "run_once",
                     "run_queue"], "live"),
    "run_monitor": "monitor",
    **dict.fromkeys(["export_for_tui", "run_compare", "run_export", "run_export_tensorboard",
                     "run_sessions"], "records"),
    **dict.fromkeys(["run_fleet_once", "run_fleet_tui", "run_serve", "start_metrics"], "remote"),
    **dict.fromkeys(["calibrated_alpha", "run_simulate"], "simulate"),
}
__all__ = ["Launcher", "calibrated_alpha", "check_store", "diagnose_engine", "diagnose_for_tui",
           "exit_code", "export_for_tui", "launch_engine", "monitor_engine", "open_spec",
           "print_queue", "print_summary", "queue_engine", "run_compare", "run_diagnose",
           "run_export", "run_export_tensorboard", "run_file", "run_fleet_once", "run_fleet_tui",
           "run_headless", "run_launch", "run_launch_tui", "run_monitor", "run_once",
           "run_queue", "run_serve", "run_sessions", "run_simulate", "start_metrics"]


def __getattr__(name: str) -> Any:
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # plain imports, one per module, so that the import contracts see them
    if module == "engines":
        from gputop_dl.runner import engines as m
    elif module == "live":
        from gputop_dl.runner import live as m
    elif module == "monitor":
        from gputop_dl.runner import monitor as m
    elif module == "records":
        from gputop_dl.runner import records as m
    elif module == "remote":
        from gputop_dl.runner import remote as m
    else:
        from gputop_dl.runner import simulate as m
    return getattr(m, name)
