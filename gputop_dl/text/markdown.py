"""Markdown for reports: escaping of untrusted text, GitHub tables, fences, atomic writes."""

from __future__ import annotations

import os
import re
import tempfile

from gputop_dl.text.fmt import DASH

_MD_PUNCT = re.compile(r"([\\`*\[\]|~#])")
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_BULLET = re.compile(r"^(\s*)([-+=])(?=\s|$)")  # would start a list / setext heading
_MD_ORDERED = re.compile(r"^(\s*\d{1,9})([.)])(?=\s|$)")  # would start an ordered list
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def md_text(text: object) -> str:
    """Untrusted text as inline Markdown: literal on GitHub, one line, no HTML, no table break."""
    s = " ".join(str(text).splitlines())
    s = _CONTROL.sub(" ", s.replace("\t", " "))
    s = _MD_PUNCT.sub(r"\\\1", s)
    s = _MD_UNDERSCORE.sub(r"\\_", s)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_BULLET.sub(r"\1\\\2", s, count=1)
    return _MD_ORDERED.sub(r"\1\\\2", s, count=1)


def md_cell(text: object) -> str:
    """Untrusted text for a table cell (empty -> an en dash, so no cell is blank)."""
    s = md_text(text).strip() if text is not None else ""
    return s or DASH


def fence(text: str, info: str = "") -> str:
    """A fenced code block that no backtick run in `text` can close."""
    body = _CONTROL.sub(" ", "\n".join(str(text).splitlines()))
    longest = max((len(r) for r in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def table(header: list[str], rows: list[list[str]], align: str = "") -> str:
    """A GFM table; `align` is one char per column: l (default) or r. Cells are already escaped."""
    seps = ["---:" if (align[i:i + 1] == "r") else "---" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(seps) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def write_atomic(path: str, text: str, mode: int | None = None) -> str:
    """Write `text` to `path` via a temp file in the same directory and os.replace: a failed
    write never leaves half a file. `mode`: the file's mode (default: 0666 less the umask).
    Returns the path."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
