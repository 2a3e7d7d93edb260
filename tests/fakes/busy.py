"""Busy loops of a known core each, as outside load, that die with the process that started them.

Each loop runs in a session of its own (as another user's process or another terminal's would:
with the kernel's autogroup, loops in the test's session share one session's CPU with it) and
gets PR_SET_PDEATHSIG = SIGKILL, so a test or benchmark killed by a timeout (SIGTERM, SIGKILL:
no `finally` runs) leaves no loop spinning on the box after it.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1
LOOP = [sys.executable, "-c", "while True: pass"]


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def busy_loops(n: int, own_session: bool = True) -> list[subprocess.Popen[bytes]]:
    """Start `n` loops (from the calling thread: the signal comes when that thread ends)."""
    return [subprocess.Popen(LOOP, start_new_session=own_session, preexec_fn=_die_with_parent)
            for _ in range(n)]


def stop(loops: list[subprocess.Popen[bytes]]) -> None:
    for p in loops:
        p.kill()
        p.wait()
