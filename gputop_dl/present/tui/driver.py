"""A Linux terminal driver whose input thread sleeps until a key arrives, instead of every 0.1 s.

Textual's `LinuxDriver` reads keys on a thread that calls `select(0.1)` in a loop: it wakes
ten times a second to see whether the app is exiting and whether a lone Escape has waited long
enough to be a key of its own. On an idle monitor that polling was about a quarter of
gputop-dl's own CPU (0.16–0.18 % of a core of 0.6 %).

`QuietLinuxDriver` blocks in `select` with no timeout while nothing is pending:

- exit: `exit_event` is a `WakingEvent`; setting it also writes a byte to a pipe the thread
  watches, so the thread returns at once (quitting no longer waits up to 0.1 s for it);
- a half-read escape sequence: the parser records when it gives up waiting
  (`_timeout_time`); the thread sleeps only until then, so a lone Escape is delivered on time.

Where the input ends because the terminal hung up (it reads end of file, or EIO, and is no
longer a terminal), the driver raises SIGHUP in its own process (`terminal_gone`): a
gputop-dl in a session of its own on that terminal (`su -c`, `setsid`) gets no SIGHUP from the
kernel and had kept sampling and recording. Input that was never a terminal (piped) and runs
out changes nothing.

Everything else — parsing, decoding, delivering events — is Textual's own code. If a Textual
release changes the parser so that its pending deadline cannot be read, the driver falls back to
the stock loop (`LinuxDriver.run_input_thread`): slower to sleep, never wrong.
"""

from __future__ import annotations

import os
import selectors
import signal
import threading
from codecs import getincrementaldecoder
from typing import Any, Callable

from textual._time import get_time
from textual.drivers.linux_driver import LinuxDriver

from gputop_dl.threadname import name_native_thread

try:
    from textual._parser import ParseError
    from textual._xterm_parser import XTermParser
    HAVE_XTERM_PARSER = True
except ImportError:  # pragma: no cover - a Textual without them: use the stock loop
    HAVE_XTERM_PARSER = False

#: The longest sleep while the parser waits for the rest of an escape sequence (seconds).
PENDING_MAX_WAIT = 0.1


class WakingEvent(threading.Event):
    """A `threading.Event` that also writes a byte to `wake_fd` when set, waking a `select`."""

    wake_fd: int | None = None

    def set(self) -> None:
        super().set()
        fd = self.wake_fd
        if fd is not None:
            try:
                os.write(fd, b"x")
            except OSError:  # closed or full: the reader is awake or gone already
                pass


def parser_deadline(parser: XTermParser) -> float | None:
    """When the parser stops waiting for the rest of a sequence (`get_time()` clock), or None.

    Raises AttributeError when the parser does not say (a Textual that changed its parser)."""
    return parser._timeout_time


def select_timeout(deadline: float | None, now: float) -> float | None:
    """How long the input thread may sleep: forever with nothing pending, else until the deadline
    (at most PENDING_MAX_WAIT, never negative)."""
    if deadline is None:
        return None
    return min(PENDING_MAX_WAIT, max(0.0, deadline - now))


def quiet_loop_supported() -> bool:
    """True when this Textual's parser exposes the pending deadline the quiet loop needs."""
    if not HAVE_XTERM_PARSER:
        return False
    try:
        parser_deadline(XTermParser(False))
    except AttributeError:
        return False
    return True


def terminal_gone() -> None:
    """The terminal hung up without a SIGHUP reaching this process: it is not in the terminal's
    session (`su -c`, `setsid`), so the kernel signalled only that session. Raise the SIGHUP it
    would have had: the app stops its sources, closes its session and ends (shutdown.py), where
    it had kept sampling and recording, writing to a terminal no one could see, for hours."""
    os.kill(os.getpid(), signal.SIGHUP)


class QuietLinuxDriver(LinuxDriver):
    """`LinuxDriver` whose input thread blocks until input, exit or a parser deadline."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_event = WakingEvent()
        self.exit_event = self._wake_event
        self.input_wakeups = 0  # select() returns, for tests and benchmarks

    def run_input_thread(self) -> None:
        name_native_thread("gdl-input")
        if not quiet_loop_supported():
            return super().run_input_thread()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        selector = selectors.DefaultSelector()
        selector.register(self.fileno, selectors.EVENT_READ, "input")
        selector.register(wake_r, selectors.EVENT_READ, "wake")
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        self._wake_event.wake_fd = wake_w
        was_tty, ended = os.isatty(self.fileno), False
        try:
            while not self.exit_event.is_set():
                timeout = select_timeout(parser_deadline(parser), get_time())
                if not self._handle(selector.select(timeout), parser, decode, wake_r, final=False):
                    ended = True
                    break
            # Keys typed while the app was stopping still reach the parser.
            selector.unregister(wake_r)
            self._handle(selector.select(0), parser, decode, wake_r, final=True)
        finally:
            self._wake_event.wake_fd = None
            selector.close()
            os.close(wake_r)
            os.close(wake_w)
            try:
                for _ in parser.feed(""):
                    pass
            except (EOFError, ParseError):  # at end of input: nothing left to deliver
                pass
        if ended and was_tty and not os.isatty(self.fileno):
            terminal_gone()

    def _handle(self, events: list[tuple[selectors.SelectorKey, int]], parser: XTermParser,
                decode: Callable[..., str], wake_r: int, *, final: bool) -> bool:
        """Read what select reported, deliver parsed events and timeouts; False at end of input."""
        self.input_wakeups += 1
        for key, _mask in events:
            if key.data == "wake":
                os.read(wake_r, 64)
                continue
            try:
                text = decode(os.read(self.fileno, 4096), final=final)
            except OSError:  # EIO: the terminal hung up
                return False
            if not text:  # stdin closed (piped input ran out, or the terminal hung up)
                return False
            for event in parser.feed(text):
                self.process_message(event)
        for event in parser.tick():
            self.process_message(event)
        return True
