"""Memory of a job beside its neighbours: its cgroup's page-cache refaults and limit events.

Read per job (the tree sampler calls `MemoryReader.read`, every `READ_EVERY` ticks):

- the job's cgroup, from `/proc/ROOT/cgroup` (once, and again every `CGROUP_RECHECK` readings):
  the v2 one (`0::/path`, under /sys/fs/cgroup) where it has a `memory.stat`, else the v1
  `memory` controller's (under /sys/fs/cgroup/memory);
- whether the group has a memory limit (v2 `memory.max` or `memory.high`; v1
  `memory.limit_in_bytes`), and the nearest group at or above it that has one: its *domain*
  (Slurm limits the job's group, above the step and task groups its processes are in);
- the domain's `memory.stat` (the job's own group's where it has none):
  `workingset_refault_file` (v1: `total_workingset_refault_file`; both count the groups
  below) — pages of files read again after the kernel had evicted them from the page cache:
  data that no longer fits in the memory the group has;
- the domain's limit events: v2 `memory.events` `high`, `max`, `oom`, `oom_kill`; v1
  `memory.failcnt` (as `max`) and `memory.oom_control`'s `oom_kill`; none read without a
  domain: an unlimited group reaches no limit.

The job's major faults (stat field 12) come with its disk I/O (collect/proc/diskio.py), the host's
refaults (`/proc/vmstat`) and PSI memory with the host's sample (collect/proc/host.py). A group that
cannot be read (a container without /sys/fs/cgroup, a kernel without the memory controller)
gives one note and the host's figures stand in. Faults never raise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, TypedDict

from gputop_dl.collect.proc.procfs import CGROUP_ROOT, ProcFiles, nearest_up

V1_MEMORY = "/sys/fs/cgroup/memory"
READ_EVERY = 2  # ticks between two readings (the last reading's rates in between)
CGROUP_RECHECK = 30  # readings between two looks at which cgroup the job is in
NO_CGROUP = "memory: the job's cgroup is not readable (no memory controller here): host figures"
EVENTS = ("high", "max", "oom", "oom_kill")
UNLIMITED = 1 << 62  # v1 reports "no limit" as a page-rounded 2^63 - 1
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
SHARED_S = 0.1  # a group's memory.stat read by another job's reader this recently is reused
_SHARED: dict[str, tuple[float, bytes]] = {}  # path -> (the reading's `now`, text)


def parse_cgroup(data: bytes) -> tuple[str | None, str | None]:
    """/proc/PID/cgroup -> (v2 path, v1 memory path); None where absent."""
    v2 = v1 = None
    for line in data.decode("utf-8", "replace").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, ctrls, path = parts
        if hid == "0" and ctrls == "":
            v2 = path
        elif "memory" in ctrls.split(","):
            v1 = path
    return v2, v1


def parse_flat(data: bytes) -> dict[str, int]:
    """A cgroup "key value" file (memory.stat, memory.events, memory.oom_control)."""
    out = {}
    for line in data.split(b"\n"):
        key, _, val = line.partition(b" ")
        try:
            out[key.decode("ascii", "replace")] = int(val)
        except ValueError:
            continue
    return out


def refault_pages(stat: bytes, v1: bool) -> int | None:
    """File refaults in a memory.stat's text (v1: the group's and its children's); older
    kernels name one counter for both kinds (`workingset_refault`). One search, no parse of
    the file's forty lines."""
    data = b"\n" + stat
    for key in ((b"\ntotal_workingset_refault_file ", b"\ntotal_workingset_refault ") if v1
                else (b"\nworkingset_refault_file ", b"\nworkingset_refault ")):
        at = data.find(key)
        if at >= 0:
            end = data.find(b"\n", at + 1)
            try:
                return int(data[at + len(key):end if end >= 0 else None])
            except ValueError:
                return None
    return None


