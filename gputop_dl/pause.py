"""Pause and resume whole process trees (SIGSTOP/SIGCONT), never leaving one stopped.

The in-situ probe pauses every other job for a few seconds. Whatever happens to gputop-dl in
that time (an exception, Ctrl-C, `kill -9`), the paused processes must run again. So before the
first SIGSTOP a tiny watchdog process is started (stdlib only, in its own session so a
terminal's Ctrl-C does not reach it, ignoring TERM/INT/HUP). gputop-dl tells it, over a pipe,
which PIDs it is about to stop; when the pipe closes — gputop-dl exited or was killed — the
watchdog sends SIGCONT to every PID it was told about and exits. `resume()` continues the
processes itself and then tells the watchdog to forget them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

WATCHDOG = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
paused = set()
def cont():
    for pid in paused:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
for line in sys.stdin:
    word, *pids = line.split()
    if word == "pause":
        paused.update(int(p) for p in pids)
    elif word == "resume":
        cont()
        paused.clear()
cont()
"""


def tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants (empty if it is gone)."""
    try:
        p = psutil.Process(pid)
        return [pid] + [c.pid for c in p.children(recursive=True)]
    except psutil.Error:
        return []


class Pauser:
    """Stops process trees and continues them; a watchdog continues them if we die first."""

    def __init__(self):
        self._watchdog: subprocess.Popen | None = None
        self.paused: list[int] = []
        self.refused: list[int] = []  # PIDs we may not signal (another user's)

    def _tell(self, line: str) -> None:
        if self._watchdog is None or self._watchdog.poll() is not None:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-S", "-c", WATCHDOG], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                text=True)
        self._watchdog.stdin.write(line + "\n")
        self._watchdog.stdin.flush()

    def pause(self, roots: list[int]) -> list[int]:
        """SIGSTOP each root's whole tree; returns the PIDs stopped."""
        pids = [p for r in roots for p in tree_pids(r)]
        if not pids:
            return []
        self._tell("pause " + " ".join(map(str, pids)))  # before any SIGSTOP
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
        if pids and self._watchdog is not None and self._watchdog.poll() is None:
            try:
                self._tell("resume")
            except OSError:
                pass

    def close(self) -> None:
        """Resume what is paused and let the watchdog go."""
        self.resume()
        if self._watchdog is not None:
            try:
                self._watchdog.stdin.close()
                self._watchdog.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._watchdog = None


def may_signal(pid: int) -> bool:
    """Whether this process may send signals to `pid` (same user, or root)."""
    try:
        os.kill(pid, 0)
        return True
    except PermissionError:
        return False
    except ProcessLookupError:
        return False
