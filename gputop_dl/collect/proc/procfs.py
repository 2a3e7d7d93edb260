"""/proc files read cheaply: one read by path, or kept open and re-read with `pread`.

Apart from procs.py (the process trees) so that reading the host (host.py) needs neither psutil
nor the process sampler: the monitor's first frame reads the host before anything else.
"""

from __future__ import annotations

import os
from typing import Callable

CGROUP_ROOT = "/sys/fs/cgroup"  # where cgroup v1 and v2 hierarchies are mounted
PROC = os.path.exists("/proc/self/stat")  # Linux: read /proc directly (procs.py, host.py)
_TICK = os.sysconf("SC_CLK_TCK") if PROC else 100  # clock ticks per second of /proc's CPU times


def nearest_up(path: str, accepts: Callable[[str], bool]) -> str | None:
    """`path` (a cgroup's, "/a/b", below its hierarchy's root) or the nearest of its parents up
    to the root "/" that `accepts`; None: none does. The limits a cgroup is under (a CPU quota,
    a memory limit) may be set on any group above it."""
    parts = [p for p in path.split("/") if p]
    while True:
        here = "/" + "/".join(parts)
        if accepts(here):
            return here
        if not parts:
            return None
        parts.pop()


def read_proc(path: str, size: int = 4096) -> bytes:
    """A /proc (or /sys) file, in one read when it is shorter than `size`. OSError when missing.

    Cheaper than `open()`: no buffered or text layer around the three system calls."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, size)
        if len(data) == size:  # longer than that: read the rest
            parts = [data]
            while part := os.read(fd, size):
                parts.append(part)
            data = b"".join(parts)
        return data
    finally:
        os.close(fd)


KEEP_MAX = 256  # files all `ProcFiles` together keep open: far below the usual limit of 1024


class ProcFiles:
    """/proc files kept open and re-read with `pread` at offset 0, which makes the kernel write
    them anew: one system call a read instead of three (open, read, close), half the CPU.

    A kept file whose process has exited fails its read (ESRCH); it is then read by path, which
    reads whatever process has that PID now, as a fresh open would. Past `KEEP_MAX` files in all,
    a read opens and closes. An instance is for one thread."""

    kept = 0  # files kept open by the instances that share KEEP_MAX

    def __init__(self, own_max: int | None = None) -> None:
        """`own_max`: this instance keeps up to that many files of its own, outside the shared
        KEEP_MAX (one that reads every process: collect/proc/busiest.py)."""
        self._fds: dict[str, int] = {}
        self._own_max = own_max

    def _may_keep(self) -> bool:
        if self._own_max is not None:
            return len(self._fds) < self._own_max
        return ProcFiles.kept < KEEP_MAX

    def read(self, path: str, size: int = 4096) -> bytes:
        """The file's content, as `read_proc(path, size)`; OSError when it cannot be read."""
        fd = self._fds.get(path)
        if fd is None and self._may_keep():
            fd = self._fds[path] = os.open(path, os.O_RDONLY)
            if self._own_max is None:
                ProcFiles.kept += 1
        if fd is not None:
            try:
                data = os.pread(fd, size, 0)
                if len(data) < size:
                    return data
            except OSError:  # exited (or unreadable now): the path may name another process
                self.forget(path)
        return read_proc(path, size)

    def forget(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)
            if self._own_max is None:
                ProcFiles.kept -= 1

    def keep_only(self, paths: set[str]) -> None:
        for path in [p for p in self._fds if p not in paths]:
            self.forget(path)

    def close(self) -> None:
        self.keep_only(set())

    __del__ = close  # the owner was dropped without closing
