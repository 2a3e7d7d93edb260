"""Untrusted text (names, messages, logs, commands) made safe to show: no control codes, no markup.

Every string that comes from a file, a job or a process goes through `clean` before a terminal
sees it: ESC (and so every ANSI/OSC sequence), the other C0 controls except newline and tab,
DEL, the C1 controls and the bidirectional overrides become visible `\\xNN` / `\\uNNNN` text.
Where Rich or Textual would read a string as markup (`console.print(str)`, `notify`, a
`Static`, a border title, an option prompt), `escape` also escapes its `[...]`; `text` gives a
Rich `Text`, which is never parsed as markup.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(value: object) -> str:
    """`value` as a string with its control codes made visible (None: "")."""
    s = "" if value is None else str(value)
    if s.isascii() and s.isprintable():  # the common case, without the regex
        return s
    return _CONTROL.sub(_visible, s)


def escape(value: object) -> str:
    """`clean`, then Rich/Textual markup escaped: for APIs that parse their string as markup."""
    from rich.markup import escape as markup_escape

    return markup_escape(clean(value))


def text(value: object, style: str = "") -> Text:
    """A Rich `Text` of `clean(value)` (never parsed as markup)."""
    from rich.text import Text

    return Text(clean(value), style=style)
