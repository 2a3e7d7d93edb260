"""Log panel: the engine's recent messages (baselines, phase changes, failures), newest last."""

from __future__ import annotations

import time
from typing import Any

from textual.content import Content

from gputop_dl.present.tui.base import Panel
from gputop_dl.text.safe import clean


def message_style(text: str) -> str:
    low = text.lower()
    if "failed" in low or "error" in low:
        return "$text-error"
    if "stopping" in low or "no nvidia" in low or "no cuda" in low or "no solo" in low:
        return "$text-warning"
    return ""


class LogPanel(Panel):
    """The last messages that fit, each with its local time of day (HH:MM:SS)."""

    DEFAULT_CSS = """
    LogPanel { height: 1fr; }
    """
    SIZED_BY_LAYOUT = True  # 1fr high and wide (app.tcss): a new message needs no layout

    def __init__(self, **kw: Any) -> None:
        super().__init__(Content.styled("no messages", "$text-muted"), **kw)
        self.border_title = "log"
        self._log: tuple[tuple[float, str], ...] = ()

    def show(self, log: tuple[tuple[float, str], ...]) -> None:
        if log == self._log:
            return
        self._log = log
        self.set(self.render_content())

    def on_resize(self) -> None:
        self.set(self.render_content())

    def render_content(self) -> Content:
        if not self._log:
            return Content.styled("no messages", "$text-muted")
        height = max(1, self.content_size.height or 8)
        lines = []
        for t, msg in self._log[-height:]:
            stamp = time.strftime("%H:%M:%S", time.localtime(t))
            lines.append(Content.assemble((stamp + " ", "$text-muted"), (clean(msg), message_style(msg))))
        return Content("\n").join(lines)
