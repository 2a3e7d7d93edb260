"""Sparklines: a series as one line of ▁..█ characters, an unknown value a blank (no I/O).

Used by the jobs table's trend cells (present/tui) and the Markdown export's per-job lines.
"""

from __future__ import annotations

from typing import Iterable

SPARKS = "▁▂▃▄▅▆▇█"


def spark(values: Iterable[float | None], width: int, top: float | None = None) -> str:
    """The last `width` values as a sparkline (▁..█), newest on the right; an unknown value is a
    blank. `top`: the value drawn as █, from 0 (a share: top=1); without it the line spans the
    values' own range, low to high (a step time's ups and downs at whatever scale; a steady one
    is a flat ▄). "" when no value is known."""
    vals = list(values)[-width:]
    known = [v for v in vals if v is not None]
    if not known:
        return ""
    n = len(SPARKS) - 1
    if top is None:
        lo, hi = min(known), max(known)
        if hi - lo <= 1e-12 * max(1.0, abs(hi)):
            return "".join(" " if v is None else SPARKS[n // 2] for v in vals)
    else:
        lo, hi = 0.0, top if top > 0 else 1.0
    return "".join(" " if v is None else SPARKS[max(0, min(n, round((v - lo) / (hi - lo) * n)))]
                   for v in vals)
