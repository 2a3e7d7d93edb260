"""`gputop-dl sessions`: the recorded sessions, newest first, as rows and as a Rich table."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from gputop_dl.present.report.markdown import when
from gputop_dl.record.paths import StoreError, default_db_path
from gputop_dl.record.store import Store
from gputop_dl.text.fmt import DASH, secs
from gputop_dl.text.safe import text

if TYPE_CHECKING:
    from rich.console import JustifyMethod
    from rich.table import Table


def list_sessions(store_path: str | None = None) -> list[dict[str, Any]]:
    """Recorded sessions, newest first: id, name, started, duration_s, jobs, verdict, state."""
    path = store_path or default_db_path(writable=False)
    if not os.path.exists(path):
        return []
    store = Store(path, readonly=True)
    try:
        stats = store.session_stats()
        out = []
        now = time.time()
        for s in store.sessions():
            st: Mapping[str, Any] = stats.get(s.id) or {}
            if s.ended is not None:
                end = s.ended
            elif s.state == "running":
                end = now
            else:
                end = st.get("heartbeat") or s.started
            v = s.verdict or {}
            out.append({"id": s.id, "name": s.name, "started": s.started,
                        "duration_s": max(0.0, end - s.started), "jobs": st.get("jobs", 0),
                        "verdict": v.get("title") or v.get("kind") if v else None,
                        "verdict_kind": v.get("kind") if v else None, "state": s.state,
                        "file": s.file})
        return out
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a damaged page found while reading
        raise StoreError(f"{path}: cannot read the session database ({exc})") from None
    finally:
        store.close()


def sessions_table(rows: list[dict[str, Any]]) -> Table:
    """The `gputop-dl sessions` table (Rich)."""
    from rich.table import Table

    justify: dict[str, JustifyMethod] = {"duration": "right", "jobs": "right"}
    t = Table(header_style="bold", title="Recorded sessions (newest first)", title_justify="left")
    for col in ("id", "name", "start", "duration", "jobs", "verdict", "state"):
        t.add_column(col, justify=justify.get(col, "left"), no_wrap=col in ("id", "start"))
    style = {"finished": "green", "interrupted": "yellow", "running": "cyan"}
    for r in rows:
        t.add_row(text(r["id"]), text(r["name"]), when(r["started"], "%Y-%m-%d %H:%M"),
                  secs(r["duration_s"]), str(r["jobs"]), text(r["verdict"] or DASH),
                  text(r["state"], style=style.get(r["state"], "")))
    return t
