"""A Rich console for command output: the terminal's width, or 160 columns when piped."""

from __future__ import annotations

from rich.console import Console


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader of stdout went away (`| head -1`): a BrokenPipeError for the command to
        end on (cli.main: exit 141), not Rich's own exit 1 from inside a print."""
        raise BrokenPipeError


def console() -> Console:
    """A console as wide as the terminal; piped (logs, CI, nohup), full 160-column lines."""
    c = _Console()
    return c if c.is_terminal else _Console(width=160)
