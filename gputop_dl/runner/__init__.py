"""Wiring: how each mode (launch, queue, diagnose, monitor, serve, fleet, export, simulate) starts and ends.

The only package that builds engines (`engines`). `cli.py` parses arguments and calls one
`run_*` function; presenters only render what they are given. One module per kind of mode:
`live` (launch, queue, diagnose, monitor, --once), `remote` (serve, the fleet), `records`
(export, sessions), `simulate`.
"""

from gputop_dl.runner.engines import (Launcher, check_store, diagnose_engine, launch_engine,
                                      monitor_engine, open_spec, queue_engine, run_file)
from gputop_dl.runner.live import (diagnose_for_tui, exit_code, print_queue, print_summary,
                                   run_diagnose, run_headless, run_launch, run_launch_tui,
                                   run_monitor, run_once, run_queue)
from gputop_dl.runner.records import (export_for_tui, run_compare, run_export, run_export_tensorboard,
                                      run_sessions)
from gputop_dl.runner.remote import run_fleet_once, run_fleet_tui, run_serve, start_metrics
from gputop_dl.runner.simulate import calibrated_alpha, run_simulate

__all__ = ["Launcher", "calibrated_alpha", "check_store", "diagnose_engine", "diagnose_for_tui",
           "exit_code", "export_for_tui", "launch_engine", "monitor_engine", "open_spec",
           "print_queue", "print_summary", "queue_engine", "run_diagnose", "run_export",
           "run_export_tensorboard", "run_file", "run_fleet_once", "run_fleet_tui", "run_headless", "run_launch",
           "run_launch_tui", "run_monitor", "run_once", "run_queue", "run_serve",
           "run_sessions", "run_simulate", "start_metrics", "run_compare"]
