"""Wiring: how each mode (launch, queue, diagnose, monitor, serve, fleet, export, simulate) starts and ends.

The only package that builds engines (`engines`). `cli/` parses arguments and calls one
`run_*` function; presenters only render what they are given. One module per kind of mode:
`monitor` (plain `gputop-dl`: its first frame before the engine, `deferred`), `live` (launch,
queue, diagnose, --once), `remote` (serve, the fleet), `records` (export, sessions, compare, schema),
`simulate`. Each name is imported from its module on first use, so that the monitor's start
imports none of the others.
"""
# ruff: noqa: F401 - the names below are re-exported, each imported on first use

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names (`X as X`: re-exported) for type checkers and readers; __getattr__
    # imports them
    from gputop_dl.runner.engines import (
        Launcher as Launcher, check_store as check_store, diagnose_engine as diagnose_engine,
        launch_engine as launch_engine, monitor_engine as monitor_engine, open_spec as open_spec,
        queue_engine as queue_engine, run_file as run_file
    )
    from gputop_dl.runner.live import (
        diagnose_for_tui as diagnose_for_tui, exit_code as exit_code, print_queue as print_queue,
        print_summary as print_summary, run_diagnose as run_diagnose,
        run_headless as run_headless, run_launch as run_launch, run_launch_tui as run_launch_tui,
        run_once as run_once, run_queue as run_queue
    )
    from gputop_dl.runner.monitor import (
        run_monitor as run_monitor
    )
    from gputop_dl.runner.records import (
        export_for_tui as export_for_tui, run_compare as run_compare, run_export as run_export,
        run_export_tensorboard as run_export_tensorboard, run_schema as run_schema,
        run_sessions as run_sessions
    )
    from gputop_dl.runner.remote import (
        run_fleet_once as run_fleet_once, run_fleet_tui as run_fleet_tui, run_serve as run_serve,
        start_metrics as start_metrics
    )
    from gputop_dl.runner.simulate import (
        calibrated_alpha as calibrated_alpha, run_simulate as run_simulate
    )

_ENGINES = ["Launcher", "check_store", "diagnose_engine", "launch_engine", "monitor_engine",
            "open_spec", "queue_engine", "run_file"]
_LIVE = ["diagnose_for_tui", "exit_code", "print_queue", "print_summary", "run_diagnose",
         "run_headless", "run_launch", "run_launch_tui", "run_once", "run_queue"]
_MONITOR = ["run_monitor"]
_RECORDS = ["export_for_tui", "run_compare", "run_export", "run_export_tensorboard", "run_schema",
            "run_sessions"]
_REMOTE = ["run_fleet_once", "run_fleet_tui", "run_serve", "start_metrics"]
_SIMULATE = ["calibrated_alpha", "run_simulate"]


def __getattr__(name: str) -> Any:
    # plain imports, one per module, so that the import contracts see them
    m: ModuleType
    if name in _ENGINES:
        from gputop_dl.runner import engines as m
    elif name in _LIVE:
        from gputop_dl.runner import live as m
    elif name in _MONITOR:
        from gputop_dl.runner import monitor as m
    elif name in _RECORDS:
        from gputop_dl.runner import records as m
    elif name in _REMOTE:
        from gputop_dl.runner import remote as m
    elif name in _SIMULATE:
        from gputop_dl.runner import simulate as m
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(m, name)
