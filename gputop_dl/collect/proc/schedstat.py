"""A job's threads' run-queue delay: each one's /proc/PID/task/TID/schedstat, read across ticks.

Each Linux thread's `schedstat` holds three numbers: nanoseconds it ran on a CPU, nanoseconds it
was runnable but waited in a run queue for one, and its time slices. A job's *CPU wait* over an
interval is the waited nanoseconds of all its threads over their runnable ones (ran + waited):
0 when every thread that wanted a core got one at once, 0.5 when they waited as long as they ran.
The files are readable for any user's process (mode 0444) and cost one `pread` a thread:

    reader = SchedReader()                       # one per job tree, kept across ticks
    waits = reader.read({pid: (start, threads)}) # pid -> (ran ns, waited ns) since the last read
    busy = reader.busy(pids)                     # pid -> its busy threads (a pool?)

collect/proc/cpu_wait.py turns these deltas into the job's `CpuWait` (`job_wait`, `tree_wait`).

`SchedReader` keeps each thread's file open (its own budget of descriptors) and
lists /proc/PID/task again only when the process's thread count (from /proc/PID/stat, read
anyway) no longer matches the threads it knows, or a thread's read failed: a thread that
vanished is dropped silently, and one that appeared counts from its second reading (its first
is the start of its deltas), as does a new process or a reused PID. Faults never raise: a kernel
without schedstat, another user's process that /proc hides (`hidepid`), or a process in another
PID namespace become the reader's `note` ("CPU wait: not available (...)").

Its cgroup's CPU throttling, the other half of a job's CPU wait, is read by
collect/proc/cgroup_cpu.py.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable, Mapping
from typing import Callable

from gputop_dl.collect.proc.procfs import read_proc

# pid -> (start time, thread count[, CPU seconds]) of this tick's live processes (`SchedReader.read`)
ProcTimes = tuple[float, int] | tuple[float, int, float]
# pid -> its busy threads (`SchedReader.busy`): (wait share, runnable share, ms run per slice,
# share of its context switches that were voluntary)
Busy = dict[int, tuple[tuple[float, float, float | None, float | None], ...]]

# the tree sampler reads the threads every this many ticks and shows the last reading between:
# at ~2.5 µs a thread, every tick cost 10-15 % of a loaded 2-core box's tick (docs/benchmarks.md)
READ_EVERY = 2
KERNEL_NOTE = "CPU wait: not available (kernel: no /proc/PID/task/TID/schedstat)"
# a trainer's thread runnable at least this share of the interval is busy: two or more busy
# threads in one process are taken for an intra-op pool (OpenMP/MKL, torch.get_num_threads() > 1)
POOL_BUSY = 0.25


def parse_schedstat(data: bytes) -> tuple[int, int, int] | None:
    """'RUN_NS WAIT_NS SLICES' -> (ran ns, waited ns, time slices; 0 where a kernel writes
    no third number); None for a malformed line."""
    parts = data.split()
    try:
        return int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) > 2 else 0
    except (IndexError, ValueError):
        return None


_VOL, _INV = b"\nvoluntary_ctxt_switches:", b"\nnonvoluntary_ctxt_switches:"


def parse_switches(status: bytes) -> tuple[int, int] | None:
    """A thread's /proc status -> (voluntary, involuntary) context switches so far; None where
    either line is missing or malformed."""
    vol, inv = status.rfind(_VOL), status.rfind(_INV)
    if vol < 0 or inv < 0:
        return None
    try:
        return (int(status[vol + len(_VOL):].split(None, 1)[0]),
                int(status[inv + len(_INV):].split(None, 1)[0]))
    except (ValueError, IndexError):
        return None


class _Threads:
    """One process's threads as last listed: ids, how each is read (a kept descriptor, or its
    path), and each one's last (ran, waited, slices) totals (None: no reading yet)."""

    __slots__ = ("start", "tids", "handles", "last", "idle", "cpu", "delta", "skipped", "quiet",
                 "switches")

    def __init__(self, start: float):
        self.start = start
        self.tids: list[int] = []
        self.handles: list[int | str] = []
        self.last: list[tuple[int, int, int] | None] = []  # ran, waited ns; time slices
        self.idle: list[bool] = []  # neither ran nor waited between its last two readings
        self.cpu: float | None = None  # the process's CPU seconds at the last read
        # tid -> (ran ns, waited ns, time slices) over the last read
        self.delta: dict[int, tuple[int, int, int]] = {}
        self.skipped = 0  # readings skipped in a row: it used no CPU since its last one
        self.quiet = False  # its last reading: no thread ran or waited since the one before
        # tid -> (voluntary, involuntary) context switches at its last `busy` reading
        self.switches: dict[int, tuple[int, int]] = {}


