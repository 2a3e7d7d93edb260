"""Process-tree sampler: CPU cores, RSS and threads of a job = its root process and all descendants.

CPU use is CPU-seconds per wall second summed over the tree (trainer + data-loader workers),
measured as deltas between ticks per PID, so a worker that exits or appears between ticks
neither counts twice nor turns the figure negative. Vanished PIDs are dropped silently.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil


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


@dataclass(frozen=True)
class TreeSample:
    pids: tuple[int, ...]
    cpu_cores: float | None  # None on the first tick (no delta yet)
    rss: int
    threads: int


class TreeSampler:
    """Samples one process tree; keep one instance per job across ticks."""

    def __init__(self, root_pid: int):
        self.root_pid = root_pid
        self._procs: dict[int, psutil.Process] = {}
        self._cpu: dict[int, float] = {}
        self._t: float | None = None

    def _tree(self, cmap: dict[int, list[int]] | None) -> list[psutil.Process]:
        root = self._procs.get(self.root_pid)
        if root is None:
            root = psutil.Process(self.root_pid)
            self._procs[self.root_pid] = root
        if not root.is_running():
            raise psutil.NoSuchProcess(self.root_pid)
        procs = [root]
        pids = descendants(self.root_pid, cmap if cmap is not None else children_map())
        for pid in pids:
            p = self._procs.get(pid)
            if p is None:
                try:
                    p = self._procs[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue
            procs.append(p)  # cached objects: psutil checks PID reuse against create_time
        return procs

    def sample(self, cmap: dict[int, list[int]] | None = None) -> TreeSample | None:
        """None when the root process is gone. `cmap`: this tick's `children_map()`."""
        now = time.monotonic()
        try:
            procs = self._tree(cmap)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
        cpu_now: dict[int, float] = {}
        rss = threads = 0
        for p in procs:
            try:
                with p.oneshot():
                    if p.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped
                        continue
                    ct = p.cpu_times()
                    mem = p.memory_info()
                    nthreads = p.num_threads()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            cpu_now[p.pid] = ct.user + ct.system
            rss += mem.rss
            threads += nthreads
        cores = None
        if self._t is not None and now > self._t:
            used = 0.0
            for pid, c in cpu_now.items():
                prev = self._cpu.get(pid)
                if prev is None:
                    # new since the last tick: all its CPU time was spent in this interval,
                    # unless it is older than the interval (first sight of an old process)
                    try:
                        born = self._procs[pid].create_time()
                    except (psutil.Error, KeyError):
                        born = 0.0
                    prev = 0.0 if time.time() - born <= now - self._t + 0.5 else c
                used += max(0.0, c - prev)
            cores = round(used / (now - self._t), 3)
        self._cpu, self._t = cpu_now, now
        for pid in list(self._procs):
            if pid not in cpu_now and pid != self.root_pid:
                del self._procs[pid]
        return TreeSample(pids=tuple(sorted(cpu_now)), cpu_cores=cores, rss=rss, threads=threads)
