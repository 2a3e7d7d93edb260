"""The box's memory cgroups with a limit of their own, and the page-cache refaults inside them.

/proc/vmstat counts every refault of the box, those inside a cgroup with a memory limit of its
own too (a container, a Slurm job's group, a systemd unit with `MemoryMax`). Their re-reads come
from their own limit, not from the page cache the rest of the box shares: the host domain's
refaults are vmstat's less theirs (analyse/live/memory_share.py).

`LimitedGroups.read(now)` looks for the top-most limited groups (a walk of the memory hierarchy
that does not go below a limited group, at most MAX_DIRS directories) every RESCAN_S seconds, or
less often where a walk costs more than COST_SHARE of the time between two, and reads each
group's `memory.stat` on every call: its refault rate since the last call (a group seen for the
first time has none yet). Nothing here needs privileges: the hierarchy is world-readable where
it is mounted at all. Faults never raise: an unreadable hierarchy gives None.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from gputop_dl.collect.proc.memory import (PAGE, V1_MEMORY, Group, group_label, has_limit,
                                           refault_pages, shared_stat)
from gputop_dl.collect.proc.procfs import CGROUP_ROOT, ProcFiles, read_proc

RESCAN_S = 5.0  # seconds between two looks for limited groups (at least)
COST_SHARE = 0.002  # a look may take at most this share of the time until the next one
MAX_DIRS = 4096  # directories one look visits at most (a node with thousands of pods)
MAX_GROUPS = 256  # limited groups read per call at most


def hierarchy(cgroup_root: str = CGROUP_ROOT, v1_root: str = V1_MEMORY,
              read: Callable[[str], bytes] = read_proc) -> tuple[str, bool] | None:
    """(folder, v1) of the hierarchy that holds the memory controller; None: none readable."""
    if os.path.exists(os.path.join(v1_root, "memory.stat")):
        return v1_root, True
    try:
        controllers = read(os.path.join(cgroup_root, "cgroup.controllers")).split()
    except OSError:
        return None
    return (cgroup_root, False) if b"memory" in controllers else None


def top_limited(root: str, v1: bool, read: Callable[[str], bytes] = read_proc,
                max_dirs: int = MAX_DIRS) -> tuple[list[str], bool]:
    """The folders of the limited groups below `root` that no limited group holds, and whether
    the walk saw the whole hierarchy (False: it stopped at `max_dirs`)."""
    found: list[str] = []
    todo, seen = [root], 0
    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as it:
                subs = sorted(e.path for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        for sub in subs:
            seen += 1
            if seen > max_dirs:
                return found, False
            if has_limit(sub, v1, read):
                found.append(sub)
            else:
                todo.append(sub)
    return sorted(found), True


class LimitedGroups:
    """The refault rates of the box's top-most limited memory groups; touched by one thread."""

    def __init__(self, cgroup_root: str = CGROUP_ROOT, v1_root: str = V1_MEMORY,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._where = hierarchy(cgroup_root, v1_root)
        self._clock = clock
        self._files = ProcFiles(own_max=MAX_GROUPS)
        self._groups: list[Group] = []
        self._next_look = 0.0
        self._last: dict[str, tuple[float, int]] = {}  # folder -> (now, refault pages)

    def read(self, now: float) -> tuple[tuple[str, int], ...] | None:
        """(group, refault bytes/s since the last call) for each group read twice so far; None:
        no memory hierarchy is readable here. `now`: monotonic, as the jobs' readers' (a job
        whose domain is one of these groups shares its reading, memory.shared_stat)."""
        if self._where is None:
            return None
        if self._clock() >= self._next_look:
            self._look()
        out = []
        last, self._last = self._last, {}
        for g in self._groups[:MAX_GROUPS]:
            try:
                pages = refault_pages(shared_stat(g, now, self._files.read), g.v1)
            except OSError:
                continue  # gone since the look
            if pages is None:
                continue
            self._last[g.folder] = now, pages
            before = last.get(g.folder)
            if before is not None and now > before[0]:
                out.append((group_label(g),
                            round(max(0, pages - before[1]) * PAGE / (now - before[0]))))
        return tuple(out)

    def _look(self) -> None:
        assert self._where is not None
        root, v1 = self._where
        t0 = self._clock()
        folders, _whole = top_limited(root, v1)  # past MAX_DIRS: the groups found so far
        cost = self._clock() - t0
        self._files.keep_only({f + "/memory.stat" for f in folders})  # close those of groups gone
        self._groups = [Group(f[len(root):], f, v1) for f in folders]
        self._next_look = t0 + max(RESCAN_S, cost / COST_SHARE)

    def close(self) -> None:
        self._files.close()
