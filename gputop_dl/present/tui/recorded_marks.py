"""The verdict changes a session recorded, read from the store for the history charts' marks.

The charts mark each change of the verdict's kind. Snapshots alone miss some: the ones before
the screen opened, and any the screen did not see (the intake keeps only the newest snapshot
of a source, so a verdict that held for one tick while the UI was busy never reached it). The
session's `verdict_changes` table has each of them, with the time it was judged
(docs/contracts.md); the panel reads it before each build of its charts (at most every 15 s,
only while they are on screen) and marks the snapshots' changes only after its last row.

One read-only connection, opened on first use in the UI thread and kept; a store that cannot be
read (none yet, damaged, locked past a short wait) is None: the snapshots' marks stand. A read
is 0.02 ms for a session with 3 changes, 0.4 ms with 200 (median on the 2-core box), beside
the ~30 ms of a build of the charts.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputop_dl.record.store import Store

Change = tuple[float, str | None, str]  # (time, old kind or None, new kind)
BUSY_MS = 50  # how long a read waits for a writer's lock (the UI thread waits meanwhile)


class RecordedChanges:
    """`read(store_path, session_id)`: the session's recorded verdict changes, or None."""

    def __init__(self) -> None:
        self._store: Store | None = None
        self._path: str | None = None
        self.reads = 0  # reads done (for tests and benchmarks)

    def read(self, store_path: str | None, session_id: str | None) -> list[Change] | None:
        if not store_path or not session_id:
            return None
        # here, not at the top: the monitor's first frame does without the store's reads
        from gputop_dl.record.paths import StoreError
        from gputop_dl.record.store import Store

        try:
            if self._store is None or self._path != store_path:
                self.close()
                self._store = Store(store_path, readonly=True)
                self._store.db.execute(f"PRAGMA busy_timeout={BUSY_MS}")
                self._path = store_path
            self.reads += 1
            changes = self._store.verdict_changes(session_id)
        except (sqlite3.Error, StoreError, OSError):
            self.close()
            return None
        if changes is None:
            return None
        return [(c["t"], c["from_"], c["to"]) for c in changes]

    def close(self) -> None:
        if self._store is not None:
            with contextlib.suppress(sqlite3.Error):
                self._store.close()
        self._store, self._path = None, None