def has_limit(folder: str, v1: bool, read: Callable[[str], bytes]) -> bool | None:
    """Whether the cgroup in `folder` has a memory limit of its own (v2 `memory.max` or
    `memory.high`, v1 `memory.limit_in_bytes`); None: none of those files could be read."""
    known = False
    for name in ("memory.limit_in_bytes",) if v1 else ("memory.max", "memory.high"):
        try:
            val = read(os.path.join(folder, name)).strip()
        except OSError:
            continue
        known = True
        if val != b"max" and val.isdigit() and int(val) < UNLIMITED:
            return True
    return False if known else None


@dataclass(frozen=True)
class Group:
    """Where a job's memory is accounted."""

    path: str  # the cgroup's path below the hierarchy's root ("/user.slice/...")
    folder: str  # its directory
    v1: bool


def group_label(g: Group) -> str:
    """The group as the readings name it: "/path", on a v1 hierarchy "v1:/path"."""
    return ("v1:" if g.v1 else "") + g.path


def shared_stat(g: Group, now: float, read: Callable[..., bytes]) -> bytes:
    """The group's memory.stat, read once a tick for all its readers (`now`, monotonic, within
    `SHARED_S`): the jobs in one group (often all of them: a user's session, a container), and
    the host's reading of the limited groups (memory_groups.py) where a job's domain is one."""
    path = g.folder + "/memory.stat"
    hit = _SHARED.get(path)
    if hit is not None and abs(now - hit[0]) < SHARED_S:
        return hit[1]
    data = read(path, 16384)
    if len(_SHARED) > 256:
        _SHARED.clear()
    _SHARED[path] = (now, data)
    return data


@dataclass(frozen=True)
class MemoryIO:
    """A job's memory readings over one interval (None: unknown; `note` says why)."""

    cgroup: str | None = None  # "/user.slice/job.scope" (v1: "v1:/path")
    limited: bool | None = None  # the group has a memory limit of its own
    # the nearest group at or above it with a memory limit (a Slurm job's above its step's and
    # task's), where its page cache competes; None: none (the host's)
    domain: str | None = None
    # bytes/s of file pages read again after eviction, in `domain` (else in `cgroup`)
    refault_bps: float | None = None
    # the limit's events (high|max|oom|oom_kill, count this interval), `domain`'s
    events: tuple[tuple[str, int], ...] = ()
    note: str | None = None


