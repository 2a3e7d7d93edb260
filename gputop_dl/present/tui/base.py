"""Shared widget bases: panels whose updates skip what would not change the screen.

`Panel` is a Static whose `set()` skips updates that change nothing; `LinePanel` draws lines of
(text, style) runs itself and repaints only the lines that changed, for panels that change every
tick (host, GPUs).

Textual re-renders a Static on every `update()`, and by default lays the whole screen out again;
at one snapshot per second most panels (banner, title, log, epoch chart) do not change, and a
panel whose line count stays the same needs no new layout. Skipping both keeps the monitor's CPU
use low. `Content.__eq__` compares text only, so the signature also includes the style spans.
Border titles refresh their widget on every assignment, even of the same text: `set_border`
assigns only a change.
"""

from __future__ import annotations

import textwrap
from typing import Any, Sequence, Union

from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

Run = Union[str, tuple[str, str]]  # text, or (text, style) with Textual style syntax ("bold $accent")
Line = tuple[Run, ...]


def set_border(widget: Widget, *, title: str | None = None, subtitle: str | None = None) -> None:
    """Set a widget's border title and/or subtitle, refreshing it only when one changes."""
    shown = widget.__dict__.setdefault("_gdl_border", {})
    for attr, value in (("border_title", title), ("border_subtitle", subtitle)):
        if value is not None and shown.get(attr) != value:
            shown[attr] = value
            setattr(widget, attr, value)


class Panel(Static):
    """A Static with change-only updates. `SIZED_BY_LAYOUT`: its size never follows its
    content (a `1fr` panel), so no update needs a new layout."""

    SIZED_BY_LAYOUT = False
    waits_for: str | None = None  # what it waits for before its first reading ("gpus"); None: shown
    _signature: tuple[object, ...] | None = None
    _lines: int = -1

    def set(self, content: Content) -> bool:
        """Show `content` unless it is what is already shown; True when it changed."""
        sig = (content.plain, tuple(content.spans))
        if sig == self._signature:
            return False
        self._signature = sig
        if self.SIZED_BY_LAYOUT:
            self.update(content, layout=False)
            return True
        # its height as wrapped at its width (a longer reason in the banner wraps onto one more
        # line with no more newlines in it: laid out by its newlines alone, it was cut)
        width = self.content_region.width
        lines = content.get_height({}, width) if width > 0 else content.plain.count("\n") + 1
        self.update(content, layout=lines != self._lines)
        self._lines = lines
        return True


class LinePanel(Widget):
    """A panel drawn from lines of runs, one cached Strip per line.

    `set_lines()` compares the new lines with those shown and refreshes only the lines that differ
    (the whole panel, with a new layout, when the count changes). Styles are Textual style strings
    resolved against the theme once each. A line of one run wraps at spaces; a longer line of several
    runs is cut at the width. Building strips from runs skips Content's wrapping and span
    resolution, the bulk of a Static's cost per update.
    """

    DEFAULT_CSS = """
    LinePanel { height: auto; }
    """
    waits_for: str | None = None  # what it waits for before its first reading ("host"); None: shown

    def __init__(self, *lines: Line, **kw: Any) -> None:
        super().__init__(**kw)
        self._lines: list[Line] = list(lines)
        self._shown: list[Line] = []  # display lines (wrapped) for `_width`
        self._width = -1
        self._strips: dict[int, tuple[Line, Strip]] = {}
        self._styles: dict[str, Style] = {}

    def set_lines(self, lines: Sequence[Line]) -> bool:
        """Show `lines`; True when anything changed."""
        lines = [tuple(line) for line in lines]
        if lines == self._lines:
            return False
        old_count = len(self._display(self._width))
        self._lines = lines
        self._width = -1  # wrap again
        shown = self._display(self.size.width)
        if len(shown) != old_count:
            self.refresh(layout=True)
        else:
            width = self.size.width
            for y, line in enumerate(shown):
                cached = self._strips.get(y)
                if cached is None or cached[0] != line:
                    self.refresh(Region(0, y, width, 1))
        return True

    def plain(self) -> str:
        """The lines as text (tests, screenshots of state)."""
        return "\n".join("".join(r if isinstance(r, str) else r[0] for r in line) for line in self._lines)

    def _display(self, width: int) -> list[Line]:
        if width != self._width:
            self._width = width
            shown: list[Line] = []
            for line in self._lines:
                if len(line) == 1 and width > 0 and len(_text(line[0])) > width:
                    style = "" if isinstance(line[0], str) else line[0][1]
                    shown += [((part, style),) for part in textwrap.wrap(_text(line[0]), width) or [""]]
                else:
                    shown.append(line)
            self._shown = shown
        return self._shown

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._display(width)))

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            base = self.visual_style
            style = self._styles[name] = (base + self.app.stylesheet.parse_style(name) if name else base).rich_style
        return style

    def notify_style_update(self) -> None:
        """Textual restyled the widget (a new theme, a class change): resolve the styles again."""
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        shown = self._display(width)
        line = shown[y] if y < len(shown) else ()
        cached = self._strips.get(y)
        if cached is not None and cached[0] == line:
            return cached[1]
        segments = [Segment(r, self._style("")) if isinstance(r, str) else Segment(r[0], self._style(r[1]))
                    for r in line]
        strip = Strip(segments).adjust_cell_length(width, self._style(""))
        self._strips[y] = (line, strip)
        return strip

    def on_resize(self) -> None:
        self._strips.clear()


def _text(run: Run) -> str:
    return run if isinstance(run, str) else run[0]
