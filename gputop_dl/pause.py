"""Pause and resume whole process trees (SIGSTOP/SIGCONT), never leaving one stopped.

The in-situ probe and `diagnose` pause every other job for a few seconds. Whatever happens to
gputop-dl in that time (an exception, Ctrl-C, `kill -9`), the paused processes must run again.
So before the first SIGSTOP the PIDs are registered with this process's one watchdog
(gputop_dl/watchdog.py, in its own session, reading a pipe from gputop-dl); when the pipe
closes — gputop-dl exited or was killed — the watchdog sends SIGCONT to every PID still
registered. `resume()` continues the processes itself and then tells the watchdog to forget
them. Without a watchdog (it could not be started) the processes are still resumed by
`resume()`, just not after a `kill -9`.
"""

from __future__ import annotations

import os
import signal

import psutil

from gputop_dl.watchdog import Watchdog, shared


def tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants (empty if it is gone)."""
    try:
        p = psutil.Process(pid)
        return [pid] + [c.pid for c in p.children(recursive=True)]
    except psutil.Error:
        return []


class Pauser:
    """Stops process trees and continues them; the watchdog continues them if we die first."""

    def __init__(self, watchdog: Watchdog | None = None):
        self._watchdog = watchdog or shared()
        self.paused: list[int] = []
        self.refused: list[int] = []  # PIDs we may not signal (another user's)

    def pause(self, roots: list[int]) -> list[int]:
        """SIGSTOP each root's whole tree; returns the PIDs stopped."""
        pids = [p for r in roots for p in tree_pids(r)]
        if not pids:
            return []
        self._watchdog.paused_pids(pids)  # before any SIGSTOP
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
                self.paused.append(pid)
            except PermissionError:
                self.refused.append(pid)
            except ProcessLookupError:
                pass
        return list(self.paused)

    def resume(self) -> None:
        """SIGCONT everything paused (also any child forked just before its parent stopped)."""
        pids, self.paused = self.paused, []
        for pid in pids:
            for p in tree_pids(pid) or [pid]:
                try:
                    os.kill(p, signal.SIGCONT)
                except OSError:
                    pass
        if pids:
            self._watchdog.resumed_pids(pids)

    def close(self) -> None:
        """Resume what is paused (the watchdog is the process's and stays)."""
        self.resume()


def may_signal(pid: int) -> bool:
    """Whether this process may send signals to `pid` (same user, or root)."""
    try:
        os.kill(pid, 0)
        return True
    except PermissionError:
        return False
    except ProcessLookupError:
        return False
