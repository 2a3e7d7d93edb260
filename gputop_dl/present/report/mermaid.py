"""Mermaid `xychart-beta` blocks for the Markdown report (GitHub renders them as charts).

Only numbers and sanitised labels ever reach a chart: a label keeps letters, digits and a few
safe punctuation marks, so untrusted names cannot close the block, break a quoted string or
inject markup. Series longer than `MAX_POINTS` are reduced to bucket means (`downsample`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

MAX_POINTS = 60

_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:()/+×-]")  # no quotes, brackets, %, #, ;, <, >, `


def label(text: object, limit: int = 40) -> str:
    """A chart-safe label: unsafe characters become '_', at most `limit` characters."""
    s = _UNSAFE.sub("_", " ".join(str(text).split()))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def downsample(values: list[float | None], n: int = MAX_POINTS) -> list[float | None]:
    """Means of `n` equal consecutive buckets (None values skipped; all-None bucket -> None)."""
    if len(values) <= n:
        return list(values)
    out: list[float | None] = []
    for i in range(n):
        a, b = i * len(values) // n, (i + 1) * len(values) // n
        known = [v for v in values[a:b] if v is not None]
        out.append(sum(known) / len(known) if known else None)
    return out


def _fill(values: list[float | None], fill: str = "prev") -> list[float] | None:
    """Gaps take the previous known value (the first known one at the start), or 0 with
    fill="zero"; None if there is no known value at all."""
    known = [v for v in values if v is not None and math.isfinite(v)]
    if not known:
        return None
    out, last = [], known[0]
    for v in values:
        if v is not None and math.isfinite(v):
            last = v
            out.append(v)
        else:
            out.append(0.0 if fill == "zero" else last)
    return out


def _n(x: float) -> str:
    """A plain decimal (Mermaid does not read exponents)."""
    s = f"{x:.3f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _nice_max(x: float) -> float:
    if x <= 0:
        return 1.0
    mag: float = 10.0 ** math.floor(math.log10(x))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if x <= m * mag:
            return m * mag
    return 10 * mag


def _block(lines: list[str]) -> str:
    return "```mermaid\n" + "\n".join(lines) + "\n```"


def bar_line_chart(title: str, categories: list[str], bars: list[float | None],
                   line: list[float | None] | None, y_title: str) -> str | None:
    """Categories on x; one bar series and (optionally) one line series. None if no data."""
    b = [0.0 if v is None else v for v in bars]
    ln = _fill(line) if line is not None else None
    if not categories or not any(b) and not ln:
        return None
    top = _nice_max(max(b + (ln or [0.0])))
    cats = ", ".join(f'"{label(c, 24)}"' for c in categories)
    lines = ["xychart-beta", f'    title "{label(title, 80)}"', f"    x-axis [{cats}]",
             f'    y-axis "{label(y_title)}" 0 --> {_n(top)}',
             "    bar [" + ", ".join(_n(v) for v in b) + "]"]
    if ln:
        lines.append("    line [" + ", ".join(_n(v) for v in ln) + "]")
    return _block(lines)


def mark_points(marks: Sequence[float], n: int) -> list[int]:
    """The points (0..n-1) of an `n`-point axis where marks at fractions 0..1 of it fall."""
    return sorted({min(int(f * n), n - 1) for f in marks if 0.0 <= f <= 1.0}) if n else []


def time_chart(title: str, t_end: float, series: list[list[float | None]], y_title: str,
               t_unit: str = "min", y_max: float | None = None,
               fill: str = "prev", marks: Sequence[float] = ()) -> str | None:
    """Lines over a numeric time axis 0 --> t_end (points evenly spaced); None if no data.
    Gaps: see `_fill`. `marks` (fractions 0..1 of the axis, the moments the verdict changed):
    a full-height bar at each, drawn after the lines so they keep their colours (xychart has no
    vertical rule)."""
    filled = [f for f in (_fill(downsample(s), fill) for s in series) if f]
    if not filled:
        return None
    top = y_max if y_max is not None else _nice_max(max(max(f) for f in filled))
    lines = ["xychart-beta", f'    title "{label(title, 80)}"',
             f'    x-axis "time ({label(t_unit)})" 0 --> {_n(max(t_end, 0.001))}',
             f'    y-axis "{label(y_title)}" 0 --> {_n(top)}']
    for f in filled:
        lines.append("    line [" + ", ".join(_n(v) for v in f) + "]")
    at = mark_points(marks, len(filled[0]))
    if at:
        lines.append("    bar [" + ", ".join(_n(top if i in at else 0.0)
                                             for i in range(len(filled[0]))) + "]")
    return _block(lines)


def lines_chart(title: str, categories: list[str], series: list[list[float | None]],
                y_title: str) -> str | None:
    """Categories on x, one line per series (gaps: see `_fill`); None if no data."""
    filled = [f for f in (_fill(s) for s in series) if f]
    if not categories or not filled:
        return None
    top = _nice_max(max(max(f) for f in filled))
    cats = ", ".join(f'"{label(c, 24)}"' for c in categories)
    lines = ["xychart-beta", f'    title "{label(title, 80)}"', f"    x-axis [{cats}]",
             f'    y-axis "{label(y_title)}" 0 --> {_n(top)}']
    lines += ["    line [" + ", ".join(_n(v) for v in f) + "]" for f in filled]
    return _block(lines)
