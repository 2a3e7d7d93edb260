"""Beyond one terminal: `serve` (the monitor's snapshots on /metrics) and the fleet of nodes.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.collect.pyspy.stall_sampler import STALL_BUDGET
from gputop_dl.engine import Engine
from gputop_dl.runner.engines import check_store, monitor_engine, stop_on_signals
from gputop_dl.text.console import console

if TYPE_CHECKING:
    from gputop_dl.collect.fleet.poll import FleetPoller, FleetSnapshot
    from gputop_dl.present.metrics_http import MetricsServer


def start_metrics(engine: Engine, listen: str, mode: str) -> MetricsServer:
    """Serve `engine`'s latest snapshot as Prometheus metrics on `listen` (HOST:PORT) until
    the returned server is stopped; raises UsageError when the address cannot be bound."""
    from gputop_dl.collect.nvml.gpu_sample import REASON_LABELS
    from gputop_dl.present.metrics_http import MetricsServer
    from gputop_dl.present.prometheus import SnapshotCollector

    collector = SnapshotCollector(reasons=REASON_LABELS, mode=mode)
    server = MetricsServer(collector, listen).start()
    engine.subscribe(collector.feed)
    print(f"gputop-dl: serving {server.url}", file=sys.stderr, flush=True)
    if not is_loopback(server.host):
        print(f"gputop-dl: warning: {server.host} is not loopback: anyone who can reach this port "
              "reads the job names, users, PIDs and command lines (no authentication; "
              "put it behind a firewall or a proxy that authenticates)", file=sys.stderr, flush=True)
    return server


def is_loopback(host: str) -> bool:
    """Whether a listen address only takes connections from this machine."""
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def run_serve(listen: str | None = None, *, interval: float = 1.0,
              stall_budget: float | None = None, record: bool = False,
              stuck_after: float | None = None, alert_command: list[str] | None = None,
              alert_webhook: str | None = None) -> int:
    """`gputop-dl serve`: the monitor's engine without a UI, its snapshots on /metrics; a job
    that becomes stuck (after `stuck_after` s at least) or fails is told to `alert_command`
    and `alert_webhook` (runner/alerts.py)."""
    from gputop_dl.present.metrics_http import DEFAULT_HOST, DEFAULT_PORT
    from gputop_dl.runner.alerts import attach_alerts

    if record:
        check_store()  # a data directory that takes no writes: one line, exit 2, before serving
    engine = monitor_engine(Nvml(), interval=max(0.1, interval), record=record,
                            stall_budget=STALL_BUDGET if stall_budget is None else stall_budget,
                            command="gputop-dl " + " ".join(sys.argv[1:]),
                            stuck_after=stuck_after)
    server = start_metrics(engine, listen or f"{DEFAULT_HOST}:{DEFAULT_PORT}", "serve")
    alerter = attach_alerts(engine, alert_command, alert_webhook,
                            say=lambda m: print(f"gputop-dl: {m}", file=sys.stderr, flush=True))
    stop_on_signals(engine)
    engine.start()
    said = False
    try:
        while not engine.join(0.5):
            if engine.recorder.failure and not said:  # a full disk mid-run: said when it happens
                said = True
                print(f"gputop-dl: {engine.recorder.failure}", file=sys.stderr, flush=True)
    finally:
        server.stop()
        if alerter is not None:
            alerter.close()
    if engine.session_id:
        print(f"session {engine.session_id} ({engine.state}): the training jobs it saw")
    elif record:
        print("gputop-dl: serve --record: no session recorded (no training job was seen)",
              file=sys.stderr)
    if engine.recorder.failure and not said:
        print(f"gputop-dl: {engine.recorder.failure}", file=sys.stderr)
    return 1 if engine.error is not None or engine.recorder.failure else 0


def fleet_poller(nodes: str | None, prometheus: str | None, interval: float = 2.0,
                 timeout: float = 2.0) -> FleetPoller:
    """The fleet's source: `nodes` (HOST:PORT,... or a TOML node list) read directly, or a
    Prometheus server's API at `prometheus`. Raises UsageError for a bad list or URL."""
    from gputop_dl.analyse.live.distributed import group_distributed
    from gputop_dl.collect.fleet.nodes import (check_prometheus_url, read_fleet, read_prometheus,
                                         resolve_nodes)
    from gputop_dl.collect.fleet.poll import FleetPoller

    if prometheus is not None:
        url = check_prometheus_url(prometheus)
        return FleetPoller(lambda: read_prometheus(url, timeout=max(timeout, 5.0)),
                           interval=interval, source=url, group=group_distributed)
    addresses, names = resolve_nodes(nodes or "")
    return FleetPoller(lambda: read_fleet(addresses, timeout=timeout, names=names),
                       interval=interval, source="nodes", group=group_distributed)


def fleet_json(snap: FleetSnapshot) -> dict[str, Any]:
    """`--once --json` on the fleet (schema gputop-dl.fleet/1; fields are only ever added)."""
    return {"schema": "gputop-dl.fleet/1", "time": snap.time, "source": snap.source,
            "error": snap.error, "poll_s": snap.poll_s,
            "nodes": [n.to_json() for n in snap.nodes], "distributed": snap.distributed}


def run_fleet_once(nodes: str | None, as_json: bool = False, timeout: float = 2.0,
                   prometheus: str | None = None) -> int:
    """`gputop-dl --nodes A:9402,B:9402 --once [--json]` (or `--prometheus URL`): every node
    read once; an unreachable node is a row that says so. Exit 1 when no node answered (or
    the Prometheus server could not be read)."""
    snap = fleet_poller(nodes, prometheus, timeout=timeout).poll()
    if snap.error:
        print(f"gputop-dl: {snap.error}", file=sys.stderr)
    if as_json:
        print(json.dumps(fleet_json(snap), indent=2))
    else:
        from gputop_dl.present.fleet import distributed_table, fleet_jobs_table, nodes_table

        out = console()
        if not snap.error:
            out.print(nodes_table(snap.nodes))
        if snap.distributed:
            out.print(distributed_table(snap.distributed))
        if any(n.jobs for n in snap.nodes):
            out.print(fleet_jobs_table(snap.nodes))
    return 0 if any(n.ok for n in snap.nodes) else 1


def run_fleet_tui(nodes: str | None, prometheus: str | None, interval: float = 2.0) -> int:
    """`gputop-dl --nodes ...` (or `--prometheus URL`): the live fleet view."""
    from gputop_dl.runner.terminal import require_foreground

    require_foreground("run it in the foreground or with `timeout --foreground`; "
                       "`--once` prints one reading")
    poller = fleet_poller(nodes, prometheus, interval=interval,
                          timeout=min(2.0, max(0.5, interval)))
    from gputop_dl.present.tui.fleet_app import FleetApp

    app = FleetApp(poller)
    try:
        app.run()
    finally:
        poller.request_stop()
        poller.join(5)
    return 0 if app.return_code is None else app.return_code
