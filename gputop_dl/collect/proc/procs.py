"""Process-tree sampler: CPU cores, RSS and threads of a job = its root process and all descendants.

CPU use is CPU-seconds per wall second summed over the tree (trainer + data-loader workers),
measured as deltas between ticks per PID, so a worker that exits or appears between ticks
neither counts twice nor turns the figure negative. Vanished PIDs and zombies are dropped
silently; a PID whose start time changed is a new process (PID reuse). On Linux each process
costs one read of /proc/PID/stat, a file the sampler keeps open (`ProcFiles`); elsewhere psutil
reads the same figures.
"""

from __future__ import annotations

import os
import time
import dataclasses
from dataclasses import dataclass
from functools import partial
from collections.abc import Iterable, Mapping
from typing import Callable, NamedTuple

import psutil

from gputop_dl.collect.proc import schedstat
from gputop_dl.collect.proc.diskio import DiskIO, DiskReader
from gputop_dl.collect.proc.cgroup_cpu import CgroupThrottle
from gputop_dl.collect.proc.cgroup_io import CgroupIO, CgroupIOReading
from gputop_dl.collect.proc.autogroup import autogroup_of
from gputop_dl.collect.proc.memory import MemoryIO, MemoryReader
from gputop_dl.collect.proc.procfs import _TICK, PROC, ProcFiles, read_proc

if PROC:
    _BOOT, _PAGE = psutil.boot_time(), os.sysconf("SC_PAGE_SIZE")


GONE_STATES = (b"Z", b"X")  # zombie (exited, not yet reaped) and dead
# a quiet tree (see `TreeSampler.sample`) is read in full at least every this many ticks
QUIET_EVERY = 4
WORKING_STATES = ("R", "D")  # running or runnable; blocked on the disk: never quiet
# a tree's CPU-wait reading: pid -> (ran, waited) ns, the reader's note, the cgroup's throttled
# share, pid -> busy threads (Nones when not read)
WaitReading = tuple[dict[int, tuple[int, int]] | None, str | None, float | None,
                    schedstat.Busy | None]


def stat_fields(data: bytes, maxsplit: int = -1) -> list[bytes]:
    """The fields of a /proc/PID/stat line after the command name, state first (field 3).

    The name (field 2) may hold spaces and ')', so the fields start after the last ')'."""
    return data[data.rfind(b")") + 2:].split(None, maxsplit)


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
        fields = stat_fields(data, 2)
        if len(fields) > 1:
            out.setdefault(int(fields[1]), []).append(int(name))
    return out


def descendants(pid: int, cmap: Mapping[int, list[int]]) -> list[int]:
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
    state: str = ""  # R, S, D, T, ... (the details' process tree)
    majflt: int | None = None  # major page faults so far (field 12; None: not read)
    # delayacct_blkio_ticks (field 42; None where the line has no such field). The kernel
    # writes 0 there while kernel.task_delayacct is off: collect/proc/diskio.py turns that into
    # "unknown" (null), never a measured 0
    blkio: int | None = None
    # named "pt_data_worker" (what torch 2.x calls a DataLoader worker process): a loader
    # worker, not a logger's or a compiler's helper (collect/proc/diskio.py's batches)
    loader: bool = False


LOADER_NAME = b"pt_data_worker"


def parse_stat(data: bytes) -> Stat | None:
    """A /proc/PID/stat line; None for a zombie (or dead) process or a malformed line."""
    f = stat_fields(data, 40)  # the fields up to delayacct_blkio_ticks, then the rest
    try:
        if f[0] in GONE_STATES:
            return None
        return Stat(cpu=(int(f[11]) + int(f[12])) / _TICK, rss=int(f[21]) * _PAGE,
                    threads=int(f[17]), start=_BOOT + int(f[19]) / _TICK,
                    state=f[0].decode("ascii", "replace"), majflt=int(f[9]),
                    blkio=int(f[39]) if len(f) > 39 else None,
                    loader=data[data.find(b"(") + 1:data.rfind(b")")] == LOADER_NAME)
    except (IndexError, ValueError):
        return None


def read_stat(pid: int, read: Callable[[str], bytes] = read_proc) -> Stat | None:
    """Linux: one read of /proc/PID/stat. None when the process is gone or a zombie."""
    try:
        return parse_stat(read(f"/proc/{pid}/stat"))
    except OSError:
        return None


