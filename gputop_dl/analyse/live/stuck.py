"""Stuck, not slow: whether a live job stopped making progress and sleeps in one place.

A job is stuck when, while its processes live, it made no step progress for longer than its
threshold (the larger of `min_s`, 60 s by default, and `factor` times its recent step time),
its processes slept over the last part of that time (no CPU to speak of, no process running
or in D, no bytes read, no loader write calls) and its main thread stood in one place across
two py-spy dumps taken after its last progress. A job that computes or writes (a checkpoint,
an evaluation) is busy, and a job waiting on its disk (state D) is slow: neither is stuck,
whatever its step counter says. One exception: a main thread held in a collective or a CUDA
synchronize may spin a core while it waits; there an unchanged stack with no reads, writes or
D state is enough.

Progress is what the job's readings already count: its steps (the trainer's or the start-up
hook's events), its own loop counter (collect/pyspy/loop_counter.py), its loader workers' write calls
(one batch handed over is a fixed number of them). Pure: the engine (engine/stuck_watch.py)
feeds it one `Look` a tick and the dumps it read; `--once` feeds it its own window.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from gputop_dl.snapshot import JobSample
from gputop_dl.stuck import StackFrame, Stuck, ThreadStack

MIN_S = 60.0  # the threshold's floor, seconds without progress
FACTOR = 10.0  # ... and its multiple of the job's recent step time
STUCK_AFTER_BOUNDS = (1.0, 7 * 86400.0)  # what `--stuck-after` accepts
IDLE_CORES = 0.1  # a job's processes together using less than this are asleep
IDLE_READ_BPS = 64 * 1024  # bytes/s read (rchar: files, pipes, sockets) of a sleeping job
QUIET_MAX_S = 30.0  # its threads must have slept over the last min(this, threshold / 2)
# a process waiting on its disk (D) is busy, and one running (R) is, unless the job's processes
# used less than this: one caught waking for a moment (torchrun's agent polls its ranks every 0.1 s) is
# often seen R on a loaded box, for want of a CPU, and reset a 60 s count in one look of many
RUN_CORES = 0.02
SPIN_WAITS = frozenset({"collective", "cuda-sync"})  # waits that may spin a core
KEPT_LOOKS = 400
KEPT_DUMPS = 3

# library files: the frame that matters to a person is the job's own that called into them
# (gputop-dl's own start-up hook wraps a command job's DataLoader: its frames are plumbing too)
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python", "<frozen", "gputop_dl/injob/hook/")
_LOADER_FUNCS = ("_next_data", "_get_data", "_try_get_data", "__next__")
_COLLECTIVES = ("all_reduce", "barrier", "broadcast", "all_gather", "reduce_scatter",
                "all_to_all", "monitored_barrier", "reduce", "gather", "scatter", "send", "recv",
                "wait")


# the kinds, the one that names a job's place first (its ranks may wait in different ones)
_FIRST = ("collective", "dataloader", "cuda-sync", "lock", "io", "sleep", "unknown")


@dataclass(frozen=True)
class Look:
    """One tick's reading of a job, reduced to what the judgement needs."""

    t: float
    alive: bool
    progress: tuple[object, ...] | None  # changes when it steps (None: no counter)
    progress_kind: str  # steps | loop | loader | none
    step_time_s: float | None
    cpu_cores: float | None
    read_bps: float | None
    loader_writes: float | None
    states: tuple[str, ...]
    distributed: bool = False

    def idle(self, spin_ok: bool = False) -> bool:
        """Whether its processes slept at this look (`spin_ok`: CPU in a spin-wait allowed)."""
        ran = not spin_ok and (self.cpu_cores is None or self.cpu_cores >= RUN_CORES)
        if any(s == "D" or (s == "R" and ran) for s in self.states):
            return False
        if (self.read_bps or 0.0) > IDLE_READ_BPS or (self.loader_writes or 0.0) > 0.0:
            return False
        return spin_ok or (self.cpu_cores is not None and self.cpu_cores < IDLE_CORES)


