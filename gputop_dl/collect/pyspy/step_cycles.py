"""Step cycles in a thread's sampled phases: when a phase that recurs once a step marks steps.

`cycles_of` reads samples in order, taken `interval_s` apart (py-spy's speedscope output);
`timed_cycles` reads runs with their own start and end times (its chrometrace output: a
sampler that falls behind and catches up does not bend them). Both refuse where the samples
cannot tell the steps apart honestly; collect/pyspy/stall.py chooses the phase (the anchor).
"""

from __future__ import annotations

import math
import statistics

MIN_CYCLES = 4  # complete cycles of the anchor phase needed before a step time is reported
ANCHOR_RUN = 1.5  # the anchor's runs (in and out of it) must last this many sample intervals (median)
MAX_MERGED = 0.25  # of a burst's cycles, at most this share may hold a step that hid a phase
TOO_SHORT_WHY = "its step phases are too short for py-spy's sampling interval"


def cycles_of(marks: list[bool], interval_s: float) -> tuple[float, int, float | None] | None:
    """Time-ordered samples, True inside the anchor phase -> (median cycle s, cycles, cv), or
    None unless the cycles can be read off honestly: at least MIN_CYCLES entries into the anchor
    phase after another one, and the complete runs of either side at least 2 samples long (a
    run shorter than the sampling interval could hide between two samples and merge two steps
    into one). One run in ten may be a single sample when the runs are typically 3 or more
    samples long: that is py-spy's timing jitter, not a hidden phase."""
    runs: list[tuple[bool, int]] = []  # (in anchor, length)
    for m in marks:
        if runs and runs[-1][0] == m:
            runs[-1] = (m, runs[-1][1] + 1)
        else:
            runs.append((m, 1))
    starts, pos = [], 0  # sample index where each anchor run that follows another one begins
    for i, (m, n) in enumerate(runs):
        if m and i > 0:
            starts.append(pos)
        pos += n
    inner = runs[1:-1]
    singles = sum(1 for _, n in inner if n < 2)
    steady = not singles or (singles <= len(inner) // 10
                             and statistics.median(n for _, n in inner) >= 3)
    if len(starts) < MIN_CYCLES + 1 or not inner or not steady:
        return None
    lengths = [(b - a) * interval_s for a, b in zip(starts, starts[1:])]
    mean = statistics.fmean(lengths)
    # the mean, not the median: py-spy's samples come unevenly on a busy machine (it catches
    # up after falling behind), so single cycles scatter while their sum keeps the time
    return (round(mean, 4), len(lengths),
            round(statistics.pstdev(lengths) / mean, 3) if mean > 0 else None)


def entries(runs: list[tuple[bool, float, float]]) -> list[float]:
    """The start times of the anchor's runs that follow another run: each starts a step."""
    return [t0 for i, (m, t0, _t1) in enumerate(runs) if m and i > 0]


def timed_cycles(runs: list[tuple[bool, float, float]],
                 interval_s: float) -> tuple[float, int, float | None, str | None]:
    """Timed runs (in the anchor phase?, start s, end s) -> (mean step s, steps, cv, None), or
    (nan, 0, None, why) where no step time can be read honestly.

    Each entry into the anchor phase after another one starts a step; the times are the
    samples' own (py-spy's chrometrace), so a sampler that falls behind and catches up does not
    bend them. A phase shorter than the gap between two samples can hide in a step, which then
    reads as two: a cycle k times the median cycle counts as k steps; if more than MAX_MERGED of
    them needed that, or the anchor's runs typically last less than ANCHOR_RUN sample intervals,
    the phase is too short to mark steps and no time is read."""
    starts = entries(runs)
    inner = runs[1:-1]
    on = [t1 - t0 for m, t0, t1 in inner if m]
    off = [t1 - t0 for m, t0, t1 in inner if not m]
    short = (not on or not off
             or min(statistics.median(on), statistics.median(off)) < ANCHOR_RUN * interval_s)
    if len(starts) < MIN_CYCLES + 1:
        # few entries say the steps are long only where each step's anchor would be seen: runs
        # as short as the interval are missed, and the burst counts fewer than it held
        seen = on if inner else [t1 - t0 for m, t0, t1 in runs if m]
        if seen and statistics.median(seen) < ANCHOR_RUN * interval_s:
            return math.nan, 0, None, TOO_SHORT_WHY
        return math.nan, 0, None, (f"fewer than {MIN_CYCLES} steps seen (a step longer than "
                                   f"a quarter of the burst, or no phase that recurs)")
    if short:
        return math.nan, 0, None, TOO_SHORT_WHY
    lengths = [b - a for a, b in zip(starts, starts[1:])]
    ks = _steps_each(lengths)
    if sum(1 for k in ks if k > 1) > MAX_MERGED * len(ks):
        return math.nan, 0, None, "py-spy's samples missed a step phase too often to count steps"
    per = [x / k for x, k in zip(lengths, ks)]
    mean = statistics.fmean(per)
    return (round(sum(lengths) / sum(ks), 4), sum(ks),
            round(statistics.pstdev(per) / mean, 3) if mean > 0 else None, None)


def _steps_each(lengths: list[float]) -> list[int]:
    """The steps each cycle holds: a cycle k times the median one hid k - 1 anchor phases."""
    mid = statistics.median(lengths)
    return [max(1, round(x / mid)) for x in lengths]


def once_a_step(step_s: float, marks: list[float]) -> bool:
    """Whether some two consecutive `marks` (the start times of another phase's runs:
    optimizer steps) lie about one anchor step `step_s` apart (0.5 to 1.5 of it): then the
    anchor recurs once a step, not once a micro-step. Gradient accumulation over k micro-steps
    puts its optimizer steps k anchor steps apart in time, however many of them py-spy's
    samples missed; a step with one anchor puts those it saw any whole number of steps apart, 1
    among them once it saw two steps running. Read in time, not in counted cycles: a glitch of
    the anchor (a 12 ms run inside another phase) shifts every later cycle's count by one."""
    return step_s > 0 and any(0.5 <= (b - a) / step_s < 1.5 for a, b in zip(marks, marks[1:]))
