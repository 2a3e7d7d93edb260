"""Quitting the monitor: the UI goes at once, then the sources are joined (their last sample
and the session's close written) before the process leaves without the interpreter's teardown."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("textual")

from gputop_dl.present.tui import app as tui_app  # noqa: E402
from gputop_dl.record import store_open  # noqa: E402
from gputop_dl.runner import monitor  # noqa: E402


class Leaving(Exception):
    """exit_now, caught: the process would have left here."""

    def __init__(self, code: int, closed: bool):
        super().__init__(code)
        self.code, self.closed = code, closed


class SlowSource:
    """A source whose close (its last sample and the session's end) takes a while after the
    stop request, as the engine's does while the UI goes."""

    def __init__(self, close_s: float = 0.3, joins: bool = True):
        self.close_s, self.joins = close_s, joins
        self.closed = threading.Event()
        self.session_id = "20261206-000000-abcdef"
        self.state = "running"
        self.error = None

    def request_stop(self, reason: str = "interrupted") -> None:
        def close() -> None:
            time.sleep(self.close_s)
            self.state = "finished"
            self.closed.set()
        threading.Thread(target=close, daemon=True).start()

    def join(self, timeout: float | None = None) -> bool:
        return self.closed.wait(timeout if self.joins else 0.0)


def run_monitor_with(monkeypatch, src: SlowSource):
    class App:  # the UI ended on `q` at once: its run() returns before the source closed
        def __init__(self, source, **_kw):
            self.sources = [source]

        def run(self) -> None:
            pass

    monkeypatch.setattr(monitor, "require_foreground", lambda _why: None)
    monkeypatch.setattr(store_open, "check_store", lambda: None)
    monkeypatch.setattr(monitor, "host_preview", lambda: None)
    monkeypatch.setattr(monitor, "DeferredSource", lambda *a, **kw: src)
    monkeypatch.setattr(tui_app, "GputopApp", App)

    def exit_now(code: int):
        raise Leaving(code, src.closed.is_set())

    monkeypatch.setattr(monitor, "exit_now", exit_now)
    return monitor.run_monitor()


def test_the_process_leaves_only_after_every_source_closed(monkeypatch, capsys):
    src = SlowSource(close_s=0.3)
    with pytest.raises(Leaving) as left:
        run_monitor_with(monkeypatch, src)
    assert left.value.closed and left.value.code == 0
    assert "session 20261206-000000-abcdef (finished)" in capsys.readouterr().out


def test_a_source_that_does_not_stop_in_time_gets_the_ordinary_exit(monkeypatch):
    monkeypatch.setattr(monitor, "JOIN_TIMEOUT_S", 0.05)
    src = SlowSource(close_s=5.0, joins=False)
    assert run_monitor_with(monkeypatch, src) == 0  # returned: no exit_now past a live source