def look_of(j: JobSample, t: float) -> Look:
    """The `Look` of one job's row."""
    if j.step is not None:
        progress: tuple[object, ...] | None = ("steps", j.epoch, j.step)
        kind, step_t = "steps", j.step_time_s
    elif j.loop_steps is not None:
        progress, kind = ("loop", j.loop_counter, j.loop_steps), "loop"
        step_t = j.loop_span_s / j.loop_steps if j.loop_steps and j.loop_span_s else j.step_time_s
    elif j.loader_writes_per_s is not None:
        progress, kind, step_t = None, "loader", j.step_time_s
    else:
        progress, kind, step_t = None, "none", j.step_time_s
    states = tuple(p.state for p in j.procs if p.state)
    return Look(t, j.status in ("running", "stuck"), progress, kind, step_t, j.cpu_cores,
                j.io_rchar_bytes_per_s if j.io_rchar_bytes_per_s is not None
                else j.io_read_bytes_per_s, j.loader_writes_per_s, states,
                j.distributed is not None and len(j.distributed.ranks) > 1)


@dataclass(frozen=True)
class Dump:
    """The stacks of a job's processes read at one time: its trainers' (root or ranks) main
    threads, in rank order, and its loader workers' main threads."""

    t: float
    mains: tuple[ThreadStack, ...]
    workers: tuple[ThreadStack, ...] = ()
    ranks: tuple[tuple[int, int], ...] = ()  # (rank, pid) of a distributed job's ranks here
    error: str | None = None

    def signature(self) -> tuple[tuple[int, tuple[tuple[str, str, int], ...]], ...]:
        return tuple((s.pid, tuple((f.func, f.file, f.line) for f in s.frames)) for s in self.mains)


@dataclass(frozen=True)
class Place:
    """Where a main thread waits: the kind, the job's own frame, who it waits on."""

    where: str
    frame: str | None
    pid: int | None = None
    stack: tuple[str, ...] = ()
    worker_pid: int | None = None
    worker_frame: str | None = None
    missing_ranks: tuple[tuple[int, str | None], ...] = ()


def threshold(step_time_s: float | None, min_s: float = MIN_S, factor: float = FACTOR) -> float:
    """Seconds without progress before a job may be called stuck."""
    return max(min_s, factor * step_time_s) if step_time_s else min_s


def _library(f: StackFrame) -> bool:
    return any(p in f.file for p in _LIBRARY)


def own_frame(frames: Iterable[StackFrame]) -> StackFrame | None:
    """The innermost frame of the job's own code (not a library's), else the innermost."""
    frames = list(frames)
    return next((f for f in frames if not _library(f)), frames[0] if frames else None)


def kind_of(frames: tuple[StackFrame, ...], distributed: bool = False) -> str:
    """What a main thread's frames (innermost first) wait in."""
    for f in frames:
        if "torch/utils/data/dataloader" in f.file and f.func.endswith(_LOADER_FUNCS):
            return "dataloader"
        if "torch/distributed" in f.file and f.func.rsplit(".", 1)[-1] in _COLLECTIVES:
            return "collective"
        if f.func.endswith("synchronize") and "torch/cuda" in f.file:
            return "cuda-sync"
        if distributed and "torch/autograd" in f.file and "backward" in f.func:
            return "collective"  # DDP's gradient all-reduce runs inside backward
    inner = frames[0] if frames else None
    code = (inner.code or "") if inner else ""
    if inner is not None and ("threading.py" in inner.file and inner.func.endswith(
            ("acquire", "wait", "__enter__")) or ".acquire(" in code
            or ("with " in code and "lock" in code.lower())):
        return "lock"
    if "synchronize(" in code:
        return "cuda-sync"
    if "sleep(" in code:
        return "sleep"
    if any(w in code for w in (".recv(", ".read(", ".accept(", "input(")):
        return "io"
    return "unknown"


def _worker_place(workers: tuple[ThreadStack, ...]) -> tuple[int | None, str | None]:
    """The loader worker that is not idle in its loop waiting for an index: its pid and frame
    (`ds.py:12 __getitem__ (time.sleep(3600))`), or the first worker's."""
    def busy(w: ThreadStack) -> bool:
        return any(not _library(f) for f in w.frames)
    pick = next((w for w in workers if busy(w)), None)
    if pick is None:
        return None, None
    f = own_frame(pick.frames)
    if f is None:
        return pick.pid, None
    return pick.pid, f.short() + (f" ({f.code})" if f.code else "")


