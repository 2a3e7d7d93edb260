"""CPU wait of a job: its threads' run-queue delay (/proc/PID/task/TID/schedstat) and its cgroup's CPU throttling.

Each Linux thread's `schedstat` holds three numbers: nanoseconds it ran on a CPU, nanoseconds it
was runnable but waited in a run queue for one, and its time slices. A job's *CPU wait* over an
interval is the waited nanoseconds of all its threads over their runnable ones (ran + waited):
0 when every thread that wanted a core got one at once, 0.5 when they waited as long as they ran.
The files are readable for any user's process (mode 0444) and cost one `pread` a thread:

    reader = SchedReader()                       # one per job tree, kept across ticks
    waits = reader.read({pid: (start, threads)}) # pid -> (ran ns, waited ns) since the last read
    cw = job_wait(waits, trainers={root, ranks}, note=reader.note, throttled=...)

`SchedReader` keeps each thread's file open (`ThreadFiles`, its own budget of descriptors) and
lists /proc/PID/task again only when the process's thread count (from /proc/PID/stat, read
anyway) no longer matches the threads it knows, or a thread's read failed: a thread that
vanished is dropped silently, and one that appeared counts from its second reading (its first
is the start of its deltas), as does a new process or a reused PID. Faults never raise: a kernel
without schedstat, another user's process that /proc hides (`hidepid`), or a process in another
PID namespace become the reader's `note` ("CPU wait: not available (...)").

`CgroupThrottle` reads the cgroup v2 `cpu.stat` (throttled_usec) of the cgroup that holds the
job's quota: the job's own cgroup or the nearest parent with a `cpu.max` other than "max"
(from /proc/PID/cgroup, read once). No quota, or cgroup v1: None (nothing to throttle).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Callable

from gputop_dl.collect.procs import ProcFiles, read_proc

CGROUP_ROOT = "/sys/fs/cgroup"
KERNEL_NOTE = "CPU wait: not available (kernel: no /proc/PID/task/TID/schedstat)"
MIN_RUNNABLE_NS = 0  # a group with no runnable time in the interval has no share (None)


class ThreadFiles(ProcFiles):
    """`ProcFiles` for per-thread files, with a budget of open descriptors of its own (so the
    threads of big jobs never take the process files' budget)."""

    kept = 0
    keep_max = 512


def parse_schedstat(data: bytes) -> tuple[int, int] | None:
    """'RUN_NS WAIT_NS SLICES' -> (ran ns, waited ns); None for a malformed line."""
    parts = data.split()
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class CpuWait:
    """A job's CPU wait over one interval (None: unknown, `note` says why where a user would ask)."""

    fraction: float | None = None  # all its threads: waited / (ran + waited), 0..1
    trainer: float | None = None  # the trainer (rank) processes' threads
    workers: float | None = None  # the other processes' threads (data-loader workers)
    throttled: float | None = None  # cgroup quota: share of the interval spent throttled
    note: str | None = None


class SchedReader:
    """The schedstat of one job tree's threads, across ticks; touched by one thread."""

    def __init__(self, proc: str = "/proc", read: Callable[[str, int], bytes] | None = None,
                 listdir: Callable[[str], list[str]] = os.listdir):
        self.proc = proc
        self._files = ThreadFiles()
        self._read = read or self._files.read
        self._listdir = listdir
        self._tids: dict[int, list[int]] = {}  # pid -> its thread ids, as last listed
        self._last: dict[tuple[int, float, int], tuple[int, int]] = {}  # (pid, start, tid) -> totals
        self.note: str | None = None  # why some or all of the job's CPU wait is unknown
        self.off = False  # the kernel has no schedstat: not looked for again

    def _list(self, pid: int) -> list[int] | None:
        try:
            return [int(t) for t in self._listdir(f"{self.proc}/{pid}/task") if t.isdigit()]
        except OSError as exc:
            self._fault(pid, exc)
            return None

    def _fault(self, pid: int, exc: OSError) -> None:
        if exc.errno in (errno.EACCES, errno.EPERM):
            self.note = (f"CPU wait: not available for PID {pid} (another user's process, and "
                         f"/proc does not let us read its threads)")
        elif exc.errno == errno.ENOENT and os.path.exists(f"{self.proc}/{pid}/stat"):
            self.note = (f"CPU wait: not available for PID {pid} (its threads are not visible "
                         f"in {self.proc}: another PID namespace?)")
        # ESRCH / ENOENT of a process that is gone: dropped silently

    def read(self, procs: dict[int, tuple[float, int]]) -> dict[int, tuple[int, int]]:
        """`procs`: pid -> (start time, thread count from /proc/PID/stat) of this tick's live
        processes. Returns pid -> (ran ns, waited ns) since the last read, summed over the
        threads seen both times; a process seen for the first time is absent."""
        self.note = None
        if self.off:
            self.note = KERNEL_NOTE
            return {}
        out: dict[int, tuple[int, int]] = {}
        seen: dict[tuple[int, float, int], tuple[int, int]] = {}
        paths: set[str] = set()
        for pid, (start, nthreads) in procs.items():
            tids = self._tids.get(pid)
            if tids is None or len(tids) != nthreads:
                tids = self._list(pid)
                if tids is None:
                    self._tids.pop(pid, None)
                    continue
                self._tids[pid] = tids
            got = self._read_threads(pid, start, tids, seen, paths)
            if got is None:  # the kernel has no schedstat
                return {}
            run, wait, counted, lost = got
            if lost:  # a thread exited: list again now, and read the threads not read yet
                again = self._list(pid) or []
                self._tids[pid] = again
                got = self._read_threads(pid, start, [t for t in again if t not in tids], seen,
                                         paths)
                if got is None:
                    return {}
                run, wait, counted = run + got[0], wait + got[1], counted or got[2]
            if counted:
                out[pid] = (run, wait)
        for pid in [p for p in self._tids if p not in procs]:
            del self._tids[pid]
        if seen.keys() != self._last.keys():
            self._files.keep_only(paths)
        self._last = seen
        return out

    def _read_threads(self, pid: int, start: float, tids: list[int], seen: dict,
                      paths: set[str]) -> tuple[int, int, bool, bool] | None:
        """Read these threads of `pid` into `seen`: (ran ns, waited ns since the last read,
        any delta, a thread gone); None when the kernel has no schedstat."""
        run = wait = 0
        counted = lost = False
        for tid in tids:
            path = f"{self.proc}/{pid}/task/{tid}/schedstat"
            try:
                totals = parse_schedstat(self._read(path, 256))
            except OSError as exc:
                if exc.errno == errno.ENOENT and tid == pid and os.path.exists(
                        f"{self.proc}/{pid}/task/{tid}"):
                    self.off = True  # the thread is there, its schedstat is not
                    self.note = KERNEL_NOTE
                    self._files.close()
                    return None
                if exc.errno in (errno.EACCES, errno.EPERM):
                    self._fault(pid, exc)
                lost = True  # exited mid-read
                continue
            if totals is None:
                continue
            key = (pid, start, tid)
            seen[key] = totals
            paths.add(path)
            prev = self._last.get(key)
            if prev is not None:
                run += max(0, totals[0] - prev[0])
                wait += max(0, totals[1] - prev[1])
                counted = True
        return run, wait, counted, lost

    def close(self) -> None:
        self._files.close()


def _share(run: int, wait: int) -> float | None:
    total = run + wait
    return round(wait / total, 4) if total > MIN_RUNNABLE_NS else None


def job_wait(waits: dict[int, tuple[int, int]] | None, trainers: set[int] | frozenset[int],
             note: str | None = None, throttled: float | None = None) -> CpuWait:
    """A job's CPU wait from `SchedReader.read`'s per-process deltas: all threads, those of the
    `trainers` (the root and the rank processes) and those of every other process (its loader
    workers). None where no thread of the group was runnable in the interval, or no delta yet."""
    if not waits:
        return CpuWait(throttled=throttled, note=note)
    tr = [v for p, v in waits.items() if p in trainers]
    wk = [v for p, v in waits.items() if p not in trainers]

    def share(vals):
        return _share(sum(v[0] for v in vals), sum(v[1] for v in vals)) if vals else None

    return CpuWait(fraction=share(list(waits.values())), trainer=share(tr), workers=share(wk),
                   throttled=throttled, note=note)


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
    parts = [p for p in path.strip().split("/") if p]
    while True:
        folder = os.path.join(root, *parts)
        try:
            quota = read(os.path.join(folder, "cpu.max")).split()[0]
            if quota != b"max":
                return folder
        except (OSError, IndexError):
            pass
        if not parts:
            return None
        parts.pop()


class CgroupThrottle:
    """Share of the interval a job's cgroup spent throttled by its CPU quota (cpu.stat's
    throttled_usec over wall time, capped at 1); None without a quota."""

    def __init__(self, pid: int, proc: str = "/proc", root: str = CGROUP_ROOT):
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


def tree_wait(ts, root: int | None, dist=None) -> CpuWait:
    """A job's `CpuWait` from its tree sample (`procs.TreeSample`, None: gone), its root PID and
    its ranks (`snapshot.Distributed`): the root and the rank processes are its trainers."""
    if ts is None:
        return CpuWait()
    trainers = {root}
    if dist is not None:
        trainers |= {r.pid for r in dist.ranks}
    return job_wait(ts.waits, trainers, ts.wait_note, ts.throttled)


def wait_fields(cw: CpuWait) -> dict:
    """The `JobSample` fields of a `CpuWait` (cpu_wait_fraction, ...), as keyword arguments."""
    return {"cpu_wait_fraction": cw.fraction, "cpu_wait_trainer": cw.trainer,
            "cpu_wait_workers": cw.workers, "cpu_throttled_fraction": cw.throttled,
            "cpu_wait_note": cw.note}
