"""Stall estimates from a burst's main-thread samples: the data-wait fraction, the samples per
step phase, and the step time where the phases' recurrences give it honestly.

`collect/pyspy/run.py` runs py-spy and re-exports these names.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from gputop_dl.collect.pyspy.stacks import PHASES, classify, phase_site
from gputop_dl.collect.pyspy.step_cycles import (
    MIN_CYCLES, cycles_of, entries, once_a_step, timed_cycles)


class StallEstimate:
    """Main-thread samples of one burst: data-wait fraction, counts, step time where honest,
    and the samples per step phase (`PHASES`)."""

    __slots__ = ("data", "compute", "step_time_s", "cycles", "cpu_s", "cv", "phases", "anchor",
                 "why", "floor_s", "micro_s")

    def __init__(self, data: int, compute: int, step_time_s: float | None = None,
                 cycles: int = 0, cpu_s: float | None = None):
        self.data, self.compute = data, compute
        self.step_time_s, self.cycles = step_time_s, cycles
        self.cv: float | None = None  # spread of the cycle lengths (stdev / mean)
        self.cpu_s = cpu_s  # what the burst cost py-spy itself (None: not known)
        self.phases: dict[str, int] = {}  # phase -> main-thread samples (empty: not classified)
        self.anchor: str | None = None  # the phase whose recurrences gave the step time
        self.why: str | None = None  # why the step time is unknown (None: read, or not tried)
        # where `why` is that fewer than MIN_CYCLES steps were seen: how long the steps are at
        # least by what the burst saw (`long_floor`; collect/pyspy/stall_sampler.py sizes the next burst by
        # it); else None
        self.floor_s: float | None = None
        # where `why` is MICRO_WHY: the cycle of the phase that recurs more often than the
        # optimizer steps (a micro-step: `checked` reads the main burst's optimizer by it)
        self.micro_s: float | None = None

    @property
    def samples(self) -> int:
        return self.data + self.compute

    @property
    def fraction(self) -> float | None:
        return round(self.data / self.samples, 3) if self.samples else None

    def __repr__(self) -> str:
        return (f"StallEstimate(fraction={self.fraction}, samples={self.samples}, "
                f"step_time_s={self.step_time_s}, cycles={self.cycles}, anchor={self.anchor})")


def phase_shares(counts: dict[str, int]) -> tuple[tuple[str, float], ...]:
    """Samples per phase -> ((phase, share of the samples), ...) in `PHASES` order; () for none."""
    total = sum(counts.get(p, 0) for p in PHASES)
    if not total:
        return ()
    return tuple((p, round(counts.get(p, 0) / total, 3)) for p in PHASES)


def stall_from_stacks(stacks: Counter[str], pid: int | None = None) -> StallEstimate:
    """Folded stacks (raw format, order lost) -> stall fraction; step time stays unknown."""
    data = compute = 0
    for stack, n in stacks.items():
        c = classify(stack, pid)
        if c == "data":
            data += n
        elif c == "compute":
            compute += n
    return StallEstimate(data, compute)


# the phases whose recurrence marks a step, most telling first: one optimizer step per training
# step (also with gradient accumulation); backward, data wait and forward once per micro-step;
# backward and optimizer together, or forward and backward together, where each alone is too
# short to be seen in every step
ANCHORS: tuple[tuple[str, ...], ...] = (("optimizer",), ("backward",), ("data",),
                                         ("backward", "optimizer"), ("forward",),
                                         ("forward", "backward"))


def pooled_step_time(bursts: Iterable[StallEstimate | tuple[float | None, int]]) -> float | None:
    """One step time from several bursts' `StallEstimate`s (or (step s, cycles) pairs): their
    cycles' mean, each burst weighted by the cycles it read (None: no burst read one). One
    burst's 4-7 cycles of a 0.3 s step scatter by up to ±50 %, as py-spy's samples come unevenly;
    their pool keeps the time, as `cycles_of` keeps it within a burst."""
    read = [(b.step_time_s, b.cycles) if isinstance(b, StallEstimate) else b for b in bursts]
    pairs = [(s, c) for s, c in read if s is not None and c]
    cycles = sum(c for _, c in pairs)
    return round(sum(s * c for s, c in pairs) / cycles, 4) if cycles else None


def step_floor(why: str | None, seconds: float) -> float | None:
    """What a burst of `seconds` that read no step because it counted fewer than MIN_CYCLES
    says of the step: longer than this (None: it says nothing)."""
    return seconds / (MIN_CYCLES + 1) if why and FEW_STEPS in why else None


def current_step_time(bursts: Sequence[tuple[float | None, int, str | None, float]]
                      ) -> tuple[float | None, str | None]:
    """A job's step time now from its recent bursts, oldest first, each (step s or None, its
    cycles, why no step, its seconds): (step s, None) or (None, why). The newest burst says
    which readings still hold: with a step of its own, those within AGREE of it, pooled (a job
    slowed down by others shows its new step at once, not a mean with its steps alone); without
    one because it saw fewer than MIN_CYCLES steps in its seconds, those as long as it could not
    count;
    without one for another reason, none: the job's steps may have changed since the older
    readings (a pair of word_language_model copies showed the step one had alone for 100 s
    after the second started, while each burst beside it failed)."""
    if not bursts:
        return None, None
    newest, _, why, seconds = bursts[-1]
    use: list[tuple[float | None, int]]
    if newest is not None:
        use = [(s, c) for s, c, _, _ in bursts if s is not None and abs(s / newest - 1) <= AGREE]
    elif (floor := step_floor(why, seconds)) is not None:
        use = [(s, c) for s, c, _, _ in bursts if s is not None and s >= floor * (1 - AGREE)]
    else:
        return None, why
    step = pooled_step_time(use)
    return step, None if step is not None else why


# The aliasing check (docs/architecture.md, "Step phases of found jobs"). py-spy samples at a
# fixed rate: a step shorter than about two sampling intervals is seen at a beat between the two
# (a 44 ms step sampled every 40 ms reads as a 0.2-0.4 s "step", its phases in order), which no
# test on the samples of one burst can tell from a real step that long. A second, concurrent
# burst at CHECK_FACTOR times the rate for CHECK_S (py-spy's shortest) settles it: its steps
# alias only below 2 of its intervals; where it reads a step, the main burst must agree or be
# unable to see one that short; where it sees its phases too short, the step cannot be timed.
# Not caught: a step shorter than two of the check's intervals (20 ms at 100 Hz) that beats
# with both rates alike (the main rate's samples are every fourth of the check's).
CHECK_FACTOR = 4
CHECK_MAX_RATE = 200  # Hz; py-spy keeps up (about 0.7 ms a sample)
CHECK_S = 1.0
AGREE = 0.2  # the two readings' largest relative difference that still agrees
RESOLVES = 3  # a burst times steps at least this many of its sampling intervals long
TOO_SHORT = "too short"  # in `timed_cycles`' reason: the phases are shorter than the interval
FEW_STEPS = "fewer than"  # ... fewer than MIN_CYCLES steps in the burst: long steps
MICRO_WHY = "its data, forward or backward recur more often than its optimizer steps"


def micro_steps(main: StallEstimate, check: StallEstimate) -> bool:
    """The check timed a phase other than the optimizer step where the job has one: where its
    steps are long, too few optimizer steps pass in its short window for `once_a_step`
    to tell micro-steps (gradient accumulation: two forwards and backwards a step) from
    steps."""
    return (check.anchor is not None and "optimizer" not in check.anchor.split("+")
            and (main.phases.get("optimizer", 0) > 0 or check.phases.get("optimizer", 0) > 0))


def check_rate(rate: int) -> int:
    """The check burst's rate for a main burst at `rate` Hz."""
    return min(CHECK_MAX_RATE, CHECK_FACTOR * rate)


