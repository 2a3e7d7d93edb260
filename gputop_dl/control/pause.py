"""Pause and resume whole process trees (SIGSTOP/SIGCONT), never leaving one stopped.

The in-situ probe and `diagnose` pause every other job for a few seconds. Whatever happens to
gputop-dl in that time (an exception, Ctrl-C, `kill -9` of every gputop-dl process at once, the
OOM killer, a logout that ends the session), the paused processes must run again. Two ways:

1. **ptrace** (first choice): a pause guard process (control/pause_guard.py) seizes and stops every
   thread. The kernel lets a tracee run again as soon as its tracer is gone, so the pause
   cannot outlive the guard, and the guard ends its hold when gputop-dl's pipe closes, on
   `resume()`, or after `max_s` without a word.
2. **SIGSTOP** where ptrace is refused (another user's process without root, Yama's
   ptrace_scope, a process already traced): the PIDs are first registered with this process's
   one watchdog (control/watchdog.py, in its own session), which sends SIGCONT when gputop-dl's pipe
   closes. This survives gputop-dl's death but not the watchdog's: `unguarded` lists them.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys

import psutil

from gputop_dl.control import pause_guard
from gputop_dl.control.watchdog import Watchdog, shared


def tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants (empty if it is gone)."""
    try:
        p = psutil.Process(pid)
        return [pid] + [c.pid for c in p.children(recursive=True)]
    except psutil.Error:
        return []


ANSWER_S = 5.0  # a guard that has not stopped them by then (a thread long in D) is let go


class Pauser:
    """Stops process trees and continues them, whatever dies (see the module docstring)."""

    def __init__(self, watchdog: Watchdog | None = None, use_ptrace: bool = True,
                 sigstop_fallback: bool = True):
        """`sigstop_fallback=False`: a process the guard cannot hold is not stopped at all
        (listed in `ptrace_refused`): for jobs gputop-dl did not start, which must never be
        left stopped, whatever dies."""
        self._watchdog = watchdog or shared()
        self._use_ptrace = use_ptrace
        self._fallback = sigstop_fallback
        self._guards: list[subprocess.Popen[str]] = []
        self.guarded: list[int] = []  # stopped by the pause guard (ptrace)
        self.paused: list[int] = []  # stopped by SIGSTOP (the watchdog continues them)
        self.refused: list[int] = []  # PIDs we may not signal (another user's)
        self.ptrace_refused: dict[int, str] = {}  # why the guard could not hold a PID

    @property
    def unguarded(self) -> list[int]:
        """PIDs held by SIGSTOP alone: they stay stopped if gputop-dl and its watchdog both die."""
        return list(self.paused)

    def pause(self, roots: list[int], max_s: float = pause_guard.MAX_S) -> list[int]:
        """Stop each root's whole tree (see the module docstring); returns the PIDs stopped.
        `max_s`: the guard lets them run after that long without `resume()`."""
        pids = [p for r in roots for p in tree_pids(r)]
        if not pids:
            return []
        held = self._hold(pids, max_s) if self._use_ptrace else set()
        pids = [p for p in pids if p not in held]
        if not self._fallback:
            for p in pids:
                self.ptrace_refused.setdefault(p, "no pause guard could be started")
            pids = []
        if not pids:
            return self.guarded + self.paused
        self._watchdog.paused_pids(pids)  # before any SIGSTOP
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
                self.paused.append(pid)
            except PermissionError:
                self.refused.append(pid)
            except ProcessLookupError:
                pass
        return self.guarded + self.paused

    def _hold(self, pids: list[int], max_s: float) -> set[int]:
        """The PIDs a new pause guard holds stopped (empty if it could not start or answer)."""
        try:
            guard = subprocess.Popen([sys.executable, "-I", os.path.abspath(pause_guard.__file__)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return set()
        assert guard.stdin is not None and guard.stdout is not None
        try:
            guard.stdin.write(json.dumps({"pids": pids, "max_s": max_s}) + "\n")
            guard.stdin.flush()
            if not select.select([guard.stdout], [], [], ANSWER_S)[0]:
                raise TimeoutError  # its kill lets go whatever it holds (the kernel detaches)
            answer = json.loads(guard.stdout.readline() or "{}")
        except (OSError, ValueError):
            guard.kill()
            guard.wait()
            return set()
        self._guards.append(guard)
        held = [int(p) for p in answer.get("stopped", [])]
        self.guarded += held
        self.ptrace_refused.update({int(p): str(w) for p, w in answer.get("refused", {}).items()})
        return set(held)

    def _release(self) -> None:
        """End the guards' holds: their threads detach and run (a guard that does not end in
        5 s is killed, which the kernel answers the same way)."""
        guards, self._guards, self.guarded = self._guards, [], []
        for guard in guards:
            try:
                assert guard.stdin is not None
                guard.stdin.write("resume\n")
                guard.stdin.close()
                guard.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                guard.kill()
                guard.wait()
            if guard.stdout is not None:
                guard.stdout.close()

    def resume(self) -> None:
        """Let everything paused run (also any child forked just before its parent stopped)."""
        self._release()
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
