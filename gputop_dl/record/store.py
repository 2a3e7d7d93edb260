"""Session store: SQLite (WAL) under the user data directory, written as the run goes.

One connection per thread. The writer commits once per tick, so a `kill -9` of gputop-dl
loses at most the last tick; such a session reads back as "interrupted" (its owner PID is gone
on this host, or its heartbeat is stale when it was recorded elsewhere). Samples are stored in
narrow tables, not as JSON blobs, to keep a 24-hour session small. `Store` opens the
database (record/store_open.py); its writes are `record/store_write.py`, its reads of
sessions, jobs and events `record/store_read.py`, of samples and steps `record/store_samples.py`, the keys they share
`record/store_keys.py`. The tables, the columns added since and opening a database file (read
only, or to write: set-up and migration) are `record/schema.py`.
"""

from __future__ import annotations

# The data directory and corruption recovery live in their own modules; their public names
# are re-exported here, where the rest of gputop-dl imports them from.
from gputop_dl.record.paths import (  # noqa: F401
    ENV_HOME, StoreError, create_private, data_dir, default_db_path, private, session_work_dir)
from gputop_dl.record.recovery import (  # noqa: F401
    CORRUPT_CODES, damage, is_corrupt, move_corrupt_aside, moved_aside)
from gputop_dl.record.schema import open_readonly
from gputop_dl.record.store_open import open_to_write
from gputop_dl.record.store_read import SessionReads
from gputop_dl.record.store_samples import SampleReads
from gputop_dl.record.store_write import SessionWrites


class Store(SessionWrites, SessionReads, SampleReads):
    """A connection to the session database (open one per thread)."""

    def __init__(self, path: str | None = None, readonly: bool = False):
        """`readonly` (listings, exports): read what is there, write and set up nothing.

        Otherwise a database of another schema or a damaged one is renamed (kept) and a new
        one started; a database that cannot be opened is a StoreError naming it."""
        self.path = path or default_db_path(writable=not readonly)
        self.db = open_readonly(self.path) if readonly else open_to_write(self.path)
        self._sks: dict[str, int] = {}
        self._jks: dict[tuple[str, str], int] = {}
        self._columns: dict[str, set[str]] = {}

    def close(self) -> None:
        self.db.close()

    def commit(self) -> None:
        self.db.commit()
