"""A job's pace beside other jobs against its pace alone: by its loader, loop counter or steps.

Which meter paces a job, and where its pace wins over the CPU-wait estimate, is the precedence
table's (analyse/slowdown/figure.py, docs/slowdown.md); the runs behind the rules below are in
docs/validation.md.

A DataLoader worker makes one batch after another and blocks when the trainer's queue is full,
so what its workers do per second follows the trainer's pace, whatever slows the trainer
(docs/validation.md, "Slowdown from the loader": `diagnose`'s probe measures it by pausing the
other jobs). The live judge pauses nothing; it can keep that rate from the ticks when a job was
the only training job running, and divide once others run beside it. The rate is the workers'
write calls a second (`JobSample.loader_writes_per_s`: a fixed number per batch handed over,
so a count of its batches; MIN_WRITES_PER_S or more alone), and where those are not read (another
user's workers) their CPU cores (which a batch takes more or less of beside other jobs):

    pace slowdown = mean(workers' write calls/s, ticks alone) / mean(the same, last ticks)
                    (else the same of the workers' cores)

(means, not medians: a worker's work comes a batch at a time, so a tick holds one batch, two
or none; the mean over the window is its rate, a median of such steps is not. The workers'
cores are their main threads' schedstat ns over the time since their last reading, so a tick
that was not read (a quiet one) is left out, not counted as 0)

- alone: the judged set held this job only, once it is under way (below: its start-up and
  first workers are not its pace); the latest REF_TICKS such ticks are kept and a
  reference needs REF_MIN of them, with MIN_CORES or more;
- beside others: the last NOW_TICKS ticks with another job under way beside it (cleared when
  it is alone again), or as many more, up to NOW_MAX, as hold NOW_BUSY ticks in which its loader
  worked (a slow loader makes a batch every few ticks: 20 ticks may hold 3 or 4); a ratio needs
  NOW_MIN of them, and the workers busy at least MIN_CORES / 50 (an idle loader has no pace).

Under way: SETTLE seconds after its process started (ticks after it was first seen, where its
start is not read: a job older than the monitor is not starting), once its loader's workers
run, or where it has none (yet: they start with its first batch), SETTLE_NO_WORKERS after. A
newcomer's start-up (torch, its CUDA context, its workers' spawn) takes no share of what the
others run on, so their ticks beside it count neither as alone nor as beside.

A job with no loader workers (or whose loader's pace cannot be read) is paced by its own loop
counter where py-spy's dumps read one (collect/loop_counter.py: `batch_idx` of its training
loop, read every 10 s or more seldom): the steps it counted over the seconds they span, while
it ran alone and over its newest dumps beside the others (LOOP_MIN_S or more of each; beside,
back to LOOP_MIN_STEPS steps, up to LOOP_MAX_S), each pair of dumps within one side (alone,
beside others under way; a pair across a change counts for neither, nor does a counter's first
pair, its loop's warm-up):

    counter pace slowdown = (steps / s alone) / (steps / s beside the others, newest)

A counter that did not move over LOOP_MAX_S beside the others gives a bound, not a pace.
Where there is no counter either, it is paced by its step time where py-spy reads one
(collect/stall.py; `JobSample.step_time_s`, each burst's reading checked against beats): the
mean of the distinct readings while it ran alone (STEP_REF_MIN or more;
each is a checked burst of 4 steps or more) against the newest one since others run beside it:

    step pace slowdown = step now / mean(steps alone)

(the newest reading paces it for STEP_STALE_S after its burst, and its age is in the evidence:
later bursts that read no step leave it standing)

A reading counts once, when it changes (a new burst): the value a job shows on its first
ticks beside others is its last reading alone, which is not its pace beside them. A reading
that comes within STRADDLE_S of the job starting or ending to run alone counts for neither
side: its burst (up to 32 s) may have begun before the change. A job slowed so far that a burst counts fewer than 4 steps shows none until its longer bursts read
one (collect/stall.py `LONGER`).

A job that never ran alone here (started beside others) borrows the reference of its twin: a
job of the same user, in the same directory and container, with the same command line but for
where it writes, its name, seed, optimizer figures or length (analyse/twins.py) that ran alone
REF_MIN readings or more (one still running, or one that ended within TWIN_MAX_AGE_S): a copy
started by hand beside the first makes the same batches, so its loader's pace alone is the
first's (`twin_pid` names it, `twin_args` what differs). Without a running twin, a stored run
of its command lent to it (`lend_stored`: engine/pace_refs.py reads and keeps them, by the
job's fingerprint) is its reference, up to STORED_MAX_AGE_S after its last reading
(`stored_age_s`); a stored loop counter alone paces it where its own counter has the same name.
Its own readings beside the others count once it is under way (its workers'
start-up is not its pace). Without either it has no reference: its estimate stays
the CPU-wait model's until the others end; once it has run alone REF_MIN readings after them,
its pace alone over its last window beside them says how much slower it ran then (`earlier`).
Outside load while it ran alone is in its reference (it makes the ratio smaller). Only
numbers, no I/O: the judge (analyse/passive.py) feeds `update` each tick.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gputop_dl.analyse import twins
from gputop_dl.analyse.slowdown.figure import Method, SlowdownFigure, choose
from gputop_dl.analyse.slowdown import figure
from gputop_dl.snapshot import JobSample

SETTLE = 10  # seconds after a job started (ticks after it was first seen, where its
SETTLE_NO_WORKERS = 30  # start is not read) before it is under way; ... with no loader worker
REF_TICKS = 60  # ticks alone kept (the latest)
REF_MIN = 10  # ticks alone a reference needs
NOW_TICKS = 20  # ticks beside others whose mean is its pace now (batches are whole: a window
NOW_MIN = 10  # of 10 ticks at 1 it/s would be ±10 % from one batch more or less)
NOW_BUSY = 8  # ... or back as far as holds this many ticks in which its loader worked,
NOW_MAX = 60  # up to this many
MIN_CORES = 0.005  # a reference loader this busy or more (5 ms of CPU a second)
MIN_WRITES_PER_S = 0.1  # ... handing over this many write calls a second or more (a batch is 5-10)
STEP_REF = 10  # distinct step readings alone kept (the latest)
STRADDLE_S = 35.0  # the monitor's longest py-spy burst (32 s, collect/stall.py) and its tick
STEP_REF_MIN = 1  # ... a step reference needs (each is a checked burst of 4 steps or more)
# the newest step reading beside others paces the job for this long after its burst: later
# bursts that read no step (too short, rates that disagree) leave it standing, and a job's
# bursts come about a minute apart beside another job at the default budget: past three or
# four of them without a reading, the step it read is no longer its pace now
STEP_STALE_S = 240.0
LOOP_MIN_S = 20.0  # seconds of paired dumps a loop counter's rate needs, alone and beside
LOOP_MIN_STEPS = 8  # beside the others, back as far as holds this many steps (whole steps:
LOOP_MAX_S = 120.0  # 8 of them read within 12 %), up to this many seconds
LOOP_KEPT = 12  # pairs of dumps kept a side
# a counter's first pair of dumps holds its loop's first steps (its warm-up: allocations, lazy
# set-up, torch.compile's compilation), which are not its pace: it counts for neither side
LOOP_WARM_PAIRS = 1

TWIN_MAX_AGE_S = 3600.0  # a twin's reference alone is lent this long after its last tick alone
STORED_MAX_AGE_S = 7 * 86400.0  # a stored reference (engine/pace_refs.py) is lent this long
TWINS_KEPT = 64  # references kept by command line (the oldest dropped)
STARTING = ("the jobs beside it are starting (their first seconds, or until their loader's "
            "workers run): their start-up is not counted as a load")

# what twins share: the command line's key (analyse/twins.py), directory, user and container
# (two users' `python train.py` in /workspace of two containers read different data)
TwinKey = tuple[tuple[str, ...], str | None, str | None, str | None]

# what paced a job, as the evidence's `own_pace.source` says it: its workers' write calls
# ("batches"), their cores ("loader"), its loop counter, py-spy's step times; the model's
# method (analyse/slowdown/figure.py) for each
PaceSource = Literal["batches", "loader", "counter", "steps"]
METHOD: dict[PaceSource, Method] = {"batches": "loader writes", "loader": "loader CPU",
                                    "counter": "loop counter", "steps": "py-spy steps"}

Key = int | str  # a job's PID (its name where it has none): a found job is renamed when a twin
# starts beside it ("train.py" becomes "train.py (4242)"), which must not lose its pace alone


@dataclass(frozen=True)
class Pace:
    """One job's pace now against alone (`slowdown` None: unknown, `why` says why)."""

    slowdown: float | None
    alone_cores: float | None = None  # its workers' mean cores over its ticks alone
    now_cores: float | None = None  # ... over its last ticks beside other jobs
    alone_ticks: int = 0
    now_ticks: int = 0
    alone_until: float | None = None  # the time of its last tick alone
    why: str | None = None
    # alone again after others ran beside it: its pace alone over its pace in its last
    # window beside them (how much slower it ran then), once REF_MIN readings alone since;
    # and how long ago that was, seconds
    earlier: float | None = None
    earlier_ago: float | None = None
    source: PaceSource = "loader"  # what paced it (METHOD: the model's word for it)
    step_alone_s: float | None = None  # its mean py-spy step time alone (None: none read)
    step_now_s: float | None = None  # ... its newest since others run beside it
    step_now_age_s: float | None = None  # ... read this long ago (None: no reading now)
    step_alone_readings: int = 0
    # its steps beside the others are longer than a py-spy burst could count 4 of: at least
    # this many times its step alone (a bound where there is no step to divide: None otherwise)
    at_least: float | None = None
    twin_pid: int | None = None  # its reference alone is this twin's (analyse/twins.py)
    twin_args: tuple[str, ...] = ()  # ... whose command differs from its own in these options
    alone_writes: float | None = None  # its workers' mean write calls a second alone
    now_writes: float | None = None  # ... over its last ticks beside other jobs
    # its reference alone is a stored one: a run of its command (or a twin's) that ended its
    # last reading alone this long ago, seconds (engine/pace_refs.py)
    stored_age_s: float | None = None
    counter: str | None = None  # its own loop counter (file:function:local) where it paced it
    counter_alone: float | None = None  # its steps a second by that counter alone
    counter_now: float | None = None  # ... over its newest dumps beside the others
    counter_alone_s: float = 0.0  # the seconds of paired dumps behind each
    counter_now_s: float = 0.0


