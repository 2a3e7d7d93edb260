"""One `py-spy dump --nonblocking --json` of a process: its threads' Python stacks, as values.

What a stuck job's main thread waits in (analyse/live/stuck.py) is read from these: the frames of
each thread, innermost first, with the source line of each frame where its file can be read
(`lock.acquire()` is a C call, so the frame that waits on a lock shows only in its line).
Non-blocking: the job is never paused (a dump costs py-spy 10-20 ms of CPU). Errors (no
py-spy, no ptrace rights, not a Python process, the process gone) come back as a message,
never an exception.
"""

from __future__ import annotations

import json
import linecache
import os
from typing import Any

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.stuck import StackFrame, ThreadStack

DUMP_TIMEOUT_S = 10.0  # a dump that takes longer is killed
MAX_FRAMES = 60  # frames kept a thread, innermost first (a deep recursion is cut)


def dump_stacks(pid: int, exe: str | None = None
                ) -> tuple[tuple[ThreadStack, ...] | None, str | None]:
    """The threads of `pid` (main thread first), or None and why."""
    text, err, _cpu = pyspy.dump(pid, [], exe, DUMP_TIMEOUT_S)
    return (None, err) if text is None else parse_dump(text, pid)


def parse_dump(text: str, pid: int) -> tuple[tuple[ThreadStack, ...] | None, str | None]:
    """py-spy's JSON (a list of threads) as `ThreadStack`s, the main thread first."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None, "py-spy: its output was not JSON"
    if not isinstance(doc, list):
        return None, "py-spy: its output was not a list of threads"
    threads = [t for t in (_thread(x, pid) for x in doc if isinstance(x, dict)) if t is not None]
    threads.sort(key=lambda t: not t.main)
    return tuple(threads), None


def _thread(x: dict[str, Any], pid: int) -> ThreadStack | None:
    frames = x.get("frames")
    if not isinstance(frames, list):
        return None
    tid = x.get("os_thread_id")
    tid = tid if isinstance(tid, int) else 0
    name = x.get("thread_name") if isinstance(x.get("thread_name"), str) else None
    main = tid == pid or name == "MainThread"
    active = x.get("active") if isinstance(x.get("active"), bool) else None
    out = []
    for f in frames[:MAX_FRAMES]:
        if not isinstance(f, dict):
            continue
        file = str(f.get("filename") or f.get("short_filename") or "?")
        got = f.get("line")
        line = got if isinstance(got, int) else 0
        out.append(StackFrame(str(f.get("name") or "?"), file, line, _source(pid, file, line)))
    return ThreadStack(pid, tid, name, main, active, tuple(out))


def _source(pid: int, file: str, line: int) -> str | None:
    """The frame's source line, through the process's root (a container's files) first."""
    if line <= 0 or not file.endswith(".py"):
        return None
    for path in (f"/proc/{pid}/root{file}" if file.startswith("/") else None, file):
        if path and os.path.isfile(path):
            text = linecache.getline(path, line).split("  # ", 1)[0].strip()  # no inline comment
            if text:
                return text[:200]
    return None
