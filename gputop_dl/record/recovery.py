"""Corruption recovery: a damaged or other-schema session database is kept aside, never lost.

A database is renamed (with its -wal and -shm), never rewritten or deleted, and the user is
told in one line on stderr; the next writer starts a new one.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time

from gputop_dl.record.paths import private

CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


def moved_aside(path: str, schema_version: int) -> str | None:
    """An existing database of another schema than `schema_version` is renamed (never
    rewritten); returns the new name."""
    if not os.path.exists(path):
        return None
    try:
        db = sqlite3.connect(path, timeout=10.0)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    if row is None or row[0] == str(schema_version):
        return None
    dest = f"{path[:-3] if path.endswith('.db') else path}.v{row[0]}.db"
    _keep_as(path, dest)
    return dest


def _keep_as(path: str, dest: str) -> None:
    """Rename a database and its -wal/-shm to `dest`, private (an older one may be 0644)."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, dest + suffix)
            private(dest + suffix)


def is_corrupt(exc: BaseException) -> bool:
    """A SQLite error that says the file is damaged or no database (not locked, not full); a
    UnicodeDecodeError is SQLite's message about a damaged schema that is no UTF-8."""
    if isinstance(exc, UnicodeDecodeError):
        return True
    return isinstance(exc, sqlite3.DatabaseError) and (
        getattr(exc, "sqlite_errorcode", None) in CORRUPT_CODES
        or "malformed" in str(exc) or "not a database" in str(exc))


def damage(path: str) -> str | None:
    """Why the file at `path` is no SQLite database, from its header alone (cheap), or None.

    Catches garbage and truncation, which SQLite itself may only notice on some later read."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError:
        return None
    if size == 0:
        return None
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        return "file is not a database"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]  # the in-header size is valid (SQLite >= 3.7.0)
    wal = path + "-wal"
    if valid and pages and size < page * pages and not (os.path.exists(wal)
                                                        and os.path.getsize(wal) > 0):
        return f"truncated: {size} of {page * pages} bytes"
    return None


def move_corrupt_aside(path: str, why: str) -> str:
    """Rename a damaged database (and its -wal/-shm) out of the way, never deleting it; says
    so in one line on stderr; returns the new name."""
    stem = path[:-3] if path.endswith(".db") else path
    dest = f"{stem}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}.db"
    n = 1
    while os.path.exists(dest):
        n += 1
        dest = f"{stem}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{n}.db"
    _keep_as(path, dest)
    sys.stderr.write(f"gputop-dl: {path} is damaged ({why}); kept as {dest}, "
                     "starting a new one\n")
    return dest