def tree_rss(pids: Iterable[int]) -> int:
    """The RSS of these processes now, summed as the tree sampler sums it (gone ones: 0)."""
    return sum(st.rss for st in map(read_stat, pids) if st is not None)


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
    cpu_by_pid: dict[int, float] | None = None  # cores per process (None on the first tick)
    # CPU wait (collect/proc/schedstat.py): per process (ran ns, waited ns) since the last
    # tick, its threads summed (None: not read); why it is unknown; the cgroup quota's throttling
    waits: dict[int, tuple[int, int]] | None = None
    wait_note: str | None = None
    throttled: float | None = None
    busy: schedstat.Busy | None = None  # per process: SchedReader.busy
    io: DiskIO | None = None  # disk I/O over the interval (collect/proc/diskio.py)
    memory: MemoryIO | None = None  # its cgroup's refaults and limit events (collect/proc/memory.py)
    cgroup_io: CgroupIOReading | None = None  # its v2 cgroup's I/O (collect/proc/cgroup_io.py)
    # True: a quiet tick (`TreeSampler.sample`): nothing moved, the reading's other fields are
    # those of its last full reading, which found nothing moving either
    quiet: bool = False
    # cores per process other than the root, of its main thread, from /proc/PID/schedstat (ns,
    # not 10 ms clock ticks: a loader worker busy 5 ms a second reads 0.005, not 0 or 0.01);
    # None where not read (the first tick, not Linux)
    main_cores_by_pid: dict[int, float] | None = None
    # its root's session autogroup where autogroups apply (collect/proc/autogroup.py), read once
    autogroup: str | None = None