def place_of(dump: Dump, distributed: bool = False) -> Place:
    """Where a job's dump says its main thread waits, and on whom."""
    if not dump.mains:
        return Place("unknown", None)
    kinds = [(s, kind_of(s.frames, distributed)) for s in dump.mains]
    # the rank that waits on the others names the place (one waiting in a collective first)
    main, kind = min(kinds, key=lambda sk: _FIRST.index(sk[1]))
    own = own_frame(main.frames)
    stack = tuple(f.short() for f in main.frames)
    wpid, wframe = _worker_place(dump.workers) if kind == "dataloader" else (None, None)
    missing: tuple[tuple[int, str | None], ...] = ()
    if kind == "collective" and dump.ranks:
        by_pid = {s.pid: (s, k) for s, k in kinds}
        out: list[tuple[int, str | None]] = []
        for rank, pid in dump.ranks:
            got = by_pid.get(pid)
            if got is None:
                out.append((rank, None))
            elif got[1] != "collective":
                f = own_frame(got[0].frames)
                out.append((rank, f.short() if f else None))
        missing = tuple(out)
    return Place(kind, own.short() if own else None, main.pid, stack, wpid, wframe, missing)


@dataclass
class _Job:
    first_t: float
    last_progress_t: float
    marker: tuple[object, ...] | None = None
    looks: deque[Look] = field(default_factory=lambda: deque(maxlen=KEPT_LOOKS))
    dumps: deque[Dump] = field(default_factory=lambda: deque(maxlen=KEPT_DUMPS))
    step_times: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    stuck: Stuck | None = None
    moved: bool = False  # it made progress since its first look
    last_busy_t: float | None = None  # its last look that was not asleep

    def since(self) -> float:
        """When its time without progress began: its last progress, or for a job that never
        made any, the end of its last busy look (its start-up, importing, loading is busy)."""
        if self.moved or self.last_busy_t is None:
            return self.last_progress_t
        return max(self.last_progress_t, self.last_busy_t)


