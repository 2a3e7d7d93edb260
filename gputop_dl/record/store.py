"""Session store: SQLite (WAL) under the user data directory, written as the run goes.

One connection per thread. The writer commits once per tick, so a `kill -9` of gputop-dl
loses at most the last tick; such a session reads back as "interrupted" (its owner PID is gone
on this host, or its heartbeat is stale when it was recorded elsewhere). Samples are stored in narrow tables, not as JSON blobs, to keep a
24-hour session small. The tables, the columns added since and opening a database file (read
only, or to write: set-up and migration) are `record/schema.py`.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The data directory and corruption recovery live in their own modules; their public names
# are re-exported here, where the rest of gputop-dl imports them from.
from gputop_dl.record.paths import (  # noqa: F401
    ENV_HOME, StoreError, create_private, data_dir, default_db_path, private, session_work_dir)
from gputop_dl.record.recovery import (  # noqa: F401
    CORRUPT_CODES, damage, is_corrupt, move_corrupt_aside, moved_aside)
from gputop_dl.record.schema import (
    JOB_SAMPLE_ADDED, dumps, loads, open_for_writing, open_readonly, redacted_info, redacted_spec)
from gputop_dl.snapshot import GpuSample, HostSample, JobSample
from gputop_dl.workload import redact_line, redact_secrets

SESSION_COLS = ("id, name, file, command, kind, started, ended, state, heartbeat, owner_pid,"
                " owner_host, environment, verdict, spec")
STEP_FIELDS = ("epoch", "step", "t_data", "t_step", "samples")
PHASE_COLS = ("ph_h2d", "ph_forward", "ph_backward", "ph_optimizer")  # steps: the step's phases
PHASE_KEYS = ("ph", "rank", "ph_clock", "ph_dropped")  # a step event's keys that go to them

STALE_S = 15.0  # a "running" session of another host whose heartbeat is older than this


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def pack_per_cpu(per_cpu: Iterable[float]) -> bytes:
    """Per-core busy fractions (0..1) as one byte per core, in whole percent."""
    return bytes(max(0, min(100, round(v * 100))) for v in per_cpu)


def unpack_per_cpu(blob: bytes | None) -> tuple[float, ...]:
    return tuple(b / 100 for b in blob) if blob else ()


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

    def __init__(self, path: str | None = None, readonly: bool = False):
        """`readonly` (listings, exports): read what is there, write and set up nothing.

        Otherwise a database of another schema or a damaged one is renamed (kept) and a new
        one started; a database that cannot be opened is a StoreError naming it."""
        self.path = path or default_db_path(writable=not readonly)
        if readonly:
            self.db = open_readonly(self.path)
        else:
            try:
                self.db = open_for_writing(self.path)
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
                if not is_corrupt(exc):
                    raise StoreError(f"{self.path}: cannot open the session database ({exc})") from None
                move_corrupt_aside(self.path, str(exc))
                self.db = open_for_writing(self.path)
        self._sks: dict[str, int] = {}
        self._jks: dict[tuple[str, str], int] = {}
        self._columns: dict[str, set[str]] = {}

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
            (sid, name, file, redact_line(command), kind, now, "running", now, os.getpid(),
             socket.gethostname(), dumps(environment), dumps(spec)))
        self.db.commit()
        return sid

    def heartbeat(self, sid: str, t: float) -> None:
        self.db.execute("UPDATE sessions SET heartbeat=? WHERE id=?", (t, sid))

    def end_session(self, sid: str, state: str, verdict: dict | None = None) -> None:
        self.db.execute("UPDATE sessions SET ended=?, state=?, verdict=? WHERE id=?",
                        (time.time(), state, dumps(verdict), sid))
        self.db.commit()

    def set_verdict(self, sid: str, verdict: dict | None) -> None:
        self.db.execute("UPDATE sessions SET verdict=? WHERE id=?", (dumps(verdict), sid))

    def upsert_job(self, sid: str, name: str, *, launched: bool, config: dict | None,
                   status: str, failure: str | None = None, device: str | None = None,
                   pid: int | None = None, started: float | None = None,
                   ended: float | None = None, info: dict | None = None) -> None:
        self.db.execute(
            "INSERT INTO jobs (session_id, name, launched, config, status, failure, device, pid,"
            " started, ended, info) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(session_id, name) DO UPDATE"
            " SET launched=excluded.launched, config=COALESCE(excluded.config, jobs.config),"
            " status=excluded.status, failure=excluded.failure,"
            " device=COALESCE(excluded.device, jobs.device),"
            " pid=excluded.pid, started=COALESCE(jobs.started, excluded.started),"
            " ended=excluded.ended, info=COALESCE(excluded.info, jobs.info)",
            (sid, name, int(launched), dumps(config), status, failure, device, pid, started,
             ended, dumps(info)))

    def add_events(self, sid: str, job: str, phase: str, events: list[dict]) -> None:
        jk = self._jk(sid, job, create=True)
        steps, rows = [], []
        phased: list[tuple[Any, ...]] = []  # steps with phases (issue 22)
        for e in events:
            if e.get("ev") == "rank_step":  # every rank's steps are a live view, not recorded
                continue
            if e.get("ev") == "step" and set(e) <= {"ev", "t", *STEP_FIELDS} and not phased:
                steps.append((jk, phase, e.get("t"), *(e.get(k) for k in STEP_FIELDS)))
            elif (e.get("ev") == "step" and set(e) <= {"ev", "t", *STEP_FIELDS, *PHASE_KEYS}
                  and isinstance(e.get("ph", {}), dict) and self.has_column("steps", "ph_cuda")):
                # (once one step of the batch has phases, the later ones go this way too, so
                # the rows keep their order)
                ph = e.get("ph") or {}
                phased.append((jk, phase, e.get("t"), *(e.get(k) for k in STEP_FIELDS),
                               *(ph.get(c[3:]) for c in PHASE_COLS), e.get("rank"),
                               int(e.get("ph_clock") == "cuda") if "ph" in e else None))
            else:
                data = {k: v for k, v in e.items() if k not in ("ev", "t")}
                rows.append((jk, phase, e.get("t"), e.get("ev"), dumps(data)))
        if steps:
            self.db.executemany(f"INSERT INTO steps (jk, phase, t, {', '.join(STEP_FIELDS)})"
                                " VALUES (?,?,?,?,?,?,?,?)", steps)  # (+ ADDED_COLUMNS: NULL)
        if phased:
            cols = ("jk", "phase", "t", *STEP_FIELDS, *PHASE_COLS, "rank", "ph_cuda")
            self.db.executemany(f"INSERT INTO steps ({', '.join(cols)}) VALUES "
                                f"({','.join('?' * len(cols))})", phased)
        if rows:
            self.db.executemany("INSERT INTO events VALUES (?,?,?,?,?)", rows)

    def add_host_sample(self, sid: str, t: float, h: HostSample) -> None:
        self.db.execute("INSERT OR REPLACE INTO host_samples VALUES (?,?,?,?,?,?,?,?)",
                        (self._sk(sid), t, h.cpu_busy, h.load1, h.cpu_pressure_some10,
                         h.cgroup_throttled_frac, h.mem_used, pack_per_cpu(h.per_cpu)))

    def add_gpu_samples(self, sid: str, t: float, gpus: Iterable[GpuSample]) -> None:
        sk = self._sk(sid)
        self.db.executemany(
            "INSERT OR REPLACE INTO gpu_samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(sk, t, g.index, g.util, g.mem_used, g.mem_total, g.temp_c, g.power_w,
              g.sm_clock_mhz, ",".join(g.throttle_reasons) or None, g.error) for g in gpus])

    def add_job_sample(self, sid: str, t: float, j: JobSample, phase: str | None,
                       name: str | None = None) -> None:
        """One tick of job `j`, kept under `name` (default: `j.name`): the name the job's row
        was recorded by, where the live name can change (found jobs)."""
        cols = "".join(f", {c}" for c, _ in JOB_SAMPLE_ADDED)
        self.db.execute(
            "INSERT OR REPLACE INTO job_samples (jk, t, phase, cpu_cores, rss, nprocs, gpu_mem,"
            f" stall, step_time, samples_per_s{cols}) VALUES"
            f" (?,?,?,?,?,?,?,?,?,?{',?' * len(JOB_SAMPLE_ADDED)})",
            (self._jk(sid, name or j.name, create=True), t, phase, j.cpu_cores, j.rss, len(j.pids),
             j.gpu_mem, j.stall_fraction, j.step_time_s, j.samples_per_s,
             *(getattr(j, a, None) for _, a in JOB_SAMPLE_ADDED)))

    def save_baseline(self, fingerprint: str, sid: str, job: str, data: dict) -> None:
        self.db.execute("INSERT OR REPLACE INTO baselines VALUES (?,?,?,?,?)",
                        (fingerprint, time.time(), sid, job, dumps(data)))

    def save_machine(self, profile: dict) -> None:
        """Keep a machine profile (gputop-dl.machine/1) and commit."""
        self.db.execute("INSERT INTO machine_profiles VALUES (?,?,?,?)",
                        (profile.get("created"), profile.get("host"), int(bool(profile.get("quick"))),
                         dumps(profile)))
        self.db.commit()

    # --- reading -------------------------------------------------------------------------
    def latest_machine(self, host: str | None = None) -> dict | None:
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

    def jobs(self, sid: str) -> list[dict]:
        cur = self.db.execute("SELECT name, launched, config, status, failure, device, pid,"
                              " started, ended, info FROM jobs WHERE session_id=? ORDER BY rowid",
                              (sid,))
        out = []
        for name, launched, config, status, failure, device, pid, started, ended, info in cur:
            out.append({"name": name, "launched": bool(launched),
                        "config": redact_secrets(loads(config)),  # also what older versions kept
                        "status": status, "failure": failure, "device": device, "pid": pid,
                        "started": started, "ended": ended, "info": redacted_info(loads(info))})
        return out

    def events(self, sid: str, job: str | None = None, ev: str | None = None,
               phase: str | None = None) -> list[dict]:
        """Recorded events as the trainer sent them (plus job and phase), in time order."""
        names = self._names_of(sid, job)
        if not names:
            return []
        marks = ",".join("?" * len(names))
        out: list[tuple] = []
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

    def host_samples(self, sid: str) -> list[tuple]:
        return self.db.execute("SELECT t, cpu_busy, load1, psi_some10, throttled, mem_used"
                               " FROM host_samples WHERE sk=? ORDER BY t",
                               (self._sk(sid),)).fetchall()

    def per_cpu_samples(self, sid: str) -> list[tuple[float, tuple[float, ...]]]:
        """(t, per-core busy fractions) of every host sample."""
        return [(t, unpack_per_cpu(b)) for t, b in self.db.execute(
            "SELECT t, per_cpu FROM host_samples WHERE sk=? ORDER BY t", (self._sk(sid),))]

    def gpu_samples(self, sid: str) -> list[tuple]:
        return self.db.execute("SELECT t, gpu, util, mem_used, mem_total, temp_c, power_w, throttle"
                               " FROM gpu_samples WHERE sk=? ORDER BY t, gpu",
                               (self._sk(sid),)).fetchall()

    def job_samples(self, sid: str, job: str | None = None) -> list[tuple]:
        """(t, job, phase, cpu_cores, rss, nprocs, gpu_mem, stall, step_time, samples_per_s)."""
        names = self._names_of(sid, job)
        out = []
        for jk, name in names.items():
            out += [(t, name, *rest) for t, *rest in self.db.execute(
                "SELECT t, phase, cpu_cores, rss, nprocs, gpu_mem, stall, step_time,"
                " samples_per_s FROM job_samples WHERE jk=?", (jk,))]
        out.sort(key=lambda r: r[0])
        return out

    # CPU wait (issue 21, branch cpuwait) ------------------------------------------------------
    def job_cpu_wait(self, sid: str, job: str) -> list[tuple]:
        """(t, cpu_wait, trainer, workers, throttled) of a job's samples, in time order; [] for a
        database recorded before CPU wait was (no such columns)."""
        if not self.has_column("job_samples", "cpu_wait"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute(
            "SELECT t, cpu_wait, cpu_wait_trainer, cpu_wait_workers, cpu_throttled FROM job_samples"
            " WHERE jk=? ORDER BY t", (jk,)).fetchall()

    def job_cpu_wait_means(self, sid: str, job: str) -> tuple | None:
        """(mean cpu_wait, trainer, workers, throttled, max cpu_wait, samples with a figure) of a
        job's samples; None for a database without the columns or a job with no figure."""
        if not self.has_column("job_samples", "cpu_wait"):
            return None
        jk = self._jk(sid, job)
        if jk is None:
            return None
        r = self.db.execute(
            "SELECT AVG(cpu_wait), AVG(cpu_wait_trainer), AVG(cpu_wait_workers),"
            " AVG(cpu_throttled), MAX(cpu_wait), COUNT(cpu_wait) FROM job_samples WHERE jk=?",
            (jk,)).fetchone()
        return None if r is None or not r[5] else tuple(r)

    def job_disk(self, sid: str, job: str) -> list[tuple]:
        """(t, io_read, io_wait, major_faults) of a job's samples, in time order (issue 32); []
        for a database recorded before the disk was (no such columns)."""
        if not self.has_column("job_samples", "io_read"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute(
            "SELECT t, io_read, io_wait, major_faults FROM job_samples WHERE jk=? ORDER BY t",
            (jk,)).fetchall()

    def job_disk_means(self, sid: str, job: str) -> tuple | None:
        """(mean io_read, max io_read, mean io_wait, mean major_faults, samples with a read
        figure) of a job's samples (issue 32); None for a database without the columns or a
        job with no figure."""
        if not self.has_column("job_samples", "io_read"):
            return None
        jk = self._jk(sid, job)
        if jk is None:
            return None
        r = self.db.execute(
            "SELECT AVG(io_read), MAX(io_read), AVG(io_wait), AVG(major_faults), COUNT(io_read)"
            " FROM job_samples WHERE jk=?", (jk,)).fetchone()
        return None if r is None or not r[4] else tuple(r)

    def job_memory(self, sid: str, job: str) -> list[tuple]:
        """(t, mem_refault, mem_wait) of a job's samples, in time order (issue 32); [] for a
        database recorded before memory was (no such columns)."""
        if not self.has_column("job_samples", "mem_refault"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute("SELECT t, mem_refault, mem_wait FROM job_samples WHERE jk=? "
                               "ORDER BY t", (jk,)).fetchall()

    def job_memory_means(self, sid: str, job: str) -> tuple | None:
        """(mean refaults, max refaults, mean memory wait, samples with a refault figure) of a
        job's samples (issue 32); None without the columns or with no figure."""
        if not self.has_column("job_samples", "mem_refault"):
            return None
        jk = self._jk(sid, job)
        if jk is None:
            return None
        r = self.db.execute("SELECT AVG(mem_refault), MAX(mem_refault), AVG(mem_wait), "
                            "COUNT(mem_refault) FROM job_samples WHERE jk=?", (jk,)).fetchone()
        return None if r is None or not r[3] else tuple(r)

    # --- aggregated reads (reports: a 24-hour session is summarised in SQL, not in Python) ----
    def sample_span(self, sid: str) -> tuple[float, float, int] | None:
        """(first t, last t, count) of the session's host samples (one per tick), or None."""
        r = self.db.execute("SELECT MIN(t), MAX(t), COUNT(*) FROM host_samples WHERE sk=?",
                            (self._sk(sid),)).fetchone()
        return None if r is None or r[0] is None else (r[0], r[1], r[2])

    def host_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[tuple]:
        """Host samples averaged per time bucket [t0 + k*width, t0 + (k+1)*width).

        Rows (k, mean t, cpu_busy, load1, psi_some10, throttled, mem_used, n), ordered by k;
        a mean over no known values is None; empty buckets have no row. `every_s` > 1 reads
        only the samples of every `every_s`-th second (long sessions: means of a subsample)."""
        return self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS k, AVG(t), AVG(cpu_busy), AVG(load1),"
            " AVG(psi_some10), AVG(throttled), AVG(mem_used), COUNT(*) FROM host_samples"
            " WHERE sk=? AND CAST(t - ? AS INTEGER) % ? = 0 GROUP BY k ORDER BY k",
            (t0, width, self._sk(sid), t0, max(1, int(every_s)))).fetchall()

    def gpu_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[tuple]:
        """GPU samples averaged per time bucket and GPU (see `host_series`).

        Rows (k, gpu, mean t, util, mem_used, max mem_total, temp_c, power_w, n), by k, gpu."""
        return self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS k, gpu, AVG(t), AVG(util), AVG(mem_used),"
            " MAX(mem_total), AVG(temp_c), AVG(power_w), COUNT(*) FROM gpu_samples"
            " WHERE sk=? AND CAST(t - ? AS INTEGER) % ? = 0 GROUP BY k, gpu"
            " ORDER BY k, gpu", (t0, width, self._sk(sid), t0, max(1, int(every_s)))).fetchall()

    def job_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[tuple]:
        """Job samples averaged per time bucket and job (see `host_series`).

        Rows (k, job, mean t, cpu_cores, stall, step_time, samples_per_s, max rss, max gpu_mem,
        n), ordered by k, job."""
        out = []
        for jk, name in self._jks_of(sid).items():
            out += [(k, name, *rest) for k, *rest in self.db.execute(
                "SELECT CAST((t - ?) / ? AS INTEGER) AS k, AVG(t), AVG(cpu_cores), AVG(stall),"
                " AVG(step_time), AVG(samples_per_s), MAX(rss), MAX(gpu_mem), COUNT(*)"
                " FROM job_samples WHERE jk=? AND CAST(t - ? AS INTEGER) % ? = 0"
                " GROUP BY k", (t0, width, jk, t0, max(1, int(every_s))))]
        out.sort(key=lambda r: (r[0], r[1]))
        return out

    def job_sample_stats(self, sid: str, job: str, phase: str,
                         t_from: float | None = None) -> tuple:
        """(mean cpu_cores over samples at t >= t_from, max rss, max gpu_mem, mean stall) of a
        job's samples in `phase` (unknown values skipped; None where none is known)."""
        row: tuple = self.db.execute(
            "SELECT AVG(CASE WHEN t >= ? THEN cpu_cores END), MAX(rss), MAX(gpu_mem), AVG(stall)"
            " FROM job_samples WHERE jk=? AND phase=?",
            (-1e300 if t_from is None else t_from, self._jk(sid, job), phase)).fetchone()
        return row

    def step_count(self, sid: str, job: str, phase: str) -> int:
        """Number of the job's step events in `phase`."""
        return int(self.db.execute("SELECT COUNT(*) FROM steps WHERE jk=? AND phase=?",
                                   (self._jk(sid, job), phase)).fetchone()[0])

    def step_rows(self, sid: str, job: str, phase: str, offset: int = 0,
                  every: int = 1) -> list[tuple]:
        """(t, t_step, t_data, samples) of a job's step events in `phase`, in order, skipping
        the first `offset` and then keeping every `every`-th."""
        rows = self.db.execute(
            "SELECT t, t_step, t_data, samples FROM steps WHERE jk=? AND phase=? ORDER BY rowid"
            " LIMIT -1 OFFSET ?", (self._jk(sid, job), phase, offset))
        if every <= 1:
            return rows.fetchall()
        return [r for i, r in enumerate(rows) if i % every == 0]

    def phase_rows(self, sid: str, job: str, phase: str, offset: int = 0,
                   every: int = 1) -> list[dict]:
        """A job's steps in `phase` with their phases, as step events (t, t_step, t_data, and
        `ph` when the step's phases were recorded), skipping the first `offset` and then
        keeping every `every`-th; [] in a database without the columns."""
        if not self.has_column("steps", "ph_cuda"):
            return []
        out = []
        for i, (t, t_step, t_data, cuda, *vals) in enumerate(self.db.execute(
                f"SELECT t, t_step, t_data, ph_cuda, {', '.join(PHASE_COLS)} FROM steps"
                " WHERE jk=? AND phase=? ORDER BY rowid LIMIT -1 OFFSET ?",
                (self._jk(sid, job), phase, offset))):
            if i % every:
                continue
            d = {"t": t, "t_step": t_step, "t_data": t_data}
            if cuda is not None:
                d["ph"] = {c[3:]: v for c, v in zip(PHASE_COLS, vals) if v is not None}
            out.append(d)
        return out

    def events_of(self, sid: str, kinds: tuple[str, ...]) -> list[dict]:
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

    def session_stats(self) -> dict[str, dict]:
        """Per session id: {"jobs": count, "heartbeat": last heartbeat time} (for listings)."""
        out = {sid: {"jobs": 0, "heartbeat": hb}
               for sid, hb in self.db.execute("SELECT id, heartbeat FROM sessions")}
        for sid, n in self.db.execute("SELECT session_id, COUNT(*) FROM jobs GROUP BY session_id"):
            if sid in out:
                out[sid]["jobs"] = n
        return out

    def solo_profile(self, fingerprint: str) -> dict | None:
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

    def baseline(self, fingerprint: str) -> dict | None:
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


def check_store(path: str | None = None) -> None:
    """Before an engine starts: the data directory and the database can be written (a damaged
    database is moved aside here, with its line); else StoreError, one line, exit 2."""
    Store(path).close()
