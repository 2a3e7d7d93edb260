"""Disk I/O of a job: what its processes read from storage, whether they sleep on it, and where.

Per process of the job's tree, each tick (the tree sampler calls `DiskReader.read`):

- `/proc/PID/io`: `read_bytes` is what came from the storage layer, `rchar` every byte read
  (page-cache hits too). It needs the right to trace the process (same user, or root): another
  user's process gives the note "disk I/O: not readable (other user)", never a guess;
- the process's state, from the `/proc/PID/stat` the sampler reads anyway: `D` is an
  uninterruptible sleep, mostly on block I/O. A look at which some process of the job is in `D`
  and its trainer (the root) is not running (`R`) is a look at a job waiting on I/O: its
  loader reads, and the trainer waits for it. Looked at once a tick (and by `peek` between ticks), so the share is a count of looks;
- major page faults (stat field 12: reads of mmap'd files and swap-ins) per second;
- `delayacct_blkio_ticks` (field 42): time blocked on block I/O, exact, but only where
  `kernel.task_delayacct` is 1 (off by default since Linux 5.14; the kernel then writes 0
  there: "unknown" (None), never 0; the switch is read again every `FILES_RECHECK` ticks);
- the filesystem the job reads from: the device of the regular files its processes hold open
  (`/proc/PID/fd`, once it has read from storage), named from `/proc/self/mountinfo`.
- `syscw` in the same `/proc/PID/io`: each process's write calls a second (`writes_ps`), of
  which a job's loader workers' (those named `pt_data_worker` where any is) are its batches
  handed to the trainer, a fixed number each (`io_fields`' `loader_writes_per_s`;
  analyse/slowdown/pace.py).

Faults never raise: a process gone between two reads is dropped, an unreadable file is a note.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import random
import stat
from collections import Counter
from dataclasses import dataclass
from collections.abc import Collection, Mapping
from typing import Callable, Protocol, TypedDict

from gputop_dl.collect.proc.procfs import _TICK, ProcFiles, read_proc


class Stat(Protocol):
    """What the reader reads of a process's `procs.Stat` (named here, not imported: procs
    imports this reader)."""

    @property
    def state(self) -> str: ...
    @property
    def start(self) -> float: ...
    @property
    def majflt(self) -> int | None: ...
    @property
    def blkio(self) -> int | None: ...
    @property
    def loader(self) -> bool: ...

# pid -> (start, rchar, read_bytes, majflt, blkio, syscw) of one reading; None: unknown
Counters = dict[int, tuple[float, int, int, int | None, int | None, int | None]]

DELAYACCT = "/proc/sys/kernel/task_delayacct"
READ_EVERY = 2  # ticks between two readings of the byte counters (the states: every tick)
FILES_EVERY = 5  # ticks between two looks at a job's open files, until a device is found
FILES_RECHECK = 30  # ... and after
NOT_READABLE = "disk I/O: not readable (another user's process)"
# where a job's open files live but are not its data: the interpreter, devices, the kernel's
SKIP_PREFIXES = ("/dev/", "/proc/", "/sys/", "/usr/lib/", "/usr/share/", "/etc/")


def parse_io(data: bytes) -> tuple[int, int, int | None] | None:
    """/proc/PID/io -> (rchar, read_bytes, syscw); None for a malformed file (syscw None where
    the file has none)."""
    vals = {}
    for line in data.split(b"\n"):
        key, _, val = line.partition(b":")
        if key in (b"rchar", b"read_bytes", b"syscw"):
            try:
                vals[key] = int(val)
            except ValueError:
                return None
    if b"rchar" not in vals or b"read_bytes" not in vals:
        return None
    return vals[b"rchar"], vals[b"read_bytes"], vals.get(b"syscw")


def delayacct_on(path: str = DELAYACCT, read: Callable[[str], bytes] = read_proc) -> bool:
    try:
        return read(path).strip() == b"1"
    except OSError:
        return False


@dataclass(frozen=True)
class Mount:
    """One filesystem from /proc/self/mountinfo."""

    dev: int  # st_dev
    point: str
    fstype: str
    source: str  # "/dev/vda", "server:/export", "tmpfs"

    @property
    def label(self) -> str:
        """"vda (/, ext4)"; a network source as it is ("nas:/data (/mnt/data, nfs4)")."""
        src = os.path.basename(self.source) if self.source.startswith("/dev/") else self.source
        return f"{src} ({self.point}, {self.fstype})"


def parse_mountinfo(data: bytes) -> dict[int, Mount]:
    """st_dev -> the mount (the last one listed for a device wins: it is the one on top)."""
    out: dict[int, Mount] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 5 or len(r) < 2:
            continue
        try:
            major, minor = (int(x) for x in f[2].split(":"))
        except ValueError:
            continue
        point = f[4].replace("\\040", " ")
        out[os.makedev(major, minor)] = Mount(os.makedev(major, minor), point, r[0], r[1])
    return out


@dataclass(frozen=True)
class DiskIO:
    """A job's disk I/O over one interval (None: unknown; `note` says why)."""

    read_bps: float | None = None  # bytes/s from storage (read_bytes)
    rchar_bps: float | None = None  # bytes/s read, page-cache hits included
    # share of the looks since the last tick on which a process was in D and none running
    blocked: float | None = None
    majflt_ps: float | None = None  # major faults per second
    blkio_share: float | None = None  # delayacct: processes' time blocked on I/O / wall time
    device: int | None = None  # st_dev of the filesystem its open files are on
    device_label: str | None = None  # "vda (/, ext4)"
    note: str | None = None
    # write calls a second of each process read at both ends of the interval (syscw): a
    # loader worker makes a fixed number a batch, whatever its CPU (analyse/slowdown/pace.py)
    writes_ps: tuple[tuple[int, float], ...] = ()


