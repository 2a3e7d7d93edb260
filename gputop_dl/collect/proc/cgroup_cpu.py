"""A job's cgroup CPU throttling: the share of time its cgroup v2 quota held it back.

`CgroupThrottle` reads the cgroup v2 `cpu.stat` (throttled_usec) of the cgroup that holds the
job's quota: the job's own cgroup or the nearest parent with a `cpu.max` other than "max"
(from /proc/PID/cgroup, read once). No quota, or cgroup v1: None (nothing to throttle). With
the threads' run-queue delay (collect/proc/schedstat.py) it makes a job's CPU wait.
"""

from __future__ import annotations

import os
from typing import Callable

from gputop_dl.collect.proc.procfs import CGROUP_ROOT, ProcFiles, nearest_up, read_proc


def quota_cgroup(pid: int, proc: str = "/proc", root: str = CGROUP_ROOT,
                 read: Callable[[str], bytes] = read_proc) -> str | None:
    """The cgroup v2 folder whose `cpu.max` limits `pid`: its own cgroup or the nearest parent
    with a quota; None without cgroup v2, without a quota, or when it cannot be read."""
    try:
        lines = read(f"{proc}/{pid}/cgroup").decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    path = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
    if path is None:
        return None

    def quota(here: str) -> bool:
        try:
            return read(os.path.join(root + here.rstrip("/"), "cpu.max")).split()[0] != b"max"
        except (OSError, IndexError):
            return False

    found = nearest_up(path.strip(), quota)
    return None if found is None else root + found.rstrip("/")


class CgroupThrottle:
    """Share of the interval a job's cgroup spent throttled by its CPU quota (cpu.stat's
    throttled_usec over wall time, capped at 1); None without a quota."""

    def __init__(self, pid: int, proc: str = "/proc", root: str = CGROUP_ROOT) -> None:
        self._files = ProcFiles()
        self.folder = quota_cgroup(pid, proc, root)
        self._last: tuple[float, int] | None = None

    def read(self, now: float) -> float | None:
        if self.folder is None:
            return None
        try:
            usec = None
            for line in self._files.read(os.path.join(self.folder, "cpu.stat")).split(b"\n"):
                if line.startswith(b"throttled_usec"):
                    usec = int(line.split()[1])
        except (OSError, ValueError, IndexError):
            usec = None
        if usec is None:
            self.folder = None
            self._files.close()
            return None
        last, self._last = self._last, (now, usec)
        if last is None or now <= last[0]:
            return None
        return round(max(0.0, min(1.0, (usec - last[1]) / 1e6 / (now - last[0]))), 4)

    def close(self) -> None:
        self._files.close()