def pace_figure(p: Pace) -> SlowdownFigure:
    """A pace as a slowdown figure: its method, and its reference alone (a stored run's, a
    twin's, or its own readings)."""
    ref: figure.Reference = ("stored run" if p.stored_age_s is not None
                      else "twin" if p.twin_pid is not None else "own readings")
    return SlowdownFigure(p.slowdown, "pace", METHOD[p.source], ref, at_least=p.at_least,
                          why=p.why)


@dataclass
class _Rate:
    """One measure of a job's loader pace (its workers' write calls a second, or their cores):
    its readings alone, beside other jobs now, and its last window beside them once alone again."""

    least: float  # a reference alone needs this much or more; a window under least / 50 is idle
    alone: deque[float] = field(default_factory=lambda: deque(maxlen=REF_TICKS))
    now: deque[float] = field(default_factory=lambda: deque(maxlen=NOW_MAX))
    beside: tuple[float, ...] = ()

    def ref(self) -> float | None:
        return statistics.fmean(self.alone) if self.alone else None

    def recent(self) -> tuple[float, ...]:
        return _recent(self.now, self.least / 50)


@dataclass
class _Track:
    seen: int = 0
    workers: bool = False  # its workers' cores or write calls were read on some tick
    writes: _Rate = field(default_factory=lambda: _Rate(MIN_WRITES_PER_S))  # its batches (see above)
    cores: _Rate = field(default_factory=lambda: _Rate(MIN_CORES))
    alone_until: float | None = None
    beside_t: float | None = None  # the time of its last tick beside others
    beside_until: float | None = None  # ... of its last window beside them, once alone again
    alone_since: int = 0  # readings alone since that window
    last_step: float | None = None  # the last step time seen (a new reading is a new value)
    steps_alone: deque[float] = field(default_factory=lambda: deque(maxlen=STEP_REF))
    step_now: float | None = None  # the newest new reading beside others
    step_now_t: float = 0.0  # ... when it was read
    step_over: float | None = None  # beside others, its steps are longer than this (s)
    under_way: bool = False  # past its start-up: it counts as beside the others (see above)
    others_starting: bool = False  # on its last tick, every job beside it was starting
    was_alone: bool | None = None  # alone on its last tick
    since: float = float("-inf")  # when it last started or stopped running alone
    last_alone: float | None = None  # the time of its last tick alone (read or not)
    # its loop counter (see the module docstring): its name, its last reading (when read,
    # steps and seconds counted so far), the pairs of dumps (steps, seconds) alone and beside
    # under way, and the side of its last tick (alone, beside, starting) and since when
    loop_name: str | None = None
    loop_last: tuple[float, int, float] | None = None
    loop_warm: int = 0  # pairs of its counter still to pass as its loop's warm-up
    loop_alone: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=LOOP_KEPT))
    loop_now: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=LOOP_KEPT))
    side: str | None = None
    side_since: float = float("-inf")


