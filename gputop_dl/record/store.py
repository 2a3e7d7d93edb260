"""Session store: SQLite (WAL) under the user data directory, written as the run goes.

One connection per thread. The writer commits once per tick, so a `kill -9` of gputop-dl
loses at most the last tick; such a session reads back as "interrupted" (its owner PID is gone
and its heartbeat is stale). Samples are stored in narrow tables, not as JSON blobs, to keep a
24-hour session small.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from dataclasses import dataclass

import platformdirs

ENV_HOME = "GPUTOP_DL_HOME"
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, name TEXT, file TEXT, command TEXT, kind TEXT,
    started REAL, ended REAL, state TEXT, heartbeat REAL, owner_pid INTEGER, owner_host TEXT,
    environment TEXT, verdict TEXT, spec TEXT);
CREATE TABLE IF NOT EXISTS jobs (
    session_id TEXT, name TEXT, launched INTEGER, config TEXT, status TEXT, failure TEXT,
    device TEXT, pid INTEGER, started REAL, ended REAL, info TEXT,
    PRIMARY KEY (session_id, name));
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT, job TEXT, phase TEXT, t REAL, ev TEXT, data TEXT);
CREATE INDEX IF NOT EXISTS events_by_job ON events (session_id, job, ev);
CREATE TABLE IF NOT EXISTS baselines (
    fingerprint TEXT PRIMARY KEY, created REAL, session_id TEXT, job TEXT, data TEXT);
CREATE TABLE IF NOT EXISTS host_samples (
    session_id TEXT, t REAL, cpu_busy REAL, load1 REAL, psi_some10 REAL, throttled REAL,
    mem_used INTEGER, per_cpu TEXT);
CREATE INDEX IF NOT EXISTS host_by_session ON host_samples (session_id, t);
CREATE TABLE IF NOT EXISTS gpu_samples (
    session_id TEXT, t REAL, gpu INTEGER, util REAL, mem_used INTEGER, mem_total INTEGER,
    temp_c REAL, power_w REAL, sm_clock INTEGER, throttle TEXT, error TEXT);
CREATE INDEX IF NOT EXISTS gpu_by_session ON gpu_samples (session_id, t);
CREATE TABLE IF NOT EXISTS job_samples (
    session_id TEXT, t REAL, job TEXT, phase TEXT, cpu_cores REAL, rss INTEGER, nprocs INTEGER,
    gpu_mem INTEGER, stall REAL, step_time REAL, samples_per_s REAL);
CREATE INDEX IF NOT EXISTS job_by_session ON job_samples (session_id, job, t);
"""

STALE_S = 15.0  # a "running" session whose heartbeat is older than this and whose owner is gone


def data_dir() -> str:
    d = os.environ.get(ENV_HOME) or platformdirs.user_data_dir("gputop-dl")
    os.makedirs(d, exist_ok=True)
    return d


def default_db_path() -> str:
    return os.path.join(data_dir(), "sessions.db")


def session_work_dir(session_id: str) -> str:
    d = os.path.join(data_dir(), "sessions", session_id)
    os.makedirs(d, exist_ok=True)
    return d


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def _dumps(obj) -> str | None:
    return None if obj is None else json.dumps(obj, separators=(",", ":"))


def _loads(text):
    return None if text is None else json.loads(text)


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
    environment: dict | None
    verdict: dict | None
    spec: dict | None