def check_seconds(seconds: float, rate: int) -> int:
    """The check burst's seconds beside a main burst of `seconds` at `rate` Hz (py-spy's are
    whole): long enough that the steps it counts (up to a fifth of it) reach those the main rate
    times without a beat (RESOLVES of its intervals: 0.12 s at 25 Hz, 0.5 s at 6 Hz); 1 s beside
    the monitor's 2 s at 25 Hz and the one-shot bursts, 3 s beside 8 s at 6 Hz, 5 s beside its
    longest, 32 s at 3 Hz."""
    need = math.ceil((MIN_CYCLES + 1) * RESOLVES / rate)
    return max(int(CHECK_S), min(need, int(round(seconds))))


def checked(main: StallEstimate, check: StallEstimate | None, rate: int, check_hz: int,
            check_error: str | None = None, check_s: float = CHECK_S) -> StallEstimate:
    """`main` (a burst at `rate` Hz) with its step time confirmed, replaced or refused by the
    concurrent `check` burst at `check_hz` (None: it failed, `check_error` says why). The data
    fraction and phase counts stay the main burst's; its CPU cost adds the check's."""
    if main.cpu_s is not None and check is not None and check.cpu_s is not None:
        main.cpu_s += check.cpu_s
    m, c = main.step_time_s, check.step_time_s if check is not None else None

    def refuse(why: str) -> StallEstimate:
        main.step_time_s, main.cycles, main.cv, main.anchor, main.why = None, 0, None, None, why
        return main

    if check is None:
        return refuse("no check of py-spy's step time for aliasing"
                      + (f" ({check_error})" if check_error else "")) if m is not None else main
    if c is not None:
        if m is not None and abs(m / c - 1) <= AGREE:  # both: pooled by their cycles
            main.step_time_s = pooled_step_time([(m, main.cycles), (c, check.cycles)])
            main.cycles += check.cycles
            return main
        if c >= RESOLVES / rate and micro_steps(main, check):  # its short window held few
            return micro_checked(main, c, rate, refuse)  # steps and may have counted micro-steps
        if m is None or c < RESOLVES / rate:  # the main rate's reading, if any, is a beat
            main.step_time_s, main.cycles, main.cv, main.anchor, main.why = (
                c, check.cycles, check.cv, check.anchor, None)
            return main
        return refuse(f"py-spy's step times at two rates disagree ({m * 1000:.0f} ms at {rate} "
                      f"Hz, {c * 1000:.0f} ms at {check_hz} Hz)")
    why = check.why or ""
    if m is None:
        return main
    if check.micro_s is not None:  # it saw micro-steps (gradient accumulation) and refused them
        return micro_checked(main, check.micro_s, rate, refuse)
    longer = check_s / (MIN_CYCLES + 1)  # the check counted fewer: its steps are longer
    if FEW_STEPS in why and m >= longer * (1 - AGREE) and longer >= 2 / rate:
        return main  # steps too long for the check to count, none a beat at the main rate
    if TOO_SHORT in why:
        return refuse(f"its steps are shorter than py-spy can time at {check_hz} Hz (its "
                      f"{m * 1000:.0f} ms at {rate} Hz is a beat of the sampling, not a step)")
    return refuse(f"py-spy's step time at {rate} Hz ({m * 1000:.0f} ms) was not confirmed at "
                  f"{check_hz} Hz ({why or 'no step read'})")


