"""Process-tree sampler: CPU cores, RSS and threads of a job = its root process and all descendants.

CPU use is CPU-seconds per wall second summed over the tree (trainer + data-loader workers),
measured as deltas between ticks per PID, so a worker that exits or appears between ticks
neither counts twice nor turns the figure negative. Vanished PIDs and zombies are dropped
silently; a PID whose start time changed is a new process (PID reuse). On Linux each process
costs one read of /proc/PID/stat; elsewhere psutil reads the same figures.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import psutil

PROC = os.path.exists("/proc/self/stat")
if PROC:
    _BOOT, _TICK, _PAGE = psutil.boot_time(), os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")


def children_map() -> dict[int, list[int]]:
    """PPID -> child PIDs for the whole machine, in one pass over /proc.

    Built once per tick and shared by every job's sampler: psutil's `children()` rescans
    /proc for each call, which made three jobs cost three scans a tick."""
    out: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:  # not Linux: let psutil do it
        for p in psutil.process_iter(["ppid"]):
            out.setdefault(p.info["ppid"], []).append(p.pid)
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 1:
            out.setdefault(int(fields[1]), []).append(int(name))
    return out


def descendants(pid: int, cmap: dict[int, list[int]]) -> list[int]:
    out, todo = [], list(cmap.get(pid, ()))
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(cmap.get(c, ()))
    return out


class Stat(NamedTuple):
    """What a tick needs of one live process."""
    cpu: float  # user + system CPU seconds
    rss: int  # bytes
    threads: int
    start: float  # creation time, seconds since the epoch: another value, another process


def parse_stat(data: bytes) -> Stat | None:
    """A /proc/PID/stat line; None for a zombie (or dead) process or a malformed line.

    The command name (field 2) may hold spaces and ')', so fields are counted after the last ')'."""
    f = data[data.rfind(b")") + 2:].split()
    try:
        if f[0] in (b"Z", b"X"):
            return None
        return Stat(cpu=(int(f[11]) + int(f[12])) / _TICK, rss=int(f[21]) * _PAGE,
                    threads=int(f[17]), start=_BOOT + int(f[19]) / _TICK)
    except (IndexError, ValueError):
        return None


def read_stat(pid: int) -> Stat | None:
    """Linux: one read of /proc/PID/stat. None when the process is gone or a zombie."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return None
    return parse_stat(data)


def psutil_stat(pid: int) -> Stat | None:
    """`read_stat` where there is no /proc (on Linux it costs about nine times the CPU)."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            if p.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped
                return None
            ct = p.cpu_times()
            return Stat(cpu=ct.user + ct.system, rss=p.memory_info().rss,
                        threads=p.num_threads(), start=p.create_time())
    except psutil.Error:  # gone, or not ours to read
        return None


@dataclass(frozen=True)
class TreeSample:
    pids: tuple[int, ...]
    cpu_cores: float | None  # None on the first tick (no delta yet)
    rss: int
    threads: int


class TreeSampler:
    """Samples one process tree; keep one instance per job across ticks.

    `read`: how one process is read (`read_stat` on Linux, `psutil_stat` elsewhere)."""

    def __init__(self, root_pid: int, *, read: Callable[[int], Stat | None] | None = None):
        self.root_pid = root_pid
        self._read = read or (read_stat if PROC else psutil_stat)
        self._root_start: float | None = None
        self._last: dict[int, Stat] = {}  # the previous tick's processes
        self._t: float | None = None

    def sample(self, cmap: dict[int, list[int]] | None = None) -> TreeSample | None:
        """None when the root process is gone. `cmap`: this tick's `children_map()`."""
        now = time.monotonic()
        root = self._read(self.root_pid)
        if root is None or self._root_start not in (None, root.start):  # gone, zombie or reused
            return None
        self._root_start = root.start
        stats = {self.root_pid: root}
        for pid in descendants(self.root_pid, cmap if cmap is not None else children_map()):
            st = self._read(pid)
            if st is not None:
                stats[pid] = st
        cores = None
        if self._t is not None and now > self._t:
            interval, wall = now - self._t, time.time()
            used = 0.0
            for pid, st in stats.items():
                prev = self._last.get(pid)
                if prev is not None and prev.start == st.start:
                    used += max(0.0, st.cpu - prev.cpu)
                elif wall - st.start <= interval + 0.5:
                    # new since the last tick, or a reused PID: all its CPU time was spent in this
                    # interval, unless it is older than the interval (first sight of an old process)
                    used += st.cpu
            cores = round(used / interval, 3)
        self._last, self._t = stats, now
        return TreeSample(pids=tuple(sorted(stats)), cpu_cores=cores,
                          rss=sum(st.rss for st in stats.values()),
                          threads=sum(st.threads for st in stats.values()))
