"""The session store's reads of sessions, jobs and events, and of stored baselines and profiles.

A "running" session whose owner is gone reads back as "interrupted" (its owner PID is gone on
this host, or its heartbeat is stale when it was recorded elsewhere). `SessionReads` is a part
of `record/store.py`'s `Store`.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, TypedDict

from gputop_dl.record.schema import JsonObject, loads, redacted_info, redacted_spec
from gputop_dl.record.store_keys import StoreKeys
from gputop_dl.record.store_write import STEP_FIELDS
from gputop_dl.workload import redact_line, redact_secrets

SESSION_COLS = ("id, name, file, command, kind, started, ended, state, heartbeat, owner_pid,"
                " owner_host, environment, verdict, spec")

STALE_S = 15.0  # a "running" session of another host whose heartbeat is older than this


@dataclass(frozen=True)
class SessionRow:
    id: str
    name: str
    file: str | None
    command: str | None
    kind: str
    started: float
    ended: float | None
    state: str
    environment: JsonObject | None
    verdict: JsonObject | None
    spec: JsonObject | None


class JobRecord(TypedDict):
    """A job of a session as recorded (`SessionReads.jobs`); `config` and `info` redacted."""

    name: str
    launched: bool
    config: JsonObject | None
    status: str
    failure: str | None
    device: str | None
    pid: int | None
    started: float | None
    ended: float | None
    info: JsonObject


class VerdictChange(TypedDict):
    """A change of a session's verdict kind (`SessionReads.verdict_changes`); `from` is None
    for the session's first verdict."""

    t: float
    from_: str | None
    to: str
    reason: str | None
    worst_slowdown: float | None


class SessionStats(TypedDict):
    """A session's job count and last heartbeat (`SessionReads.session_stats`, listings)."""

    jobs: int
    heartbeat: float | None


