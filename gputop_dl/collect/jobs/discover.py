"""Discovery of training jobs gputop-dl did not launch: GPU processes and Python processes with torch loaded.

One `Discoverer` lives across ticks. Each tick, `refresh()` lists /proc and reads
`/proc/PID/stat` only for PIDs it has not seen before (PPID and start time); it also re-reads
the children of a PID that vanished, since only a parent's exit re-parents a process. The
PPID map it keeps is handed to the job samplers, so a tick still makes one /proc pass. The
listing itself is skipped while `/proc/loadavg` shows the same last PID and task count (no
process or thread created or reaped since), and a listing equal to the last one (only threads
came or went) is not compared PID by PID again.

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

Grouping: a candidate (torch or GPU process) whose parent is also a candidate is a worker of
it (data-loader workers, torchrun ranks under the torchrun agent); the others are roots, and
a job is a root plus its descendants, down to where another job's (or a launched job's)
tree begins. Left out: gputop-dl's own process, processes
claimed by an engine of this process (`claim`), and descendants of this process that carry
the launch marker (`GPUTOP_DL_EVENTS` in their environment): those are launched jobs.
A PID that vanishes or denies access between listing and reading is skipped silently. While
the PPID map, the candidates (and their kinds), the exclusions and NVML's PIDs stay the same,
`find()` hands back its last grouping instead of grouping again.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gputop_dl.collect.jobs import hidden as hidden_jobs
from gputop_dl.collect.proc.procfs import ProcFiles
from gputop_dl.collect.proc.procs import GONE_STATES, stat_fields
from gputop_dl.text.fmt import gib
from gputop_dl.workload import shown_command

__all__ = ["Discoverer", "Found", "claim", "unclaim", "job_name", "outside_note"]

LAUNCH_MARKER = b"GPUTOP_DL_EVENTS="  # = gputop_dl.injob.channel.ENV_EVENTS, set on launched jobs
TORCH_MARKS = (b"libtorch", b"torch/_C")
NVIDIA_MARK = b"/dev/nvidia"
PY_RECHECK_MIN_S, PY_RECHECK_MAX_S = 1.0, 30.0
GPU_RECHECK_S = 5.0
YOUNG_RECHECK_S = 2.0
TORCHRUN_MARKS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")

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


def job_name(cmdline: tuple[str, ...] | list[str], pid: int) -> str:
    """A short name from a command line: `train.py`, `python -m pkg.mod`, `torchrun train.py`."""
    args = list(cmdline)
    if not args:
        return f"pid {pid}"
    exe = os.path.basename(args[0])
    if exe.startswith("python") or exe in ("pypy", "pypy3"):
        rest = args[1:]
        i = 0
        while i < len(rest):
            a = rest[i]
            if a == "-m" and i + 1 < len(rest):
                return f"python -m {rest[i + 1]}"
            if a.startswith("-m") and len(a) > 2:
                return f"python -m {a[2:]}"
            if a == "-c":
                return "python -c"
            if a in ("-W", "-X", "--check-hash-based-pycs"):
                i += 2
                continue
            if a.startswith("-"):
                i += 1
                continue
            if any(m in os.path.basename(a) for m in ("torchrun", "accelerate", "deepspeed")):
                return job_name(rest[i:], pid)  # python .../bin/torchrun train.py
            return os.path.basename(a)
        return exe
    if any(m in exe for m in ("torchrun", "accelerate", "deepspeed")):
        script = next((os.path.basename(a) for a in args[1:] if a.endswith(".py")), None)
        return f"{exe} {script}" if script else exe
    script = next((os.path.basename(a) for a in args[1:] if a.endswith(".py")), None)
    return script or exe


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
        self.ppid: dict[int, int] = {}
        self.start: dict[int, int] = {}
        self.cmap: dict[int, list[int]] = {}
        self.job_cmap: dict[int, list[int]] = {}  # cmap without edges into other jobs' trees
        self._info: dict[tuple[int, int], _Info] = {}
        self._names: dict[tuple[int, int], str] = {}
        self._zombies: set[int] = set()  # not re-read until they are reaped (leave the listing)
        self._last_zombie = False
        self._watch: set[int] = set()  # PIDs to classify: new ones, Python ones to re-check
        self._due: dict[int, float] = {}  # watched hidden PIDs -> when to judge them again
        self._torch: set[int] = set()  # PIDs with torch loaded (or judged training: "trains")
        self._primed = False  # after the first find(): every new PID is a young process
        self._mark: bytes | None = None  # /proc/loadavg's "tasks last-PID" at the last listing
        self._listing: list[str] | None = None  # the last one (None: a PID was left unread)
        self._files = ProcFiles()
        self._gen = 0  # counts the changes of the PPID map
        self._last_find: _LastFind | None = None  # (inputs, jobs, job_cmap) of the last find()
        self._looked: tuple[int, tuple[int, int, int]] = (-1, (0, 0, 0))  # (_gen, looked_at())
        self.euid = os.geteuid()  # whose processes are "ours" (0: root reads every one it may)
        self.outside: dict[int, int | None] = {}  # NVML PIDs not in this namespace -> memory
        self.ok = os.path.isdir(proc_root)

    # --- /proc access (tests override `_read`) -------------------------------------------------
    def _read(self, pid: int, what: str) -> bytes:
        with open(f"{self.proc}/{pid}/{what}", "rb") as f:
            return f.read()

    def _stat(self, pid: int) -> tuple[int, int] | None:
        """(ppid, start time) or None when the PID is gone, a zombie, or unreadable."""
        self._last_zombie = False
        try:
            data = self._read(pid, "stat")
        except OSError:
            return None
        fields = stat_fields(data, 20)
        self._last_zombie = bool(fields) and fields[0] in GONE_STATES
        if len(fields) < 20 or self._last_zombie:
            return None
        try:
            return int(fields[1]), int(fields[19])
        except ValueError:
            return None

    def _listing_mark(self) -> bytes | None:
        """The task count and last PID of `/proc/loadavg` ("... 2/175 7500" -> b"175 7500"):
        unchanged, no process was created (a new PID) or reaped (one task fewer) in between.

        The count is the machine's, the PID this namespace's: a process reaped here while
        another namespace creates one is seen at the next change (its reads fail till then)."""
        try:
            data = self._files.read(f"{self.proc}/loadavg")
        except OSError:
            return None
        return data[data.find(b"/") + 1:]

    # --- per tick ------------------------------------------------------------------------------
    def refresh(self) -> dict[int, list[int]]:
        """List /proc; stat new PIDs; returns the PPID -> children map (for TreeSampler)."""
        if not self.ok:
            return {}
        mark = self._listing_mark()  # read before the listing: a later change shows next tick
        if mark is not None and mark == self._mark:
            return self.cmap
        try:
            names = os.listdir(self.proc)
        except OSError:
            return self.cmap
        if names == self._listing:  # threads came or went, processes did not
            self._mark = mark
            return self.cmap
        pids = {int(n) for n in names if n.isdigit()}
        ppid, start = self.ppid, self.start
        gone = ppid.keys() - pids
        orphans: set[int] = set()
        if gone:
            for p in gone:
                del ppid[p]
                start.pop(p, None)
            orphans = {p for p, pp in ppid.items() if pp in gone}
            self._torch -= gone
            self._watch -= gone
            for p in gone & self._due.keys():
                del self._due[p]
        zombies = self._zombies
        if zombies:
            zombies &= pids
        todo = (pids - ppid.keys() - zombies) | orphans
        self._mark, self._listing = mark, names
        for p in todo:
            st = self._stat(p)
            if st is None:
                ppid.pop(p, None)
                start.pop(p, None)
                if self._last_zombie:
                    zombies.add(p)
                else:  # unread: list again next tick
                    self._mark = self._listing = None
                continue
            if p not in orphans and p != self.own:  # never a job: not worth a look
                self._watch.add(p)  # new: classify it at the next find()
            ppid[p], start[p] = st
            if st[0] in self._due:  # a hidden process forked (a loader's worker?): judge it now
                self._due[st[0]] = 0.0
                parent = self._info.get((st[0], start.get(st[0], -1)))
                if parent is not None:
                    parent.next_check = 0.0
        if todo or gone:
            cmap: dict[int, list[int]] = {}
            for p, pp in ppid.items():
                cmap.setdefault(pp, []).append(p)
            self.cmap = cmap
            self._gen += 1
        if gone:
            alive = set(start.items())
            for key in [k for k in self._info if k not in alive]:
                del self._info[key]
                self._names.pop(key, None)
        return self.cmap

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

    def _ancestors(self, pid: int) -> list[int]:
        out, seen = [], {pid}
        p = self.ppid.get(pid)
        while p is not None and p not in seen and p > 0:
            out.append(p)
            seen.add(p)
            p = self.ppid.get(p)
        return out

    def looked_at(self) -> tuple[int, int, int]:
        """(the processes of the last listing, those of them whose maps could not be read
        because they are other users' (judged from what every user may read), those whose
        maps could not be read though this process is root or their owner: not dumpable, or
        a security module's); counted again only when the listing changed; who owns each was read once, when its
        maps were refused."""
        if self._looked[0] != self._gen:
            start = self.start
            others = protected = 0
            for (pid, st), info in self._info.items():
                if info.hidden and start.get(pid) == st:
                    if info.protected:
                        protected += 1
                    else:
                        others += 1
            self._looked = (self._gen, (len(self.ppid), others, protected))
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
        skip = set(exclude) | claimed
        if skip:
            todo = [p for p in skip if p in start]
            while todo:  # whole subtrees of launched jobs
                c = todo.pop()
                for k in self.cmap.get(c, ()):
                    if k not in skip:
                        skip.add(k)
                        todo.append(k)
        skip.add(self.own)  # only the process itself: a job started from it is not launched
        # the same processes, candidates (and kinds), exclusions and GPU PIDs: the same jobs
        inputs = (self._gen, frozenset((p, i.kind) for p, i in cand.items()), frozenset(skip),
                  frozenset(gpu_mem))
        if self._last_find is not None and self._last_find[0] == inputs:
            self.job_cmap = self._last_find[2]
            return list(self._last_find[1])
        roots: list[int] = []
        for pid in sorted(cand):
            if pid in skip:
                continue
            parent = self.ppid.get(pid)
            if parent in cand and parent not in skip:
                # a worker (or rank) of its parent's job, unless a gputop-dl launched it from
                # a torch process (a test runner, a notebook): then it is a job of its own
                if not self._marked(pid, cand[pid]) or self._marked(parent, cand[parent]):
                    continue
            if self.own in self._ancestors(pid) and self._marked(pid, cand[pid]):
                continue  # launched by an engine of this process, not claimed yet
            roots.append(pid)
        # a job's tree stops where another job (or a launched one) begins
        jcmap = self.cmap
        cut = (set(roots) | skip) - {self.own}
        parents = {pp for p in cut if (pp := self.ppid.get(p)) is not None} & jcmap.keys()
        if parents:
            jcmap = dict(jcmap)
            for pp in parents:
                jcmap[pp] = [c for c in jcmap[pp] if c not in cut]
        self.job_cmap = jcmap
        out = []
        for root in roots:
            pids = [root]
            todo = list(jcmap.get(root, ()))
            while todo:
                c = todo.pop()
                pids.append(c)
                todo.extend(jcmap.get(c, ()))
            info = cand[root]
            cmd = self._cmdline(root, info)
            key = (root, start.get(root, -1))
            name = self._names.get(key)
            if name is None:
                name = self._names[key] = job_name(cmd, root)
            target = root
            if any(m in " ".join(cmd[:3]) for m in TORCHRUN_MARKS):
                ranks = sorted(k for k in self.cmap.get(root, ()) if k in cand)
                if ranks:
                    target = ranks[0]
            gpu = any(p in gpu_mem for p in pids)
            by = "maps" if not info.hidden else "nvml" if root in gpu_mem else "cmdline"
            out.append(Found(name=name, pid=root, start=start.get(root, -1),
                             pids=tuple(sorted(pids)), target=target,
                             torch=info.kind == "torch", gpu=gpu, cmdline=cmd, found_by=by))
        self._last_find = inputs, out, jcmap
        return list(out)

    def describe(self, found: Found) -> str:
        return _shell_line(found.cmdline) if found.cmdline else found.name


@functools.lru_cache(maxsize=256)  # a job's command line is asked for every tick
def _shell_line(cmdline: tuple[str, ...]) -> str:
    """The command line as shown, stored and served: secret-looking arguments redacted."""
    return shown_command(cmdline)
