"""Leaving the process at once: its standard streams flushed, without the interpreter's teardown.

For a process whose teardown would do harm: gputop-dl cut short while thousands of jobs' objects
would still be torn down (runner/engines.py), and a DDP rank whose gloo threads C++ may destroy
still running at exit (injob/trainer/loop.py). What the caller wants kept must already be written.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr (a closed or broken one is passed over), then `os._exit(code)`."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or its pipe gone: nothing more to keep
            pass
    os._exit(code)