def micro_checked(main: StallEstimate, micro_s: float, rate: int,
                  refuse: Callable[[str], StallEstimate]) -> StallEstimate:
    """The check's short window held few optimizer steps and saw a phase recur every
    `micro_s` (micro-steps of gradient accumulation, or steps it could not tell from them):
    the main burst's optimizer steps stand where it timed them and the micro-steps are long
    enough for the main rate to see each (no beat); else none."""
    if main.step_time_s is not None and main.anchor == "optimizer" and micro_s >= 2 / rate:
        return main
    return refuse("the check burst's phase may recur more than once a step (gradient "
                  "accumulation) and the main burst timed no optimizer step")


Mark = Callable[[str, str | None], bool]  # (phase, call site) -> inside the anchor?


def call_sites(labels: Iterable[tuple[str, str | None, float]]) -> dict[str, list[str | None]]:
    """(phase, call site, time) per sample or run -> phase -> its call sites, most time first."""
    spent: dict[str, dict[str | None, float]] = {}
    for ph, site, dt in labels:
        by = spent.setdefault(ph, {})
        by[site] = by.get(site, 0.0) + dt
    return {ph: sorted(by, key=lambda k: -by[k]) for ph, by in spent.items()}


def anchor_marks(anchor: tuple[str, ...], sites: dict[str, list[str | None]]) -> list[Mark]:
    """The ways to mark `anchor`'s samples, to try in order. A phase called from one place a
    step: its samples. A phase the loop calls from several lines (a GAN's two optimizers,
    its three `backward()`s; `phase_site`): each line's own, most time first, as each recurs
    once a step where the phase recurs more often. Two phases joined where either has several
    lines: none (their runs would mark parts of a step)."""
    def at(site: str | None) -> Mark:
        return lambda ph, st: ph == anchor[0] and st == site

    if len(anchor) == 1 and len(sites.get(anchor[0], ())) > 1:
        return [at(s) for s in sites[anchor[0]]]
    if any(len(sites.get(p, ())) > 1 for p in anchor):
        return []
    return [lambda ph, st: ph in anchor]


