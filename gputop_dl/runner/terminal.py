"""The TUI's terminal: a TUI started in the background (under plain `timeout`, or with `&`)
would be stopped by SIGTTIN at its first read and sit on a blank screen; say so instead."""

from __future__ import annotations

import os
import sys

from gputop_dl.errors import UsageError


def background_terminal() -> bool:
    """Whether this process's terminal has another process group in the foreground."""
    for stream in (sys.stdin, sys.stdout):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return os.tcgetpgrp(fd) != os.getpgrp()
        except (AttributeError, OSError, ValueError):
            continue
    return False


def require_foreground(alternative: str) -> None:
    """UsageError (one line, exit 2) when the TUI could not read its terminal."""
    if background_terminal():
        raise UsageError("the TUI needs the terminal's foreground, and this process runs in the "
                         "background (started with `&`, or under `timeout` without "
                         f"--foreground): {alternative}")
