"""Opening the session database to write, and the check before an engine starts.

A database of another schema is migrated, a damaged one renamed (kept, with its line) and a
new one started; one that cannot be opened is a StoreError naming it. `check_store` is what
`gputop-dl` runs before its first frame: it imports the opening alone (SQLite, the schema),
not the store's reads and writes (record/store.py), which the engine imports after that frame.
"""

from __future__ import annotations

import sqlite3

from gputop_dl.record.paths import StoreError, default_db_path
from gputop_dl.record.recovery import is_corrupt, move_corrupt_aside
from gputop_dl.record.schema import open_for_writing


def open_to_write(path: str) -> sqlite3.Connection:
    """The database at `path`, set up to write (see the module docstring)."""
    try:
        return open_for_writing(path)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        if not is_corrupt(exc):
            raise StoreError(f"{path}: cannot open the session database ({exc})") from None
        move_corrupt_aside(path, str(exc))
        return open_for_writing(path)


def check_store(path: str | None = None) -> None:
    """Before an engine starts: the data directory and the database can be written (a damaged
    database is moved aside here, with its line); else StoreError, one line, exit 2."""
    open_to_write(path or default_db_path(writable=True)).close()