@dataclass(frozen=True)
class _Ref:
    """A job's track, whose readings alone are lent to its twins (see the module docstring):
    the track itself, not a copy, so it is lent once and stays its latest."""

    pid: int | None
    command: str
    track: _Track
    stored: bool = False  # a stored reference (`OwnPace.lend_stored`), not a live twin's


@dataclass(frozen=True)
class Reference:
    """A job's readings alone, as kept between gputop-dl runs (engine/pace_refs.py): its
    loader's cores and write calls a second, its step times, its loop counter's name and
    pairs of dumps (steps, seconds), and the time of its last."""

    command: str
    until: float
    cores: tuple[float, ...] = ()
    writes: tuple[float, ...] = ()
    steps: tuple[float, ...] = ()
    pid: int | None = None  # the job that read them (None: read back from the store)
    loop: str | None = None
    loop_pairs: tuple[tuple[int, float], ...] = ()

    def usable(self) -> bool:
        """Enough readings of one kind to pace a job by (as a twin's reference)."""
        return _enough(len(self.cores), len(self.writes), len(self.steps),
                       _loop_s(self.loop_pairs) if self.loop else 0.0)


@dataclass
class OwnPace:
    """Each job's loader pace alone and beside others, tick by tick (jobs gone are forgotten,
    their references alone lent to twins for TWIN_MAX_AGE_S)."""

    _tracks: dict[Key, _Track] = field(default_factory=dict)
    _twins: dict[TwinKey, _Ref] = field(default_factory=dict)
    _stored: dict[Key, _Ref] = field(default_factory=dict)  # lent from the store, by job

    def lend_stored(self, key: Key, ref: Reference) -> None:
        """Lend job `key` a stored reference alone (engine/pace_refs.py): it paces the job
        where neither its own readings alone nor a running twin's do."""
        track = _Track(alone_until=ref.until, loop_name=ref.loop)
        for rate, xs in ((track.cores, ref.cores), (track.writes, ref.writes)):
            rate.alone.extend(xs)
        track.steps_alone.extend(ref.steps)
        if ref.loop:
            track.loop_alone.extend(ref.loop_pairs)
        self._stored[key] = _Ref(None, ref.command, track, stored=True)

    def references(self) -> list[Reference]:
        """The references alone read here, by the job that read them (its own, lent to twins;
        those of jobs gone are kept TWIN_MAX_AGE_S): what engine/pace_refs.py stores."""
        out = []
        for ref in self._twins.values():
            tr, until = ref.track, _until(ref.track)
            if until is not None:
                out.append(Reference(ref.command, until, tuple(tr.cores.alone),
                                     tuple(tr.writes.alone), tuple(tr.steps_alone), ref.pid,
                                     tr.loop_name if tr.loop_alone else None,
                                     tuple(tr.loop_alone) if tr.loop_name else ()))
        return out

    def update(self, jobs: Sequence[JobSample], t: float) -> dict[str, Pace]:
        keys = {_key(j) for j in jobs}
        for key in [k for k in self._tracks if k not in keys]:
            del self._tracks[key]
        for key in [k for k in self._stored if k not in keys]:
            del self._stored[key]
        alone = len(jobs) == 1
        tracks = []
        for j in jobs:
            tr = self._tracks.setdefault(_key(j), _Track())
            tr.seen += 1
            tr.under_way = tr.under_way or _under_way(j, tr.seen)
            tracks.append(tr)
        under_way = sum(tr.under_way for tr in tracks)
        out = {}
        for j, tr in zip(jobs, tracks):
            c, w = j.cpu_cores_workers, j.loader_writes_per_s
            tr.workers = tr.workers or c is not None or w is not None
            if tr.was_alone is not None and tr.was_alone != alone:
                tr.since = t
            tr.was_alone = alone
            s = j.step_time_s
            if s is not None and s != tr.last_step and t - tr.since > STRADDLE_S:
                if alone and tr.seen > SETTLE:
                    tr.steps_alone.append(s)
                elif not alone and tr.seen > SETTLE:
                    tr.step_now, tr.step_over, tr.step_now_t = s, None, t
            over = j.step_time_over_s
            if over is not None and not alone and (tr.step_now is None or over > tr.step_now):
                tr.step_now, tr.step_over = None, over  # its newest burst: longer than that
            tr.last_step = s if s is not None else tr.last_step
            rates = ((tr.cores, c), (tr.writes, w))
            tr.others_starting = not alone and under_way == tr.under_way
            _count(j, tr, "alone" if alone else "starting" if tr.others_starting else "beside", t)
            if alone:
                if any(len(r.now) >= NOW_MIN for r, _ in rates):  # the others are gone: keep
                    for r, _ in rates:  # how it ran beside them
                        r.beside = r.recent()
                    tr.beside_until, tr.alone_since = tr.beside_t, 0
                for r, _ in rates:
                    r.now.clear()
                tr.step_now = tr.step_over = None
                if (c is not None or w is not None) and tr.under_way:
                    for r, x in rates:
                        if x is not None:
                            r.alone.append(x)
                    tr.alone_until = t
                    tr.alone_since += 1
                tr.last_alone = t
                self._lend(j, tr)
            elif not tr.others_starting:  # another job under way beside it
                tr.beside_t = t
                for r, x in rates:
                    if x is not None and tr.under_way:
                        r.now.append(x)
            twin = None if alone or _has_ref(tr) else self._twin(j, t)
            out[j.name] = pace(tr, alone, t, twin)
            if twin is not None and j.command:
                out[j.name] = dataclasses.replace(out[j.name],
                                                  twin_args=twins.differ(twin.command, j.command))
            if twin is not None and twin.stored:
                until = _until(twin.track) or t
                out[j.name] = dataclasses.replace(out[j.name],  # (a clock set back: 0)
                                                  stored_age_s=max(0.0, round(t - until)))
        return out

    def _lend(self, j: JobSample, tr: _Track) -> None:
        """Lend a job's readings alone to its twins, once they are a reference."""
        if not j.command or not _has_ref(tr):
            return
        key = _twin_key(j, j.command)
        lent = self._twins.get(key)
        if lent is not None and lent.track is tr:
            return  # lent already: its track's deques are read where they are
        self._twins[key] = _Ref(j.pid, j.command, tr)
        while len(self._twins) > TWINS_KEPT:  # the one alone longest ago goes
            del self._twins[min(self._twins, key=lambda k: _until(self._twins[k].track) or 0.0)]

    def _twin(self, j: JobSample, t: float) -> _Ref | None:
        """The reference alone lent by a twin of `j` (analyse/twins.py) in its directory, else
        a stored one lent to it (`lend_stored`)."""
        ref = self._twins.get(_twin_key(j, j.command)) if j.command else None
        until = None if ref is None else _until(ref.track)
        if ref is not None and ref.pid != j.pid and until is not None and t - until <= TWIN_MAX_AGE_S:
            return ref
        ref = self._stored.get(_key(j))
        until = None if ref is None else _until(ref.track)
        return ref if until is not None and t - until <= STORED_MAX_AGE_S else None


