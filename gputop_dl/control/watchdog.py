"""Watchdog: a tiny stdlib-only process that cleans up the jobs' process groups if gputop-dl dies.

gputop-dl starts one watchdog per process (at its first launched job) and keeps the write end
of a pipe to its stdin. Nothing else holds that end (it is not inheritable, and jobs are started
with `close_fds`), so the watchdog reads EOF exactly when gputop-dl is gone, however it ended
(`kill -9` included). It then

1. sends SIGCONT to every process group and process registered as paused (the jobs a probe
   or `diagnose` paused through `pause.Pauser` run on);
2. sends SIGTERM (then SIGCONT, so a stopped process handles it) to every watched job: its
   process group and every process whose environment carries the job's marker (the
   `GPUTOP_DL_EVENTS=...` entry), which also finds a double-forked grandchild that made its
   own session;
3. after `GRACE_S`, SIGKILL to whatever of those is left.

The protocol is one JSON object per line on the watchdog's stdin:

    {"op": "watch", "pgid": 1234, "marker": "GPUTOP_DL_EVENTS=/path/a.events.jsonl"}
    {"op": "forget", "pgid": 1234}      # the job's group was stopped and is empty
    {"op": "paused", "pgid": 1234}      # a probe stopped this group: SIGCONT it if we die
    {"op": "resumed", "pgid": 1234}     # ... and resumed it again
    {"op": "paused", "pids": [1, 2]}    # these processes (a found job's tree, which is no
    {"op": "resumed", "pids": [1, 2]}   #   group of ours) were stopped / continued

A watched group is only signalled while at least one of its members still carries a marker
of ours, so a process group ID reused by an unrelated program is left alone. This module
imports only the standard library: the watchdog runs it as a script (`python -I control/watchdog.py`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from typing import Required, TypedDict

GRACE_S = 2.0  # SIGTERM to SIGKILL, after gputop-dl died


# --- the watchdog process -------------------------------------------------------------------------

def _procs() -> dict[int, tuple[int, bytes]]:
    """Every process in /proc: pid -> (pgid, environ); environ is b"" where unreadable."""
    out: dict[int, tuple[int, bytes]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pgid = int(stat[stat.rindex(b")") + 2:].split()[2])
        except (OSError, ValueError, IndexError):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            env = b""
        out[pid] = (pgid, env)
    return out


def _targets(watched: dict[int, bytes]) -> set[int]:
    """PIDs of the watched jobs still there: members of a group that still holds a marked
    process, and every marked process wherever its group is."""
    me = os.getpid()
    procs = _procs()
    markers = {m for m in watched.values() if m}
    marked = {pid for pid, (_, env) in procs.items()
              if pid != me and any(m in env.split(b"\0") for m in markers)}
    ours = {procs[pid][0] for pid in marked} & set(watched)
    return marked | {pid for pid, (pgid, _) in procs.items() if pgid in ours and pid != me}


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def clean_up(watched: dict[int, bytes], paused: set[int], grace_s: float = GRACE_S,
             paused_pids: Iterable[int] = frozenset()) -> None:
    """What the watchdog does once gputop-dl is gone (see the module docstring)."""
    for pgid in paused:
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass
    _signal_all(set(paused_pids), signal.SIGCONT)
    if not watched:
        return
    pids = _targets(watched)
    _signal_all(pids, signal.SIGTERM)
    _signal_all(pids, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = _targets(watched)
    _signal_all(pids, signal.SIGKILL)


def serve(stream: Iterable[bytes]) -> None:
    """Read registrations until EOF, then clean up."""
    watched: dict[int, bytes] = {}  # pgid -> marker (b"KEY=VALUE")
    paused: set[int] = set()
    paused_pids: set[int] = set()
    for raw in stream:
        try:
            msg = json.loads(raw)
            op = msg["op"]
            if "pids" in msg:
                pids = {int(p) for p in msg["pids"]}
                if op == "paused":
                    paused_pids |= pids
                elif op == "resumed":
                    paused_pids -= pids
                continue
            pgid = int(msg["pgid"])
        except (ValueError, KeyError, TypeError):
            continue
        if op == "watch":
            watched[pgid] = str(msg.get("marker") or "").encode()
        elif op == "forget":
            watched.pop(pgid, None)
        elif op == "paused":
            paused.add(pgid)
        elif op == "resumed":
            paused.discard(pgid)
    clean_up(watched, paused, paused_pids=paused_pids)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP):  # a Ctrl-C is gputop-dl's to handle
        signal.signal(sig, signal.SIG_IGN)
    serve(sys.stdin.buffer)


# --- gputop-dl's side -----------------------------------------------------------------------------

class Message(TypedDict, total=False):
    """One registration sent to the watchdog process (a JSON line on its stdin)."""

    op: Required[str]  # "watch", "forget", "paused" or "resumed"
    pgid: int  # a job's process group
    marker: str  # "KEY=VALUE" in the environment of each of the job's processes
    pids: list[int]  # single processes paused or resumed (control/pause.py)


class Watchdog:
    """gputop-dl's handle on its watchdog process; every method is thread-safe and never raises
    (without a watchdog, the process groups are still stopped by gputop-dl itself)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._failed = False

    def _send(self, msg: Message, spawn: bool = True) -> None:
        with self._lock:
            if self._proc is None and spawn and not self._failed:
                try:
                    self._proc = subprocess.Popen(
                        [sys.executable, "-I", os.path.abspath(__file__)],
                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, start_new_session=True)
                except OSError:
                    self._failed = True
            if self._proc is None or self._proc.stdin is None:
                return
            try:
                self._proc.stdin.write((json.dumps(msg) + "\n").encode())
                self._proc.stdin.flush()
            except (OSError, ValueError):  # it died (someone killed it): carry on without
                self._failed, self._proc = True, None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def watch(self, pgid: int, marker: str) -> None:
        self._send({"op": "watch", "pgid": pgid, "marker": marker})

    def forget(self, pgid: int) -> None:
        self._send({"op": "forget", "pgid": pgid}, spawn=False)

    def paused(self, pgid: int) -> None:
        self._send({"op": "paused", "pgid": pgid})

    def resumed(self, pgid: int) -> None:
        self._send({"op": "resumed", "pgid": pgid}, spawn=False)

    def paused_pids(self, pids: list[int]) -> None:
        """These processes are about to be stopped: SIGCONT them if gputop-dl dies."""
        self._send({"op": "paused", "pids": list(pids)})

    def resumed_pids(self, pids: list[int]) -> None:
        self._send({"op": "resumed", "pids": list(pids)}, spawn=False)


_SHARED: Watchdog | None = None


def shared() -> Watchdog:
    """This process's one watchdog (launched jobs and paused ones alike), started lazily."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Watchdog()
    return _SHARED


if __name__ == "__main__":
    main()
