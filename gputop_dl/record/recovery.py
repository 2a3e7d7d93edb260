"""Corruption recovery: a damaged or other-schema session database is kept aside, never lost.

A database is renamed (with its -wal and -shm), never rewritten or deleted, and the user is
told in one line on stderr; the next writer starts a new one.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
import urllib.parse

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
    """Why the file at `path` is no readable SQLite database, or None; asked of SQLite itself.

    The file is never opened here but by SQLite: POSIX locks belong to the process, and closing
    *any* descriptor of a file drops every lock the process holds on it, SQLite's included (a
    writer's lock gone, another process checkpoints and deletes the WAL under it: the database
    is corrupt). SQLite reports garbage (SQLITE_NOTADB) and a file shorter than its header says
    (SQLITE_CORRUPT) on its first read; the header's figures for the message are then read with
    pread on the descriptor SQLite opened, which takes and drops no lock."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    if size == 0:
        return None
    try:
        db = sqlite3.connect(f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro",
                             uri=True, timeout=10.0)
    except sqlite3.Error:
        return None
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return None
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        if not is_corrupt(exc):
            return None  # locked, cannot open (a read-only folder): not damage
        return _header_says(path, size) or str(exc)
    finally:
        db.close()


def _header_says(path: str, size: int) -> str | None:
    """"not a database" or "truncated: N of M bytes" from the file's 100-byte header, read
    through a descriptor this process already holds on it (SQLite's); None without one."""
    try:
        want = os.stat(path)
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for name in fds:
        try:
            fd = int(name)
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
                continue
            head = os.pread(fd, 100, 0)
        except (OSError, ValueError):
            continue
        if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
            return "file is not a database"
        page = int.from_bytes(head[16:18], "big")
        page = 65536 if page == 1 else page
        pages = int.from_bytes(head[28:32], "big")
        if head[24:28] == head[92:96] and pages and size < page * pages:
            return f"truncated: {size} of {page * pages} bytes"
        return None
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
