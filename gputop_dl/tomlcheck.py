"""The TOML checker every input file uses: read, convert values, name the file, table, key and line.

One error type (`ConfigError`, one line: `<file>: <where> (line N): <problem>, expected <what>`),
value converters (`as_int`, `as_float`, `check(conv, ok, expected)`, ...) that raise `Bad` for
the caller to place, `Lines` (the line of each key: tomllib reports no positions), `read_toml`,
and `TableChecker`, which checks one table's keys against a dict of converters. Used by the
workload file (`config/`), the simulator's trace (`config/trace.py`) and the fleet's node list
(`collect/fleet/nodes.py`). A values-floor module: it imports nothing of gputop-dl.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import stat
import tomllib
from collections.abc import Callable, Sequence
from typing import Any

Converter = Callable[[str, Any], Any]
# a table's place in the file: ("workload", its index, sub-table names...) or its dotted name
TableId = tuple[str | int, ...]


class ConfigError(Exception):
    """A bad input file. str() is one line: `<file>: <where> (line N): <problem>, expected <what>`.

    Without a `where` the position is compiler-style: `<file>:<line>:<column>: <problem>`.
    `reason` says what kind of failure it was when the file could not be read at all
    ("missing", "unreadable", "invalid": not UTF-8 or not TOML); None for a bad value.
    """

    def __init__(self, path: str, problem: str, *, where: str | None = None, line: int | None = None,
                 column: int | None = None, expected: str | None = None, hint: str | None = None,
                 reason: str | None = None):
        self.path, self.problem, self.where = str(path), problem, where
        self.line, self.column, self.expected, self.hint = line, column, expected, hint
        self.reason = reason
        if where:
            msg = f"{self.path}: {where}" + (f" (line {line})" if line else "")
        else:
            msg = self.path + "".join(f":{n}" for n in (line, column if line else None) if n)
        msg += f": {problem}"
        if expected:
            msg += f", expected {expected}"
        if hint:
            msg += f"; {hint}" if expected else f", {hint}"
        super().__init__(" ".join(msg.splitlines()))


class Bad(Exception):
    """A value problem found by a converter; the caller adds file, table, key and line."""

    def __init__(self, problem: str, expected: str | None = None, hint: str | None = None):
        super().__init__(problem)
        self.problem, self.expected, self.hint = problem, expected, hint


def show(v: Any) -> str:
    """A TOML value as the user wrote it, cut to 60 characters."""
    s = json.dumps(v, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


def kind_of(v: Any) -> str:
    """`an integer`, `a string`, ...: what a TOML value is, for an error message."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}
    return names.get(type(v), "a date/time")


def did_you_mean(word: str, choices: Sequence[str], n: int = 1) -> str | None:
    """`did you mean 'x'?` for the closest of `choices`, or None."""
    close = difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)
    return "did you mean " + ", ".join(f"'{c}'" for c in close) + "?" if close else None


# ---- converters: (key, raw TOML value) -> value, or raise Bad -----------------------------------

MAX_STRING = 1 << 16  # characters in any one string (a command's argument, a path, ...)
MAX_ITEMS = 4096  # items in any one list
MAX_INT = (1 << 63) - 1  # what SQLite stores as an integer (tomllib reads any size)


def as_str(key: str, v: Any) -> str:
    if not isinstance(v, str):
        raise Bad(f"{key} = {show(v)} is {kind_of(v)}", "a string")
    if not v.strip():
        raise Bad(f"{key} is empty", "a non-empty string")
    if len(v) > MAX_STRING:
        raise Bad(f"{key} has {len(v)} characters", f"at most {MAX_STRING}")
    return v


