"""The base of the live apps (the monitor's, the fleet's): snapshot intake, staleness, pausing.

Sources tick in their own threads and call `_receive(index, snapshot)`. It only drops the
snapshot into an `Inbox` (newest per source) and posts one `SnapshotsArrived` wake-up when none
is pending; the UI thread then takes the newest state (`_drain` → the app's `take`). The title's
"no new sample for N s" is redrawn by a plain event-loop callback that each snapshot re-arms
(`_arm_stale_check`), not by an interval timer: a monitor that gets its samples never wakes for
it. The quiet terminal driver (driver.py) is chosen here too.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Generic

from textual.app import App
from textual.content import Content
from textual.driver import Driver
from textual.binding import Binding
from textual.message import Message
from textual.theme import Theme

from gputop_dl.present.tui.contrast import readable
from gputop_dl.present.tui.base import Panel
from gputop_dl.present.tui.table_cells import Palette
from gputop_dl.present.tui.source import Inbox, S

QUIT_BINDINGS = [
    Binding("q", "quit_app", "Quit"),
    Binding("ctrl+q", "quit_app", "Quit", show=False, priority=True),
    Binding("ctrl+c", "interrupt_app", "Quit", show=False, priority=True),
    Binding("question_mark", "help", "Help", key_display="?"),
]
# grouped keys: one entry in the key bar ("j/k Move", "c/m/n/t/o Sort"), each key in `?` help
MOVE = Binding.Group("Move")
SORT = Binding.Group("Sort")
ROW_BINDINGS = [  # the apps' action_cursor and action_sort
    Binding("j", "cursor(1)", "Down", group=MOVE),
    Binding("k", "cursor(-1)", "Up", group=MOVE),
    Binding("c", "sort('cpu')", "Sort CPU", group=SORT),
    Binding("m", "sort('mem')", "Sort memory", group=SORT),
    Binding("n", "sort('name')", "Sort name", group=SORT),
    Binding("t", "sort('step')", "Sort step time", group=SORT),
    Binding("o", "sort('')", "Default order", group=SORT),
]


class SnapshotsArrived(Message):
    """Wake-up: the inbox holds new snapshots (carries none itself)."""


class TitleBar(Panel):
    """One line: mode, session, phase, elapsed, pause and staleness."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $primary-muted; color: $text; padding: 0 1; }
    """


class LiveApp(App[int], Generic[S]):
    """Intake, staleness, pausing and the quiet driver. Subclasses define `take(snaps)` (render
    the newest snapshot per source index), `_title_content()`, `stale_after()` (seconds after a
    snapshot before the title is checked) and `palette_changed()`; their `on_mount` calls
    `ready(title_bar)` once the widgets exist."""

    paused = False

    def __init__(self, clock: Callable[[], float] = time.time):
        super().__init__()
        self.clock = clock
        self.inbox: Inbox[S] = Inbox()
        self.paused = False
        self.renders = 0
        self.palette = Palette()
        self._stale_handle: asyncio.TimerHandle | None = None
        self._widgets_ready = threading.Event()  # set once the widgets exist (on_mount)

    def ready(self, title_bar: TitleBar) -> None:
        """Called by the subclass's on_mount: take the snapshots that came meanwhile."""
        self.title_bar = title_bar
        self.palette = Palette(self.theme_variables)
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        self._widgets_ready.set()
        self._drain()  # a snapshot that came while the screen was being built
        self._arm_stale_check()

    # --- intake ----------------------------------------------------------------------------------
    def _receive(self, index: int, snap: S) -> None:
        """Called in the source's thread: keep the newest, wake the UI once."""
        if self.inbox.put(index, snap) and self._widgets_ready.is_set():
            self.post_message(SnapshotsArrived())

    def on_snapshots_arrived(self, _msg: SnapshotsArrived) -> None:
        if not self.paused:
            self._drain()

    def _drain(self) -> None:
        snaps = self.inbox.take()
        if snaps:
            self.take(snaps)

    def take(self, snaps: dict[int, S]) -> None:  # pragma: no cover - every app defines it
        raise NotImplementedError

    # --- title and staleness -----------------------------------------------------------------------
    def _title_content(self) -> Content:  # pragma: no cover - every app defines it
        raise NotImplementedError

    def stale_after(self) -> float:
        return 2.0

    def _update_title(self) -> None:
        self.title_bar.set(self._title_content())

    def _arm_stale_check(self, delay: float | None = None) -> None:
        """Redraw the title `delay` s from now (by default `stale_after()`), then every second
        while no snapshot comes; each snapshot cancels and re-arms it."""
        handle = self._stale_handle
        if handle is not None:
            handle.cancel()
        self._stale_handle = asyncio.get_running_loop().call_later(
            self.stale_after() if delay is None else delay, self._stale_check)

    def _stale_check(self) -> None:
        self._stale_handle = None
        self._update_title()
        self._arm_stale_check(1.0)

    def on_unmount(self) -> None:
        if self._stale_handle is not None:
            self._stale_handle.cancel()
            self._stale_handle = None

    def get_css_variables(self) -> dict[str, str]:
        """The theme's variables, its tone text colours made readable (contrast.py)."""
        variables = readable(super().get_css_variables(), self.current_theme.dark)
        self.theme_variables = variables
        return variables

    def _on_theme_changed(self, _theme: Theme) -> None:
        self.palette = Palette(self.get_css_variables())
        self.palette_changed()

    def palette_changed(self) -> None:
        """Render again in the new theme's colours."""

    # --- pausing and the driver ------------------------------------------------------------------
    def action_pause(self) -> None:
        self.paused = not self.paused
        self.notify("updates paused (p resumes)" if self.paused else "updates resumed", timeout=2)
        if not self.paused:
            self._drain()
        self._update_title()

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, except that its Linux driver is swapped for one whose input thread
        sleeps until a key arrives (driver.py) instead of waking ten times a second."""
        from textual.drivers.linux_driver import LinuxDriver

        from gputop_dl.present.tui.driver import QuietLinuxDriver

        chosen = super().get_driver_class()
        return QuietLinuxDriver if chosen is LinuxDriver else chosen