class Store:
    """A connection to the session database (open one per thread)."""

    def __init__(self, path: str | None = None):
        self.path = path or default_db_path()
        self.db = sqlite3.connect(self.path, timeout=10.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    def commit(self) -> None:
        self.db.commit()

    # --- writing -------------------------------------------------------------------------
    def create_session(self, name: str, *, file: str | None, command: str, kind: str,
                       environment: dict, spec: dict | None = None,
                       session_id: str | None = None) -> str:
        sid = session_id or new_session_id()
        now = time.time()
        self.db.execute(
            "INSERT INTO sessions (id, name, file, command, kind, started, state, heartbeat,"
            " owner_pid, owner_host, environment, spec) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (sid, name, file, command, kind, now, "running", now, os.getpid(),
             socket.gethostname(), _dumps(environment), _dumps(spec)))
        self.db.commit()
        return sid

    def heartbeat(self, sid: str, t: float) -> None:
        self.db.execute("UPDATE sessions SET heartbeat=? WHERE id=?", (t, sid))

    def end_session(self, sid: str, state: str, verdict: dict | None = None) -> None:
        self.db.execute("UPDATE sessions SET ended=?, state=?, verdict=? WHERE id=?",
                        (time.time(), state, _dumps(verdict), sid))
        self.db.commit()

    def set_verdict(self, sid: str, verdict: dict | None) -> None:
        self.db.execute("UPDATE sessions SET verdict=? WHERE id=?", (_dumps(verdict), sid))

    def upsert_job(self, sid: str, name: str, *, launched: bool, config: dict | None,
                   status: str, failure: str | None = None, device: str | None = None,
                   pid: int | None = None, started: float | None = None,
                   ended: float | None = None, info: dict | None = None) -> None:
        self.db.execute(
            "INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(session_id, name) DO UPDATE"
            " SET status=excluded.status, failure=excluded.failure, device=excluded.device,"
            " pid=excluded.pid, started=COALESCE(jobs.started, excluded.started),"
            " ended=excluded.ended, info=excluded.info",
            (sid, name, int(launched), _dumps(config), status, failure, device, pid, started,
             ended, _dumps(info)))

    def add_events(self, sid: str, job: str, phase: str, events: list[dict]) -> None:
        rows = []
        for e in events:
            data = {k: v for k, v in e.items() if k not in ("ev", "t")}
            rows.append((sid, job, phase, e.get("t"), e.get("ev"), _dumps(data)))
        self.db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?)", rows)

    def add_host_sample(self, sid: str, t: float, h) -> None:
        self.db.execute("INSERT INTO host_samples VALUES (?,?,?,?,?,?,?,?)",
                        (sid, t, h.cpu_busy, h.load1, h.cpu_pressure_some10,
                         h.cgroup_throttled_frac, h.mem_used, _dumps(list(h.per_cpu))))

    def add_gpu_samples(self, sid: str, t: float, gpus) -> None:
        self.db.executemany(
            "INSERT INTO gpu_samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(sid, t, g.index, g.util, g.mem_used, g.mem_total, g.temp_c, g.power_w,
              g.sm_clock_mhz, ",".join(g.throttle_reasons) or None, g.error) for g in gpus])

    def add_job_sample(self, sid: str, t: float, j, phase: str | None) -> None:
        self.db.execute(
            "INSERT INTO job_samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (sid, t, j.name, phase, j.cpu_cores, j.rss, len(j.pids), j.gpu_mem,
             j.stall_fraction, j.step_time_s, j.samples_per_s))

    def save_baseline(self, fingerprint: str, sid: str, job: str, data: dict) -> None:
        self.db.execute("INSERT OR REPLACE INTO baselines VALUES (?,?,?,?,?)",
                        (fingerprint, time.time(), sid, job, _dumps(data)))

    # --- reading -------------------------------------------------------------------------
    def _row(self, r) -> SessionRow:
        (sid, name, file, command, kind, started, ended, state, heartbeat, owner_pid,
         owner_host, env, verdict, spec) = r
        if state == "running" and _owner_gone(owner_pid, owner_host, heartbeat):
            state = "interrupted"
        return SessionRow(sid, name, file, command, kind, started, ended, state, _loads(env),
                          _loads(verdict), _loads(spec))

    def sessions(self) -> list[SessionRow]:
        rows = self.db.execute("SELECT * FROM sessions ORDER BY started DESC").fetchall()
        return [self._row(r) for r in rows]

    def session(self, sid: str | None = None) -> SessionRow | None:
        """The session with this id (a unique prefix works), or the latest one."""
        if sid is None:
            r = self.db.execute("SELECT * FROM sessions ORDER BY started DESC LIMIT 1").fetchone()
        else:
            rs = self.db.execute("SELECT * FROM sessions WHERE id LIKE ? ORDER BY started DESC",
                                 (sid + "%",)).fetchall()
            r = rs[0] if len(rs) == 1 or (rs and rs[0][0] == sid) else None
        return self._row(r) if r else None

    def jobs(self, sid: str) -> list[dict]:
        cur = self.db.execute("SELECT name, launched, config, status, failure, device, pid,"
                              " started, ended, info FROM jobs WHERE session_id=? ORDER BY rowid",
                              (sid,))
        out = []
        for name, launched, config, status, failure, device, pid, started, ended, info in cur:
            out.append({"name": name, "launched": bool(launched), "config": _loads(config),
                        "status": status, "failure": failure, "device": device, "pid": pid,
                        "started": started, "ended": ended, "info": _loads(info) or {}})
        return out

    def events(self, sid: str, job: str | None = None, ev: str | None = None,
               phase: str | None = None) -> list[dict]:
        q, args = "SELECT job, phase, t, ev, data FROM events WHERE session_id=?", [sid]
        for col, val in (("job", job), ("ev", ev), ("phase", phase)):
            if val is not None:
                q += f" AND {col}=?"
                args.append(val)
        out = []
        for job_, phase_, t, ev_, data in self.db.execute(q + " ORDER BY rowid", args):
            d = _loads(data) or {}
            d.update(job=job_, phase=phase_, t=t, ev=ev_)
            out.append(d)
        return out

    def host_samples(self, sid: str) -> list[tuple]:
        return self.db.execute("SELECT t, cpu_busy, load1, psi_some10, throttled, mem_used"
                               " FROM host_samples WHERE session_id=? ORDER BY t", (sid,)).fetchall()

    def gpu_samples(self, sid: str) -> list[tuple]:
        return self.db.execute("SELECT t, gpu, util, mem_used, mem_total, temp_c, power_w, throttle"
                               " FROM gpu_samples WHERE session_id=? ORDER BY t, gpu",
                               (sid,)).fetchall()

    def job_samples(self, sid: str, job: str | None = None) -> list[tuple]:
        q = ("SELECT t, job, phase, cpu_cores, rss, nprocs, gpu_mem, stall, step_time,"
             " samples_per_s FROM job_samples WHERE session_id=?")
        args = [sid]
        if job is not None:
            q += " AND job=?"
            args.append(job)
        return self.db.execute(q + " ORDER BY t", args).fetchall()

    # --- aggregated reads (reports: a 24-hour session is summarised in SQL, not in Python) ----
    def sample_span(self, sid: str) -> tuple[float, float, int] | None:
        """(first t, last t, count) of the session's host samples (one per tick), or None."""
        r = self.db.execute("SELECT MIN(t), MAX(t), COUNT(*) FROM host_samples WHERE session_id=?",
                            (sid,)).fetchone()
        return None if r is None or r[0] is None else (r[0], r[1], r[2])

    def host_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[tuple]:
        """Host samples averaged per time bucket [t0 + k*width, t0 + (k+1)*width).

        Rows (k, mean t, cpu_busy, load1, psi_some10, throttled, mem_used, n), ordered by k;
        a mean over no known values is None; empty buckets have no row. `every_s` > 1 reads
        only the samples of every `every_s`-th second (long sessions: means of a subsample)."""
        return self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS k, AVG(t), AVG(cpu_busy), AVG(load1),"
            " AVG(psi_some10), AVG(throttled), AVG(mem_used), COUNT(*) FROM host_samples"
            " WHERE session_id=? AND CAST(t - ? AS INTEGER) % ? = 0 GROUP BY k ORDER BY k",
            (t0, width, sid, t0, max(1, int(every_s)))).fetchall()

    def gpu_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[tuple]:
        """GPU samples averaged per time bucket and GPU (see `host_series`).

        Rows (k, gpu, mean t, util, mem_used, max mem_total, temp_c, power_w, n), by k, gpu."""
        return self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS k, gpu, AVG(t), AVG(util), AVG(mem_used),"
            " MAX(mem_total), AVG(temp_c), AVG(power_w), COUNT(*) FROM gpu_samples"
            " WHERE session_id=? AND CAST(t - ? AS INTEGER) % ? = 0 GROUP BY k, gpu"
            " ORDER BY k, gpu", (t0, width, sid, t0, max(1, int(every_s)))).fetchall()

    def job_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[tuple]:
        """Job samples averaged per time bucket and job (see `host_series`).

        Rows (k, job, mean t, cpu_cores, stall, step_time, samples_per_s, max rss, max gpu_mem,
        n), ordered by k, job."""
        return self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS k, job, AVG(t), AVG(cpu_cores), AVG(stall),"
            " AVG(step_time), AVG(samples_per_s), MAX(rss), MAX(gpu_mem), COUNT(*)"
            " FROM job_samples WHERE session_id=? AND CAST(t - ? AS INTEGER) % ? = 0"
            " GROUP BY k, job ORDER BY k, job",
            (t0, width, sid, t0, max(1, int(every_s)))).fetchall()

    def job_sample_stats(self, sid: str, job: str, phase: str,
                         t_from: float | None = None) -> tuple:
        """(mean cpu_cores over samples at t >= t_from, max rss, max gpu_mem) of a job's
        samples in `phase` (unknown values skipped; None where none is known)."""
        return self.db.execute(
            "SELECT AVG(CASE WHEN t >= ? THEN cpu_cores END), MAX(rss), MAX(gpu_mem)"
            " FROM job_samples WHERE session_id=? AND job=? AND phase=?",
            (-1e300 if t_from is None else t_from, sid, job, phase)).fetchone()

    def first_event_rowid(self, sid: str, job: str, ev: str, phase: str) -> int | None:
        """Row id of the job's first `ev` event in `phase` (e.g. the co-run "started")."""
        r = self.db.execute("SELECT MIN(rowid) FROM events WHERE session_id=? AND job=? AND ev=?"
                            " AND phase=?", (sid, job, ev, phase)).fetchone()
        return r[0] if r else None

    @staticmethod
    def _steps_where(phase: str, after_rowid: int | None) -> tuple[str, tuple]:
        # After a row id (the co-run "started" event: the engine writes a job's events in
        # order and the co-run is its last run), the index alone answers; else filter phase.
        if after_rowid is not None:
            return "rowid > ?", (after_rowid,)
        return "phase = ?", (phase,)

    def step_count(self, sid: str, job: str, phase: str, after_rowid: int | None = None) -> int:
        """Number of the job's step events in `phase` (or: after row `after_rowid`)."""
        cond, args = self._steps_where(phase, after_rowid)
        return self.db.execute(f"SELECT COUNT(*) FROM events WHERE session_id=? AND job=?"
                               f" AND ev='step' AND {cond}", (sid, job, *args)).fetchone()[0]

    def step_rows(self, sid: str, job: str, phase: str, offset: int = 0, every: int = 1,
                  after_rowid: int | None = None) -> list[tuple]:
        """(t, t_step, t_data, samples) of a job's step events in `phase` (or: after row
        `after_rowid`), in order, skipping the first `offset` and then keeping every
        `every`-th; the JSON fields are read in SQL, for the kept rows only."""
        cond, args = self._steps_where(phase, after_rowid)
        where = f"WHERE session_id=? AND job=? AND ev='step' AND {cond}"
        cols = ("t, json_extract(data, '$.t_step'), json_extract(data, '$.t_data'),"
                " json_extract(data, '$.samples')")
        if every <= 1:
            return self.db.execute(f"SELECT {cols} FROM events {where} ORDER BY rowid"
                                   " LIMIT -1 OFFSET ?", (sid, job, *args, offset)).fetchall()
        ids = [r for (r,) in self.db.execute(f"SELECT rowid FROM events {where} ORDER BY rowid",
                                             (sid, job, *args))][offset::every]
        return self.db.execute(f"SELECT {cols} FROM events WHERE rowid IN"
                               " (SELECT value FROM json_each(?)) ORDER BY rowid",
                               (json.dumps(ids),)).fetchall()

    def events_of(self, sid: str, kinds: tuple[str, ...]) -> list[dict]:
        """Events of these kinds (e.g. failed, note, baseline), in order; like `events`."""
        marks = ",".join("?" * len(kinds))
        out = []
        for job_, phase_, t, ev_, data in self.db.execute(
                "SELECT job, phase, t, ev, data FROM events WHERE session_id=? AND ev IN"
                f" ({marks}) ORDER BY rowid", (sid, *kinds)):
            d = _loads(data) or {}
            d.update(job=job_, phase=phase_, t=t, ev=ev_)
            out.append(d)
        return out

    def session_stats(self) -> dict[str, dict]:
        """Per session id: {"jobs": count, "heartbeat": last heartbeat time} (for listings)."""
        out = {sid: {"jobs": 0, "heartbeat": hb}
               for sid, hb in self.db.execute("SELECT id, heartbeat FROM sessions")}
        for sid, n in self.db.execute("SELECT session_id, COUNT(*) FROM jobs GROUP BY session_id"):
            if sid in out:
                out[sid]["jobs"] = n
        return out

    def baseline(self, fingerprint: str) -> dict | None:
        r = self.db.execute("SELECT data FROM baselines WHERE fingerprint=?",
                            (fingerprint,)).fetchone()
        return _loads(r[0]) if r else None


def _owner_gone(pid: int | None, host: str | None, heartbeat: float | None) -> bool:
    if heartbeat is not None and time.time() - heartbeat < STALE_S:
        return False
    if host == socket.gethostname() and pid:
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return True
