"""The host's busiest processes over a tick: who else takes the cores the jobs wait for.

Read only while a job waits for a CPU (or the host is nearly all busy): every second tick, one
pass over `/proc/PID/stat` of every process (~90-240 processes on the 2-core box), the CPU
seconds of each against its last reading, kept per (PID, start time) so a reused PID is not a
rate; the tick between gives the last pass's figures. The files stay open between passes and
are re-read with `pread` (`ProcFiles`, as many as `keep_files()` allows: 0.95 against 1.85 ms
for 91 processes, docs/benchmarks.md "Engine tick"), and the processes are the discovery's
listing of this tick where there is one (no second listing of /proc); all are closed when
nobody waits. The first pass after a quiet spell gives no rates (nothing to compare with): the
tick after does. Only the few busiest get their user (the owner of /proc/PID) and command line
(redacted as found jobs' are), read once per process (PID and start time) and again after
`NAME_AGE_S` (an `exec` keeps both): the same few are the busiest tick after tick. The live verdict
(analyse/live/passive.py) leaves out the jobs' own processes and names the rest as load from
outside the jobs.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Collection
from typing import Any, NamedTuple

from gputop_dl.collect.proc.autogroup import applies, read_autogroup
from gputop_dl.collect.proc.identity import user_name
from gputop_dl.collect.proc.procfs import _TICK, ProcFiles, read_proc
from gputop_dl.collect.proc.procs import GONE_STATES, stat_fields
from gputop_dl.snapshot import NAMED_MIN_CORES as MIN_CORES, ProcLoad  # under it: not named
from gputop_dl.workload import shown_command

KEEP = 12  # the busiest processes kept per tick (the judge leaves the jobs' own out of them)
# sched(7)'s scheduling classes by number (SCHED_OTHER ... SCHED_DEADLINE; 4 is unused)
POLICIES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}
NAME_AGE_S = 30.0  # a process's user and command line are read again after this
# a pass every this many calls (ticks); the calls between give the last pass's figures, as the
# CPU wait's reading does (collect/proc/schedstat.py): a pass over /proc is ~2 ms on a busy box
READ_EVERY = 2


def keep_files() -> int:
    """How many `stat` files a pass keeps open: 512, or a quarter of the open-file limit where
    that is lower (256 at the usual 1,024: the other readers keep up to 256, procfs.KEEP_MAX)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 512 if soft == resource.RLIM_INFINITY else max(0, min(512, soft // 4))


def priority(fields: list[bytes]) -> dict[str, Any]:
    """A process's nice value and scheduling class from its `stat_fields(data, 20)` (the main
    thread's: `chrt -p`/`renice -p` set one thread); None where the line is short."""
    try:
        nice = int(fields[16])
    except (IndexError, ValueError):
        nice = None
    rest = fields[20].split() if len(fields) > 20 else []  # field 23 onwards
    try:
        n = int(rest[41 - 23])
        policy = POLICIES.get(n, str(n))
    except (IndexError, ValueError):
        policy = None
    return {"nice": nice, "policy": policy}


class _Named(NamedTuple):
    """What is read of one of the busiest once, and again after NAME_AGE_S."""

    t: float  # when read
    user: str | None
    command: str | None
    autogroups: bool  # autogroups apply to it (collect/proc/autogroup.py)


class BusiestSampler:
    """CPU per process between two passes; `sample()` once a tick while someone waits."""

    def __init__(self, proc: str = "/proc", keep: int = KEEP, every: int = READ_EVERY) -> None:
        self.proc, self.keep, self.every = proc, keep, max(1, every)
        self._result: tuple[ProcLoad, ...] | None = None  # the last pass's, with rates
        self._since = 0  # calls since that pass
        self._last: dict[tuple[int, int], float] = {}  # (pid, start ticks) -> CPU seconds
        self._t: float | None = None
        # (pid, start ticks) -> the busiest's names: read once, and again after NAME_AGE_S
        self._names: dict[tuple[int, int], _Named] = {}
        self._files = ProcFiles(own_max=keep_files())

    def forget(self) -> None:
        """Nobody waits: drop the last pass (the next one starts afresh) and close its files."""
        self._last, self._t, self._result = {}, None, None
        self._files.close()

    def sample(self, pids: Collection[int] | None = None) -> tuple[ProcLoad, ...] | None:
        """The busiest processes since the last pass, most cores first; None on the first
        pass (no rates yet) or where /proc cannot be listed. A pass every `every` calls once
        it has rates; the calls between give the last pass's result. `pids`: every process
        now (the discovery's listing of this tick); None: list /proc."""
        self._since += 1
        if self._result is not None and self._since < self.every:
            return self._result
        self._since = 0
        self._result = self._pass(pids)
        return self._result

    def _pass(self, pids: Collection[int] | None) -> tuple[ProcLoad, ...] | None:
        if pids is None:
            try:
                pids = [int(n) for n in os.listdir(self.proc) if n.isdigit()]
            except OSError:
                return None
        now = time.monotonic()
        cur: dict[tuple[int, int], float] = {}
        raw: dict[tuple[int, int], list[bytes]] = {}  # their fields, for the busiest's priority
        read, paths = self._files.read, set()
        for pid in pids:
            path = f"{self.proc}/{pid}/stat"
            try:
                f = stat_fields(read(path), 20)
                paths.add(path)
                if f[0] not in GONE_STATES:
                    k = (pid, int(f[19]))
                    cur[k], raw[k] = (int(f[11]) + int(f[12])) / _TICK, f
            except (OSError, IndexError, ValueError):
                continue
        self._files.keep_only(paths)  # the processes gone: their files closed
        last, t0 = self._last, self._t
        self._last, self._t = cur, now
        if t0 is None or now <= t0:
            return None
        dt = now - t0
        rates = sorted(((cpu - last[k]) / dt, k) for k, cpu in cur.items() if k in last)
        top = [(c, k) for c, k in reversed(rates[-self.keep:]) if c >= MIN_CORES]
        named = {}
        for _c, k in top:
            got = self._names.get(k)
            if got is None or now - got.t >= NAME_AGE_S:
                got = _Named(now, self._user(k[0]), self._command(k[0]),
                             applies(k[0], self.proc))
            named[k] = got
        self._names = named  # only the busiest are kept
        return tuple(ProcLoad(pid=k[0], cores=round(c, 3), user=named[k].user,
                              command=named[k].command, **priority(raw[k]),
                              **self._autogroup(k[0], named[k].autogroups))
                     for c, k in top)

    def _autogroup(self, pid: int, on: bool) -> dict[str, Any]:
        """Its autogroup and that group's nice value where autogroups apply to it, read each
        pass (the group's nice may be changed: the fix for it)."""
        got = read_autogroup(pid, self.proc) if on else None
        return {"autogroup": None if got is None else got[0],
                "autogroup_nice": None if got is None else got[1]}

    def _user(self, pid: int) -> str | None:
        try:
            return user_name(os.stat(f"{self.proc}/{pid}").st_uid)
        except OSError:
            return None

    def _command(self, pid: int) -> str | None:
        try:
            args = read_proc(f"{self.proc}/{pid}/cmdline").split(b"\0")
        except OSError:
            return None
        words = [a.decode("utf-8", "replace") for a in args if a]
        if not words:  # a kernel thread: its name from stat
            try:
                data = read_proc(f"{self.proc}/{pid}/stat")
                return "[" + data[data.find(b"(") + 1:data.rfind(b")")].decode("utf-8", "replace") + "]"
            except OSError:
                return None
        return shown_command(words)