class DiskReader:
    """The disk I/O of one job tree across ticks; touched by one thread."""

    def __init__(self, root: int | None = None, proc: str = "/proc",
                 read: Callable[[str], bytes] | None = None,
                 listdir: Callable[[str], list[str]] = os.listdir,
                 statf: Callable[[str], os.stat_result] = os.stat):
        self.root, self.proc = root, proc
        self._files = ProcFiles()
        self._read = read or self._files.read
        self._listdir, self._stat = listdir, statf
        self._last: Counters = {}
        self._t: float | None = None
        self._sysctl = read or read_proc
        self._delayacct = delayacct_on(read=self._sysctl)
        self._ticks = 0
        self._pids: set[int] = set()
        self._looked = self._hits = 0  # looks at the states between ticks (`peek`), and blocked
        self._io = DiskIO()
        self._files_at = 0  # the tick of the next look at the open files
        self._device: int | None = None
        self._label: str | None = None
        self._mounts: dict[int, Mount] | None = None

    def read(self, stats: Mapping[int, Stat], now: float) -> DiskIO:
        """`stats`: pid -> procs.Stat of this tick's live processes of the tree.

        The states (from `stats`) are this tick's; the byte counters are read every
        `READ_EVERY` ticks (the rates of the last reading in between), and the open files only
        once the job has read from storage, every `FILES_EVERY` ticks until a device is found
        and every `FILES_RECHECK` ticks after: within 10 % of the tick's cost with 12 jobs
        (benchmarks/io_cost.py)."""
        looked = self._looked + 1
        hits = self._hits + _blocked({pid: st.state for pid, st in stats.items()}, self.root)
        self._looked = self._hits = 0
        blocked = hits / looked
        self._ticks += 1
        if self._t is not None and self._ticks % READ_EVERY and stats.keys() == self._pids:
            return dataclasses.replace(self._io, blocked=blocked)
        self._pids = set(stats)
        note = None
        cur: Counters = {}
        for pid, st in stats.items():
            try:
                io = parse_io(self._read(f"{self.proc}/{pid}/io"))
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    note = NOT_READABLE
                io = None
            if io is None:
                continue
            cur[pid] = (st.start, io[0], io[1], st.majflt, st.blkio, io[2])
        if cur.keys() != self._last.keys():
            self._files.keep_only({f"{self.proc}/{pid}/io" for pid in cur})
        last, t_last = self._last, self._t
        self._last, self._t = cur, now
        rates = self._rates(cur, last, t_last, now, blocked, note)
        named = {pid for pid, st in stats.items() if st.loader}
        if named:  # its DataLoader workers, named so: a helper's writes are not batches
            rates = dataclasses.replace(rates, writes_ps=tuple(
                (pid, w) for pid, w in rates.writes_ps if pid in named))
        if self._ticks % FILES_RECHECK == 0:  # switched off since? then unknown, never 0
            self._delayacct = delayacct_on(read=self._sysctl)
        every = FILES_RECHECK if self._device is not None else FILES_EVERY
        if (rates.read_bps or self._device is not None) and self._ticks >= self._files_at:
            self._files_at = self._ticks + every
            self._device = self._open_device(stats) or self._device
            self._label = self._device_label()
        self._io = dataclasses.replace(rates, device=self._device, device_label=self._label)
        return self._io

    def reading(self) -> bool:
        """Whether its last reading found it reading from storage (what `only_reading` peeks at)."""
        return bool(self._io.read_bps)

    def peek(self, proc: str | None = None, only_reading: bool = False) -> None:
        """One more look at the states of the processes of the last reading, between two ticks
        (`--once` looks fifty times in its second; the monitor nine times between its ticks, at
        the jobs that read from storage: `only_reading`): the blocked share counts every look."""
        if only_reading and not self._io.read_bps:
            return
        states = {}
        for pid in self._pids:
            try:
                data = read_proc(f"{proc or self.proc}/{pid}/stat", 1024)
            except OSError:
                continue
            at = data.rfind(b")") + 2
            states[pid] = data[at:at + 1].decode("ascii", "replace")
        if states:
            self._looked += 1
            self._hits += _blocked(states, self.root)

    def _rates(self, cur: Counters, last: Counters, t_last: float | None, now: float, blocked: float,
               note: str | None) -> DiskIO:
        if t_last is None or now <= t_last:
            return DiskIO(blocked=blocked, note=note)
        dt = now - t_last
        rchar = rb = flt = blk = 0
        counted, flt_known, blk_known = False, True, self._delayacct
        writes = []
        for pid, (start, rc, r, mf, bk, sw) in cur.items():
            prev = last.get(pid)
            if prev is None or prev[0] != start:
                continue  # a new process: its totals are its first reading
            rchar += rc - prev[1]
            rb += r - prev[2]
            if sw is not None and prev[5] is not None:
                writes.append((pid, max(0, sw - prev[5]) / dt))
            if mf is None or prev[3] is None:
                flt_known = False
            else:
                flt += mf - prev[3]
            if bk is None or prev[4] is None:
                blk_known = False
            else:
                blk += bk - prev[4]
            counted = True
        if not counted:
            return DiskIO(blocked=blocked, note=note)
        return DiskIO(read_bps=max(0, rb) / dt, rchar_bps=max(0, rchar) / dt, blocked=blocked,
                      majflt_ps=max(0, flt) / dt if flt_known else None,
                      blkio_share=(max(0, blk) / _TICK / dt) if blk_known else None,
                      note=note, writes_ps=tuple(writes))

    def _device_label(self) -> str | None:
        if self._device is None:
            return None
        if self._mounts is None:
            try:
                self._mounts = parse_mountinfo(read_proc(f"{self.proc}/self/mountinfo", 65536))
            except OSError:
                self._mounts = {}
        m = self._mounts.get(self._device)
        return m.label if m else f"device {os.major(self._device)}:{os.minor(self._device)}"

    def _open_device(self, stats: Mapping[int, Stat]) -> int | None:
        """The st_dev most of the tree's open regular files are on (its data, most likely)."""
        devs: Counter[int] = Counter()
        for pid in stats:
            folder = f"{self.proc}/{pid}/fd"
            try:
                fds = self._listdir(folder)
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(f"{folder}/{fd}")
                    if not target.startswith("/") or target.startswith(SKIP_PREFIXES):
                        continue
                    st = self._stat(f"{folder}/{fd}")
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    devs[st.st_dev] += 1
        return devs.most_common(1)[0][0] if devs else None

    def close(self) -> None:
        self._files.close()


