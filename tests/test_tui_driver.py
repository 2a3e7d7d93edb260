"""The quiet Linux driver: keys arrive, a lone Escape is delivered, idle costs no wake-ups, exit is prompt."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import tty

import pytest

pytest.importorskip("termios")

from textual import events  # noqa: E402

from gputop_dl.present.tui.driver import (PENDING_MAX_WAIT, QuietLinuxDriver, WakingEvent,  # noqa: E402
                                          quiet_loop_supported, select_timeout)


def test_select_timeout_sleeps_forever_without_a_pending_sequence():
    assert select_timeout(None, 100.0) is None
    assert select_timeout(100.05, 100.0) == pytest.approx(0.05)
    assert select_timeout(99.0, 100.0) == 0.0  # overdue: do not block
    assert select_timeout(130.0, 100.0) == PENDING_MAX_WAIT


def test_waking_event_writes_to_its_pipe_and_tolerates_a_closed_one():
    r, w = os.pipe()
    ev = WakingEvent()
    ev.wake_fd = w
    ev.set()
    assert ev.is_set() and os.read(r, 10) == b"x"
    os.close(r)
    os.close(w)
    ev.set()  # the reader is gone: no error


def test_this_textual_supports_the_quiet_loop():
    # If a Textual upgrade changes its parser, the driver falls back to the stock 0.1 s poll;
    # this test says so instead of the monitor silently costing more.
    assert quiet_loop_supported()


class RecordingDriver(QuietLinuxDriver):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.got: list[tuple[float, object]] = []

    def process_message(self, message) -> None:
        self.got.append((time.monotonic(), message))


def keys(driver) -> list[str]:
    return [m.key for _, m in driver.got if isinstance(m, events.Key)]


async def wait_for(cond, timeout: float = 2.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(0.01)
    return cond()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux driver")
def test_quiet_driver_reads_keys_sleeps_while_idle_and_exits_at_once():
    async def go():
        master, slave = os.openpty()
        tty.setraw(slave)  # as the app sets the terminal: bytes arrive unbuffered
        driver = RecordingDriver(app=object(), mouse=False, size=(80, 24))
        driver.fileno = slave
        thread = threading.Thread(target=driver.run_input_thread, daemon=True)
        thread.start()
        try:
            os.write(master, b"j")
            assert await wait_for(lambda: keys(driver) == ["j"])
            # Idle: the stock driver wakes 10 times a second; this one not at all.
            before = driver.input_wakeups
            await asyncio.sleep(0.6)
            assert driver.input_wakeups - before == 0
            # A lone Escape is a key of its own once the parser stops waiting for more.
            sent = time.monotonic()
            os.write(master, b"\x1b")
            assert await wait_for(lambda: "escape" in keys(driver))
            at = next(t for t, m in driver.got if isinstance(m, events.Key) and m.key == "escape")
            assert at - sent < 1.0
            # An escape sequence split across reads is still one key.
            os.write(master, b"\x1b[")
            await asyncio.sleep(0.01)
            os.write(master, b"A")
            assert await wait_for(lambda: keys(driver)[-1:] == ["up"])
            assert keys(driver) == ["j", "escape", "up"]
            # Exit: setting the event wakes the thread; it does not wait for a timeout.
            t0 = time.monotonic()
            driver.exit_event.set()
            thread.join(2.0)
            assert not thread.is_alive()
            assert time.monotonic() - t0 < 0.09
        finally:
            driver.exit_event.set()
            thread.join(2.0)
            os.close(master)
            os.close(slave)

    asyncio.run(go())


def test_the_app_runs_on_the_quiet_driver(monkeypatch):
    from textual.drivers.linux_driver import LinuxDriver

    from gputop_dl.present.tui.app import GputopApp

    from tests.fakes.source import FakeSource
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    app = GputopApp(FakeSource())
    if sys.platform.startswith("linux"):
        assert app.driver_class is QuietLinuxDriver
        assert issubclass(app.driver_class, LinuxDriver)
    else:
        assert app.driver_class is not QuietLinuxDriver
