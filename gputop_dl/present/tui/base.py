"""Shared widget base: a Static whose `set()` skips updates that would not change the screen.

Textual re-renders a Static on every `update()`; at one snapshot per second most panels (banner,
title, log, epoch chart) do not change, and skipping them keeps the monitor's CPU use low.
`Content.__eq__` compares text only, so the signature also includes the style spans.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class Panel(Static):
    """A Static with change-only updates."""

    _signature: tuple | None = None

    def set(self, content: Content) -> bool:
        """Show `content` unless it is what is already shown; True when it changed."""
        sig = (content.plain, tuple(content.spans))
        if sig == self._signature:
            return False
        self._signature = sig
        self.update(content)
        return True
