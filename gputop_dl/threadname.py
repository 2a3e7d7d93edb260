"""Name the calling thread for the OS, so `top -H`, `ps -L` and /proc/PID/task show what it is.

Python (before 3.14) names a thread only for itself; the kernel sees every gputop-dl thread as
"gputop-dl". Linux keeps a thread's name in /proc/self/task/TID/comm (15 bytes), which a thread
may rewrite. Elsewhere, or when that fails, nothing happens.
"""

from __future__ import annotations

import threading

COMM_MAX = 15  # bytes the kernel keeps


def name_native_thread(name: str) -> bool:
    """Give the calling thread `name` (cut to 15 bytes) in /proc; True if it took."""
    try:
        tid = threading.get_native_id()
        with open(f"/proc/self/task/{tid}/comm", "wb") as f:
            f.write(name.encode("utf-8", "replace")[:COMM_MAX])
        return True
    except (OSError, AttributeError):
        return False