def look_times(n: int, rng: random.Random | None = None) -> list[float]:
    """When to look at the jobs' states between two samples, as fractions of the span between
    them: one at a random moment of each of `n` equal slots (slot 0 starts at the first
    sample, which is a look of its own; the slots are 1..n of n + 1). Not the slots' starts: a
    job whose step locks to a 100 ms grid (a throttled disk dispatches in 100 ms slices) and
    looks every 100 ms find it at the same moment of its step every time. Looked at
    densely, a pair that waited 47 % and 48 % of 10 s read between 15 % and 94 % from looks
    on a 100 ms grid, as the grid's start moved; 41-58 % from looks at random moments of the
    same slots (benchmarks/look_aliasing.py)."""
    r = rng or random
    return [(k + r.random()) / (n + 1) for k in range(1, n + 1)]


def _blocked(states: dict[int, str], root: int | None) -> int:
    """1 when the job waits on I/O at this look: a process is in D (uninterruptible, mostly
    block I/O) and its trainer (the root) is not running. A trainer that runs while its loader
    workers read has the read off its critical path; a worker that runs beside another one in
    D (decoding, or waiting for a CPU on a busy box) does not make the trainer's wait shorter.
    Without a known root (tests): no process may be running."""
    if "D" not in states.values():
        return 0
    if root is not None and root in states:
        return int(states[root] != "R")
    return int("R" not in states.values())


