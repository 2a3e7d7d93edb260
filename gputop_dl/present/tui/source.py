"""Snapshot sources for the TUI (the Engine, or a fake in tests) and the latest-only inbox.

A source is anything with the Engine's thread-facing API:

    subscribe(fn)        fn(snapshot) is called in the source's own thread, once per tick
    start()              begin ticking
    request_stop(reason) stop (launched jobs are stopped too); applied at the next tick
    stop_job(name)       stop one launched job
    live_jobs()          names of launched jobs still alive
    running              True while the source's thread runs
    join(timeout)        wait for the thread; True when it ended
    session_id           the recorded session (None for the plain monitor)

Optional: `interval` (seconds), `env` (dict; "gpu_status_detail" explains a missing GPU),
`spec` (the SessionSpec, for job details), `error`, `state`.

`Inbox` hands snapshots from source threads to the UI thread. It keeps only the newest snapshot
per source, and asks for a wake-up only when none is pending, so a UI that falls behind renders
the latest state once instead of working through a backlog.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, TypeVar


if TYPE_CHECKING:
    from gputop_dl.snapshot import Snapshot
    from gputop_dl.workload import SessionSpec


class Source(Protocol):
    @property
    def session_id(self) -> str | None: ...
    @property
    def state(self) -> str: ...  # "running", then how it ended (the Engine's)

    def subscribe(self, fn: Callable[[Snapshot], None]) -> None: ...
    def start(self) -> None: ...
    def request_stop(self, reason: str = "interrupted") -> None: ...
    def stop_job(self, name: str) -> None: ...
    def live_jobs(self) -> list[str]: ...
    def join(self, timeout: float | None = None) -> bool: ...

    @property
    def running(self) -> bool: ...


class Launcher(Protocol):
    """What the `l` screen uses to load a workload file and start it (runner's launchers)."""

    def load(self, path: str, only: list[str] | None = None) -> SessionSpec: ...
    def start(self, spec: SessionSpec) -> Source: ...


S = TypeVar("S")  # what a source hands in: a Snapshot, or the fleet view's fleet snapshot


class Inbox(Generic[S]):
    """Latest snapshot per source; `put` says whether the UI needs a wake-up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[int, S] = {}
        self._pending = False
        self.received = 0  # snapshots put (for tests and benchmarks)
        self.dropped = 0  # snapshots replaced before the UI took them

    def put(self, source_index: int, snap: S) -> bool:
        with self._lock:
            self.received += 1
            if source_index in self._latest:
                self.dropped += 1
            self._latest[source_index] = snap
            if self._pending:
                return False
            self._pending = True
            return True

    def take(self) -> dict[int, S]:
        with self._lock:
            out, self._latest = self._latest, {}
            self._pending = False
            return out

    def has_pending(self) -> bool:
        with self._lock:
            return bool(self._latest)


def source_attr(source: Any, name: str, default: Any = None) -> Any:
    """An optional source attribute (fake sources need not have them all)."""
    return getattr(source, name, default)