def _twin_key(j: JobSample, command: str) -> TwinKey:
    return twins.key(command), j.cwd, j.user, j.container


def _recent(now: deque[float], idle: float) -> tuple[float, ...]:
    """The readings beside the others that are its pace now: the last NOW_TICKS, or back as far
    as holds NOW_BUSY in which its loader worked (above `idle`; see the module docstring)."""
    n = busy = 0
    for x in reversed(now):
        n += 1
        busy += x > idle
        if n >= NOW_TICKS and busy >= NOW_BUSY:
            break
    return tuple(now)[len(now) - n:]


def _under_way(j: JobSample, seen: int) -> bool:
    """Whether a job seen on `seen` ticks is past its start-up (see the module docstring): its
    age is its process's where read (a job older than the monitor is not starting), else the
    ticks it was seen on."""
    age = j.elapsed_s if j.elapsed_s is not None else seen
    if age <= SETTLE:
        return False
    # a loader's workers start with its first batch, after the model and its CUDA context: a
    # job without any (yet) may still be starting
    workers = j.cpu_cores_workers is not None or j.loader_writes_per_s is not None
    return workers or age > SETTLE_NO_WORKERS


def _until(tr: _Track) -> float | None:
    """When a lent reference was last added to: its last reading alone, or its last tick alone."""
    return tr.alone_until if tr.alone_until is not None else tr.last_alone