class TreeSampler:
    """Samples one process tree; keep one instance per job across ticks, and `close()` it after.

    `read`: how one process is read (`read_stat` through kept files on Linux, `psutil_stat`
    elsewhere). `sched`: also read the threads' CPU wait and the cgroup's throttling
    (collect/proc/schedstat.py; default: on Linux, unless `read` is given)."""

    def __init__(self, root_pid: int, *, read: Callable[[int], Stat | None] | None = None,
                 sched: bool | None = None):
        self.root_pid = root_pid
        self._files = ProcFiles()
        self._read = read or (partial(read_stat, read=self._files.read) if PROC else psutil_stat)
        if sched is None:
            sched = PROC and read is None
        self._sched = schedstat.SchedReader() if sched else None
        self._throttle = CgroupThrottle(root_pid) if sched else None
        self._disk = DiskReader(root_pid) if sched else None
        self._mem = MemoryReader(root_pid) if sched else None
        self._cgio = CgroupIO(root_pid) if sched else None
        got = autogroup_of(root_pid) if sched else None  # a session's group does not change
        self.autogroup = None if got is None else got[0]
        self.cpu_wait = True  # False: skip the CPU-wait reading (benchmarks price it this way)
        self._waits_skip = 0  # ticks to hand on the last reading before the next one
        self._waits_last: WaitReading = (None, None, None, None)
        self._root_start: float | None = None
        self._last: dict[int, Stat] = {}  # the previous tick's processes
        self._t: float | None = None
        self._full: TreeSample | None = None  # the last full reading, when it found nothing moving
        # pid -> (start, its main thread's ran ns, when read): quiet ticks skip the reading
        self._main_ns: dict[int, tuple[float, int, float]] = {}
        self._quiet_skips = 0  # quiet ticks in a row since it

    def sample(self, cmap: dict[int, list[int]] | None = None) -> TreeSample | None:
        """None when the root process is gone. `cmap`: this tick's `children_map()`."""
        now = time.monotonic()
        root = self._read(self.root_pid)
        if root is None or self._root_start not in (None, root.start):  # gone, zombie or reused
            self.close()
            return None
        self._root_start = root.start
        stats = {self.root_pid: root}
        for pid in descendants(self.root_pid, cmap if cmap is not None else children_map()):
            st = self._read(pid)
            if st is not None:
                stats[pid] = st
        if stats.keys() != self._last.keys():  # processes came or went: close what they left
            self._files.keep_only({f"/proc/{pid}/stat" for pid in stats}
                                  | {f"/proc/{pid}/schedstat" for pid in stats if pid != self.root_pid})
        quiet = self._quiet_tick(stats)
        if quiet is not None:
            self._last, self._t = stats, now
            return quiet
        cores, by_pid = None, None
        if self._t is not None and now > self._t:
            interval, wall = now - self._t, time.time()
            by_pid = {}
            for pid, st in stats.items():
                prev = self._last.get(pid)
                if prev is not None and prev.start == st.start:
                    by_pid[pid] = max(0.0, st.cpu - prev.cpu) / interval
                elif wall - st.start <= interval + 0.5:
                    # new since the last tick, or a reused PID: all its CPU time was spent in this
                    # interval, unless it is older than the interval (first sight of an old process)
                    by_pid[pid] = st.cpu / interval
            cores = round(sum(by_pid.values()), 3)
        main = self._main_cores(stats, now)
        waits, note, throttled, busy = self._read_waits(stats, now)
        io = self._disk.read(stats, now) if self._disk is not None and self.cpu_wait else None
        mem = self._mem.read(now) if self._mem is not None and self.cpu_wait else None
        cgio = self._cgio.read(now) if self._cgio is not None and self.cpu_wait else None
        still = self._still(stats)
        self._last, self._t = stats, now
        out = TreeSample(pids=tuple(sorted(stats)), cpu_cores=cores,
                         rss=sum(st.rss for st in stats.values()),
                         threads=sum(st.threads for st in stats.values()), cpu_by_pid=by_pid,
                         waits=waits, wait_note=note, throttled=throttled, busy=busy, io=io,
                         memory=mem, main_cores_by_pid=main, cgroup_io=cgio,
                         autogroup=self.autogroup)
        # a full reading that found nothing moving: no CPU second since the last tick, no
        # thread that ran or waited for a CPU, no read from storage, no process blocked on it
        self._full = out if (still and not any(r or w for r, w in (waits or {}).values())
                             and (io is None or (not io.read_bps and not io.blocked))) else None
        self._quiet_skips = 0
        return out

    def _still(self, stats: dict[int, Stat]) -> bool:
        """Whether nothing moved since the last tick: the same processes, each in the same
        state (none running, runnable or blocked on the disk), with the same CPU seconds
        (utime + stime of all its threads) and resident memory."""
        last = self._last
        if self._t is None or stats.keys() != last.keys():
            return False
        for pid, st in stats.items():
            prev = last[pid]
            if (st.cpu != prev.cpu or st.start != prev.start or st.state != prev.state
                    or st.state in WORKING_STATES or st.rss != prev.rss
                    or st.threads != prev.threads):
                return False
        return True

    def _quiet_tick(self, stats: dict[int, Stat]) -> TreeSample | None:
        """This tick's sample without the per-thread, disk and memory readings, where the tree is
        quiet: its last full reading found nothing moving and nothing moved since (`_still`);
        then that reading's figures stand (what ran under a clock tick meanwhile lands in the
        next full reading's deltas). Every `QUIET_EVERY`th tick is read in full all the same;
        a tree whose CPU time moved is read at once. None: read in full now."""
        full = self._full
        if full is None or self._quiet_skips >= QUIET_EVERY - 1 or not self._still(stats):
            return None
        self._quiet_skips += 1
        # not read this tick: the next reading's rate spans it (a 0 here would count it twice)
        return dataclasses.replace(full, cpu_cores=0.0, cpu_by_pid=dict.fromkeys(stats, 0.0),
                                   main_cores_by_pid=None, quiet=True)

    def _main_cores(self, stats: dict[int, Stat], now: float) -> dict[int, float] | None:
        """Cores of each process but the root since its last reading, its main thread's
        schedstat (a loader worker's work runs there); None where not read. A process first
        seen is absent (its ns so far are not this interval's); quiet ticks between two
        readings are in the interval (what ran then lands here: the ns are cumulative)."""
        if not PROC or not self.cpu_wait:
            return None
        out: dict[int, float] = {}
        seen: dict[int, tuple[float, int, float]] = {}
        for pid, st in stats.items():
            if pid == self.root_pid:
                continue
            try:
                got = schedstat.parse_schedstat(self._files.read(f"/proc/{pid}/schedstat"))
            except OSError:
                got = None
            if got is None:
                continue
            seen[pid] = (st.start, got[0], now)
            prev = self._main_ns.get(pid)
            if prev is not None and prev[0] == st.start and now > prev[2]:
                out[pid] = max(0, got[0] - prev[1]) / 1e9 / (now - prev[2])
        first = not self._main_ns and self._t is None
        self._main_ns = seen
        return None if first else out

    def _read_waits(self, stats: dict[int, Stat], now: float) -> WaitReading:
        """(pid -> (ran, waited) ns, note, throttled share, pid -> busy threads); Nones when
        off. Read every
        `schedstat.READ_EVERY` ticks (the figures of the last reading in between), which keeps
        the reading within 10 % of the tick's cost (docs/benchmarks.md); every tick until a
        reading has figures."""
        if self._sched is None or not self.cpu_wait:
            return None, None, None, None
        if self._waits_skip > 0 and self._waits_last[0]:  # (until the first figures: read
            self._waits_skip -= 1  # each tick, so that `--once`'s second sample has them)
            return self._waits_last
        waits = self._sched.read({pid: (st.start, st.threads, st.cpu) for pid, st in stats.items()})
        throttled = self._throttle.read(now) if self._throttle is not None else None
        self._waits_last = (waits, self._sched.note, throttled, self._sched.busy(waits))
        self._waits_skip = schedstat.READ_EVERY - 1
        return self._waits_last

    def peek_io(self, only_reading: bool = False) -> None:
        """One more look at the processes' states for the disk's blocked share (between ticks)."""
        if self._disk is not None and self.cpu_wait:
            self._disk.peek(only_reading=only_reading)

    def reading(self) -> bool:
        """Whether the job read from storage at the last reading (the looks between ticks)."""
        return self._disk is not None and self.cpu_wait and self._disk.reading()

    def stats(self) -> dict[int, Stat]:
        """The last `sample()`'s processes (pid -> Stat), for the process tree."""
        return self._last

    def close(self) -> None:
        """Close the /proc files kept open for this tree."""
        self._files.close()
        if self._sched is not None:
            self._sched.close()
        if self._throttle is not None:
            self._throttle.close()
        if self._disk is not None:
            self._disk.close()
        if self._mem is not None:
            self._mem.close()
        if self._cgio is not None:
            self._cgio.close()
