"""Text charts for the TUI: fixed-scale bars and cheap history strips (no textual, no I/O).

`History` keeps the last `span` samples of one series (e.g. one GPU's utilisation, 600 samples
= 10 minutes at 1 Hz) and renders them as a strip of unicode blocks on a fixed 0..1 scale. Each
character is the mean of a bucket of samples; finished buckets are kept as characters, so a push
is O(1) and a render is one `str.join` over `width` characters. Only a change of width (a
terminal resize) re-buckets the raw samples.
"""

from __future__ import annotations

import math
from collections import deque

from rich.cells import cell_len, set_cell_size

BLOCKS = " ▁▂▃▄▅▆▇█"  # 0..8 eighths; index 0 (blank) is a measured 0 %
UNKNOWN = "·"  # a bucket with no known value


def block(v: float | None) -> str:
    """One character for a value on the fixed 0..1 scale (None: unknown)."""
    if v is None:
        return UNKNOWN
    v = 0.0 if v < 0 else 1.0 if v > 1 else v
    i = int(v * 8 + 0.5)
    if i == 0 and v > 0:
        i = 1  # anything above zero shows
    return BLOCKS[i]


def bar_cells(frac: float | None, width: int) -> tuple[int, bool]:
    """How many of `width` cells a fixed-scale bar fills; (0, False) when unknown."""
    if frac is None or width <= 0:
        return 0, False
    frac = 0.0 if frac < 0 else 1.0 if frac > 1 else frac
    n = int(frac * width + 0.5)
    if n == 0 and frac > 0:
        n = 1
    return n, True


def bar(frac: float | None, width: int, fill: str = "█", empty: str = "░") -> tuple[str, str]:
    """A fixed-scale bar split into its filled and empty parts (unknown: all `·`)."""
    n, known = bar_cells(frac, width)
    if not known:
        return "", UNKNOWN * width
    return fill * n, empty * (width - n)


class History:
    """The last `span` samples of a 0..1 series, rendered as a block strip at a given width."""

    __slots__ = ("span", "raw", "known", "_width", "_bucket", "_chars", "_acc", "_n", "_open_known")

    def __init__(self, span: int = 600):
        self.span = max(1, span)
        self.raw: deque[float | None] = deque(maxlen=self.span)
        self.known = 0  # samples in `raw` that are not None
        self._width = 0
        self._bucket = 1
        self._chars: deque[str] = deque()
        self._acc = 0.0  # sum of known values in the open bucket
        self._n = 0  # samples in the open bucket
        self._open_known = 0  # known values in the open bucket

    def push(self, v: float | None) -> None:
        if len(self.raw) == self.span and self.raw[0] is not None:
            self.known -= 1  # the oldest sample leaves the window
        if v is not None:
            self.known += 1
        self.raw.append(v)
        if self._width:
            self._add(v)

    def _add(self, v: float | None) -> None:
        self._n += 1
        if v is not None:
            self._acc += v
            self._open_known += 1
        if self._n >= self._bucket:
            self._chars.append(self._open_char())
            self._acc, self._n, self._open_known = 0.0, 0, 0

    def _open_char(self) -> str:
        return block(self._acc / self._open_known) if self._open_known else UNKNOWN

    def _rebuild(self, width: int) -> None:
        self._width = width
        self._bucket = max(1, math.ceil(self.span / width))
        self._chars = deque(maxlen=width)
        self._acc, self._n, self._open_known = 0.0, 0, 0
        for v in self.raw:
            self._add(v)

    def strip(self, width: int) -> str:
        """`width` characters, newest on the right, left-padded with blanks."""
        if width <= 0:
            return ""
        if width != self._width:
            self._rebuild(width)
        s = "".join(self._chars)
        if self._n:
            s += self._open_char()
        s = s[-width:]
        return " " * (width - len(s)) + s

    @property
    def seconds_per_char(self) -> int:
        return self._bucket


def level(frac: float | None, warn: float = 0.7, crit: float = 0.9) -> str:
    """The theme variable for a fill at this level: $success / $warning / $error."""
    if frac is None:
        return "$foreground-muted"
    if frac >= crit:
        return "$error"
    if frac >= warn:
        return "$warning"
    return "$success"


def text_level(frac: float | None, warn: float = 0.7, crit: float = 0.9) -> str:
    """Like `level`, for text (the $text-* variables keep contrast on light themes)."""
    if frac is None:
        return "$text-muted"
    if frac >= crit:
        return "$text-error"
    if frac >= warn:
        return "$text-warning"
    return "$text-success"


def fit(s: str, width: int, right: bool = False) -> str:
    """`s` in exactly `width` terminal cells: cut with an ellipsis, or padded (on the left if `right`)."""
    if width <= 0:
        return ""
    n = cell_len(s)
    if n > width:
        return set_cell_size(s, width - 1) + "…"
    return " " * (width - n) + s if right else s + " " * (width - n)
