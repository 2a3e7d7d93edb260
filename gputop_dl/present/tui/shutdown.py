"""Quitting the monitor app: confirm when launched jobs run, stop every source, exit; signals.

`Shutdown` is a mixin of `GputopApp` (app.py): `q` asks before stopping launched jobs;
SIGTERM/SIGHUP/SIGINT stop them without asking, and a watchdog thread ends the process once the
sources stopped if the UI cannot exit (after a hang-up its terminal is gone). With no launched
job running, `q` (and Ctrl-C, a key in the TUI) ends the UI at once: the sources finish their
last sample and close their sessions while the terminal is restored, and whoever ran the app
joins them before the process ends (runner/monitor.py). Ctrl-C is `q` with the exit code of an
interrupt (130; `q` is 0), and a second Ctrl-C while the question is up answers it: stop and
quit. A question asked while jobs ran goes away, and the app quits, once they have ended.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputop_dl.present.tui.app_state import MonitorHost as _Host
else:
    _Host = object  # a plain mixin at run time


JOIN_TIMEOUT_S = 60.0  # how long quitting waits for a source to stop its jobs
WATCHDOG_S = 5.0  # after a signal: exit this long after the sources stopped, if the UI has not


class Shutdown(_Host):
    """Needs `sources`, `stopping`, `live_jobs()`, `_render_banner_and_log()`, `_update_title()`
    and `_drain()` from the app."""

    _watchdog_started = False
    _asking: object | None = None  # the quit question on screen (a ConfirmScreen), if any
    exit_code_on_quit = 0  # 130 once Ctrl-C asked to quit

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # no signal handlers on this loop (not the main thread): the default stays

    def action_interrupt_app(self) -> None:
        """Ctrl-C: as `q`, exit 130; a second one while the question is up stops and quits."""
        self.exit_code_on_quit = 130
        if self._asking is not None and not self.stopping:
            self._asking = None
            self.pop_screen()
            self.run_worker(self.stop_and_exit(), group="quit")
            return
        self.action_quit_app()

    def action_quit_app(self) -> None:
        if self.stopping:
            self.notify("still stopping jobs…", timeout=2)
            return
        if self._asking is not None:
            return
        live = self.live_jobs()
        if not live:  # nothing of ours to stop: the UI goes at once, the sources end behind it
            self.stopping = True
            for src in self.sources:
                src.request_stop("interrupted")
            self.exit(self.exit_code_on_quit)
            return
        from gputop_dl.present.tui.screens import ConfirmScreen  # on demand: ~50 ms to import

        def answer(yes: bool | None) -> None:
            self._asking = None
            if yes:
                self.run_worker(self.stop_and_exit(), group="quit")
            else:
                self.exit_code_on_quit = 0

        names = ", ".join(n for _, n in live)
        self._asking = ConfirmScreen(f"{len(live)} launched job(s) still running: {names}.\n"
                                     "Stop them and quit?", title="quit", yes="Stop and quit")
        self.push_screen(self._asking, answer)

    def quit_if_asked_and_ended(self) -> None:
        """A snapshot came: if the quit question is up and the jobs it named have all ended,
        it is answered for the person (quit), never left saying they run."""
        if self._asking is not None and not self.stopping and not self.live_jobs():
            self._asking = None
            self.pop_screen()
            self.action_quit_app()

    async def stop_and_exit(self) -> None:
        """Ask every source to stop, wait for them to finish cleanly (off the UI thread), exit."""
        self.stopping = True
        self._render_banner_and_log()
        self._update_title()
        for src in self.sources:
            src.request_stop("interrupted")
        await asyncio.to_thread(self._join_all)
        self._drain()
        self.exit(self.exit_code_on_quit)

    def _join_all(self) -> None:
        for src in self.sources:
            try:
                src.join(JOIN_TIMEOUT_S)
            except Exception:
                pass

    def _on_signal(self, signum: int) -> None:
        """SIGTERM/SIGHUP/SIGINT: stop the jobs cleanly and quit.

        After SIGHUP the terminal is usually gone, and Textual's shutdown can block writing to it;
        so a watchdog thread ends the process once every source has stopped (jobs stopped, session
        closed) and the UI has not managed to exit within WATCHDOG_S.
        """
        for src in self.sources:
            src.request_stop("interrupted")
        if not self._watchdog_started:
            self._watchdog_started = True
            # after a hang-up there is no terminal to restore: exit as soon as the jobs are stopped
            delay = 0.5 if signum == signal.SIGHUP else WATCHDOG_S
            threading.Thread(target=self._watchdog, args=(128 + int(signum), delay),
                             name="gputop-dl-watchdog", daemon=True).start()
        if not self.stopping:
            self.run_worker(self.stop_and_exit(), group="quit")

    def _watchdog(self, code: int, delay: float) -> None:
        self._join_all()
        time.sleep(delay)
        os._exit(code)