def _has_ref(tr: _Track) -> bool:
    return _enough(len(tr.cores.alone), len(tr.writes.alone), len(tr.steps_alone),
                   _loop_s(tr.loop_alone) if tr.loop_name else 0.0)


def _enough(cores: int, writes: int, steps: int, loop_s: float = 0.0) -> bool:
    """Whether readings alone this many (of its loader's cores, its write calls, its step
    times, seconds of its loop counter's pairs) are a reference: REF_MIN of either rate,
    STEP_REF_MIN step times, or LOOP_MIN_S of its counter."""
    return cores >= REF_MIN or writes >= REF_MIN or steps >= STEP_REF_MIN or loop_s >= LOOP_MIN_S


def _loop_s(pairs: Sequence[tuple[int, float]]) -> float:
    return sum(s for _, s in pairs)


def _key(j: JobSample) -> Key:
    return j.pid if j.pid is not None else j.name


def pace(tr: _Track, alone: bool, t: float, twin: _Ref | None = None) -> Pace:
    """The `Pace` of one track at time `t` (see the module docstring); `twin`: a reference
    alone lent by a twin, for a track without its own."""
    if twin is not None:  # its track with the twin's readings alone (read, never changed)
        lent = dataclasses.replace(
            tr, cores=dataclasses.replace(tr.cores, alone=twin.track.cores.alone),
            writes=dataclasses.replace(tr.writes, alone=twin.track.writes.alone),
            steps_alone=twin.track.steps_alone, alone_until=_until(twin.track),
            loop_alone=twin.track.loop_alone if twin.track.loop_name == tr.loop_name
            else deque())
        return dataclasses.replace(pace(lent, alone, t), twin_pid=twin.pid)
    ref, wref = tr.cores.ref(), tr.writes.ref()
    recent, wrecent = tr.cores.recent(), tr.writes.recent()
    now = statistics.fmean(recent) if recent else None
    wnow = statistics.fmean(wrecent) if wrecent else None

    def out(slowdown: float | None, why: str | None = None, source: PaceSource = "loader") -> Pace:
        batches = source == "batches"
        return Pace(slowdown, alone_cores=ref, now_cores=now,
                    alone_ticks=len((tr.writes if batches else tr.cores).alone),
                    now_ticks=len(wrecent if batches else recent), alone_until=tr.alone_until,
                    why=why, source=source, alone_writes=wref, now_writes=wnow)

    if alone:
        p = out(None, "it runs alone")
        earlier = _earlier(tr) if tr.alone_since >= REF_MIN else None
        if earlier is None:
            return p
        return dataclasses.replace(p, earlier=earlier[0], earlier_ago=earlier[1])
    loader = _by_loader(tr, out)
    counted = _by_counter(tr) if tr.loop_alone else None
    steps = _by_steps(tr, t) if tr.steps_alone else None
    meters = [m for m in (loader, counted, steps) if m is not None]
    figures = [pace_figure(m) for m in meters]
    chosen = choose(figures)  # the first meter with a value, in ROUTES' order
    if chosen is not None:
        return meters[figures.index(chosen)]
    # none has a value: the one whose `why` says most of what it lacks
    if steps is not None and not tr.workers and counted is None:
        return steps
    return counted if counted is not None and not tr.workers else loader