class IoFields(TypedDict):
    """The `JobSample` fields of a job's disk I/O (see `io_fields`)."""

    io_read_bytes_per_s: int | None
    io_rchar_bytes_per_s: int | None
    io_blocked: float | None
    major_faults_per_s: float | None
    io_blkio_share: float | None
    io_device: int | None
    io_device_label: str | None
    io_note: str | None
    loader_writes_per_s: float | None
    io_cgroup: str | None
    io_cgroup_read_bytes_per_s: int | None
    io_cgroup_pressure: float | None


def io_fields(ts: object | None, trainers: Collection[int] = ()) -> IoFields:
    """The `JobSample` fields of a tree sample's (`procs.TreeSample`) `DiskIO` (ts None: the job is gone);
    `trainers`: its trainer PIDs (cpu_wait.trainer_pids), whose writes are not its loader's."""
    d: DiskIO = getattr(ts, "io", None) or DiskIO()
    workers = [w for pid, w in d.writes_ps if pid not in trainers]
    cg = getattr(ts, "cgroup_io", None)  # its v2 cgroup's (collect/proc/cgroup_io.py)
    return {"io_cgroup": cg.cgroup if cg else None,
            "io_cgroup_read_bytes_per_s": None if cg is None or cg.read_bytes_per_s is None
            else round(cg.read_bytes_per_s),
            "io_cgroup_pressure": None if cg is None or cg.pressure_some10 is None
            else round(cg.pressure_some10, 4),
            "loader_writes_per_s": round(sum(workers), 3) if workers else None,
            "io_read_bytes_per_s": None if d.read_bps is None else round(d.read_bps),
            "io_rchar_bytes_per_s": None if d.rchar_bps is None else round(d.rchar_bps),
            "io_blocked": None if d.blocked is None else round(d.blocked, 3), "major_faults_per_s":
                None if d.majflt_ps is None else round(d.majflt_ps, 2),
            "io_blkio_share": None if d.blkio_share is None else round(d.blkio_share, 4),
            "io_device": d.device, "io_device_label": d.device_label, "io_note": d.note}
