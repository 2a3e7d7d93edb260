"""A Rich console for command output: the terminal's width, or 160 columns when piped."""

from __future__ import annotations

from rich.console import Console


def console() -> Console:
    """A console as wide as the terminal; piped (logs, CI, nohup), full 160-column lines."""
    c = Console()
    return c if c.is_terminal else Console(width=160)
