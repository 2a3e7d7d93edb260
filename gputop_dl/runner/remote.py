"""Beyond one terminal: `serve` (the monitor's snapshots on /metrics) and the fleet of nodes.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

from gputop_dl.collect.nvml import Nvml
from gputop_dl.collect.stall import STALL_BUDGET
from gputop_dl.engine import Engine
from gputop_dl.runner.engines import monitor_engine, stop_on_signals
from gputop_dl.text.console import console

if TYPE_CHECKING:
    from gputop_dl.present.prometheus import MetricsServer


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
    stop_on_signals(engine)
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
