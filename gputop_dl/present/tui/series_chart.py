"""One history chart: a figure's lines of bucket means on a relative time axis, drawn by
`textual-plotext` (Textualize's plotting widget: plotext's braille line charts, theme-aware).

Imported when the history panel first shows (history_panel.py), not on the first frame.
"""

from __future__ import annotations

from typing import Any

from plotext import _utility as plotext_ut
from rich.text import Span, Text
from rich.style import Style
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from gputop_dl.present.tui.timeline import CLEAR_COLOUR, Figure, ago, mark_glyph, ticks


# plotext's cell colours (foreground, style, background) -> the Rich style its ANSI codes parse to
_STYLES: dict[tuple[object, object, object], Style | None] = {}


def cell_style(colours: tuple[object, object, object]) -> Style | None:
    """The style that `Text.from_ansi` gives a cell of these plotext colours (None: plain)."""
    if colours not in _STYLES:
        ansi = plotext_ut.colors_to_ansi(*colours)
        spans = Text.from_ansi(ansi + "x" + plotext_ut.ansi_end).spans if ansi else []
        style = spans[0].style if spans else None
        _STYLES[colours] = Style.parse(style) if isinstance(style, str) else style
    return _STYLES[colours]


def matrix_text(plot: Plot) -> Text:
    """The built figure as Text, read from plotext's cell matrix: what
    `Text.from_ansi(plot.build())` gives, without writing the ANSI string and parsing it back
    (about two thirds of a chart's build, docs/benchmarks.md)."""
    fig: Any = plot  # plotext's figure: untyped
    fig._set_sizes()
    fig._build_matrix()
    m = fig.monitor.matrix
    dashed(m)
    plain: list[str] = []
    spans: list[Span] = []
    at = 0
    cols = range(m.cols)
    for row in reversed(m.Rows):  # plotext's row 0 is the bottom one
        fg, st, bg = m.fullground[row], m.style[row], m.background[row]
        start, last = 0, None
        for col in cols:
            colours = (fg[col], st[col], bg[col])
            if colours != last:
                if last is not None and col > start and (style := cell_style(last)) is not None:
                    spans.append(Span(at + start, at + col, style))
                start, last = col, colours
        if last is not None and m.cols > start and (style := cell_style(last)) is not None:
            spans.append(Span(at + start, at + m.cols, style))
        line = "".join(m.marker[row])
        plain.append(line)
        at += len(line) + 1
    plain.append("")  # the ANSI string's last line ends with a newline too
    return Text("\n".join(plain), spans=spans, end="\n")


def dashed(m: Any) -> None:
    """plotext draws every vertical line with "│": those in CLEAR_COLOUR (a slowdown's end,
    timeline.mark_glyph) are made "╎", in place in its cell matrix."""
    for row in m.Rows:
        fg, marker = m.fullground[row], m.marker[row]
        for col, c in enumerate(fg):
            if c == CLEAR_COLOUR and marker[col] == "│":
                marker[col] = "╎"


class SeriesChart(PlotextPlot):
    """One figure's chart: lines of bucket means on a relative time axis."""

    DEFAULT_CSS = """
    SeriesChart { width: 1fr; height: 1fr; min-height: 5; }
    """

    def draw(self, fig: Figure, lines: list[tuple[tuple[int, int, int], list[float | None]]],
             window: float, marks: list[tuple[float, str]]) -> None:
        """Set the chart's data (built on the next render): `lines` of (colour, n bucket means
        over the `window` seconds up to now, oldest first), `marks` (seconds before now, the
        verdict's new kind: timeline.mark_glyph)."""
        # a new figure each time: plotext's clear_figure() keeps some of the last build's layout
        # (the tick labels moved with the builds before it), and a figure is 0.5 ms to make
        self._plot = plt = Plot()
        plt.title(fig.title)
        known = [v for _c, ys in lines for v in ys if v is not None]
        if fig.percent:
            lo, hi = 0.0, 100.0
        else:
            top = max(known, default=fig.least_top or 1.0)
            top = max(top * 1.1, fig.least_top)
            lo = fig.floor if fig.floor is not None else min(1.0, min(known, default=1.0)) * 0.95
            hi = top if top > lo else lo + 1.0
        n = max((len(ys) for _c, ys in lines), default=1)
        step = window / n
        xs = [-window + (i + 0.5) * step for i in range(n)]
        for colour, ys in lines:
            scale = 100.0 if fig.percent else 1.0
            run_x: list[float] = []
            run_y: list[float] = []
            for x, y in zip(xs, ys + [None]):  # a None ends a run: an unknown stretch is a gap
                if y is not None:
                    run_x.append(x)
                    run_y.append(y * scale)
                    continue
                if run_x:
                    plt.plot(run_x, run_y, marker="braille", color=colour)
                    run_x, run_y = [], []
            if run_x:
                plt.plot(run_x, run_y, marker="braille", color=colour)
        for x, kind in marks:
            plt.vline(x, mark_glyph(kind)[1])
        plt.xlim(-window, 0)
        plt.ylim(lo, hi)
        # labels that fit (about 8 cells each): plotext drops crowded ones, in an order that
        # changes between runs
        at = ticks(window, most=max(1, (self.size.width - 8) // 8))
        plt.xticks(at, [ago(t) for t in at])
        self.refresh()

    def render(self) -> Text:
        """As `PlotextPlot.render` (the size, then the theme), read from plotext's matrix."""
        plot = self._plot
        plot.plotsize(self.size.width, self.size.height)
        plot._set_size(self.size.width, self.size.height)  # as textual-plotext does (its issue 5)
        plot.theme(self._get_plotext_theme_name(self.app.theme))
        return matrix_text(plot)
