"""A found job's own loop counter, read from its main thread's locals: its steps, as it counts them.

A training loop counts its batches in a local variable: `batch_idx` in PyTorch's mnist
(`for batch_idx, (data, target) in enumerate(train_loader)`), `batch` and `i` in its
word_language_model, `step` in transformers' Trainer. `py-spy dump --locals --nonblocking`
reads every frame's locals without pausing the process (10-20 ms of py-spy's CPU a dump), so
two dumps some seconds apart say how many batches the job made in between, by its own count:
its progress itself, where a job has no loader workers whose batches can be counted
(analyse/slowdown/pace.py).

The counter: among the main thread's int locals named as step counters (`STEP_NAMES`), the one
in the outermost frame that moved since an earlier dump (a sweep's outer `i` that stands
still is passed over for the training loop's; an `i` inside a model's `forward` is deeper than
the loop's; torch's own frames and comprehensions, such as a DataLoader's `idx` of the samples
it fetches, are not read). Once chosen it is kept while one of the last 3 dumps finds it (in
an evaluation between epochs the loop is off the stack). Two dumps pair only where both
read it and it did not go back (a new epoch restarts `enumerate`), and where an `epoch`
local in the frames around it stayed the same (a loop that restarted and passed the old
count between two dumps). A dump read without pausing is now and then torn (`confirm`): a
reading counts once the next one agrees with it. `Counted.steps` and `Counted.span_s` add up
the paired dumps' steps and seconds, so a consumer's rate over any two readings is steps over
seconds of counted time only.

A dump costs more than a sample (py-spy starts, reads the process's memory maps): one at a
time, a job every `every_s` or more seldom, within `COUNTER_BUDGET` of a core for each job read
and `COUNTER_MAX` for all (a token bucket, each dump's real CPU from wait4). Errors never
raise: no py-spy or no ptrace rights leave the counter unknown; module-level loops have no
locals py-spy reads (their frame's are globals).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.pyspy.turns import Turns

# the names loops count batches by, in the order one is preferred within a frame
STEP_NAMES = ("global_step", "total_batched_samples", "step", "batch_idx", "batch_id",
              "batch_i", "batch_num", "batch_nb", "iteration", "iter", "it", "itr", "n_iter",
              "niter", "batch", "i")
EPOCH_NAMES = ("epoch", "ep", "cur_epoch", "current_epoch")
EVERY_S = 10.0  # a job's dumps at most this often
# py-spy's dumps within this share of one core for each job it reads (0.2 %: a dump of ~20 ms
# every 10 s, EVERY_S), and COUNTER_MAX for all: one share for all made a job's dumps come
# 30-45 s apart beside two others, and a reading needs the dump after it (`confirm`)
COUNTER_BUDGET = 0.002
COUNTER_MAX = 0.006
CREDIT_S = 0.05  # CPU-seconds the bucket holds at most (and starts with)
DUMP_CPU_S = 0.02  # a dump's CPU where its own is unknown (measured 10-20 ms)
DUMP_TIMEOUT_S = 10.0  # a dump that takes longer is killed
KEPT = 6  # dumps kept a job (to choose its counter by what moved)
# a chosen counter is kept while one of the last this many dumps found it (its loop is off the
# stack in an evaluation between epochs: the dumps then find none, or a loop of the evaluation)
STICKY = 3
_INT = re.compile(r"-?\d+")

# a local: (frame depth from the outermost, "file:function", name)
Local = tuple[int, str, str]
# (wall time, the step-named and epoch-named int locals of the main thread); None: no dump
Dump = tuple[float, dict[Local, int]]
DumpFn = Callable[[int, str | None], tuple[dict[Local, int] | None, str | None, float | None]]


@dataclass(frozen=True)
class Counted:
    """A job's counter: its name ("main.py:train:batch_idx"), its newest confirmed value and
    when it was read, and the steps and seconds of all paired dumps so far (see the module
    docstring)."""

    name: str | None
    value: int | None
    t: float  # wall time of that reading (of the newest dump where none is confirmed yet)
    steps: int = 0
    span_s: float = 0.0


def parse_dump(text: str, pid: int) -> dict[Local, int] | None:
    """The int locals named as step counters or epochs in `py-spy dump --json`'s main thread
    (the thread whose id is the process's), outermost frame first; None: no main thread."""
    try:
        threads = json.loads(text)
    except ValueError:
        return None
    main = next((th for th in threads if isinstance(th, dict) and th.get("os_thread_id") == pid),
                None)
    if main is None:
        return None
    frames = list(reversed(main.get("frames") or []))  # py-spy lists the innermost first
    out: dict[Local, int] = {}
    for depth, fr in enumerate(frames):
        path, func = str(fr.get("filename") or ""), str(fr.get("name") or "")
        if "/torch/" in path or func.startswith("<"):
            continue  # torch's own loops (a DataLoader's sample indices), comprehensions
        where = f"{fr.get('short_filename') or path}:{func}"
        for loc in fr.get("locals") or ():
            name, rep = loc.get("name"), loc.get("repr")
            if (name in STEP_NAMES or name in EPOCH_NAMES) and isinstance(rep, str) \
                    and _INT.fullmatch(rep):
                out[(depth, where, name)] = int(rep)
    return out


def choose(dumps: Sequence[Dump], kept: Local | None) -> Local | None:
    """The counter (see the module docstring): `kept` while one of the last STICKY dumps has
    it, else the outermost step-named local of the newest dump that moved since an earlier one
    (ties: the order of STEP_NAMES); None: none moved yet. Frames of torch's own files and
    comprehensions are not read (`parse_dump`)."""
    if not dumps:
        return None
    *earlier, (_, newest) = dumps
    if kept is not None and any(kept in d for _, d in list(dumps)[-STICKY:]):
        return kept
    moved = [k for k, v in newest.items() if k[2] in STEP_NAMES
             and any(k in d and d[k] != v for _, d in earlier)]
    if not moved:
        return None
    return min(moved, key=lambda k: (k[0], STEP_NAMES.index(k[2])))


def _epochs(d: dict[Local, int], counter: Local) -> tuple[tuple[Local, int], ...]:
    """The epoch-named locals of the counter's frame and the frames around it (outer ones)."""
    return tuple(sorted((k, v) for k, v in d.items()
                        if k[2] in EPOCH_NAMES and k[0] <= counter[0]))


def _at(d: Dump, counter: Local) -> tuple[tuple[tuple[Local, int], ...], int]:
    """Where a dump finds the loop: the epochs around it, then the counter."""
    return _epochs(d[1], counter), d[1][counter]


def confirm(accepted: Dump | None, pending: Dump | None, new: Dump, counter: Local
            ) -> tuple[Dump | None, tuple[int, float] | None]:
    """Judge the dump awaiting confirmation by the one after it: (the newest confirmed dump,
    the steps and seconds from the one confirmed before it, where the two pair).

    A dump read without pausing the process is now and then torn: a local's slot read while
    the interpreter wrote another (PyTorch's loop: 1 in 15 dumps of a tight loop read another
    local's value, 19999 or 24629671 for a `batch_idx` of 957 or 3341). So a reading counts
    once the next one agrees: one that does not lie between its neighbours where they run in
    order is torn and dropped; where the loop restarted between them (a new epoch), the
    reading starts the new run if the next one follows it. Two confirmed readings pair where
    they lie in one run (the same epochs around it, the count not gone back)."""
    if pending is None or counter not in pending[1] or counter not in new[1]:
        return accepted, None
    p, n = _at(pending, counter), _at(new, counter)
    if accepted is None or counter not in accepted[1]:
        return (pending, None) if p <= n else (accepted, None)
    a = _at(accepted, counter)
    if a <= n:  # in order around it: it counts if it lies between them
        if not a <= p <= n:
            return accepted, None  # torn
    elif not p <= n:  # restarted between them, and it does not lead into the next one
        return accepted, None
    if a[0] == p[0] and a[1] <= p[1] and pending[0] > accepted[0]:
        return pending, (p[1] - a[1], pending[0] - accepted[0])
    return pending, None  # the first of a new run


def dump_locals(pid: int, exe: str | None = None
                ) -> tuple[dict[Local, int] | None, str | None, float | None]:
    """One `py-spy dump --locals --nonblocking` of `pid`: (its main thread's counters, error
    message, py-spy's CPU seconds)."""
    text, err, cpu = pyspy.dump(pid, ["--locals"], exe, DUMP_TIMEOUT_S)  # its CPU, for the budget
    return (None, err, cpu) if text is None else (parse_dump(text, pid), None, cpu)


class CounterSampler:
    """Schedules py-spy dumps of found jobs' locals; one at a time, within a CPU budget."""

    def __init__(self, every_s: float = EVERY_S, cpu_budget: float = COUNTER_BUDGET,
                 credit: float = CREDIT_S, dump: DumpFn | None = None, exe: str | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 cpu_max: float = COUNTER_MAX) -> None:
        """`cpu_budget`: the dumps' share of one core for each job to read, `cpu_max` for all
        (0: no limit)."""
        self.every_s = every_s
        self.per_job, self.cpu_max = cpu_budget, cpu_max
        self._dump = dump or dump_locals
        self.exe, self.clock = exe, clock
        self._turns = Turns(cpu_budget, credit, DUMP_CPU_S, clock)  # whose dump is next
        self._lock = threading.Lock()
        self._dumps: dict[Hashable, deque[Dump]] = {}
        self._counter: dict[Hashable, Local] = {}
        self._counted: dict[Hashable, Counted] = {}
        # key -> (its newest confirmed dump, the newest one awaiting the next): see `confirm`
        self._held: dict[Hashable, tuple[Dump | None, Dump | None]] = {}
        self._thread: threading.Thread | None = None
        self.denied = False  # py-spy may not read the jobs, or is missing: no more dumps
        self.dumps = 0

    @property
    def cpu_spent(self) -> float:
        """py-spy's CPU-seconds so far, all dumps."""
        return self._turns.cpu_spent

    def round(self, jobs: list[tuple[Hashable, int]]) -> bool:
        """One scheduling step over this tick's jobs [(key, pid)]; forgets the others. Returns
        True where a dump started."""
        now = self.clock()
        turns = self._turns
        with self._lock:
            for k in turns.forget(k for k, _ in jobs):
                for kept in (self._dumps, self._counter, self._counted, self._held):
                    kept.pop(k, None)
            share = self.per_job * max(1, len(jobs))  # a share for each job to read
            turns.set_budget(min(share, self.cpu_max) if self.cpu_max else share, now)
            if turns.busy is not None or not jobs or self.denied or not turns.affordable(now):
                return False
            taken = turns.take(jobs, self.every_s, now)
            if taken is None:
                return False
            key, pid = taken
        self._thread = threading.Thread(target=self._run, args=(key, pid), daemon=True,
                                        name=f"py-spy-dump-{pid}")
        self._thread.start()
        return True

    def _run(self, key: Hashable, pid: int) -> None:
        t0 = time.time()
        try:
            got, err, cpu = self._dump(pid, self.exe)
        except Exception as exc:  # noqa: BLE001 - a broken dump must not break the monitor
            got, err, cpu = None, f"py-spy failed: {exc}", None
        t = (t0 + time.time()) / 2  # read somewhere in between (10-30 ms)
        with self._lock:
            self._turns.paid(cpu if cpu is not None else DUMP_CPU_S)
            self.dumps += 1
            if err is not None and (pyspy.is_permission_error(err) or "not installed" in err):
                self.denied = True
            if key not in self._turns.last:
                return  # the job went while it was read
            self._add(key, (t, got or {}))

    def _add(self, key: Hashable, dump: Dump) -> None:
        q = self._dumps.setdefault(key, deque(maxlen=KEPT))
        q.append(dump)
        kept = self._counter.get(key)
        counter = choose(q, kept)
        if counter is None:
            self._counter.pop(key, None)
            self._counted[key] = Counted(None, None, dump[0])
            self._held[key] = (None, None)
            return
        was = self._counted.get(key) if counter == kept else None
        steps, span = (was.steps, was.span_s) if was is not None else (0, 0.0)
        if counter == kept:
            accepted, pending = self._held.get(key, (None, None))
        else:  # newly chosen: the dump before this one awaits confirmation
            accepted, pending = None, q[-2] if len(q) > 1 else None
        self._counter[key] = counter
        accepted, paired = confirm(accepted, pending, dump, counter)
        if paired is not None:
            steps, span = steps + paired[0], span + paired[1]
        self._held[key] = (accepted, dump if counter in dump[1] else None)
        self._counted[key] = Counted(
            f"{counter[1]}:{counter[2]}", None if accepted is None else accepted[1][counter],
            dump[0] if accepted is None else accepted[0], steps, round(span, 3))

    def add(self, key: Hashable, dump: Dump) -> None:
        """Add a dump read elsewhere (tests, replays) as if this sampler had read it."""
        with self._lock:
            self._turns.last.setdefault(key, self.clock())
            self._add(key, dump)

    def result(self, key: Hashable) -> Counted | None:
        """The job's counter as of its newest dump; None before its first."""
        with self._lock:
            return self._counted.get(key)

    def join(self, timeout: float | None = None) -> None:
        t = self._thread
        if t is not None:
            t.join(timeout)