def steps_seen(runs: Sequence[tuple[str, str | None]],
               phase: str = "optimizer") -> tuple[int, str | None]:
    """(runs of `phase` at its call site with the most runs, that site): the steps it saw
    where it runs once a step (a GAN's two optimizers are two runs a step, one a line)."""
    per: dict[str | None, int] = {}
    for ph, site in runs:
        if ph == phase:
            per[site] = per.get(site, 0) + 1
    site = max(per, key=lambda s: per[s], default=None)
    return (per[site] if per else 0), site


def stall_from_sequence(seq: list[str], interval_s: float, pid: int | None = None) -> StallEstimate:
    """Time-ordered samples of one thread -> stall fraction, samples per step phase, and a step
    time only when it can be read off honestly: the cycle of the first phase in `ANCHORS`
    whose recurrences pass `cycles_of` (an optimizer step, else backward, else the data wait,
    else the forward; one call site of it where the loop calls it from several,
    `anchor_marks`); where optimizer steps were seen, another anchor counts only if it recurs
    no more often than they do."""
    labels = [(ph, st) for ph, st in (phase_site(s, pid) for s in seq) if ph is not None]
    phases_only = [ph for ph, _ in labels]
    data = phases_only.count("data")
    est = StallEstimate(data, len(labels) - data)
    est.phases = {p: phases_only.count(p) for p in PHASES}
    # optimizer steps seen (runs of optimizer samples at one line): another anchor must not
    # recur more often, or it marks micro-steps (gradient accumulation) rather than steps
    opt_runs, _ = steps_seen([lab for i, lab in enumerate(labels)
                              if i == 0 or labels[i - 1] != lab])
    sites = call_sites((ph, st, interval_s) for ph, st in labels)
    for anchor in ANCHORS:
        if not all(est.phases.get(p) for p in anchor):
            continue
        for mark in anchor_marks(anchor, sites):
            got = cycles_of([mark(ph, st) for ph, st in labels], interval_s)
            if (got is not None and anchor != ("optimizer",) and opt_runs
                    and got[1] > 1.25 * opt_runs):
                continue
            if got is not None:
                est.step_time_s, est.cycles, est.cv = got
                est.anchor = "+".join(anchor)
                return est
    return est


