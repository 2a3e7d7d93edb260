"""A table of keyed rows, repainted line by line (the jobs table and the fleet's tables).

A line-API widget, not a `DataTable`: a DataTable repaints every visible row when any cell
changes (14.5 ms of CPU per snapshot with three jobs), which alone broke the monitor's CPU
budget. Here each row is rendered once into a cached `Strip`; a tick re-renders and refreshes
only the lines whose cells changed, and repaints the whole table only when the row order, the
cursor's scroll window, the width or the theme changes. Rows are never cleared: they are kept by
key, and the cursor is a row key, so it stays on its row through adds, removes and re-sorts.

Columns that do not fit the width are left out, least useful first (`DROP_ORDER`;
column_fit.py lays them out); a column of
`HIDE_EMPTY` with no value ("–") in any row is left out too (`hidden_empty()` says which; once
a row filled it, it stays while rows are shown: a job's step time that a later py-spy burst
could not read shows "–" in its place rather than taking the column away), and
the `FLEX` column takes the width the others leave. Cells (table_cells.py) carry Rich styles
resolved from the theme's CSS variables; a theme change re-renders them.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gputop_dl.present.tui.base import set_border
from gputop_dl.present.tui.charts import fit
from gputop_dl.present.tui.column_fit import Column, fit_columns
from gputop_dl.present.tui.table_cells import PAD, Cell, Row, line

RowT = TypeVar("RowT", bound=Row)


class KeyedTable(Widget, Generic[RowT], can_focus=True):
    """A table of keyed rows (of type RowT); `show(rows)` applies a new set of rows in place.

    Subclasses set `COLUMNS` (key, label, width, right-justified), `DROP_ORDER` (columns left
    out first on a narrow terminal), `SORTS` (sort key -> label, column, descending first) and
    `TABLE_TITLE`; `Row.cells` are in `COLUMNS` order."""

    COLUMNS: tuple[Column, ...] = ()
    DROP_ORDER: tuple[str, ...] = ()
    SORTS: dict[str, tuple[str, str, bool]] = {}
    TABLE_TITLE = ""
    HIDE_EMPTY: tuple[str, ...] = ()  # left out while no row has a value in them
    FLEX: str | None = None  # the column that takes the width the others leave (its width: the least)
    # the column that first takes what width is left, as much as its longest cell needs (up to
    # GROW_MAX): the names that tell rows apart are read whole where the screen has the room;
    # where it has not, the columns of GROW_YIELDS are left out for it, FLEX first, then in
    # DROP_ORDER (the details show what they held)
    GROW: str | None = None
    GROW_MAX = 48
    # it narrows only once no row has needed its width for this long: rows that come and go
    # (a test suite's short runs beside the jobs) would lay the table out again each time
    GROW_HOLD_S = 30.0
    GROW_YIELDS: frozenset[str] = frozenset()
    EMPTY_TEXTS = ("", "–")
    waits_for: str | None = None  # what it waits for before its first rows ("jobs"); None: shown

    COMPONENT_CLASSES = {"keyed-table--header", "keyed-table--cursor"}
    DEFAULT_CSS = """
    KeyedTable { height: 1fr; min-height: 7; background: $surface; color: $foreground; }
    KeyedTable > .keyed-table--header { text-style: bold; }
    KeyedTable > .keyed-table--cursor { background: $block-cursor-blurred-background; }
    KeyedTable:focus > .keyed-table--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """
    BINDINGS = [
        Binding("enter", "select", "Details"),
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
    ]

    class Highlighted(Message):
        """The cursor moved to another row (`key`; None when the table is empty)."""

        def __init__(self, key: str | None):
            super().__init__()
            self.key = key

    class Selected(Message):
        """Enter, or a click on the cursor's row: open that row."""

        def __init__(self, key: str):
            super().__init__()
            self.key = key

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.border_title = self.TABLE_TITLE
        self._keys = tuple(c[0] for c in self.COLUMNS)
        self.rows_by_key: dict[str, RowT] = {}
        self.sort_by: str | None = None
        self.sort_reverse = False
        self.cursor_key: str | None = None
        self.top = 0  # index of the first row shown
        self._order: list[str] = []
        self._default_order: list[str] = []
        self._strips: dict[str, tuple[tuple[Cell, ...], Strip]] = {}  # row key -> (cells, rendered)
        self._layout_sig: tuple[object, ...] | None = None  # (width, styles) the cached lines were rendered for
        self._style_cache: tuple[Style, Style, Style] | None = None
        self._columns: tuple[Column, ...] = self.COLUMNS  # those that fit
        self._shown = tuple(range(len(self.COLUMNS)))  # their indices in COLUMNS (and in Row.cells)
        self._widths = tuple(c[2] for c in self.COLUMNS)  # the shown columns' widths
        self._empty: frozenset[str] = frozenset()  # HIDE_EMPTY columns left out now
        self._filled: set[str] = set()  # HIDE_EMPTY columns a row filled since rows came
        self._grow_want = 0  # the cells the GROW column's longest cell needs (held: GROW_HOLD_S)
        self._grow_needed_at = -float("inf")  # when a row last needed that width
        self.clock = time.monotonic  # for GROW_HOLD_S (tests set their own)
        self._subtitle = ""
        self.empty_lines: tuple[str, ...] = ()  # said under the header while there is no row
        self._empty_wrapped: tuple[int, list[str]] = (-1, [])
        self.row_renders = 0  # rows rendered into strips (cache misses), for tests and benchmarks

    # --- selection -------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._order)

    def order(self) -> list[str]:
        """Row keys top to bottom, as shown."""
        return list(self._order)

    def selected_key(self) -> str | None:
        return self.cursor_key

    def selected(self) -> RowT | None:
        return self.rows_by_key.get(self.cursor_key) if self.cursor_key else None

    def cell(self, key: str, column: str) -> Cell:
        return self.rows_by_key[key].cells[self._keys.index(column)]

    def header_label(self, column: str) -> str:
        for key, label, _w, _r in self.COLUMNS:
            if key == column:
                if self.sort_by and self.SORTS[self.sort_by][1] == column:
                    return f"{label} {'▼' if self.sort_reverse else '▲'}"
                return label
        raise KeyError(column)

    def visible_columns(self) -> list[str]:
        return [c[0] for c in self._columns]

    def hidden_empty(self) -> frozenset[str]:
        """The `HIDE_EMPTY` columns left out because no row has a value in them."""
        return self._empty

    def _empty_columns(self, rows: Sequence[RowT]) -> frozenset[str]:
        if not rows:  # nothing to show: only the columns that are always there
            self._filled.clear()
            return frozenset(self.HIDE_EMPTY)
        keys = self._keys
        empty = self.EMPTY_TEXTS
        self._filled.update(c for c in self.HIDE_EMPTY if c not in self._filled and any(
            r.cells[keys.index(c)].text.strip() not in empty for r in rows))
        return frozenset(c for c in self.HIDE_EMPTY if c not in self._filled)

    def _grow_width(self, rows: Sequence[RowT]) -> int:
        """The width the GROW column's longest cell needs (at most GROW_MAX; 0: no GROW)."""
        if self.GROW is None or not rows:
            return 0
        i = self._keys.index(self.GROW)
        return min(self.GROW_MAX, max(cell_len(r.cells[i].text) for r in rows))

    # --- updates -------------------------------------------------------------------------------
    def show(self, rows: Sequence[RowT]) -> None:
        """Apply rows (given in default order): repaint changed lines; re-order when needed.

        The cursor stays on the same row key whatever moves around it; when its row goes, it
        takes the row now at its old position.
        """
        old_rows, old_order = self.rows_by_key, self._order
        new = {r.key: r for r in rows}
        self.rows_by_key = new
        self._default_order = [r.key for r in rows]
        order = self._sorted_keys(rows)
        self._order = order
        for key in [k for k in self._strips if k not in new]:
            del self._strips[key]
        empty = self._empty_columns(rows)
        want, now = self._grow_width(rows), self.clock()
        if want >= self._grow_want:
            self._grow_needed_at = now
        elif now - self._grow_needed_at < self.GROW_HOLD_S:
            want = self._grow_want
        relayout = empty != self._empty or want != self._grow_want
        if relayout:
            self._empty, self._grow_want = empty, want
            self._layout_sig = None
        cursor = self.cursor_key
        if cursor not in new:
            index = old_order.index(cursor) if cursor in old_order else 0
            cursor = order[min(index, len(order) - 1)] if order else None
        scrolled = self._set_cursor(cursor)
        if order != old_order or scrolled or relayout:
            self.refresh()
        else:
            for i, key in enumerate(order):
                old = old_rows.get(key)
                if old is None or old.cells != new[key].cells:
                    self._refresh_index(i)
        self._update_subtitle()

    def wait_for(self, kind: str, text: str) -> None:
        """Until its first rows: what it waits for (`kind`), said in the table (`text`)."""
        self.waits_for = kind
        self.set_empty((text,))

    def set_empty(self, lines: tuple[str, ...]) -> None:
        """What the table says under its header while it has no row: never a blank table."""
        if lines != self.empty_lines:
            self.empty_lines = lines
            self._empty_wrapped = (-1, [])
            if not self._order:
                self.refresh()

    def empty_wrapped(self, width: int) -> list[str]:
        """`empty_lines` wrapped at `width` (the lines the table needs with no row)."""
        if self._empty_wrapped[0] != width:
            inner = max(10, width - 2 * PAD)
            self._empty_wrapped = (width, [w for line in self.empty_lines
                                           for w in textwrap.wrap(line, inner) or [""]])
        return self._empty_wrapped[1]

    def set_subtitle(self, text: str) -> None:
        """The app's summary for the bottom border; the table adds its scroll position."""
        self._subtitle = text
        self._update_subtitle()

    def _update_subtitle(self) -> None:
        shown = self._visible_rows()
        n = len(self._order)
        sub = self._subtitle
        if n > shown > 0:
            sub += f" · rows {self.top + 1}–{min(n, self.top + shown)} of {n}"
        set_border(self, subtitle=sub)

    def _sorted_keys(self, rows: Sequence[RowT]) -> list[str]:
        if self.sort_by is None:
            return [r.key for r in rows]
        col = self.SORTS[self.sort_by][1]
        known = [r for r in rows if r.sort.get(col) is not None]
        unknown = [r for r in rows if r.sort.get(col) is None]
        known.sort(key=lambda r: r.sort[col], reverse=self.sort_reverse)
        return [r.key for r in known + unknown]

    def set_sort(self, which: str | None) -> None:
        """Sort by `which` (a key of SORTS); the same key again reverses; None = default order."""
        if which is None:
            self.sort_by, self.sort_reverse = None, False
        elif which == self.sort_by:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_by, self.sort_reverse = which, self.SORTS[which][2]
        self.show([self.rows_by_key[k] for k in self._default_order if k in self.rows_by_key])
        self.refresh()  # the header's sort mark

    def restyle(self) -> None:
        """Look the styles up again and render every row again."""
        self._style_cache = None
        self.refresh()

    def notify_style_update(self) -> None:
        """Textual restyled the table (a new theme, focus): its styles are looked up again."""
        super().notify_style_update()
        self._style_cache = None

    # --- cursor --------------------------------------------------------------------------------
    def _visible_rows(self) -> int:
        return max(0, self.size.height - 1)

    def _set_cursor(self, key: str | None) -> bool:
        """Move the cursor to `key`, scrolling it into view; True when the window scrolled."""
        old = self.cursor_key
        self.cursor_key = key
        top = self.top
        if key is not None:
            i = self._order.index(key)
            shown = self._visible_rows() or 1
            if i < self.top:
                self.top = i
            elif i >= self.top + shown:
                self.top = i - shown + 1
        self.top = max(0, min(self.top, len(self._order) - (self._visible_rows() or 1)))
        scrolled = self.top != top
        if old != key:
            if not scrolled:
                for k in (old, key):
                    if k in self._order:
                        self._refresh_index(self._order.index(k))
            self.post_message(self.Highlighted(key))
        return scrolled

    def move_cursor(self, delta: int) -> None:
        if not self._order:
            return
        i = self._order.index(self.cursor_key) if self.cursor_key in self._order else 0
        i = max(0, min(len(self._order) - 1, i + delta))
        if self._set_cursor(self._order[i]):
            self.refresh()
        self._update_subtitle()

    def action_cursor_down(self) -> None:
        self.move_cursor(1)

    def action_cursor_up(self) -> None:
        self.move_cursor(-1)

    def action_page(self, direction: int) -> None:
        self.move_cursor(direction * max(1, self._visible_rows() - 1))

    def action_first(self) -> None:
        self.move_cursor(-len(self._order))

    def action_last(self) -> None:
        self.move_cursor(len(self._order))

    def action_select(self) -> None:
        if self.cursor_key is not None:
            self.post_message(self.Selected(self.cursor_key))

    def _scroll(self, delta: int) -> None:
        top = max(0, min(self.top + delta, len(self._order) - self._visible_rows()))
        if top != self.top:
            self.top = top
            self.refresh()
            self._update_subtitle()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self._scroll(3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self._scroll(-3)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        i = self.top + offset.y - 1
        if i >= len(self._order):
            return
        key = self._order[i]
        if key == self.cursor_key or event.chain > 1:
            self.post_message(self.Selected(key))
        elif self._set_cursor(key):
            self.refresh()

    def on_focus(self) -> None:
        self.restyle()  # the cursor's colours depend on focus

    def on_blur(self) -> None:
        self.restyle()

    def on_resize(self, _event: events.Resize) -> None:
        if self.cursor_key is not None:
            self._set_cursor(self.cursor_key)
        self.refresh()
        self._update_subtitle()

    # --- rendering -----------------------------------------------------------------------------
    def _refresh_index(self, i: int) -> None:
        y = i - self.top + 1
        if 1 <= y <= self._visible_rows():
            self.refresh(Region(0, y, self.size.width, 1))

    def _styles(self) -> tuple[Style, Style, Style]:
        """(base, header, cursor) styles; looked up once, again after a focus or theme change."""
        if self._style_cache is None:
            self._style_cache = (self.rich_style, self.get_component_rich_style("keyed-table--header"),
                                 self.get_component_rich_style("keyed-table--cursor"))
        return self._style_cache

    def _check_layout(self, width: int) -> None:
        """Drop the cached lines when the width, the empty columns or the styles changed."""
        sig = (width, self._styles(), self._empty, self._grow_want)
        if sig == self._layout_sig:
            return
        self._layout_sig = sig
        self._strips.clear()
        self._columns, self._shown, self._widths = fit_columns(
            self.COLUMNS, width, empty=self._empty, drop_order=self.DROP_ORDER, grow=self.GROW,
            grow_want=self._grow_want, grow_yields=self.GROW_YIELDS, flex=self.FLEX)

    def _header(self, width: int) -> Strip:
        style = self._styles()[1]
        return line([(fit(self.header_label(k), w, right), style)
                           for (k, _l, _w, right), w in zip(self._columns, self._widths)], width)

    def _row_strip(self, key: str, width: int) -> Strip:
        row = self.rows_by_key[key]
        cached = self._strips.get(key)
        if cached is not None and cached[0] == row.cells:
            return cached[1]
        columns = self.COLUMNS
        cells = [(fit(row.cells[i].text, w, columns[i][3]), row.cells[i].style)
                 for i, w in zip(self._shown, self._widths)]
        strip = line(cells, width)
        self._strips[key] = (row.cells, strip)
        self.row_renders += 1
        return strip

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        self._check_layout(width)
        base, _header, cursor = self._styles()
        if y == 0:
            return self._header(width).apply_style(base)
        i = self.top + y - 1
        if i >= len(self._order):
            said = self.empty_wrapped(width) if not self._order else []
            if i < len(said):
                muted = base + Style(dim=True)
                return Strip([Segment(" " * PAD + said[i], muted)]).adjust_cell_length(width, base)
            return Strip.blank(width, base)
        key = self._order[i]
        strip = self._row_strip(key, width)
        if key != self.cursor_key:
            return strip.apply_style(base)
        # the cursor's colours win over the cells' own, as in a DataTable
        return Strip(list(Segment.apply_style(iter(strip), base, cursor)), strip.cell_length)
