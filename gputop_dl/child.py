"""Children that end with gputop-dl: the parent-death signal, set between fork and exec.

A helper gputop-dl runs for a while (a py-spy burst of up to 32 s, a launched job) must not
outlive it, however it ends (`q`, Ctrl-C, `kill -9`). `die_with_parent` is a `preexec_fn`:
Linux sends the child SIGTERM when the thread that started it ends, and every thread ends
with the process. Elsewhere it does nothing (the parent's own handlers still clean up).
"""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when this process's parent thread ends (in the child)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:  # noqa: BLE001 - not Linux: the parent's signal handlers still clean up
        pass