def stall_from_timeline(timeline: list[tuple[float, str]], rate: int,
                        pid: int | None = None) -> StallEstimate:
    """One thread's timed stack changes (`parse_chrometrace`) -> stall fraction and phases by
    the time spent in each (as sample counts at `rate`), and the step time where one anchor
    (`ANCHORS` order; one call site of it where the loop calls it from several,
    `anchor_marks`) passes `timed_cycles`; else `why` says why it is unknown."""
    runs: list[tuple[str, str | None, float, float]] = []  # (phase, call site, start, end)
    for (t, stack), (t2, _) in zip(timeline, timeline[1:]):
        ph, site = phase_site(stack, pid) if stack else (None, None)
        if ph is None:
            continue
        if runs and runs[-1][:2] == (ph, site) and abs(runs[-1][3] - t) < 1e-9:
            runs[-1] = (ph, site, runs[-1][2], t2)
        else:
            runs.append((ph, site, t, t2))
    spent = {p: sum(r[3] - r[2] for r in runs if r[0] == p) for p in PHASES}
    phases = {p: int(round(v * rate)) for p, v in spent.items()}
    est = StallEstimate(phases["data"], sum(phases.values()) - phases["data"])
    est.phases = phases
    opt_runs, opt_site = steps_seen([r[:2] for r in runs])
    sites = call_sites((ph, st, t1 - t0) for ph, st, t0, t1 in runs)
    opt_starts = [t0 for ph, st, t0, _ in runs if ph == "optimizer" and st == opt_site]
    # why no step time: an anchor that counted enough steps says it (the steps are not long);
    # where none did, one seen each step that counted too few says the steps are long
    # (collect/pyspy/stall_sampler.py then times them with longer bursts: only the busiest line of a phase,
    # as a line the loop calls once an epoch must not say so); else the first anchor tried
    counted: str | None = None
    micro: float | None = None  # the first anchor refused as micro-steps: its cycle
    few: str | None = None
    few_floor: float | None = None
    first: str | None = None
    for anchor in ANCHORS:
        if not all(spent.get(p) for p in anchor):
            continue
        for k, mark in enumerate(anchor_marks(anchor, sites)):
            merged: list[tuple[bool, float, float]] = []
            for ph, st, t0, t1 in runs:
                m = mark(ph, st)
                if merged and merged[-1][0] == m:
                    merged[-1] = (m, merged[-1][1], t1)
                else:
                    merged.append((m, t0, t1))
            step, n, cv, note = timed_cycles(merged, 1.0 / rate)
            # where optimizer steps were seen, another anchor counts steps only if two of
            # them came one of its steps apart: with gradient accumulation they come k apart.
            # (Its cycles against the burst's optimizer runs, 1.75 to 1, let a short burst's
            # 2-micro-step anchor through: 7 cycles against 4 optimizer steps.)
            if (note is None and anchor != ("optimizer",) and opt_runs
                    and not once_a_step(step, opt_starts)):
                note, micro = MICRO_WHY, micro or step
            if note is None:
                est.step_time_s, est.cycles, est.cv, est.anchor = step, n, cv, "+".join(anchor)
                est.why = None
                return est
            if len(entries(merged)) > MIN_CYCLES:
                counted = counted or note
            elif k == 0 and FEW_STEPS in note and few is None:
                few, few_floor = note, long_floor(merged)
            first = first or note
    est.why = (counted or few or first
               or "no step phase (data wait, forward, backward, optimizer) was seen")
    if counted is None and few is not None:
        est.floor_s = few_floor
    if est.why == MICRO_WHY:
        est.micro_s = micro
    return est


def long_floor(runs: list[tuple[bool, float, float]]) -> float | None:
    """What a burst that saw too few steps says of their length (anchor runs as in
    `timed_cycles`): the span before its first step start and after its last (a step began
    before the burst and ended at the first start; one began at the last and outlasted it), and
    the median of the whole steps between starts, the longest of these; the burst's whole span
    where no step began in it (None: no runs)."""
    if not runs:
        return None
    t0, t1 = runs[0][1], runs[-1][2]
    starts = entries(runs)
    if not starts:
        return round(t1 - t0, 3)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    return round(max(starts[0] - t0, t1 - starts[-1], statistics.median(gaps) if gaps else 0.0), 3)
