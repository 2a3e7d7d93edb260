"""Shared widget base: a Static whose `set()` skips updates that would not change the screen.

Textual re-renders a Static on every `update()`, and by default lays the whole screen out again;
at one snapshot per second most panels (banner, title, log, epoch chart) do not change, and a
panel whose line count stays the same needs no new layout. Skipping both keeps the monitor's CPU
use low. `Content.__eq__` compares text only, so the signature also includes the style spans.
Border titles refresh their widget on every assignment, even of the same text: `set_border`
assigns only a change.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static


def set_border(widget: Widget, *, title: str | None = None, subtitle: str | None = None) -> None:
    """Set a widget's border title and/or subtitle, refreshing it only when one changes."""
    shown = widget.__dict__.setdefault("_gdl_border", {})
    for attr, value in (("border_title", title), ("border_subtitle", subtitle)):
        if value is not None and shown.get(attr) != value:
            shown[attr] = value
            setattr(widget, attr, value)


class Panel(Static):
    """A Static with change-only updates."""

    _signature: tuple | None = None
    _lines: int = -1

    def set(self, content: Content) -> bool:
        """Show `content` unless it is what is already shown; True when it changed."""
        sig = (content.plain, tuple(content.spans))
        if sig == self._signature:
            return False
        self._signature = sig
        lines = content.plain.count("\n")
        self.update(content, layout=lines != self._lines)
        self._lines = lines
        return True