def as_int(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise Bad(f"{key} = {show(v)} is {kind_of(v)}", "an integer")
    if abs(v) > MAX_INT:
        raise Bad(f"{key} = {show(v)} does not fit in 64 bits", f"an integer from -{MAX_INT} to {MAX_INT}")
    return v


def at_most(conv: Converter, most: float, what: str = "") -> Converter:
    """`conv`, then at most `most` (`what` names the unit: " seconds")."""
    def bounded(key: str, v: Any) -> Any:
        if (v := conv(key, v)) > most:
            raise Bad(f"{key} = {show(v)}", f"at most {int(most) if most == int(most) else most}{what}")
        return v
    return bounded


def as_float(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Bad(f"{key} = {show(v)} is {kind_of(v)}", "a number")
    if not math.isfinite(v):
        raise Bad(f"{key} = {v}", "a finite number")
    return float(v)


def as_bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise Bad(f"{key} = {show(v)} is {kind_of(v)}", "true or false")
    return v


def list_of(key: str, v: Any, conv: Converter, expected: str) -> tuple[Any, ...]:
    if not isinstance(v, list):
        raise Bad(f"{key} = {show(v)} is {kind_of(v)}", expected)
    if not v:
        raise Bad(f"{key} = [] is empty", expected)
    if len(v) > MAX_ITEMS:
        raise Bad(f"{key} has {len(v)} items", f"at most {MAX_ITEMS}")
    out = []
    for i, item in enumerate(v):
        try:
            out.append(conv(f"{key}[{i}]", item))
        except Bad as b:
            raise Bad(b.problem, expected) from None
    return tuple(out)


def choice(options: Sequence[str]) -> Converter:
    def conv(key: str, v: Any) -> str:
        s = as_str(key, v)
        if s not in options:
            raise Bad(f"{key} = {show(v)} is not supported", "one of " + ", ".join(map(show, options)),
                      did_you_mean(v, options))
        return s
    return conv


MAX_NAME = 200  # characters in a name (it names files: <name>.log, ...)


def as_title(key: str, v: Any) -> str:
    """A free-text name (a session's, a trace's): any characters, at most MAX_NAME of them."""
    if isinstance(v, str) and len(v) > MAX_NAME:
        raise Bad(f"{key} has {len(v)} characters", f"at most {MAX_NAME}")
    return as_str(key, v)


def as_name(key: str, v: Any) -> str:
    name = as_str(key, v)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise Bad(f"{key} = {show(v)} has characters other than letters, digits, '_', '.', '-'",
                  "a name matching [A-Za-z0-9_.-]+")
    if len(name) > MAX_NAME:
        raise Bad(f"{key} has {len(name)} characters", f"at most {MAX_NAME}")
    if name in (".", ".."):  # it names files and folders: <name>.log, a TensorBoard run <name>/
        raise Bad(f"{key} = {show(v)} names a folder itself, not a file of its own",
                  "a name with a letter, digit, '_' or '-', or more than two dots")
    return name


def check(conv: Converter, ok: Callable[[Any], bool], expected: str) -> Converter:
    """`conv`, then `ok(value)` or Bad("key = value", expected)."""
    def checked(key: str, v: Any) -> Any:
        if not ok(v := conv(key, v)):
            raise Bad(f"{key} = {show(v)}", expected)
        return v
    return checked


class Lines:
    """First line of each `key =` per table, from the raw text (tomllib reports no positions).

    Table ids: ("session",), ("defaults", "cpu_fallback"), ("workload", i), ("workload", i, "env"), ...
    """

    _HEADER = re.compile(r"""\s*(\[\[?)\s*([\w."' -]+?)\s*\]\]?\s*(#.*)?""")
    _KEY = re.compile(r"""\s*("[^"]*"|'[^']*'|[\w-]+)\s*[=.]""")

    def __init__(self, text: str):
        self.keys: dict[tuple[TableId, str], int] = {}
        self.headers: dict[TableId, int] = {}
        tid: TableId = ()
        n, in_multiline = -1, False
        for no, line in enumerate(text.splitlines(), 1):
            was_in = in_multiline
            if (line.count('"""') + line.count("'''")) % 2:
                in_multiline = not in_multiline
            if was_in:
                continue
            if m := self._HEADER.fullmatch(line):
                parts = [p.strip().strip("\"'") for p in m.group(2).split(".")]
                if parts[0] == "workload":
                    n += m.group(1) == "[[" and len(parts) == 1
                    tid = ("workload", n, *parts[1:])
                else:
                    tid = tuple(parts)
                self.headers.setdefault(tid, no)
                self.headers.setdefault(tuple(parts), no)  # by written name too: ("workload",) = first one
            elif m := self._KEY.match(line):
                self.keys.setdefault((tid, m.group(1).strip("\"'")), no)

    def find(self, tid: TableId, key: str | None = None) -> int | None:
        if key is None:
            return self.headers.get(tid)
        line = self.keys.get((tid, key)) or self.headers.get((*tid, key))
        if line is None and len(tid) > 1 and isinstance(tid[-1], str):  # inline table: the parent key's line
            line = self.find(tid[:-1], tid[-1])
        return line


MAX_FILE = 8 << 20  # bytes of an input file (4,096 workloads with long commands fit in 1 MiB)
MAX_DEPTH = 32  # nesting of arrays, inline tables and dotted keys (tomllib recurses per level)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"))


def read_bounded(spath: str, what: str, limit: int = MAX_FILE) -> bytes:
    """The bytes of the regular file at `spath`, at most `limit`: a device, FIFO, socket or
    directory is refused by its type before a byte is read (`/dev/zero` would never end, a FIFO
    would block), a larger file by its size (ConfigError)."""
    expected = f"a readable TOML {what} file"
    try:  # O_NONBLOCK: opening a FIFO does not wait for a writer
        fd = os.open(spath, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as e:
        raise ConfigError(spath, f"cannot read the file: {e.strerror or e}", expected=expected,
                          reason="missing") from None
    except OSError as e:
        raise ConfigError(spath, f"cannot read the file: {e.strerror or e}", expected=expected,
                          reason="unreadable") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
            raise ConfigError(spath, f"is {kind}, not a regular file", expected=f"a TOML {what} file "
                              "(nothing was read from it)", reason="unreadable")
        if st.st_size > limit:
            raise ConfigError(spath, f"the file is {st.st_size} bytes", expected=f"at most {limit >> 20} "
                              f"MiB ({limit} bytes) for a TOML {what} file", reason="unreadable")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise ConfigError(spath, f"cannot read the file: {e.strerror or e}", expected=expected,
                          reason="unreadable") from None
    finally:
        os.close(fd)
    if size > limit:  # it grew while read
        raise ConfigError(spath, f"the file is more than {limit} bytes", expected=f"at most "
                          f"{limit >> 20} MiB for a TOML {what} file", reason="unreadable")
    return b"".join(chunks)


# what can open or close a nesting level, or hide brackets: strings (multi-line first) and comments
_TOKENS = re.compile(r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\''
                     r"|#[^\n]*|[\[\]{}]", re.S)


def bracket_depth(text: str, stop: int = MAX_DEPTH) -> int:
    """The deepest nesting of [ and { outside strings and comments (a table header counts too),
    scanned without recursion; stops counting once past `stop`. Never less than tomllib's
    recursion for the same text (an unclosed string's brackets are counted)."""
    if (n := text.count("[") + text.count("{")) <= stop:
        return n  # cannot be deeper (fast path: every ordinary file)
    depth = deepest = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop:
                    break
        elif c in "]}":
            depth = max(0, depth - 1)
    return deepest


def value_depth(obj: Any, stop: int = MAX_DEPTH) -> int:
    """The nesting of a parsed TOML value (dotted keys `a.b.c = 1` nest without brackets),
    walked without recursion; stops once past `stop`."""
    deepest, todo = 0, [(obj, 0)]
    while todo:
        v, d = todo.pop()
        if d > deepest:
            deepest = d
            if deepest > stop:
                break
        if isinstance(v, dict):
            todo += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            todo += [(x, d + 1) for x in v]
    return deepest


def read_toml(spath: str, what: str) -> tuple[str, dict[str, Any]]:
    """The text and the parsed TOML of the `what` file at `spath` (ConfigError if unreadable,
    not a regular file, over MAX_FILE bytes or nested deeper than MAX_DEPTH)."""
    try:
        text = read_bounded(spath, what).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(spath, f"not UTF-8 text (byte {e.start})", expected="a UTF-8 TOML file",
                          reason="invalid") from None
    too_deep = ConfigError(spath, f"nested more than {MAX_DEPTH} levels deep (arrays, inline "
                           "tables or dotted keys)", expected=f"at most {MAX_DEPTH} levels",
                           reason="invalid")
    if bracket_depth(text) > MAX_DEPTH:  # before tomllib, which would recurse to the end
        raise too_deep
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
        if m:
            raise ConfigError(spath, f"invalid TOML: {msg[:m.start()]}", line=int(m[1]), column=int(m[2]),
                              reason="invalid") from None
        raise ConfigError(spath, f"invalid TOML: {msg}", reason="invalid") from None
    except RecursionError:  # a nesting the scan did not see (it should): the same line
        raise too_deep from None
    if value_depth(data) > MAX_DEPTH:
        raise too_deep
    return text, data


class TableChecker:
    """Checks the tables of one file: every key known, every value converted, errors placed.

    `where(tid)` names a table for the message (override it); `names` holds the names of the
    array tables read so far (index -> name) for `[[workload]] 'a'`-style labels.
    """

    def __init__(self, path: str, text: str):
        self.path = path
        self.lines = Lines(text)
        self.names: dict[int, str] = {}

    def where(self, tid: TableId) -> str:
        if len(tid) < 2:
            return f"[{tid[0]}]"
        idx = tid[1]
        if isinstance(idx, int) and idx in self.names:
            return f"[[{tid[0]}]] '{self.names[idx]}'"
        return f"[[{tid[0]}]] #{idx + 1}" if isinstance(idx, int) else f"[[{tid[0]}]] {idx}"

    def fail(self, tid: TableId, key: str | None, b: Bad) -> ConfigError:
        return ConfigError(self.path, b.problem, where=self.where(tid) + (f" key '{key}'" if key else ""),
                           line=self.lines.find(tid, key), expected=b.expected, hint=b.hint)

    def table(self, tid: TableId, value: Any, specs: dict[str, Converter]) -> dict[str, Any]:
        """The table's values converted by `specs` (key -> converter); an unknown key fails."""
        if not isinstance(value, dict):
            raise ConfigError(self.path, f"{tid[0]} = {show(value)} is not a table", where=self.where(tid),
                              expected="a table")
        out = {}
        for key, v in value.items():
            if key not in specs:
                hint = did_you_mean(key, list(specs))
                raise ConfigError(self.path, f"unknown key '{key}'", where=self.where(tid),
                                  line=self.lines.find(tid, key), hint=hint,
                                  expected=None if hint else "one of " + ", ".join(specs))
            try:
                out[key] = specs[key](key, v)
            except Bad as b:
                raise self.fail(tid, key, b) from None
        return out
