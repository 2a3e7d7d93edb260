"""Time series for the history charts: a session's samples, bounded, as bucket means (no textual).

`Timeline` keeps one series (e.g. one job's step time): the last `fine_s` seconds sample by
sample, and the whole session as buckets whose width doubles whenever more than `cap` are kept
(so a day-long session holds at most `cap` buckets). `points(t_end, window, n)` gives `n` bucket
means over `[t_end - window, t_end]` on a relative time axis (seconds before `t_end`, so the
newest point is near 0), None where no sample is known: a gap, never a value it did not see.

`Marks` keeps the moments the verdict's kind changed ((time, old kind, new kind), bounded).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

FINE_S = 300.0  # seconds kept sample by sample: the default view (last 5 min)
CAP = 1024  # whole-session buckets kept at most; their width doubles past it
MARK_COLOUR = (200, 120, 0)  # the verdict's changes on a chart: an orange no job's or GPU's line has
# a change back to "parallel" (a slowdown's end) is drawn dashed (╎) in grey, the others solid
# (│) in orange: the start and the end of a slowdown tell apart by shape, on any theme
CLEAR_COLOUR = (120, 120, 120)
CLEAR_KIND = "parallel"


def mark_glyph(new_kind: str) -> tuple[str, tuple[int, int, int]]:
    """The glyph and colour of a mark for a change to `new_kind`."""
    return ("╎", CLEAR_COLOUR) if new_kind == CLEAR_KIND else ("│", MARK_COLOUR)


class Timeline:
    """One series: recent samples as they came, and the whole session as merged buckets."""

    __slots__ = ("fine", "coarse", "width", "last_t", "known")

    def __init__(self, interval: float = 1.0):
        self.fine: deque[tuple[float, float | None]] = deque(maxlen=max(8, math.ceil(FINE_S / max(interval, 0.05)) + 2))
        self.coarse: list[list[float]] = []  # [bucket start, sum of known values, known count]
        self.width = max(interval, 0.05)  # the whole-session buckets' width, seconds
        self.last_t = -math.inf
        self.known = 0  # known samples in `fine`

    def push(self, t: float, v: float | None) -> None:
        if len(self.fine) == self.fine.maxlen and self.fine[0][1] is not None:
            self.known -= 1
        self.fine.append((t, v))
        self.last_t = t
        if v is None:
            return
        self.known += 1
        start = math.floor(t / self.width) * self.width
        if self.coarse and self.coarse[-1][0] == start:
            b = self.coarse[-1]
            b[1] += v
            b[2] += 1
        else:
            self.coarse.append([start, v, 1])
            if len(self.coarse) > CAP:
                self._halve()

    def _halve(self) -> None:
        """Double the bucket width: merge the buckets that fall into the same wider one."""
        self.width *= 2
        merged: list[list[float]] = []
        for start, s, n in self.coarse:
            start = math.floor(start / self.width) * self.width
            if merged and merged[-1][0] == start:
                merged[-1][1] += s
                merged[-1][2] += n
            else:
                merged.append([start, s, n])
        self.coarse = merged

    def first_t(self) -> float | None:
        """The time of the first known sample kept (None: none)."""
        if self.coarse:
            return self.coarse[0][0]
        return next((t for t, v in self.fine if v is not None), None)

    def points(self, t_end: float, window: float, n: int) -> list[float | None]:
        """`n` bucket means over the `window` seconds up to `t_end`, oldest first (None: no
        known sample in that bucket). Samples from the fine deque when it covers the window,
        else from the whole-session buckets (each counted in the bucket its start falls in)."""
        n = max(1, n)
        t0 = t_end - window
        step = window / n
        acc = [0.0] * n
        cnt: list[float] = [0] * n  # known samples per bucket
        if self.fine and (self.fine[0][0] <= t0 + step or len(self.fine) < (self.fine.maxlen or 0)):
            src: Iterable[tuple[float, float, float]] = ((t, v, 1) for t, v in self.fine if v is not None)
        else:  # the whole session: each bucket at its middle
            src = ((s + self.width / 2, total / k, k) for s, total, k in self.coarse)
        for t, v, k in src:
            if t < t0 or t > t_end:
                continue
            i = min(n - 1, int((t - t0) / step))
            acc[i] += v * k
            cnt[i] += k
        return [acc[i] / cnt[i] if cnt[i] else None for i in range(n)]


PENDING = "insufficient-data"  # a verdict not reached yet: until a first one, no change to mark


class Marks:
    """The moments the verdict's kind changed: (time, old kind or None, new kind).

    From the snapshots (`push`), and from the session's recorded changes (`load`), which
    replace what the snapshots gave up to the last one recorded. The first verdict is no
    change, nor is the first after the session's opening "insufficient-data" (the live
    verdict's first seconds): a mark from it would stand at every session's start."""

    __slots__ = ("kind", "changes", "loaded_until", "judged")

    def __init__(self, keep: int = 256):
        self.kind: str | None = None
        self.changes: deque[tuple[float, str | None, str]] = deque(maxlen=keep)
        self.loaded_until = -math.inf  # the time of the last recorded change loaded
        self.judged = False  # a kind other than PENDING was seen

    def push(self, t: float, kind: str | None) -> None:
        """The verdict's kind at `t` (None: no verdict): a change from one kind to another is
        a mark; a verdict that goes away and comes back as the same kind is not. A snapshot
        from before the last recorded change loaded is not news."""
        if kind is None or kind == self.kind or t <= self.loaded_until:
            return
        if self.kind is not None and self.judged:
            self.changes.append((t, self.kind, kind))
        self.kind = kind
        self.judged = self.judged or kind != PENDING

    def load(self, recorded: Iterable[tuple[float, str | None, str]]) -> None:
        """The session's recorded changes in time order (the first verdict's `from` is None:
        no mark): they replace the marks up to the last of them. The snapshots' marks after it
        stay where they still change the kind from the last recorded one (the store has not got
        them yet); one that only repeats a recorded change (seen late: the screen missed the
        snapshot it was judged in) goes."""
        rows = list(recorded)
        if not rows:
            return
        until, kind = rows[-1][0], rows[-1][2]
        later = [c for c in self.changes if c[0] > until]
        self.changes.clear()
        judged = False
        for c in rows:
            if c[1] is not None and judged:
                self.changes.append(c)
            judged = judged or c[2] != PENDING
        for t, _old, new in later:
            if new != kind:
                self.changes.append((t, kind, new))
                kind = new
        self.kind = kind
        self.judged = judged or any(c[2] != PENDING for c in later)
        self.loaded_until = max(self.loaded_until, until)

    def within(self, t0: float, t1: float) -> list[tuple[float, str | None, str]]:
        return [c for c in self.changes if t0 <= c[0] <= t1]


def ago(seconds: float) -> str:
    """A time-axis label: seconds before now as "-4:30", "-1:05:00"; 0 is "now"."""
    s = int(round(abs(seconds)))
    if s == 0:
        return "now"
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"-{h}:{m:02d}:{sec:02d}" if h else f"-{m}:{sec:02d}"



TICK_STEPS = (10, 30, 60, 120, 180, 240, 300, 600, 900, 1200, 1800, 3600, 7200, 4 * 3600, 6 * 3600, 12 * 3600, 86400)


def ticks(window: float, most: int = 5) -> list[float]:
    """Time-axis ticks for a window of `window` seconds up to now: round steps back from 0,
    at most `most` intervals (oldest first)."""
    step = next((s for s in TICK_STEPS if window / s <= most), math.ceil(window / most / 86400) * 86400)
    return [-k * float(step) for k in range(int(window // step), -1, -1)]


@dataclass(frozen=True)
class Figure:
    """One chart: its title, whose lines (jobs or GPUs), the value of a sample, its y range."""

    key: str
    title: str
    of: str  # "job" | "gpu"
    value: Callable[[Any], float | None]  # of a JobSample (of == "job") or a GpuSample
    percent: bool = False  # a 0..1 share drawn as 0–100 %
    floor: float | None = 0.0  # the y axis' lowest value (None: the data's)
    least_top: float = 0.0  # the y axis' top is at least this
