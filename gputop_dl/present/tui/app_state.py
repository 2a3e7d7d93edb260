"""What the monitor app's mixins (row_actions.py, session_actions.py, shutdown.py) read of the
app, for the type checker: the state `GputopApp` (app.py) keeps and the methods it defines.

`MonitorHost` is the mixins' base only while type checking; at run time they are plain mixins
of `GputopApp`, which defines all of this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from gputop_dl.present.tui.live_app import LiveApp
from gputop_dl.present.tui.source import Launcher, Source
from gputop_dl.snapshot import Snapshot

if TYPE_CHECKING:
    from gputop_dl.present.tui.history_panel import HistoryPanel
    from gputop_dl.present.tui.jobs_table import JobsTable
    from gputop_dl.workload import SessionSpec


class MonitorHost(LiveApp[Snapshot]):
    """The monitor app as its mixins see it (app.py sets and defines these)."""

    sources: list[Source]
    specs: dict[int, SessionSpec | None]
    latest: dict[int, Snapshot]
    launcher: Launcher | None
    exporter: Callable[..., str] | None
    diagnoser: Callable[..., dict[str, Any]] | None  # returns the diagnosis JSON
    diagnosis: dict[str, Any] | None
    diagnosing: bool
    diag_t0: float
    diag_status: str
    readonly: bool
    stopping: bool
    workloads_dir: str
    export_dir: str | None
    exported: list[str]
    table: JobsTable
    history_panel: HistoryPanel
    epochs_all: bool

    @property
    def primary(self) -> Snapshot | None:
        raise NotImplementedError

    def launch_index(self) -> int | None:
        raise NotImplementedError

    def live_jobs(self) -> list[tuple[int, str]]:
        raise NotImplementedError

    def _render_banner_and_log(self) -> None:
        raise NotImplementedError

    def _render_jobs(self) -> None:
        raise NotImplementedError

    def _render_epochs(self) -> None:
        raise NotImplementedError

    def _attach_source(self, index: int, src: Source) -> None:
        raise NotImplementedError
