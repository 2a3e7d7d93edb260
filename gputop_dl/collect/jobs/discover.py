"""Discovery of training jobs gputop-dl did not launch: GPU processes and Python processes with torch loaded.

One `Discoverer` lives across ticks. Each tick, `refresh()` brings its process table up to
date (collect/proc/pid_table.py: each PID's parent and start time, read once per new PID), whose
PPID map is handed to the job samplers, so a tick still makes one /proc pass.

`find()` classifies each new process ONCE per (pid, start time) by reading `/proc/PID/maps`
(steady-state work is proportional to the new and the Python processes, not to all of them):
torch loaded (`libtorch` / `torch/_C`), Python without torch (re-checked with back-off from
1 s to 30 s, because a fresh interpreter has not imported torch yet), or neither (read once
more 2 s later when first seen young, since `sh -c` / `exec python` may still turn it into
Python; then never again). NVML's GPU PIDs count as jobs too, once their maps show an NVIDIA device (or torch):
a PID that NVML reports but that is absent here, or is another process, lives outside this
PID namespace (a container) and is only summed into one note.

Another user's process (its maps not readable without root) is judged from what every user
may read (collect/jobs/hidden.py): on NVML's list it is a job (`found_by` "nvml"); a Python
interpreter running a training entry point with forked twins, a launcher's Python children, or
a busy thread pool is one too (`found_by` "cmdline"), re-judged with back-off until it is;
everything else stays out. A job whose maps were read is `found_by` "maps".

Grouping (collect/jobs/job_trees.py): a candidate (torch or GPU process) whose parent is also
a candidate is a worker of it; the others are roots, and a job is a root plus its descendants,
down to where another job's (or a launched job's) tree begins; each is named by
collect/jobs/job_name.py. Left out: gputop-dl's own process, processes
claimed by an engine of this process (`claim`), and descendants of this process that carry
the launch marker (`GPUTOP_DL_EVENTS` in their environment): those are launched jobs.
A PID that vanishes or denies access between listing and reading is skipped silently. While
the PPID map, the candidates (and their kinds), the exclusions and NVML's PIDs stay the same,
`find()` hands back its last grouping instead of grouping again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gputop_dl.collect.jobs import hidden as hidden_jobs
from gputop_dl.collect.jobs.job_name import job_name, shown_line
from gputop_dl.collect.jobs.job_trees import excluded, job_cmap, job_roots, profile_target, tree
from gputop_dl.collect.proc.pid_table import PidTable
from gputop_dl.text.fmt import gib

__all__ = ["Discoverer", "Found", "claim", "unclaim", "outside_note"]

LAUNCH_MARKER = b"GPUTOP_DL_EVENTS="  # = gputop_dl.injob.channel.ENV_EVENTS, set on launched jobs
TORCH_MARKS = (b"libtorch", b"torch/_C")
NVIDIA_MARK = b"/dev/nvidia"
PY_RECHECK_MIN_S, PY_RECHECK_MAX_S = 1.0, 30.0
GPU_RECHECK_S = 5.0
YOUNG_RECHECK_S = 2.0

_claimed: set[int] = set()  # root PIDs launched by an Engine of this process
_claim_lock = threading.Lock()


def claim(pid: int) -> None:
    """Mark `pid` (and its descendants) as launched by gputop-dl in this process."""
    with _claim_lock:
        _claimed.add(pid)


def unclaim(pid: int) -> None:
    with _claim_lock:
        _claimed.discard(pid)


@dataclass(frozen=True)
class Found:
    """One found job: a root process and its descendants."""

    name: str
    pid: int  # the root
    start: int  # the root's start time (clock ticks after boot): (pid, start) is its identity
    pids: tuple[int, ...]  # root + descendants, sorted
    target: int  # the process to profile: the root, or rank 0 under a torchrun agent
    torch: bool
    gpu: bool
    cmdline: tuple[str, ...] = ()
    found_by: str = "maps"  # maps | nvml | cmdline: how it was told a job (docstring above)


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class _Info:
    __slots__ = ("kind", "nvidia", "next_check", "backoff", "marked", "cmdline", "hidden",
                 "protected", "ticks", "tick_t")

    def __init__(self) -> None:
        # torch | python | other | gone | young; with maps unreadable: hidden (a Python
        # interpreter with a training entry point, not yet working like a job) | trains
        self.kind = "?"
        self.hidden = False  # its maps are not readable (another user's process)
        self.protected = False  # ... though this process is root or its owner (looked_at)
        self.ticks: int | None = None  # CPU ticks and clock at the last look (hidden only)
        self.tick_t = 0.0
        self.nvidia = False
        self.next_check = 0.0
        self.backoff = PY_RECHECK_MIN_S
        self.marked: bool | None = None  # launch marker in environ (None = not read yet)
        self.cmdline: tuple[str, ...] | None = None


def outside_note(n: int, mem: int | None) -> str:
    used = gib(mem) if mem is not None else "unknown"
    return (f"GPU memory used by {n} process{'es' if n != 1 else ''} outside this container's PID "
            f"namespace: {used}")


# the last find(): its inputs (PPID map generation, candidates and kinds, exclusions, GPU PIDs),
# the jobs it found and its job_cmap
_LastFind = tuple[tuple[int, frozenset[tuple[int, str]], frozenset[int], frozenset[int]],
                  list[Found], dict[int, list[int]]]


class Discoverer:
    """Finds jobs not launched here; keep one instance across ticks (it caches per process)."""

    def __init__(self, proc_root: str = "/proc", own_pid: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.proc = proc_root
        self.own = os.getpid() if own_pid is None else own_pid
        self.clock = clock
        self.table = PidTable(proc_root, self._read)
        self.job_cmap: dict[int, list[int]] = {}  # cmap without edges into other jobs' trees
        self._info: dict[tuple[int, int], _Info] = {}
        self._names: dict[tuple[int, int], str] = {}
        self._watch: set[int] = set()  # PIDs to classify: new ones, Python ones to re-check
        self._due: dict[int, float] = {}  # watched hidden PIDs -> when to judge them again
        self._torch: set[int] = set()  # PIDs with torch loaded (or judged training: "trains")
        self._primed = False  # after the first find(): every new PID is a young process
        self._last_find: _LastFind | None = None  # (inputs, jobs, job_cmap) of the last find()
        self._looked: tuple[int, tuple[int, int, int]] = (-1, (0, 0, 0))  # (table.gen, looked_at())
        self.euid = os.geteuid()  # whose processes are "ours" (0: root reads every one it may)
        self.outside: dict[int, int | None] = {}  # NVML PIDs not in this namespace -> memory
        self.ok = os.path.isdir(proc_root)

    # --- /proc access (tests override `_read`) -------------------------------------------------
    def _read(self, pid: int, what: str) -> bytes:
        with open(f"{self.proc}/{pid}/{what}", "rb") as f:
            return f.read()

    @property
    def ppid(self) -> dict[int, int]:
        """PID -> its parent's PID, of the last listing (the process table's)."""
        return self.table.ppid

    @property
    def start(self) -> dict[int, int]:
        """PID -> its start time (clock ticks after boot), of the last listing."""
        return self.table.start

    @property
    def cmap(self) -> dict[int, list[int]]:
        """PPID -> its children, of the last listing."""
        return self.table.cmap

    # --- per tick ------------------------------------------------------------------------------
    def refresh(self) -> dict[int, list[int]]:
        """List /proc; stat new PIDs; returns the PPID -> children map (for TreeSampler)."""
        if not self.ok:
            return {}
        changes = self.table.refresh()
        if changes is None:
            return self.table.cmap
        gone = changes.gone
        if gone:
            self._torch -= gone
            self._watch -= gone
            for p in gone & self._due.keys():
                del self._due[p]
        ppid, start = self.table.ppid, self.table.start
        for p in changes.read:
            if p not in changes.orphans and p != self.own:  # never a job: not worth a look
                self._watch.add(p)  # new: classify it at the next find()
            pp = ppid[p]
            if pp in self._due:  # a hidden process forked (a loader's worker?): judge it now
                self._due[pp] = 0.0
                parent = self._info.get((pp, start.get(pp, -1)))
                if parent is not None:
                    parent.next_check = 0.0
        if gone:
            alive = set(start.items())
            for key in [k for k in self._info if k not in alive]:
                del self._info[key]
                self._names.pop(key, None)
        return self.table.cmap

    def _classify(self, pid: int, now: float, gpu: bool) -> _Info | None:
        key = (pid, self.start.get(pid, -1))
        info = self._info.get(key)
        if info is None:
            info = self._info[key] = _Info()
        if info.kind == "gone":
            return None
        if info.hidden:
            return self._judge_hidden(pid, info, now)
        recheck = info.kind == "?" or \
            (info.kind in ("python", "young") and now >= info.next_check) or \
            (gpu and not info.nvidia and info.kind != "torch" and now >= info.next_check)
        if recheck:
            try:
                maps = self._read(pid, "maps")
            except (FileNotFoundError, ProcessLookupError):
                info.kind = "gone"
                return None
            except OSError:  # no rights to read it (another user's process): judged otherwise
                info.hidden = True
                info.protected = self.euid == 0 or self._owner(pid) == self.euid
                return self._judge_hidden(pid, info, now)
            if any(m in maps for m in TORCH_MARKS):
                info.kind = "torch"
            elif b"python" in maps:
                info.kind = "python"
            elif info.kind == "?" and self._primed:
                # a process first seen young may still exec a Python (sh -c, exec python ...):
                # one more look when it has lived a little
                info.kind = "young"
                info.next_check = now + YOUNG_RECHECK_S
            elif info.kind in ("?", "young"):
                info.kind = "other"
            info.nvidia = info.nvidia or NVIDIA_MARK in maps
            if info.kind == "python" or (gpu and not info.nvidia and info.kind != "young"):
                if info.next_check:
                    info.backoff = min(info.backoff * 2, PY_RECHECK_MAX_S)
                info.next_check = now + (info.backoff if info.kind == "python" else GPU_RECHECK_S)
        return info

    def _judge_hidden(self, pid: int, info: _Info, now: float) -> _Info | None:
        """Classify a process whose maps are not readable from its command line, `comm`,
        threads, CPU and children (collect/jobs/hidden.py)."""
        if info.kind in ("trains", "other") or (info.kind != "?" and now < info.next_check):
            return info
        try:
            st = hidden_jobs.parse_stat(self._read(pid, "stat"))
        except OSError:
            st = None
        if st is None:
            info.kind = "gone"
            return None
        comm, ticks, threads = st
        if info.kind in ("?", "young"):
            info.cmdline = None  # a young process may have exec'ed since
            cmd = self._cmdline(pid, info)
            if not hidden_jobs.interpreter(cmd, comm) or hidden_jobs.entry_point(cmd, comm) is None:
                if info.kind == "?" and self._primed:  # may still exec a Python (sh -c)
                    info.kind, info.next_check = "young", now + YOUNG_RECHECK_S
                else:
                    info.kind = "other"
                return info
            info.kind = "hidden"
        cmd = self._cmdline(pid, info)
        cores = None
        if info.ticks is not None and now > info.tick_t:
            cores = (ticks - info.ticks) / CLK_TCK / (now - info.tick_t)
        info.ticks, info.tick_t = ticks, now
        twins = pythons = 0
        for kid in self.cmap.get(pid, ()):
            try:
                raw = self._read(kid, "cmdline")
            except OSError:
                continue
            kc = tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)
            if kc == cmd:
                twins += 1
            elif hidden_jobs.interpreter(kc, ""):
                pythons += 1
        entry = hidden_jobs.entry_point(cmd, comm) or "script"
        if hidden_jobs.works(entry, twins, pythons, threads, cores):
            info.kind = "trains"
        else:  # not (yet) working like a job: look again later, less and less often
            if info.next_check:
                info.backoff = min(info.backoff * 2, PY_RECHECK_MAX_S)
            info.next_check = self._due[pid] = now + info.backoff
        return info

    def _cmdline(self, pid: int, info: _Info) -> tuple[str, ...]:
        if info.cmdline is None:
            try:
                raw = self._read(pid, "cmdline")
            except OSError:
                return ()
            info.cmdline = tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)
        return info.cmdline

    def _marked(self, pid: int, info: _Info) -> bool:
        if info.marked is None:
            try:
                env = self._read(pid, "environ")
            except PermissionError:  # another user's: not launched by this user's gputop-dl
                info.marked = False
                return False
            except OSError:
                return False
            info.marked = (b"\0" + LAUNCH_MARKER) in (b"\0" + env)
        return info.marked

    def looked_at(self) -> tuple[int, int, int]:
        """(the processes of the last listing, those of them whose maps could not be read
        because they are other users' (judged from what every user may read), those whose
        maps could not be read though this process is root or their owner: not dumpable, or
        a security module's); counted again only when the listing changed; who owns each was read once, when its
        maps were refused."""
        if self._looked[0] != self.table.gen:
            start = self.start
            others = protected = 0
            for (pid, st), info in self._info.items():
                if info.hidden and start.get(pid) == st:
                    if info.protected:
                        protected += 1
                    else:
                        others += 1
            self._looked = (self.table.gen, (len(self.ppid), others, protected))
        return self._looked[1]

    def _owner(self, pid: int) -> int | None:
        try:
            return os.stat(f"{self.proc}/{pid}").st_uid
        except OSError:
            return None

    def unjudged(self) -> list[int]:
        """Other users' Python processes with a training entry point not (yet) judged a job
        (collect/jobs/hidden.py), as of the last `find()`."""
        info_of, start = self._info, self.start
        return [p for p in self._watch
                if (i := info_of.get((p, start.get(p, -1)))) is not None and i.kind == "hidden"]

    def find(self, gpu_pids: Iterable[int] | Mapping[int, int | None] = (),
             exclude: set[int] | frozenset[int] = frozenset()) -> list[Found]:
        """The jobs on this machine not launched here. Call `refresh()` first in the same tick.

        `gpu_pids`: PIDs NVML reports (a dict pid -> memory bytes, or any iterable).
        `exclude`: root PIDs whose trees are left out (the engine's launched jobs).
        Sets `self.outside` to the NVML PIDs that are not processes of this namespace."""
        if not self.ok:
            self.outside = dict(gpu_pids) if isinstance(gpu_pids, dict) else dict.fromkeys(gpu_pids)
            return []
        now = self.clock()
        gpu_mem: Mapping[int, int | None] = (gpu_pids if isinstance(gpu_pids, dict)
                                             else dict.fromkeys(gpu_pids))
        start = self.start
        cand: dict[int, _Info] = {}
        outside: dict[int, int | None] = {}
        watch, torch, due = self._watch, self._torch, self._due
        for pid in list(watch):  # new PIDs, and Python processes due for a re-check
            if due and due.get(pid, 0.0) > now and pid not in gpu_mem:
                continue  # a hidden one not due yet (its judge would return at once)
            info = self._classify(pid, now, pid in gpu_mem) if pid in start else None
            if info is None or info.kind not in ("?", "python", "young", "hidden"):
                watch.discard(pid)
                due.pop(pid, None)
            if info is not None and info.kind in ("torch", "trains"):
                torch.add(pid)
        info_of = self._info
        for pid in torch:
            info = info_of.get((pid, start.get(pid, -1)))
            if info is not None:
                cand[pid] = info
        for pid, mem in gpu_mem.items():
            if pid in cand:
                continue
            info = self._classify(pid, now, True) if pid in start else None
            if info is None or not (info.nvidia or info.hidden):
                outside[pid] = mem
            else:
                cand[pid] = info
        self.outside = outside
        self._primed = True
        with _claim_lock:
            claimed = set(_claimed)
        skip = excluded(set(exclude) | claimed, start, self.cmap)  # launched jobs' whole subtrees
        skip.add(self.own)  # only the process itself: a job started from it is not launched
        # the same processes, candidates (and kinds), exclusions and GPU PIDs: the same jobs
        inputs = (self.table.gen, frozenset((p, i.kind) for p, i in cand.items()), frozenset(skip),
                  frozenset(gpu_mem))
        if self._last_find is not None and self._last_find[0] == inputs:
            self.job_cmap = self._last_find[2]
            return list(self._last_find[1])
        roots = job_roots(cand, self.ppid, skip, self.own, lambda p: self._marked(p, cand[p]))
        jcmap = self.job_cmap = job_cmap(self.cmap, self.ppid, roots, skip, self.own)
        out = []
        for root in roots:
            pids = tree(root, jcmap)
            info = cand[root]
            cmd = self._cmdline(root, info)
            key = (root, start.get(root, -1))
            name = self._names.get(key)
            if name is None:
                name = self._names[key] = job_name(cmd, root)
            target = profile_target(root, cmd, self.cmap, cand)
            gpu = any(p in gpu_mem for p in pids)
            by = "maps" if not info.hidden else "nvml" if root in gpu_mem else "cmdline"
            out.append(Found(name=name, pid=root, start=start.get(root, -1),
                             pids=tuple(sorted(pids)), target=target,
                             torch=info.kind == "torch", gpu=gpu, cmdline=cmd, found_by=by))
        self._last_find = inputs, out, jcmap
        return list(out)

    def describe(self, found: Found) -> str:
        return shown_line(found.cmdline) if found.cmdline else found.name
