"""Stall estimates from a burst's main-thread samples: the data-wait fraction, the samples per
step phase, and the step time where the phases' recurrences give it honestly.

`collect/pyspy.py` runs py-spy and re-exports these names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from gputop_dl.collect.pyspy_stacks import PHASES, classify, phase_of
from gputop_dl.collect.step_cycles import ACCUMULATION, cycles_of, timed_cycles


class StallEstimate:
    """Main-thread samples of one burst: data-wait fraction, counts, step time where honest,
    and the samples per step phase (`PHASES`)."""

    __slots__ = ("data", "compute", "step_time_s", "cycles", "cpu_s", "cv", "phases", "anchor",
                 "why")

    def __init__(self, data: int, compute: int, step_time_s: float | None = None,
                 cycles: int = 0, cpu_s: float | None = None):
        self.data, self.compute = data, compute
        self.step_time_s, self.cycles = step_time_s, cycles
        self.cv: float | None = None  # spread of the cycle lengths (stdev / mean)
        self.cpu_s = cpu_s  # what the burst cost py-spy itself (None: not known)
        self.phases: dict[str, int] = {}  # phase -> main-thread samples (empty: not classified)
        self.anchor: str | None = None  # the phase whose recurrences gave the step time
        self.why: str | None = None  # why the step time is unknown (None: read, or not tried)

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


def stall_from_sequence(seq: list[str], interval_s: float, pid: int | None = None) -> StallEstimate:
    """Time-ordered samples of one thread -> stall fraction, samples per step phase, and a step
    time only when it can be read off honestly: the cycle of the first phase in `ANCHORS`
    whose recurrences pass `cycles_of` (an optimizer step, else backward, else the data wait,
    else the forward); where optimizer steps were seen, another anchor counts only if it recurs
    no more often than they do."""
    labels = [c for c in (phase_of(s, pid) for s in seq) if c is not None]
    data = labels.count("data")
    est = StallEstimate(data, len(labels) - data)
    est.phases = {p: labels.count(p) for p in PHASES}
    # optimizer steps seen (runs of optimizer samples): another anchor must not recur more
    # often, or it marks micro-steps (gradient accumulation) rather than steps
    opt_runs = sum(1 for i, c in enumerate(labels)
                   if c == "optimizer" and (i == 0 or labels[i - 1] != "optimizer"))
    for anchor in ANCHORS:
        if not all(est.phases.get(p) for p in anchor):
            continue
        got = cycles_of([c in anchor for c in labels], interval_s)
        if got is not None and anchor != ("optimizer",) and opt_runs and got[1] > 1.25 * opt_runs:
            continue
        if got is not None:
            est.step_time_s, est.cycles, est.cv = got
            est.anchor = "+".join(anchor)
            break
    return est


def stall_from_timeline(timeline: list[tuple[float, str]], rate: int,
                        pid: int | None = None) -> StallEstimate:
    """One thread's timed stack changes (`parse_chrometrace`) -> stall fraction and phases by
    the time spent in each (as sample counts at `rate`), and the step time where one anchor
    (`ANCHORS` order) passes `timed_cycles`; else `why` says why it is unknown."""
    runs: list[tuple[str, float, float]] = []  # (phase, start, end)
    for (t, stack), (t2, _) in zip(timeline, timeline[1:]):
        ph = phase_of(stack, pid) if stack else None
        if ph is None:
            continue
        if runs and runs[-1][0] == ph and abs(runs[-1][2] - t) < 1e-9:
            runs[-1] = (ph, runs[-1][1], t2)
        else:
            runs.append((ph, t, t2))
    spent = {p: sum(r[2] - r[1] for r in runs if r[0] == p) for p in PHASES}
    phases = {p: int(round(v * rate)) for p, v in spent.items()}
    est = StallEstimate(phases["data"], sum(phases.values()) - phases["data"])
    est.phases = phases
    opt_runs = sum(1 for r in runs if r[0] == "optimizer")
    why = "no step phase (data wait, forward, backward, optimizer) was seen"
    est.why = None
    for anchor in ANCHORS:
        if not all(spent.get(p) for p in anchor):
            continue
        merged: list[tuple[bool, float, float]] = []
        for ph, t0, t1 in runs:
            m = ph in anchor
            if merged and merged[-1][0] == m:
                merged[-1] = (m, merged[-1][1], t1)
            else:
                merged.append((m, t0, t1))
        step, n, cv, note = timed_cycles(merged, 1.0 / rate)
        if note is None and anchor != ("optimizer",) and opt_runs and n > ACCUMULATION * opt_runs:
            note = "its data, forward or backward recur more often than its optimizer steps"
        if note is None:
            est.step_time_s, est.cycles, est.cv, est.anchor = step, n, cv, "+".join(anchor)
            est.why = None
            return est
        est.why = est.why or note  # the first anchor tried says it best
    est.why = est.why or why
    return est