def _count(j: JobSample, tr: _Track, side: str, t: float) -> None:
    """Take a job's new loop-counter reading (see the module docstring): the pair of dumps
    since its last one goes to its side, where the whole pair lies within that side."""
    if not tr.under_way:  # its start-up is not its pace: pairs count from when it is under way
        side = "its start-up"
    if side != tr.side:
        tr.side, tr.side_since = side, t
    name, steps, span, at = j.loop_counter, j.loop_steps, j.loop_span_s, j.loop_read_t
    if name is None or steps is None or span is None or at is None:
        return
    if name != tr.loop_name:  # another counter: the readings so far count something else
        tr.loop_name, tr.loop_last, tr.loop_warm = name, (at, steps, span), LOOP_WARM_PAIRS
        tr.loop_alone.clear()
        tr.loop_now.clear()
        return
    last = tr.loop_last
    if last is None or at <= last[0]:
        tr.loop_last = last or (at, steps, span)
        return
    tr.loop_last = (at, steps, span)
    d_steps, d_span = steps - last[1], span - last[2]
    if d_span <= 0 or d_steps < 0:
        return  # not a pair (a new epoch)
    if tr.loop_warm > 0:  # its loop's warm-up
        tr.loop_warm -= 1
        return
    if last[0] < tr.side_since:
        return  # across a change of side
    if side == "alone":
        tr.loop_alone.append((d_steps, d_span))
    elif side == "beside":
        tr.loop_now.append((d_steps, d_span))


