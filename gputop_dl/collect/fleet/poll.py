"""The live fleet view's source: `FleetPoller` reads the fleet (the node reads of
`collect/fleet/nodes.py`) every few seconds in its own thread, one poll at a time, and keeps the
bookkeeping across polls: when each node last answered, where each rank was last seen, and the
last good read aged when a Prometheus server stops answering.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from gputop_dl.collect.fleet.nodes import Node, PrometheusError

LastSeen = dict[tuple[str, int], str]  # (run id, rank) -> the label of the node it was last seen on


@dataclass(frozen=True)
class FleetSnapshot:
    """One poll of the fleet: its nodes in list order, the distributed jobs across them."""

    time: float
    nodes: list[Node]
    # analyse.live.distributed's groups (a sibling floor: read as maps here)
    distributed: Sequence[Mapping[str, Any]] = field(default_factory=list)
    poll_s: float | None = None  # how long the poll took
    source: str = ""  # "nodes" or the Prometheus URL
    error: str | None = None  # the Prometheus server could not be read (nodes: the last read, aged)
    last_ok: dict[str, float] = field(default_factory=dict)  # address -> time it last answered


class FleetPoller:
    """Reads the fleet every `interval` seconds in its own thread and hands each FleetSnapshot
    to its subscribers: the live fleet view's source (the Engine's thread-facing API, without
    an engine). One poll at a time: a slow poll delays the next, never overlaps it.

    `read()` returns the nodes (read_fleet or read_prometheus); a PrometheusError becomes the
    snapshot's `error`. `group` gathers the ranks of distributed jobs across the nodes
    (`analyse.live.distributed.group_distributed`; without it the snapshot has none). `last_ok`
    remembers when each node last answered, `last_seen` where each rank of a distributed job
    was last seen (so a rank on a node that went down is named as missing and where)."""

    session_id = None

    def __init__(self, read: Callable[[], list[Node]], *, interval: float = 2.0,
                 source: str = "nodes", clock: Callable[[], float] = time.time,
                 group: Callable[[list[Node], LastSeen], Sequence[Mapping[str, Any]]] | None = None):
        self.read, self.interval, self.source, self.clock = read, interval, source, clock
        self.group = group  # analyse.live.distributed.group_distributed (handed in: a sibling floor)
        self._subs: list[Callable[[FleetSnapshot], None]] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_ok: dict[str, float] = {}
        self.last_seen: LastSeen = {}
        self.polls = 0
        self.error: BaseException | None = None
        self._last: tuple[float, list[Node]] | None = None  # the last good poll (time, nodes)

    def subscribe(self, fn: Callable[[FleetSnapshot], None]) -> None:
        self._subs.append(fn)

    def poll(self) -> FleetSnapshot:
        """One read of the fleet (in the caller's thread)."""
        t0 = time.monotonic()
        error = None
        try:
            nodes = self.read()
        except PrometheusError as exc:
            nodes, error = self._aged(), str(exc)
        now = self.clock()
        if error is None:
            self._last = (now, nodes)
        for n in nodes:
            if n.ok:
                self.last_ok[n.address] = now
        self.polls += 1
        return FleetSnapshot(time=now, nodes=nodes,
                             distributed=self.group(nodes, self.last_seen) if self.group else [],
                             poll_s=time.monotonic() - t0, source=self.source, error=error,
                             last_ok=dict(self.last_ok))

    def _aged(self) -> list[Node]:
        """When Prometheus cannot be read: the nodes of the last good poll, their age grown by
        the time since (so they turn "stale"), never shown as fresh."""
        if self._last is None:
            return []
        then, nodes = self._last
        gone = max(0.0, self.clock() - then)
        return [replace(n, age_s=(n.age_s or 0.0) + gone) if n.ok else n
                for n in nodes]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gdl-fleet-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                t0 = time.monotonic()
                snap = self.poll()
                if self._stop.is_set():
                    break
                for fn in self._subs:
                    fn(snap)
                self._wake.wait(max(0.0, self.interval - (time.monotonic() - t0)))
                self._wake.clear()
        except BaseException as exc:  # a bug: the view says the source stopped
            self.error = exc

    def poll_now(self) -> None:
        """Start the next poll now (or right after the one in progress)."""
        self._wake.set()

    def request_stop(self, reason: str = "interrupted") -> None:
        self._stop.set()
        self._wake.set()

    def stop_job(self, name: str) -> None:
        pass  # the fleet view starts no job

    def live_jobs(self) -> list[str]:
        return []

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running
