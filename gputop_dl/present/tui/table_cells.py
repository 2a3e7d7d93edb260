"""A table's rows: their cells, the theme's styles for them, and one row drawn into a line.

The values the keyed table (keyed_table.py) shows: `Row`s of `Cell`s, styled from a `Palette`
of the app's theme variables, built by the jobs table and the fleet's tables. `line` pads the
cells into one `Strip`, neighbours in one style sharing a segment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

PAD = 1  # blank cells on each side of a cell, as DataTable draws them


class Palette:
    """Rich styles resolved from the app's theme variables ($text-success, ...)."""

    def __init__(self, variables: dict[str, str] | None = None):
        v = variables or {}

        def style(name: str, **kw: Any) -> Style:
            color = v.get(name)
            if color and not color.startswith("auto") and color[:1] == "#":
                return Style(color=color[:7], **kw)
            return Style(**kw)

        self.ok = style("text-success")
        self.warn = style("text-warning")
        self.err = style("text-error", bold=True)
        self.accent = style("text-accent", bold=True)
        self.muted = Style(dim=True)
        self.plain = Style()
        self.bold = Style(bold=True)

    def tone(self, tone: str | None) -> Style:
        """The style of a tone (present.verdict_text.slowdown_tone); plain when unknown."""
        return {"good": self.ok, "warn": self.warn, "bad": self.err}.get(tone or "", self.plain)


class Cell(NamedTuple):
    """One cell: its text and Rich style (compared by value to find the lines that changed)."""

    text: str
    style: Style = Style()


@dataclass
class Row:
    """One row: its key (the cursor follows it), cells in the table's `COLUMNS` order, raw sort
    values by column key (None = unknown) and a display name."""

    key: str
    cells: tuple[Cell, ...]
    sort: dict[str, Any]  # column key -> raw value for sorting (None = unknown)
    name: str = ""


def line(cells: list[tuple[str, Style]], width: int) -> Strip:
    """Cells padded into one line of `width` cells, in their own styles (no background yet)."""
    # neighbours in one style share a segment: fewer segments for every later step (base style,
    # border, colour filters, cropping, the terminal write) to walk
    segments: list[Segment] = []
    pad = " " * PAD
    run: list[str] = []
    run_style = None
    for text, style in cells:
        if run and style != run_style:
            segments.append(Segment("".join(run), run_style))
            run = []
        run_style = style
        run.append(f"{pad}{text}{pad}")
    if run:
        segments.append(Segment("".join(run), run_style))
    return Strip(segments).adjust_cell_length(width)
