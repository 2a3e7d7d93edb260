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

A job with no loader workers (or whose loader's pace cannot be read) is paced by its own loop
counter where py-spy's dumps read one (collect/pyspy/loop_counter.py: `batch_idx` of its training
loop, read every 10 s or more seldom): the steps it counted over the seconds they span, while
it ran alone and over its newest dumps beside the others (LOOP_MIN_S or more of each; beside,
back to LOOP_MIN_STEPS steps, up to LOOP_MAX_S), each pair of dumps within one side (alone,
beside others under way; a pair across a change counts for neither, nor does a counter's first
pair, its loop's warm-up):

    counter pace slowdown = (steps / s alone) / (steps / s beside the others, newest)

A counter that did not move over LOOP_MAX_S beside the others gives a bound, not a pace.
Where there is no counter either, it is paced by its step time where py-spy reads one
(collect/pyspy/stall_sampler.py; `JobSample.step_time_s`, each burst's reading checked against beats): the
mean of the distinct readings while it ran alone (STEP_REF_MIN or more;
each is a checked burst of 4 steps or more) against the newest one since others run beside it:

    step pace slowdown = step now / mean(steps alone)

(the newest reading paces it for STEP_STALE_S after its burst, and its age is in the evidence:
later bursts that read no step leave it standing)

Where the readings alone come from (the job's own, a twin's, a stored run's), when a job is
under way and when a reading counts for neither side: analyse/slowdown/pace_tracks.py. Only
numbers, no I/O.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gputop_dl.analyse.slowdown import figure, twins
from gputop_dl.analyse.slowdown.figure import Method, SlowdownFigure, choose

REF_TICKS = 60  # ticks alone kept (the latest)
REF_MIN = 10  # ticks alone a reference needs
NOW_TICKS = 20  # ticks beside others whose mean is its pace now (batches are whole: a window
NOW_MIN = 10  # of 10 ticks at 1 it/s would be ±10 % from one batch more or less)
NOW_BUSY = 8  # ... or back as far as holds this many ticks in which its loader worked,
NOW_MAX = 60  # up to this many
MIN_CORES = 0.005  # a reference loader this busy or more (5 ms of CPU a second)
MIN_WRITES_PER_S = 0.1  # ... handing over this many write calls a second or more (a batch is 5-10)
STEP_REF = 10  # distinct step readings alone kept (the latest)
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

STARTING = ("the jobs beside it are starting (their first seconds, or until their loader's "
            "workers run): their start-up is not counted as a load")

# what paced a job, as the evidence's `own_pace.source` says it: its workers' write calls
# ("batches"), their cores ("loader"), its loop counter, py-spy's step times; the model's
# method (analyse/slowdown/figure.py) for each
PaceSource = Literal["batches", "loader", "counter", "steps"]
METHOD: dict[PaceSource, Method] = {"batches": "loader writes", "loader": "loader CPU",
                                    "counter": "loop counter", "steps": "py-spy steps"}


@dataclass(frozen=True)
class LoaderReadings:
    """What its loader's meter read: its workers' mean cores and write calls a second alone and
    over its last ticks beside the others, and the readings behind the measure that paced it
    (its write calls' where `Pace.source` is "batches", else its cores')."""

    cores_alone: float | None = None
    cores_now: float | None = None
    writes_alone: float | None = None
    writes_now: float | None = None
    alone_ticks: int = 0
    now_ticks: int = 0


@dataclass(frozen=True)
class StepReadings:
    """What py-spy's step times read: its mean step alone, its newest since others run beside
    it and how long ago that was read (None: no reading now), and the readings alone."""

    alone_s: float
    now_s: float | None
    now_age_s: float | None
    alone_readings: int


@dataclass(frozen=True)
class CounterReadings:
    """What its own loop counter read (file:function:local): its steps a second alone and over
    its newest dumps beside the others, and the seconds of paired dumps behind each."""

    name: str | None
    alone: float | None
    now: float | None
    alone_s: float
    now_s: float


@dataclass(frozen=True)
class Lender:
    """Whose readings alone paced a job that has none of its own: a twin's (its PID;
    analyse/slowdown/twins.py), or a stored run's of its command (or a twin's) that ended its
    last reading alone `stored_age_s` ago (engine/pace_refs.py); `args`: the options in which
    that command differs from the job's own."""

    pid: int | None
    args: tuple[str, ...] = ()
    stored_age_s: float | None = None

    @property
    def reference(self) -> figure.Reference:
        return "stored run" if self.stored_age_s is not None else "twin"


@dataclass(frozen=True)
class Pace:
    """One job's pace now against alone (`slowdown` None: unknown, `why` says why): the
    outcome, whose readings alone it is divided by (`lender`; None: its own), and the readings
    of the one meter that paced it (`source`), the others None."""

    slowdown: float | None
    source: PaceSource = "loader"  # what paced it (METHOD: the model's word for it)
    why: str | None = None
    # no value, but a bound: its steps beside the others are longer than a py-spy burst
    # could count 4 of, or its loop counter did not move: at least this many times slower
    at_least: float | None = None
    # alone again after others ran beside it: its pace alone over its pace in its last
    # window beside them (how much slower it ran then), once REF_MIN readings alone since;
    # and how long ago that was, seconds
    earlier: float | None = None
    earlier_ago: float | None = None
    alone_until: float | None = None  # the time of its last tick alone
    lender: Lender | None = None
    loader: LoaderReadings | None = None
    steps: StepReadings | None = None
    counter: CounterReadings | None = None

    @property
    def reference(self) -> figure.Reference:
        """What its readings now are divided by: its own readings alone, a twin's, a stored
        run's."""
        return "own readings" if self.lender is None else self.lender.reference


def pace_figure(p: Pace) -> SlowdownFigure:
    """A pace as a slowdown figure: its method, and its reference alone (a stored run's, a
    twin's, or its own readings)."""
    return SlowdownFigure(p.slowdown, "pace", METHOD[p.source], p.reference,
                          at_least=p.at_least, why=p.why)


@dataclass
class Rate:
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
class Track:
    """What one job's meters read: its loader's rates, its step times and its loop counter,
    alone and beside the others (kept by analyse/slowdown/pace_tracks.py)."""

    seen: int = 0
    workers: bool = False  # its workers' cores or write calls were read on some tick
    writes: Rate = field(default_factory=lambda: Rate(MIN_WRITES_PER_S))  # its batches (see above)
    cores: Rate = field(default_factory=lambda: Rate(MIN_CORES))
    alone_until: float | None = None
    beside_t: float | None = None  # the time of its last tick beside others
    beside_until: float | None = None  # ... of its last window beside them, once alone again
    alone_since: int = 0  # readings alone since that window
    last_step: float | None = None  # the last step time seen (a new reading is a new value)
    steps_alone: deque[float] = field(default_factory=lambda: deque(maxlen=STEP_REF))
    step_now: float | None = None  # the newest new reading beside others
    step_now_t: float = 0.0  # ... when it was read
    step_over: float | None = None  # beside others, its steps are longer than this (s)
    under_way: bool = False  # past its start-up: it counts as beside the others
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
class Lent:
    """A job's track, whose readings alone are lent to its twins (pace_tracks.py): the track
    itself, not a copy, so it is lent once and stays its latest."""

    pid: int | None
    command: str
    track: Track
    stored: bool = False  # a stored reference (`OwnPace.lend_stored`), not a live twin's


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


def ref_until(tr: Track) -> float | None:
    """When a lent reference was last added to: its last reading alone, or its last tick alone."""
    return tr.alone_until if tr.alone_until is not None else tr.last_alone


def has_ref(tr: Track) -> bool:
    return enough(len(tr.cores.alone), len(tr.writes.alone), len(tr.steps_alone),
                   loop_seconds(tr.loop_alone) if tr.loop_name else 0.0)


def enough(cores: int, writes: int, steps: int, loop_s: float = 0.0) -> bool:
    """Whether readings alone this many (of its loader's cores, its write calls, its step
    times, seconds of its loop counter's pairs) are a reference: REF_MIN of either rate,
    STEP_REF_MIN step times, or LOOP_MIN_S of its counter."""
    return cores >= REF_MIN or writes >= REF_MIN or steps >= STEP_REF_MIN or loop_s >= LOOP_MIN_S


def loop_seconds(pairs: Sequence[tuple[int, float]]) -> float:
    return sum(s for _, s in pairs)


def pace(tr: Track, alone: bool, t: float, twin: Lent | None = None,
         command: str | None = None) -> Pace:
    """The `Pace` of one track at time `t` (see the module docstring); `twin`: a reference
    alone lent by a twin or a stored run, for a track without its own, and `command` the job's
    own (the options in which the lender's differs are named)."""
    if twin is not None:  # its track with the twin's readings alone (read, never changed)
        lent = dataclasses.replace(
            tr, cores=dataclasses.replace(tr.cores, alone=twin.track.cores.alone),
            writes=dataclasses.replace(tr.writes, alone=twin.track.writes.alone),
            steps_alone=twin.track.steps_alone, alone_until=ref_until(twin.track),
            loop_alone=twin.track.loop_alone if twin.track.loop_name == tr.loop_name
            else deque())
        lender = Lender(twin.pid, twins.differ(twin.command, command) if command else (),
                        # (a clock set back: 0)
                        max(0.0, round(t - (ref_until(twin.track) or t))) if twin.stored
                        else None)
        return dataclasses.replace(pace(lent, alone, t), lender=lender)
    ref, wref = tr.cores.ref(), tr.writes.ref()
    recent, wrecent = tr.cores.recent(), tr.writes.recent()
    now = statistics.fmean(recent) if recent else None
    wnow = statistics.fmean(wrecent) if wrecent else None

    def out(slowdown: float | None, why: str | None = None, source: PaceSource = "loader") -> Pace:
        batches = source == "batches"
        return Pace(slowdown, source, why, alone_until=tr.alone_until, loader=LoaderReadings(
            ref, now, wref, wnow, alone_ticks=len((tr.writes if batches else tr.cores).alone),
            now_ticks=len(wrecent if batches else recent)))

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


def _newest(pairs: deque[tuple[int, float]]) -> tuple[int, float]:
    """The steps and seconds of the newest pairs beside the others: back to LOOP_MIN_S and
    LOOP_MIN_STEPS, at most LOOP_MAX_S (see the module docstring)."""
    steps, span = 0, 0.0
    for k, s in reversed(pairs):
        if span >= LOOP_MAX_S or (span >= LOOP_MIN_S and steps >= LOOP_MIN_STEPS):
            break
        steps, span = steps + k, span + s
    return steps, span


def _by_counter(tr: Track) -> Pace:
    """A track's pace by its own loop counter (see the module docstring)."""
    alone_s = loop_seconds(tr.loop_alone)
    ref = sum(k for k, _ in tr.loop_alone) / alone_s if alone_s > 0 else None
    steps, span = _newest(tr.loop_now)
    now = steps / span if span > 0 else None

    def out(slowdown: float | None, why: str | None = None, at_least: float | None = None) -> Pace:
        return Pace(slowdown, "counter", why, at_least, alone_until=tr.alone_until,
                    counter=CounterReadings(tr.loop_name, ref, now, alone_s, span))

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


def _by_steps(tr: Track, t: float) -> Pace:
    """A track's pace by its py-spy step times (see the module docstring)."""
    ref = statistics.fmean(tr.steps_alone)
    age = None if tr.step_now is None else round(max(0.0, t - tr.step_now_t), 1)

    def out(slowdown: float | None, why: str | None = None, at_least: float | None = None) -> Pace:
        return Pace(slowdown, "steps", why, at_least, alone_until=tr.alone_until,
                    steps=StepReadings(round(ref, 4), tr.step_now, age, len(tr.steps_alone)))

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


def _earlier(tr: Track) -> tuple[float, float] | None:
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


def _by_loader(tr: Track, out: Callable[..., Pace]) -> Pace:
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


def _by_rate(r: Rate, out: Callable[..., Pace], source: PaceSource, others_starting: bool
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
