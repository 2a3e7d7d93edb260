"""Pause guard: a tiny stdlib-only process that holds processes stopped by ptrace, not SIGSTOP.

A process stopped with SIGSTOP stays stopped until someone sends SIGCONT: if gputop-dl and its
watchdog both die (`kill -9` of all of them, the OOM killer, an ssh logout that tears down the
session's scope), the job stays in state T for ever. A thread stopped by its ptrace tracer
(PTRACE_SEIZE, then PTRACE_INTERRUPT) is different: when the tracer exits, however it exits,
the kernel detaches it and it runs on (ptrace(2): "If the tracer dies, all tracees are
automatically detached and restarted"). So the guard is that tracer, in its own process (the
tracer is one thread, and gputop-dl's own `waitpid` on its children must not see the stops):

- it reads one JSON line on stdin, `{"pids": [...], "max_s": 60}`, stops every thread of every
  process listed (and the children they forked meanwhile), and answers one JSON line,
  `{"stopped": [pids], "refused": {pid: "why"}}`;
- it then waits for a line `resume` or the end of stdin (gputop-dl gone, `kill -9` included)
  or `max_s` seconds without a line `renew` (gputop-dl hung), detaches every thread (they run)
  and exits.

Where ptrace is refused (another user's process without root, Yama's ptrace_scope, a process
already traced) the caller falls back to SIGSTOP with the watchdog (control/pause.py). This module
imports only the standard library: it runs as a script (`python -I control/pause_guard.py`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import sys
import time

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000  # __WALL: wait for threads too
EVENT_STOP = 128  # PTRACE_EVENT_STOP
MAX_S = 120.0  # the longest hold without a "renew"


class Tracer:
    """The ptrace calls, all from this one thread (a tracee belongs to the thread that seized it)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        self._libc.ptrace.restype = ctypes.c_long
        self.held: dict[int, int] = {}  # tid -> signal to give back at detach (0: none)

    def _ptrace(self, req: int, tid: int, data: int = 0) -> None:
        if self._libc.ptrace(req, tid, None, ctypes.c_void_p(data) if data else None) == -1:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def _stop_thread(self, tid: int) -> None:
        """Seize and interrupt one thread, and wait until it is stopped (or gone)."""
        self._ptrace(PTRACE_SEIZE, tid)
        self.held[tid] = 0
        self._ptrace(PTRACE_INTERRUPT, tid)
        while True:
            try:
                _, status = os.waitpid(tid, WALL)
            except ChildProcessError:
                self.held.pop(tid, None)
                return
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                self.held.pop(tid, None)
                return
            if os.WIFSTOPPED(status):
                if status >> 16 != EVENT_STOP:
                    # a signal arrived first: it stays stopped here; give the signal back later
                    self.held[tid] = os.WSTOPSIG(status)
                return

    def stop_process(self, pid: int) -> None:
        """Every thread of `pid`, again until no new thread appeared while stopping them."""
        while True:
            tids = {int(t) for t in os.listdir(f"/proc/{pid}/task")} - set(self.held)
            if not tids:
                return
            for tid in sorted(tids):
                try:
                    self._stop_thread(tid)
                except ProcessLookupError:
                    pass

    def detach_all(self) -> None:
        for tid, sig in list(self.held.items()):
            try:
                self._ptrace(PTRACE_DETACH, tid, sig)
            except OSError:
                pass
            del self.held[tid]


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out |= {int(c) for c in f.read().split()}
    except (OSError, ValueError):
        pass
    return out


def hold(tracer: Tracer, pids: list[int]) -> tuple[list[int], dict[int, str]]:
    """Stop each process and every child forked while the others were stopped."""
    stopped: list[int] = []
    refused: dict[int, str] = {}
    todo, seen = list(pids), set()
    while todo:
        pid = todo.pop(0)
        if pid in seen or pid == os.getpid():
            continue
        seen.add(pid)
        try:
            tracer.stop_process(pid)
            stopped.append(pid)
        except OSError as exc:
            if exc.errno in (errno.ESRCH, errno.ENOENT):
                continue
            refused[pid] = exc.strerror or str(exc)
            continue
        todo += sorted(_children(pid) - seen)
    return stopped, refused


def serve(max_s: float = MAX_S) -> None:
    """The guard's life (see the module docstring)."""
    line = sys.stdin.readline()
    tracer = Tracer()
    try:
        req = json.loads(line) if line.strip() else {}
        pids = [int(p) for p in req.get("pids", [])]
        max_s = float(req.get("max_s", max_s))
        stopped, refused = hold(tracer, pids)
    except (ValueError, TypeError, OSError) as exc:
        tracer.detach_all()
        sys.stdout.write(json.dumps({"stopped": [], "refused": {}, "error": str(exc)}) + "\n")
        sys.stdout.flush()
        return
    try:
        sys.stdout.write(json.dumps({"stopped": stopped, "refused": refused}) + "\n")
        sys.stdout.flush()
        deadline = time.monotonic() + max_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sys.stdin], [], [], left)[0]:
                break  # no word for max_s: gputop-dl hangs; let them run
            cmd = sys.stdin.readline()
            if cmd.strip() == "renew":
                deadline = time.monotonic() + max_s
            else:  # "resume", or EOF: gputop-dl is gone
                break
    finally:
        tracer.detach_all()


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is gputop-dl's to handle; any
    serve()  # death of the guard itself lets the processes run
