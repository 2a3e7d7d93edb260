"""The session store's connection and its keys: a session's and a job's integer key, cached.

`StoreKeys` is the part of `record/store.py`'s `Store` that the writes
(`record/store_write.py`) and the reads (`record/store_read.py`, `record/store_samples.py`)
share: `db`, the key lookups and whether the database has a table or a column.
"""

from __future__ import annotations

import sqlite3


class StoreKeys:
    """The connection and the cached keys (`Store.__init__` sets the attributes declared here)."""

    db: sqlite3.Connection
    _sks: dict[str, int]
    _jks: dict[tuple[str, str], int]
    _columns: dict[str, set[str]]

    def _sk(self, sid: str) -> int | None:
        sk = self._sks.get(sid)
        if sk is None:
            r = self.db.execute("SELECT sk FROM sessions WHERE id=?", (sid,)).fetchone()
            if r is None:
                return None
            sk = self._sks[sid] = r[0]
        return sk

    def _jk(self, sid: str, name: str, create: bool = False) -> int | None:
        """The job's integer key (created as a bare job row when `create` and missing)."""
        jk = self._jks.get((sid, name))
        if jk is None:
            if create:
                self.db.execute("INSERT OR IGNORE INTO jobs (session_id, name, launched, status)"
                                " VALUES (?,?,0,'unknown')", (sid, name))
            r = self.db.execute("SELECT jk FROM jobs WHERE session_id=? AND name=?",
                                (sid, name)).fetchone()
            if r is None:
                return None
            jk = self._jks[(sid, name)] = r[0]
        return jk

    def _jks_of(self, sid: str) -> dict[int, str]:
        return dict(self.db.execute("SELECT jk, name FROM jobs WHERE session_id=?", (sid,)))

    def _names_of(self, sid: str, job: str | None) -> dict[int, str]:
        """jk -> name of the session's jobs, or of the one `job`: one indexed lookup, not a
        read of every job (a per-job read over 3,000 jobs was quadratic)."""
        if job is None:
            return self._jks_of(sid)
        jk = self._jk(sid, job)
        return {} if jk is None else {jk: job}

    def has_column(self, table: str, column: str) -> bool:
        """Whether this database has the column (one written before it was added has not)."""
        if table not in self._columns:
            self._columns[table] = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
        return column in self._columns[table]

    def has_table(self, table: str) -> bool:
        """Whether this database has the table (one written before it was added has not)."""
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                               (table,)).fetchone() is not None