class SessionReads(StoreKeys):
    """Sessions, jobs, events, baselines and machine profiles, as recorded (a part of `Store`)."""

    def latest_machine(self, host: str | None = None) -> JsonObject | None:
        """The newest stored machine profile (of `host` when given); None when there is none."""
        if not self.has_table("machine_profiles"):
            return None
        where, args = ("WHERE host=?", (host,)) if host else ("", ())
        r = self.db.execute(f"SELECT data FROM machine_profiles {where} ORDER BY created DESC"
                            " LIMIT 1", args).fetchone()
        return loads(r[0]) if r else None

    def _row(self, r: tuple[Any, ...]) -> SessionRow:
        (sid, name, file, command, kind, started, ended, state, heartbeat, owner_pid,
         owner_host, env, verdict, spec) = r
        if state == "running" and _owner_gone(owner_pid, owner_host, heartbeat):
            state = "interrupted"
        return SessionRow(sid, name, file, redact_line(command), kind, started, ended, state, loads(env),
                          loads(verdict), redacted_spec(loads(spec)))

    def sessions(self) -> list[SessionRow]:
        rows = self.db.execute(f"SELECT {SESSION_COLS} FROM sessions ORDER BY started DESC").fetchall()
        return [self._row(r) for r in rows]

    def session(self, sid: str | None = None) -> SessionRow | None:
        """The session with this id (a unique prefix works), or the latest one."""
        if sid is None:
            r = self.db.execute(f"SELECT {SESSION_COLS} FROM sessions ORDER BY started DESC LIMIT 1").fetchone()
        else:
            rs = self.db.execute(f"SELECT {SESSION_COLS} FROM sessions WHERE id LIKE ? ORDER BY started DESC",
                                 (sid + "%",)).fetchall()
            r = rs[0] if len(rs) == 1 or (rs and rs[0][0] == sid) else None
        return self._row(r) if r else None

    def jobs(self, sid: str) -> list[JobRecord]:
        cur = self.db.execute("SELECT name, launched, config, status, failure, device, pid,"
                              " started, ended, info FROM jobs WHERE session_id=? ORDER BY rowid",
                              (sid,))
        out: list[JobRecord] = []
        for name, launched, config, status, failure, device, pid, started, ended, info in cur:
            out.append({"name": name, "launched": bool(launched),
                        "config": redact_secrets(loads(config)),  # also what older versions kept
                        "status": status, "failure": failure, "device": device, "pid": pid,
                        "started": started, "ended": ended, "info": redacted_info(loads(info))})
        return out

    def events(self, sid: str, job: str | None = None, ev: str | None = None,
               phase: str | None = None) -> list[JsonObject]:
        """Recorded events as the trainer sent them (plus job and phase), in time order."""
        names = self._names_of(sid, job)
        if not names:
            return []
        marks = ",".join("?" * len(names))
        out: list[tuple[float | None, int, int, JsonObject]] = []  # (t, kind, rowid, event)
        if ev in (None, "step"):
            q = f"SELECT rowid, jk, phase, t, {', '.join(STEP_FIELDS)} FROM steps WHERE jk IN ({marks})"
            args: list[object] = list(names)
            if phase is not None:
                q += " AND phase=?"
                args.append(phase)
            for rowid, jk, ph, t, *vals in self.db.execute(q, args):
                d = dict(zip(STEP_FIELDS, vals))
                d.update(job=names[jk], phase=ph, t=t, ev="step")
                out.append((t, 0, rowid, d))
        # the other events (and a step event with unexpected fields, kept whole)
        q = f"SELECT rowid, jk, phase, t, ev, data FROM events WHERE jk IN ({marks})"
        args = list[object](names)
        for col, val in (("ev", ev), ("phase", phase)):
            if val is not None:
                q += f" AND {col}=?"
                args.append(val)
        for rowid, jk, ph, t, ev_, data in self.db.execute(q, args):
            d = loads(data) or {}
            d.update(job=names[jk], phase=ph, t=t, ev=ev_)
            out.append((t, 1, rowid, d))
        out.sort(key=lambda r: (r[0] is None, r[0] or 0.0, r[1], r[2]))
        return [r[3] for r in out]

    def events_of(self, sid: str, kinds: tuple[str, ...]) -> list[JsonObject]:
        """Events of these kinds (e.g. failed, note, baseline; never steps), in order."""
        names = self._jks_of(sid)
        if not names:
            return []
        out = []
        for jk, phase_, t, ev_, data in self.db.execute(
                f"SELECT jk, phase, t, ev, data FROM events WHERE jk IN ({','.join('?' * len(names))})"
                f" AND ev IN ({','.join('?' * len(kinds))}) ORDER BY rowid", (*names, *kinds)):
            d = loads(data) or {}
            d.update(job=names[jk], phase=phase_, t=t, ev=ev_)
            out.append(d)
        return out

    def verdict_changes(self, sid: str) -> list[VerdictChange] | None:
        """The session's verdict changes in time order; None when the session did not record
        them (written by a gputop-dl before they were kept): not known, never "none"."""
        if not (self.has_table("verdict_changes") and self.has_column("sessions", "verdict_history")):
            return None
        r = self.db.execute("SELECT sk, verdict_history FROM sessions WHERE id=?", (sid,)).fetchone()
        if r is None or not r[1]:
            return None
        return [{"t": t, "from_": a, "to": b, "reason": why, "worst_slowdown": worst}
                for t, a, b, why, worst in self.db.execute(
                    "SELECT t, from_kind, to_kind, reason, worst_slowdown FROM verdict_changes"
                    " WHERE sk=? ORDER BY t, rowid", (r[0],))]

    def session_stats(self) -> dict[str, SessionStats]:
        """Per session id: {"jobs": count, "heartbeat": last heartbeat time} (for listings)."""
        out: dict[str, SessionStats] = {sid: {"jobs": 0, "heartbeat": hb}
               for sid, hb in self.db.execute("SELECT id, heartbeat FROM sessions")}
        for sid, n in self.db.execute("SELECT session_id, COUNT(*) FROM jobs GROUP BY session_id"):
            if sid in out:
                out[sid]["jobs"] = n
        return out

    def solo_profile(self, fingerprint: str) -> JsonObject | None:
        """A cached solo baseline with what its solo run's samples add: peak RSS, mean bytes/s
        read from storage, peak GPU memory (None where not recorded); None: no baseline."""
        r = self.db.execute("SELECT session_id, job, data FROM baselines WHERE fingerprint=?",
                            (fingerprint,)).fetchone()
        if r is None:
            return None
        out = dict(loads(r[2]) or {}, rss_peak=None, io_read=None, gpu_mem_peak=None)
        jk = self._jk(r[0], r[1])
        if jk is not None:
            io = "AVG(io_read)" if self.has_column("job_samples", "io_read") else "NULL"
            row = self.db.execute(f"SELECT MAX(rss), {io}, MAX(gpu_mem) FROM job_samples"
                                  " WHERE jk=? AND phase='baseline'", (jk,)).fetchone()
            if row:
                out.update(rss_peak=row[0], io_read=row[1], gpu_mem_peak=row[2])
        return out

    def pace_refs(self, since: float) -> dict[str, tuple[float, str, JsonObject]]:
        """This host's stored readings alone (engine/pace_refs.py) whose last reading is
        `since` or later: fingerprint -> (that time, the command, the readings)."""
        if not self.has_table("pace_refs"):
            return {}
        rows = self.db.execute("SELECT fingerprint, until, command, data FROM pace_refs"
                               " WHERE host=? AND until>=?", (socket.gethostname(), since))
        out = {}
        for fp, until, command, data in rows:
            try:
                out[fp] = (until, command, loads(data))
            except sqlite3.DatabaseError:  # a damaged row (not JSON): skipped, the others read
                continue
        return out

    def baseline(self, fingerprint: str) -> JsonObject | None:
        r = self.db.execute("SELECT data FROM baselines WHERE fingerprint=?",
                            (fingerprint,)).fetchone()
        return loads(r[0]) if r else None


def _owner_gone(pid: int | None, host: str | None, heartbeat: float | None) -> bool:
    """A "running" session whose owner is not running: on this host, its PID is gone (at once,
    also right after a recording stopped on a full disk); elsewhere, its heartbeat is stale."""
    if host == socket.gethostname() and pid:
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return heartbeat is None or time.time() - heartbeat >= STALE_S