class StuckJudge:
    """Keeps each job's looks and dumps; says when a dump is due and whether it is stuck."""

    def __init__(self, min_s: float = MIN_S, factor: float = FACTOR) -> None:
        self.min_s, self.factor = min_s, factor
        self._jobs: dict[Hashable, _Job] = {}

    def forget(self, keep: Iterable[Hashable]) -> None:
        keep = set(keep)
        for k in [k for k in self._jobs if k not in keep]:
            del self._jobs[k]

    def look(self, key: Hashable, lk: Look, wall: float | None = None) -> None:
        """Add one tick's look (`wall`: the wall time of a job's progress, default `lk.t`)."""
        j = self._jobs.get(key)
        if j is None:
            j = self._jobs[key] = _Job(lk.t, lk.t, lk.progress)
        moved = (lk.progress is not None and lk.progress != j.marker) or (lk.loader_writes or 0) > 0
        if moved:
            j.marker, j.last_progress_t, j.moved = lk.progress, lk.t, True
        if not lk.idle():
            j.last_busy_t = lk.t
        if lk.step_time_s:
            j.step_times.append(lk.step_time_s)
        j.looks.append(lk)

    def threshold_of(self, key: Hashable) -> float:
        j = self._jobs.get(key)
        step = statistics.median(j.step_times) if j is not None and j.step_times else None
        return threshold(step, self.min_s, self.factor)

    def progress_age(self, key: Hashable, now: float) -> float | None:
        """Seconds since the job's last progress; None where nothing counts it."""
        j = self._jobs.get(key)
        if j is None or not j.looks or j.looks[-1].progress_kind == "none":
            return None
        return round(now - j.since(), 1)

    def dump_every(self, key: Hashable) -> float:
        """Seconds between two dumps of a job that may be stuck."""
        return min(15.0, max(0.5, self.threshold_of(key) / 4))

    def dump_due(self, key: Hashable, now: float) -> bool:
        """Whether a dump of the job's stacks is worth taking now: no progress for half its
        threshold, alive, and no dump for `dump_every` (twice that once it is stuck)."""
        j = self._jobs.get(key)
        if j is None or not j.looks or not j.looks[-1].alive:
            return False
        if now - j.since() < self.threshold_of(key) / 2:
            return False
        every = self.dump_every(key) * (2 if j.stuck is not None else 1)
        return not j.dumps or now - j.dumps[-1].t >= every

    def dumped(self, key: Hashable, d: Dump) -> None:
        j = self._jobs.get(key)
        if j is not None and d.error is None and d.mains:
            j.dumps.append(d)

    def judge(self, key: Hashable, now: float, wall_now: float | None = None) -> Stuck | None:
        """The job's `Stuck` at `now` (None: not stuck). `wall_now`: the wall time of `now`,
        for `since` (default `now`)."""
        j = self._jobs.get(key)
        j_stuck = self._judge(j, key, now, wall_now if wall_now is not None else now) if j else None
        if j is not None:
            j.stuck = j_stuck
        return j_stuck

    def _judge(self, j: _Job, key: Hashable, now: float, wall_now: float) -> Stuck | None:
        last = j.looks[-1] if j.looks else None
        if last is None or not last.alive:
            return None
        limit = self.threshold_of(key)
        no_progress = now - j.since()
        if no_progress < limit:
            return None
        dumps = [d for d in j.dumps if d.t > j.since()]
        if len(dumps) < 2:
            return None
        a, b = dumps[-2], dumps[-1]
        gap = min(10.0, limit / 4)
        if a.signature() != b.signature() or b.t - a.t < gap * 0.9:
            return None
        if now - b.t > 4 * self.dump_every(key):  # its stacks are too old to say
            return None
        place = place_of(b, last.distributed)
        quiet = min(QUIET_MAX_S, limit / 2)
        looks = [lk for lk in j.looks if lk.t >= now - quiet]
        if len(looks) < 2 or not all(lk.idle(place.where in SPIN_WAITS) for lk in looks):
            return None
        same = [d for d in dumps if d.signature() == b.signature()]
        return _stuck(place, looks, quiet, limit, no_progress, wall_now - no_progress,
                      len(same), b.t - same[0].t, last.progress_kind)


def _stuck(place: Place, looks: list[Look], quiet: float, limit: float, no_progress: float,
           since: float, dumps: int, same_s: float, kind: str,
           window_s: float | None = None) -> Stuck:
    def most(vals: list[float | None]) -> float | None:
        known = [v for v in vals if v is not None]
        return round(max(known), 3) if known else None
    return Stuck(
        since=round(since, 3), for_s=round(no_progress, 1), threshold_s=round(limit, 1),
        where=place.where, frame=place.frame, stack=place.stack, pid=place.pid,
        worker_pid=place.worker_pid, worker_frame=place.worker_frame,
        missing_ranks=place.missing_ranks, quiet_s=round(quiet, 1),
        cpu_cores_max=most([lk.cpu_cores for lk in looks]),
        read_bytes_per_s_max=most([lk.read_bps for lk in looks]),
        loader_writes_per_s_max=most([lk.loader_writes for lk in looks]),
        states=" ".join(looks[-1].states), dumps=dumps, stack_same_s=round(same_s, 1),
        progress=kind, window_s=window_s)


def judge_window(first: Look, last: Look, looks: list[Look], a: Dump | None, b: Dump | None
                 ) -> Stuck | None:
    """`--once`: stuck over its own sampling window alone (no history): no progress from its
    first look to its last, asleep at every look, and its main stack the same in a dump at
    each end of the window. The window is what it says: `window_s` seconds."""
    if not last.alive or a is None or b is None or a.error or b.error or not a.mains:
        return None
    if a.signature() != b.signature():
        return None
    if last.progress is not None and last.progress != first.progress:
        return None
    place = place_of(b, last.distributed)
    if not looks or not all(lk.idle(place.where in SPIN_WAITS) for lk in looks):
        return None
    window = b.t - a.t
    return _stuck(place, looks, window, window, window, first.t, 2, window,
                  last.progress_kind, window_s=round(window, 1))