class MemoryReader:
    """The memory readings of one job's cgroup across ticks; touched by one thread."""

    def __init__(self, root: int, proc: str = "/proc", cgroup_root: str = CGROUP_ROOT,
                 v1_root: str = V1_MEMORY, read: Callable[[str], bytes] | None = None):
        self.root, self.proc = root, proc
        self._roots = cgroup_root, v1_root
        self._files = ProcFiles()
        self._read: Callable[..., bytes] = read or self._files.read
        self._group: Group | None = None
        self._domain: Group | None = None  # the nearest limited group at or above `_group`
        self._looked = 0  # readings since the last look at the job's cgroup
        self._ticks = 0
        self._last: tuple[float, int | None, dict[str, int]] | None = None
        self._limited: bool | None = None
        self._mem = MemoryIO()

    def read(self, now: float) -> MemoryIO:
        self._ticks += 1
        if self._last is not None and self._ticks % READ_EVERY:
            return self._mem
        if self._group is None or self._looked >= CGROUP_RECHECK:
            group = self._find_group()
            domain = self._nearest_limited(group)
            if group != self._group or domain != self._domain:
                self._files.close()
                self._last = None
                # its own limit: the domain's being itself, else False or None (unreadable)
                self._limited = domain == group if domain is not None else self._limit(group)
            self._group, self._domain, self._looked = group, domain, 0
        self._looked += 1
        g, d = self._group, self._domain
        if g is None:
            self._mem = MemoryIO(note=NO_CGROUP)
            return self._mem
        try:
            # the domain's counters hold the job's group's (v1 total_*, v2 is hierarchical)
            stat = self._stat(d or g, now)
            # an unlimited group never reaches a limit: its events are not read (cost)
            events = self._events(d) if d is not None else {}
        except OSError:
            self._mem = MemoryIO(note=NO_CGROUP)
            self._group = None
            return self._mem
        pages = refault_pages(stat, g.v1)
        last, self._last = self._last, (now, pages, events)
        label, dom = group_label(g), None if d is None else group_label(d)
        if last is None or now <= last[0]:
            self._mem = MemoryIO(cgroup=label, limited=self._limited, domain=dom)
            return self._mem
        dt = now - last[0]
        rate = None if pages is None or last[1] is None else max(0, pages - last[1]) * PAGE / dt
        self._mem = MemoryIO(cgroup=label, limited=self._limited, domain=dom, refault_bps=rate,
                             events=tuple((k, max(0, v - last[2][k])) for k, v in events.items()
                                          if k in last[2]))
        return self._mem

    def _nearest_limited(self, g: Group | None) -> Group | None:
        """The group itself where it has a memory limit, else its nearest parent that has one
        (below the hierarchy's root); None: none has."""
        if g is None:
            return None
        base = g.folder[:len(g.folder) - len(g.path.rstrip("/"))]
        found = nearest_up(g.path, lambda here: here != "/" and bool(
            has_limit(base + here, g.v1, self._read_once)))
        return None if found is None else Group(found, base + found, g.v1)

    def _find_group(self) -> Group | None:
        try:
            v2, v1 = parse_cgroup(self._read_once(f"{self.proc}/{self.root}/cgroup"))
        except OSError:
            return None
        base2, base1 = self._roots
        if v2 is not None and os.path.exists(os.path.join(base2 + v2, "memory.stat")):
            return Group(v2, base2 + v2.rstrip("/"), False)
        if v1 is not None and os.path.exists(os.path.join(base1 + v1, "memory.stat")):
            return Group(v1, base1 + v1.rstrip("/"), True)
        return None

    def _stat(self, g: Group, now: float) -> bytes:
        return shared_stat(g, now, self._read)

    def _read_once(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read(65536)

    def _limit(self, g: Group | None) -> bool | None:
        return None if g is None else has_limit(g.folder, g.v1, self._read_once)

    def _events(self, g: Group) -> dict[str, int]:
        """The group's limit events so far (the counts a v1 group has: `max`, `oom_kill`)."""
        if not g.v1:
            ev = parse_flat(self._read(os.path.join(g.folder, "memory.events")))
            return {k: ev[k] for k in EVENTS if k in ev}
        out = {}
        try:
            out["max"] = int(self._read(os.path.join(g.folder, "memory.failcnt")))
            oom = parse_flat(self._read(os.path.join(g.folder, "memory.oom_control")))
            if "oom_kill" in oom:
                out["oom_kill"] = oom["oom_kill"]
        except (OSError, ValueError):
            pass
        return out

    def close(self) -> None:
        self._files.close()


class MemoryFields(TypedDict):
    """The `JobSample` fields of a job's memory readings (see `memory_fields`)."""

    mem_cgroup: str | None
    mem_limited: bool | None
    mem_domain: str | None
    mem_refault_bytes_per_s: int | None
    mem_events: tuple[tuple[str, int], ...]
    mem_note: str | None


def memory_fields(ts: object | None) -> MemoryFields:
    """The `JobSample` fields of a tree sample's (`procs.TreeSample`) `MemoryIO` (ts None: the
    job is gone)."""
    m: MemoryIO = getattr(ts, "memory", None) or MemoryIO()
    return {"mem_cgroup": m.cgroup, "mem_limited": m.limited, "mem_domain": m.domain,
            "mem_refault_bytes_per_s": None if m.refault_bps is None else round(m.refault_bps),
            "mem_events": m.events, "mem_note": m.note}