def _newest(pairs: deque[tuple[int, float]]) -> tuple[int, float]:
    """The steps and seconds of the newest pairs beside the others: back to LOOP_MIN_S and
    LOOP_MIN_STEPS, at most LOOP_MAX_S (see the module docstring)."""
    steps, span = 0, 0.0
    for k, s in reversed(pairs):
        if span >= LOOP_MAX_S or (span >= LOOP_MIN_S and steps >= LOOP_MIN_STEPS):
            break
        steps, span = steps + k, span + s
    return steps, span


def _by_counter(tr: _Track) -> Pace:
    """A track's pace by its own loop counter (see the module docstring)."""
    alone_s = _loop_s(tr.loop_alone)
    ref = sum(k for k, _ in tr.loop_alone) / alone_s if alone_s > 0 else None
    steps, span = _newest(tr.loop_now)
    now = steps / span if span > 0 else None

    def out(slowdown: float | None, why: str | None = None, at_least: float | None = None) -> Pace:
        return Pace(slowdown, alone_until=tr.alone_until, why=why, source="counter",
                    counter=tr.loop_name, counter_alone=ref, counter_now=now,
                    counter_alone_s=alone_s, counter_now_s=span, at_least=at_least)

    if ref is None or alone_s < LOOP_MIN_S:
        return out(None, f"{alone_s:.0f} of {LOOP_MIN_S:.0f} s of its loop counter alone")
    if ref <= 0:
        return out(None, "its loop counter did not move while it ran alone")
    if span < LOOP_MIN_S:
        return out(None, f"{span:.0f} of {LOOP_MIN_S:.0f} s of its loop counter beside the "
                         "others")
    if steps == 0:
        return out(None, f"its loop counter did not move in {span:.0f} s beside the others: "
                         "no step to divide", at_least=round(ref * span, 1))
    return out(round(ref / now, 3) if now else None)


