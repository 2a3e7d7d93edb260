"""Whether the kernel's OOM killer killed a job: its kill counters, read when a job starts and
again when it ends.

Two counters, each only ever rising: the host's (`oom_kill` in /proc/vmstat, Linux 4.13+)
and the job's memory cgroup's (`oom_kill` in cgroup v2 `memory.events`, or in cgroup v1
`memory.oom_control`). A SIGKILL is blamed on the OOM killer only when one of them rose over
the job's life; when both were read and neither rose, the kernel killed nothing, so another
process sent it. A counter that cannot be read says nothing (None).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PROC = "/proc"
CGROUP = "/sys/fs/cgroup"


@dataclass(frozen=True)
class OomCounts:
    host: int | None  # /proc/vmstat oom_kill
    cgroup: int | None  # the job's memory cgroup's oom_kill
    cgroup_file: str | None  # where that was read (read again there once the job is gone)


def _counter(path: str, key: str = "oom_kill") -> int | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def cgroup_file(pid: int, proc: str = PROC, root: str = CGROUP) -> str | None:
    """The file holding the `oom_kill` count of `pid`'s memory cgroup: v2 `memory.events`
    (a unified or a hybrid hierarchy), else v1 `memory.oom_control`; None if neither."""
    try:
        with open(os.path.join(proc, str(pid), "cgroup"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        rel = path.lstrip("/")
        if hid == "0" and not controllers:
            for top in (root, os.path.join(root, "unified")):
                candidate = os.path.join(top, rel, "memory.events")
                if os.path.exists(candidate):
                    return candidate
        elif "memory" in controllers.split(","):
            candidate = os.path.join(root, "memory", rel, "memory.oom_control")
            if os.path.exists(candidate):
                return candidate
    return None


def read_counts(pid: int | None, *, where: str | None = None, proc: str = PROC,
                root: str = CGROUP) -> OomCounts:
    """The counters now: the host's, and those of `pid`'s cgroup (or of the file `where`, found
    when the job started: a job that ended has no /proc entry left)."""
    found = where if where is not None else (cgroup_file(pid, proc, root) if pid else None)
    return OomCounts(_counter(os.path.join(proc, "vmstat")),
                     _counter(found) if found else None, found)


def oom_killed(before: OomCounts | None, after: OomCounts | None) -> bool | None:
    """True: a counter rose between the two readings (the kernel OOM-killed in the job's cgroup
    or on the host in that time); False: at least one was read both times and none rose;
    None: nothing could be read."""
    if before is None or after is None:
        return None
    pairs = [(a, b) for a, b in ((before.host, after.host), (before.cgroup, after.cgroup))
             if a is not None and b is not None]
    if not pairs:
        return None
    return any(b > a for a, b in pairs)
