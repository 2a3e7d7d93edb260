"""What is worth telling a person, once: a job that became stuck, or failed, from the snapshots.

`AlertEvents.update(snap)` compares a snapshot's jobs with what it saw before and returns the
new events only: a job is told stuck once per stuck spell (again only after it moved and hung
anew), failed once. Each event is a JSON object (`event`, `job`, `pid`, `host`, `time`, a
Slack- and Mattermost-compatible `text`, and the `stuck` object or the `failure`); the TUI
notifies and rings the bell with it, `runner/alerts.py` hands it to a command and a webhook.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from gputop_dl.present.stuck_text import evidence_text, fix_text, stuck_line

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import JobSample, Snapshot

# an alert event as JSON (what a command reads on stdin and a webhook receives): a document
# for other programs, its fields listed in docs/stuck.md
AlertEvent = dict[str, Any]
ALERT_SCHEMA = "gputop-dl.alert/1"


def _key(j: JobSample) -> tuple[bool, str, int | None]:
    return j.launched, j.name, j.pid


class AlertEvents:
    """Turns snapshots into new alert events (one per stuck spell, one per failure)."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or socket.gethostname()
        self._stuck: set[tuple[bool, str, int | None]] = set()
        self._failed: set[tuple[bool, str, int | None]] = set()
        self._first = True

    def update(self, snap: Snapshot) -> list[AlertEvent]:
        out: list[AlertEvent] = []
        stuck_now = set()
        for j in snap.jobs:
            k = _key(j)
            if j.stuck is not None:
                stuck_now.add(k)
                if k not in self._stuck:
                    out.append(self._event("stuck", j, snap))
            elif j.status == "failed" and k not in self._failed:
                self._failed.add(k)
                if not self._first or j.launched:  # a found job failed before we looked: no news
                    out.append(self._event("failed", j, snap))
        self._stuck = stuck_now
        self._first = False
        return out

    def _event(self, kind: str, j: JobSample, snap: Snapshot) -> AlertEvent:
        st = j.stuck
        if kind == "stuck" and st is not None:
            line = stuck_line(j) or j.name
            text = (f"gputop-dl on {self.host}: {line}\nevidence: {evidence_text(st)}\n"
                    f"fix: {fix_text(st)}")
        else:
            line = f"{j.name} failed" + (f": {j.failure}" if j.failure else "")
            text = f"gputop-dl on {self.host}: {line}"
        return {"schema": ALERT_SCHEMA, "event": kind, "job": j.name, "pid": j.pid,
                "user": j.user, "host": self.host, "time": snap.time,
                "session_id": snap.session_id, "line": line, "text": text,
                "stuck": st.to_json() if st is not None else None, "failure": j.failure}