def _by_steps(tr: _Track, t: float) -> Pace:
    """A track's pace by its py-spy step times (see the module docstring)."""
    ref = statistics.fmean(tr.steps_alone)
    age = None if tr.step_now is None else round(max(0.0, t - tr.step_now_t), 1)

    def out(slowdown: float | None, why: str | None = None, at_least: float | None = None) -> Pace:
        return Pace(slowdown, alone_until=tr.alone_until, why=why, source="steps",
                    step_alone_s=round(ref, 4), step_now_s=tr.step_now, step_now_age_s=age,
                    step_alone_readings=len(tr.steps_alone), at_least=at_least)

    if len(tr.steps_alone) < STEP_REF_MIN:
        return out(None, f"{len(tr.steps_alone)} of {STEP_REF_MIN} step times of it alone")
    if tr.step_over is not None:
        return out(None, f"its steps beside the others are longer than {tr.step_over:.1f} s "
                         "(py-spy counted fewer than 4 in a burst): no step to divide",
                   at_least=round(tr.step_over / ref, 1))
    if tr.step_now is None:
        return out(None, "no step time read since the others run beside it")
    if age is not None and age > STEP_STALE_S:
        return out(None, f"its last step time beside the others was read {age:.0f} s ago "
                         "(no burst since read one): not its pace now")
    return out(round(tr.step_now / ref, 3))


def _earlier(tr: _Track) -> tuple[float, float] | None:
    """Alone again: how much slower it ran in its last window beside the others, by its
    batches (write calls) where read, else its loader's cores, and how long ago that window
    ended; None where neither tells."""
    if tr.beside_until is None or tr.alone_until is None:
        return None
    ago = round(tr.alone_until - tr.beside_until, 1)
    for r in (tr.writes, tr.cores):
        ref = r.ref() if len(r.alone) >= REF_MIN else None
        was = statistics.fmean(r.beside) if r.beside else None
        if ref is not None and was is not None and ref >= r.least and was >= r.least / 50:
            return round(ref / was, 3), ago
    return None


def _by_loader(tr: _Track, out: Callable[..., Pace]) -> Pace:
    """A track's pace by its loader: its batches (write calls) where they pace it, else its
    workers' cores (see the module docstring)."""
    if not tr.workers:
        return out(None, "no loader worker processes, and no step time of it alone, to pace "
                         "it by")
    batches, decided = _by_rate(tr.writes, out, "batches", tr.others_starting)
    if decided:
        return batches
    cores, _ = _by_rate(tr.cores, out, "loader", tr.others_starting)
    # its batches were read alone, not its cores: they say what it lacks
    return batches if not tr.cores.alone and len(tr.writes.alone) >= REF_MIN else cores


def _by_rate(r: _Rate, out: Callable[..., Pace], source: PaceSource, others_starting: bool
             ) -> tuple[Pace, bool]:
    """A track's pace by one measure of its loader, and whether that measure decides it (a
    reference alone and enough readings beside the others; none yet while every job beside
    it is starting: STARTING says so)."""
    batches = source == "batches"
    if len(r.alone) < REF_MIN:
        return out(None, "it has not run alone since gputop-dl saw it: no pace of its own to "
                         "compare" if not r.alone else f"{len(r.alone)} of {REF_MIN} readings "
                                                       "of it alone", source), False
    ref = statistics.fmean(r.alone)
    if ref < r.least:
        return out(None, f"its loader handed over {ref:.2f} write calls a second alone: too "
                         "few to pace" if batches else
                         f"its loader used {ref:.3f} cores alone: too little to pace",
                   source), False
    if len(r.now) < NOW_MIN:
        return out(None, STARTING if others_starting and not r.now else
                   f"{len(r.now)} of {NOW_MIN} readings beside the others", source), False
    now = statistics.fmean(r.recent())
    if now < r.least / 50:
        return out(None, "its loader handed its trainer no batch in the last readings"
                   if batches else "its loader did no work in the last readings", source), True
    return out(round(ref / now, 3), source=source), True