class SchedReader:
    """The schedstat of one job tree's threads, across ticks; touched by one thread.

    Each thread's file is kept open (at most `KEEP_MAX` descriptors for all readers together;
    past that a thread's file is opened and closed per read) and re-read with `pread`."""

    kept = 0  # descriptors kept open by all readers
    KEEP_MAX = 512
    IDLE_EVERY = 4  # an idle thread is read every this many ticks (see `read`)
    SKIP_IDLE = True  # a process that used no CPU since its last reading is skipped (`read`)

    def __init__(self, proc: str = "/proc", read: Callable[[str, int], bytes] | None = None,
                 listdir: Callable[[str], list[str]] = os.listdir):
        """`read` (tests): read every file by path with it, keeping nothing open."""
        self.proc = proc
        self._read_path = read or read_proc
        self._keep = read is None
        self._listdir = listdir
        self._procs: dict[int, _Threads] = {}
        self.note: str | None = None  # why some or all of the job's CPU wait is unknown
        self.off = False  # the kernel has no schedstat: not looked for again
        self._ticks = 0
        self._t: float | None = None  # when the last read was (monotonic)
        self.span_s: float | None = None  # seconds between the last two reads

    # --- one process's threads -------------------------------------------------------------
    def _fault(self, pid: int, exc: OSError) -> None:
        if exc.errno in (errno.EACCES, errno.EPERM):
            self.note = (f"CPU wait: not available for PID {pid} (another user's process, and "
                         f"/proc does not let us read its threads)")
        elif exc.errno == errno.ENOENT and os.path.exists(f"{self.proc}/{pid}/stat"):
            self.note = (f"CPU wait: not available for PID {pid} (its threads are not visible "
                         f"in {self.proc}: another PID namespace?)")
        # ESRCH / ENOENT of a process that is gone: dropped silently

    def _get(self, handle: int | str) -> bytes:
        if isinstance(handle, int):
            return os.pread(handle, 128, 0)
        return self._read_path(handle, 256)

    def _open(self, path: str) -> int | str:
        """A kept descriptor for `path`, or the path itself (tests, or past the budget)."""
        if self._keep and SchedReader.kept < self.KEEP_MAX:
            fd = os.open(path, os.O_RDONLY)
            SchedReader.kept += 1
            return fd
        return path

    def _drop(self, handles: Iterable[int | str]) -> None:
        for h in handles:
            if type(h) is int:
                os.close(h)
                SchedReader.kept -= 1

    def _list(self, pid: int, start: float, old: _Threads | None) -> _Threads | None:
        """List the process's threads; keep what is known of those still there, open and read
        the new ones (their first reading). None when it cannot be listed (note set where a
        user would ask) or the kernel has no schedstat (`off`)."""
        try:
            tids = sorted(int(t) for t in self._listdir(f"{self.proc}/{pid}/task") if t.isdigit())
        except OSError as exc:
            self._fault(pid, exc)
            if old is not None:
                self._drop(old.handles)
            return None
        if old is not None and old.start != start:  # the PID is another process now
            self._drop(old.handles)
            old = None
        known = (dict(zip(old.tids, zip(old.handles, old.last, old.idle))) if old is not None
                 else {})
        st = _Threads(start)
        if old is not None:
            st.cpu = old.cpu
        for tid in tids:
            idle = False
            if tid in known:
                h, last, idle = known.pop(tid)
            else:
                path = f"{self.proc}/{pid}/task/{tid}/schedstat"
                try:
                    h = self._open(path)
                    last = parse_schedstat(self._get(h))
                except OSError as exc:
                    if exc.errno == errno.ENOENT and tid == pid and os.path.isdir(
                            f"{self.proc}/{pid}/task/{tid}"):
                        self.off = True  # the thread is there, its schedstat is not
                    elif exc.errno in (errno.EACCES, errno.EPERM):
                        self._fault(pid, exc)
                    if self.off:
                        self._drop([h for h in st.handles])
                        self._drop([h for h, _, _ in known.values()])
                        return None
                    continue  # exited since the listing
            st.tids.append(tid)
            st.handles.append(h)
            st.last.append(last)
            st.idle.append(idle)
        self._drop([h for h, _, _ in known.values()])  # threads that exited
        return st

    def read(self, procs: Mapping[int, ProcTimes]) -> dict[int, tuple[int, int]]:
        """`procs`: pid -> (start time, thread count[, CPU seconds]) from /proc/PID/stat, of this
        tick's live processes. Returns pid -> (ran ns, waited ns) since the last read, summed
        over the threads read both times; a process seen for the first time is absent.

        With the CPU seconds, a thread that neither ran nor waited between its last two
        readings is read only every `IDLE_EVERY` ticks, unless the process used more CPU than
        the threads read account for (then all are read): torch keeps many idle threads. A
        quiet process (its last reading found no thread that ran or waited) whose CPU seconds
        (utime + stime, all its threads) did not move since is not read at all, up to
        `IDLE_EVERY - 1` times in a row: an idle job costs no thread reads on most ticks (64
        jobs with 2,000 threads, docs/benchmarks.md). What it ran or waited meanwhile (under a
        clock tick) goes into its next reading's delta.
        /proc/PID/schedstat would be one read, but it is the main thread's alone, not a sum."""
        self.note = None
        if self._stopped():
            return {}
        now = time.monotonic()
        self.span_s = None if self._t is None else now - self._t
        self._t = now
        out: dict[int, tuple[int, int]] = {}
        tick = self._ticks = self._ticks + 1
        for pid, entry in procs.items():
            start, nthreads = entry[0], entry[1]
            cpu = entry[2] if len(entry) > 2 else None
            st = self._procs.get(pid)
            if st is None or st.start != start or len(st.tids) != nthreads:
                fresh = st is None or st.start != start
                st = self._list(pid, start, st)
                if st is None:
                    self._procs.pop(pid, None)
                    if self.off:
                        return self._kernel_off()
                    continue
                self._procs[pid] = st
                if fresh:
                    st.cpu = cpu
                    continue  # a new process: its first readings were just taken
            skip = cpu is not None and st.cpu is not None
            if (skip and self.SKIP_IDLE and st.quiet and cpu == st.cpu
                    and st.skipped < self.IDLE_EVERY - 1):
                st.skipped += 1
                continue
            if st.skipped:  # read after skips: every thread (the two cadences must not alias)
                st.skipped = 0
                idx = list(range(len(st.tids)))
            else:
                idx = [i for i, tid in enumerate(st.tids)
                       if not (skip and st.idle[i] and (tid + tick) % self.IDLE_EVERY)]
            st.delta = {}  # this reading's per-thread deltas (both passes below add to it)
            run, wait, counted, lost = self._read_threads(st, idx)
            if (cpu is not None and st.cpu is not None and len(idx) < len(st.tids)
                    and (cpu - st.cpu) * 1e9 > run + 2e7):
                # the process ran more than the threads read: one of the idle ones woke
                rest = sorted(set(range(len(st.tids))) - set(idx))
                r2, w2, c2, l2 = self._read_threads(st, rest)
                run, wait, counted, lost = run + r2, wait + w2, counted or c2, lost or l2
            st.cpu = cpu
            st.quiet = counted and run == 0 and wait == 0
            if lost:  # list again now: the gone are dropped, the new read for the first time
                st = self._list(pid, start, st)
                if st is None:
                    self._procs.pop(pid, None)
                    if self.off:
                        return self._kernel_off()
                else:
                    self._procs[pid] = st
            if counted:
                out[pid] = (max(0, run), max(0, wait))
        for pid in [p for p in self._procs if p not in procs]:
            self._drop(self._procs.pop(pid).handles)
        return out

    def _read_threads(self, st: _Threads, idx: list[int]) -> tuple[int, int, bool, bool]:
        """Read these threads of `st`: (ran ns, waited ns since their last readings, any
        delta, a thread gone)."""
        run = wait = 0
        counted = lost = False
        get, pread, handles, last, idle = self._get, os.pread, st.handles, st.last, st.idle
        delta = st.delta
        for i in idx:
            h = handles[i]
            try:
                data = pread(h, 128, 0) if type(h) is int else get(h)
                sp = data.split(None, 3)
                now = (int(sp[0]), int(sp[1]), int(sp[2]) if len(sp) > 2 else 0)
            except OSError:
                lost = True  # the thread exited mid-read
                continue
            except (ValueError, IndexError):
                continue
            prev = last[i]
            last[i] = now
            if prev is not None:
                run += now[0] - prev[0]
                wait += now[1] - prev[1]
                delta[st.tids[i]] = (now[0] - prev[0], now[1] - prev[1], now[2] - prev[2])
                counted = True
                idle[i] = now == prev
        return run, wait, counted, lost

    def busy(self, pids: Iterable[int]) -> Busy:
        """Per process of `pids`, its threads busy over the last read's span (runnable at least
        POOL_BUSY of it): (wait share, runnable share, ms on a CPU per time slice, share of its
        context switches since its last busy reading that were voluntary; None where the
        kernel counted no slice, or on a thread's first such reading), the busiest first. The
        switches come from /proc/PID/task/TID/status, read only in a process with two or more
        busy threads (a pool; a lone busy thread, e.g. a loader worker's, costs no read)."""
        span = self.span_s
        out: Busy = {}
        if not span:
            return out
        for pid in pids:
            st = self._procs.get(pid)
            if st is None:
                continue
            busy = [(tid, r, w, n) for tid, (r, w, n) in st.delta.items()
                    if r + w > 0 and (r + w) / 1e9 / span >= POOL_BUSY]
            # the switches tell a pool's spin (job_wait): read only where there can be a pool
            pooled = len(busy) >= 2
            seen: dict[int, tuple[int, int]] = {}
            rows = []
            for tid, r, w, n in busy:
                yields = None
                now = self._switches(pid, tid) if pooled else None
                if now is not None:
                    seen[tid] = now
                    old = st.switches.get(tid)
                    if old is not None and (dv := now[0] - old[0]) + (dn := now[1] - old[1]) > 0:
                        yields = round(dv / (dv + dn), 4)
                rows.append((round(w / (r + w), 4), round(min(1.0, (r + w) / 1e9 / span), 4),
                             None if n <= 0 else round(r / n / 1e6, 3), yields))
            st.switches = seen  # a thread no longer busy starts again from its next reading
            out[pid] = tuple(sorted(rows, key=lambda x: -x[1]))
        return out

    def _switches(self, pid: int, tid: int) -> tuple[int, int] | None:
        """A thread's (voluntary, involuntary) context switches so far (None: unreadable)."""
        try:
            data = self._read_path(f"{self.proc}/{pid}/task/{tid}/status", 4096)
        except OSError:
            return None
        return parse_switches(data)

    def _stopped(self) -> bool:
        """Whether the kernel has no schedstat (`off`, set by `_list`); the note then says so."""
        if self.off:
            self.note = KERNEL_NOTE
        return self.off

    def _kernel_off(self) -> dict[int, tuple[int, int]]:
        self.note = KERNEL_NOTE
        self.close()
        return {}

    def close(self) -> None:
        for st in self._procs.values():
            self._drop(st.handles)
        self._procs.clear()

    __del__ = close
