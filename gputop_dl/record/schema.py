"""The session database on disk: its tables, the columns added since, and opening a file.

`open_readonly` reads what is there and sets up nothing; `open_for_writing` keeps a damaged or
other-schema file aside (record/recovery.py), creates the tables, adds the columns added since
schema 2 and scrubs the secrets an older gputop-dl stored, once. The reads and writes on an open
database are `record/store.py`'s `Store`.
"""

from __future__ import annotations

import glob
import json
import os
import sqlite3
import stat
import time
import sys
import urllib.parse
from typing import Any

from gputop_dl.record.paths import StoreError, private
from gputop_dl.record.recovery import damage, move_corrupt_aside, moved_aside

SCHEMA_VERSION = 2

# Why this shape (docs/architecture.md, "Session store"): a 24-hour, 8-GPU, 10-job session
# writes ~2.5 M rows. Rows name their session and job by small integer keys (`sk`, `jk`), not
# by the 22-character session id and job name; the per-tick sample tables are WITHOUT ROWID,
# clustered on their natural key, so they need no second index; step events, 95 % of all
# events, are a numeric table instead of JSON text; per-core CPU is one byte per core.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS sessions (
    sk INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, name TEXT, file TEXT, command TEXT,
    kind TEXT, started REAL, ended REAL, state TEXT, heartbeat REAL, owner_pid INTEGER,
    owner_host TEXT, environment TEXT, verdict TEXT, spec TEXT);
CREATE TABLE IF NOT EXISTS jobs (
    jk INTEGER PRIMARY KEY, session_id TEXT NOT NULL, name TEXT NOT NULL, launched INTEGER,
    config TEXT, status TEXT, failure TEXT, device TEXT, pid INTEGER, started REAL, ended REAL,
    info TEXT, UNIQUE (session_id, name));
CREATE TABLE IF NOT EXISTS events (jk INTEGER, phase TEXT, t REAL, ev TEXT, data TEXT);
CREATE INDEX IF NOT EXISTS events_by_job ON events (jk, ev);
CREATE TABLE IF NOT EXISTS steps (
    jk INTEGER, phase TEXT, t REAL, epoch INTEGER, step INTEGER, t_data REAL, t_step REAL,
    samples INTEGER);
CREATE INDEX IF NOT EXISTS steps_by_job ON steps (jk, phase);
CREATE TABLE IF NOT EXISTS baselines (
    fingerprint TEXT PRIMARY KEY, created REAL, session_id TEXT, job TEXT, data TEXT);
CREATE TABLE IF NOT EXISTS host_samples (
    sk INTEGER, t REAL, cpu_busy REAL, load1 REAL, psi_some10 REAL, throttled REAL,
    mem_used INTEGER, per_cpu BLOB, PRIMARY KEY (sk, t)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gpu_samples (
    sk INTEGER, t REAL, gpu INTEGER, util REAL, mem_used INTEGER, mem_total INTEGER,
    temp_c REAL, power_w REAL, sm_clock INTEGER, throttle TEXT, error TEXT,
    PRIMARY KEY (sk, t, gpu)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_samples (
    jk INTEGER, t REAL, phase TEXT, cpu_cores REAL, rss INTEGER, nprocs INTEGER,
    gpu_mem INTEGER, stall REAL, step_time REAL, samples_per_s REAL,
    PRIMARY KEY (jk, t)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS machine_profiles (created REAL, host TEXT, quick INTEGER, data TEXT);
CREATE TABLE IF NOT EXISTS verdict_changes (
    sk INTEGER, t REAL, from_kind TEXT, to_kind TEXT, reason TEXT, worst_slowdown REAL);
CREATE INDEX IF NOT EXISTS verdict_changes_by_session ON verdict_changes (sk, t);
CREATE TABLE IF NOT EXISTS pace_refs (
    fingerprint TEXT PRIMARY KEY, until REAL, host TEXT, command TEXT, data TEXT);
"""
# Tables added after schema 2 are in SCHEMA with IF NOT EXISTS: a schema-2 database opened to
# write gets them; a reader of one written before asks `Store.has_table` first.
# machine_profiles (`gputop-dl machine`): one row per profile, JSON of
# gputop-dl.machine/1
# verdict_changes: one row per change of a session's verdict kind (the first verdict
# is a change from NULL), written only when the kind changes, never per tick
# pace_refs (engine/pace_refs.py): a found job's readings alone (its loader's cores
# and write calls a second, its step times, its loop counter's pairs of dumps) by the fingerprint of its command, directory, files,
# interpreter and machine; one row per fingerprint, replaced as the readings grow
# Columns added after schema 2, as (table, column, SQL type): a database of schema 2 gets them
# by ALTER TABLE ADD COLUMN when it is opened to write (old rows read NULL: "not recorded"), so
# a new figure never costs the user their recorded sessions. Readers ask `has_column` first.
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # step phases (docs/phases.md): seconds in the step, NULL = not seen; the rank in
    # a distributed run; ph_cuda 1 when the GPU phases are CUDA-event times
    ("steps", "ph_h2d", "REAL"), ("steps", "ph_forward", "REAL"),
    ("steps", "ph_backward", "REAL"), ("steps", "ph_optimizer", "REAL"),
    ("steps", "rank", "INTEGER"), ("steps", "ph_cuda", "INTEGER"),
    # 1: this session records its verdict changes; NULL: a session recorded
    # before, whose changes are not known (never "there were none")
    ("sessions", "verdict_history", "INTEGER"),
)
# job_samples columns added after schema 2 that `add_job_sample` writes straight from a
# `JobSample` attribute: (column, attribute); each feature adds its own block
JOB_SAMPLE_ADDED: tuple[tuple[str, str], ...] = ()
# CPU wait: shares 0..1 of the last interval
CPU_WAIT_COLUMNS = (("cpu_wait", "cpu_wait_fraction"), ("cpu_wait_trainer", "cpu_wait_trainer"),
                    ("cpu_wait_workers", "cpu_wait_workers"), ("cpu_throttled", "cpu_throttled_fraction"))
JOB_SAMPLE_ADDED += CPU_WAIT_COLUMNS
ADDED_COLUMNS += tuple(("job_samples", col, "REAL") for col, _ in CPU_WAIT_COLUMNS)
# disk I/O (collect/proc/diskio.py): bytes/s from storage, the share of the live verdict's
# window it waited on I/O, major faults/s
DISK_COLUMNS = (("io_read", "io_read_bytes_per_s"), ("io_wait", "io_wait_fraction"),
                ("major_faults", "major_faults_per_s"))
JOB_SAMPLE_ADDED += DISK_COLUMNS
ADDED_COLUMNS += tuple(("job_samples", col, "REAL") for col, _ in DISK_COLUMNS)
# memory (collect/proc/memory.py): bytes/s of page-cache refaults in the job's cgroup, the
# share of the live verdict's window it waited on re-reads of evicted pages
MEMORY_COLUMNS = (("mem_refault", "mem_refault_bytes_per_s"), ("mem_wait", "memory_wait_fraction"))
JOB_SAMPLE_ADDED += MEMORY_COLUMNS
ADDED_COLUMNS += tuple(("job_samples", col, "REAL") for col, _ in MEMORY_COLUMNS)
# energy (analyse/live/energy.py): the job's GPU joules since its run began, its power, joules per
# step and per epoch, samples per joule, 1 where a shared GPU was split by time share (estimate)
ENERGY_COLUMNS = (("energy", "energy_j"), ("energy_w", "energy_w"),
                  ("energy_step", "energy_per_step_j"), ("energy_epoch", "energy_per_epoch_j"),
                  ("samples_per_j", "samples_per_joule"), ("energy_est", "energy_estimate"))
JOB_SAMPLE_ADDED += ENERGY_COLUMNS
ADDED_COLUMNS += tuple(("job_samples", col, "REAL") for col, _ in ENERGY_COLUMNS)


def dumps(obj: object) -> str | None:
    """A value as a JSON column's text (None stays NULL)."""
    return None if obj is None else json.dumps(obj, separators=(",", ":"))


# A JSON object as stored or read back (an environment, a spec, a verdict, a job's info, an
# event): its shape is its writer's, and older versions wrote other shapes, so readers check it.
JsonObject = dict[str, Any]


def loads(text: str | bytes | None) -> Any:
    """A JSON column's text as the value (NULL reads None); Any: whatever JSON was stored,
    which the reader checks (older versions wrote other shapes). Text that is not JSON (a
    damaged page's bytes; gputop-dl writes JSON only) is a `sqlite3.DatabaseError`, which every
    reader already turns into one line about the damaged database (found by the fuzzer)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise sqlite3.DatabaseError(f"a stored JSON value is damaged ({exc})") from None


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def check_file(path: str) -> os.stat_result | None:
    """The database file's stat (None when there is none); StoreError, one line, for what no
    SQLite database can be: a directory, a FIFO (opening it would block), a device, a socket,
    or a path that cannot be looked at. Checked before any open."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"{path}: cannot be used as the session database ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise StoreError(f"{path}: is {kind}, not a session database file; move it away "
                         "(a `gputop-dl launch` then starts a new database)")
    return st


def lenient_text(raw: bytes) -> str:
    """A TEXT value as read: bytes a damaged page made invalid UTF-8 are shown as U+FFFD, never
    a UnicodeDecodeError out of a query (found by the fuzzer, tests/test_fuzz.py)."""
    return raw.decode("utf-8", "replace")


def open_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection: no WAL switch, no schema set-up, no file created. Without
    write access to the folder and no -shm file to share, SQLite needs `immutable` to read."""
    st = check_file(path)
    if st is None:
        raise StoreError(f"{path}: no session database")
    if st.st_size == 0:
        raise StoreError(f"{path}: an empty file (0 bytes), no session recorded in it; the next "
                         "`gputop-dl launch` starts a new database there")
    uri = "file:" + urllib.parse.quote(os.path.abspath(path))
    why = damage(path)
    if why:
        raise StoreError(f"{path}: not a readable session database ({why}); the next "
                         "`gputop-dl launch` keeps it aside and starts a new one")
    for extra in ("", "&immutable=1"):
        db = sqlite3.connect(f"{uri}?mode=ro{extra}", uri=True, timeout=10.0)
        db.text_factory = lenient_text
        try:
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.OperationalError as exc:
            db.close()
            if "unable to open" in str(exc) and not extra:
                continue
            if "no such table" in str(exc):
                raise StoreError(f"{path}: not a gputop-dl session database") from None
            raise StoreError(f"{path}: cannot read the session database ({exc})") from None
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            db.close()
            raise StoreError(f"{path}: not a readable session database ({exc}); the next "
                             "`gputop-dl launch` keeps it aside and starts a new one") from None
        if row is not None and row[0] != str(SCHEMA_VERSION):
            db.close()
            raise StoreError(f"{path} was written by another gputop-dl (schema {row[0]}); the "
                             "next `gputop-dl launch` keeps it aside and starts a new one")
        return db
    raise AssertionError("unreachable")


BUSY_S = 30.0  # how long a writer waits for another's lock (SQLite's busy timeout) at most


def open_for_writing(path: str) -> sqlite3.Connection:
    """A connection that writes: a damaged database or one of another schema kept aside first,
    a new one created 0600, WAL, the tables and the columns added since set up, the secrets
    scrubbed once. A file this call created is removed again if the set-up fails (a full
    disk, no write access): never a 0-byte database left behind."""
    st = check_file(path)
    if st is not None and not os.access(path, os.W_OK):
        mode = stat.S_IMODE(st.st_mode)
        raise StoreError(f"{path}: the session database is read-only (mode {mode:04o}); "
                         "nothing can be recorded in it")
    why = damage(path)
    if why:
        move_corrupt_aside(path, why)
    old = moved_aside(path, SCHEMA_VERSION)
    if old:
        sys.stderr.write(f"gputop-dl: {path} was written by an older gputop-dl "
                         f"(schema differs); kept as {old}, starting a new one\n")
    created = not os.path.exists(path)
    if created:  # 0600; SQLite gives its -wal and -shm the same
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:  # another gputop-dl created it just now
            created = False
        except OSError as exc:
            raise StoreError(f"{path}: cannot create the session database ({exc.strerror or exc})") from None
    for suffix in ("", "-wal", "-shm"):  # an older gputop-dl left them 0644
        private(path + suffix)
    deadline = time.monotonic() + BUSY_S
    while True:
        try:
            return _set_up(path)
        except sqlite3.OperationalError as exc:
            # SQLITE_BUSY that SQLite returns without waiting (another gputop-dl switching a
            # new file to WAL, or a stale read snapshot): try again, within the same bound
            if getattr(exc, "sqlite_errorcode", None) == 5 and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            if created:
                _remove_new(path)
            raise
        except BaseException:
            if created:
                _remove_new(path)
            raise


def _set_up(path: str) -> sqlite3.Connection:
    """One try at opening the database to write and setting it up (open_for_writing)."""
    db = sqlite3.connect(path, timeout=BUSY_S)
    db.text_factory = lenient_text
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        new = db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                         (str(SCHEMA_VERSION),)).rowcount == 1
        if new:  # written by this gputop-dl from its first row: nothing older to scrub
            db.executemany("INSERT OR IGNORE INTO meta VALUES (?, '1')",
                           [("env_redacted",), ("args_redacted",)])
        _add_columns(db)
        db.commit()
        if db.execute("SELECT COUNT(*) FROM meta WHERE key IN ('env_redacted', 'args_redacted')"
                      ).fetchone()[0] < 2:
            _scrub_secrets(db, os.path.dirname(path))
    except BaseException:
        db.close()
        raise
    return db


def _remove_new(path: str) -> None:
    """Remove the database file this process just created (and its -wal, -shm) after its
    set-up failed; only while it holds no table (never a database with data)."""
    try:
        db = sqlite3.connect(f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro", uri=True)
        try:
            tables = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name='sessions'").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        tables = 0 if os.path.getsize(path) == 0 else 1
    if tables:
        return
    for suffix in ("-wal", "-shm", ""):
        try:
            os.unlink(path + suffix)
        except OSError:
            pass


def _add_columns(db: sqlite3.Connection) -> None:
    """Give a schema-2 database the columns added since (ADDED_COLUMNS), NULL in old rows."""
    for table, column, kind in ADDED_COLUMNS:
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def redacted_spec(spec: Any) -> Any:
    """A session's spec as read: its workloads' `env` values redacted, whatever wrote it (an
    older gputop-dl stored them in clear)."""
    from gputop_dl.workload import redact_secrets  # not on the first frame's path (open_for_writing)

    if isinstance(spec, dict) and isinstance(spec.get("workloads"), list):
        return dict(spec, workloads=[redact_secrets(w) for w in spec["workloads"]])
    return spec


def redacted_info(info: object) -> JsonObject:
    """A job's info as read: the command line of a found job and the argv of a launched one
    redacted, whatever wrote them (`workload.redact_secrets`'s rule)."""
    from gputop_dl.workload import redact_args, redact_line

    if not isinstance(info, dict):
        return {}
    out: JsonObject = info
    if isinstance(info.get("command"), str) and redact_line(info["command"]) != info["command"]:
        out = dict(out, command=redact_line(info["command"]))
    argv = info.get("argv")
    if isinstance(argv, list) and all(isinstance(a, str) for a in argv) and redact_args(argv) != argv:
        out = dict(out, argv=redact_args(argv))
    return out


def _scrub_secrets(db: sqlite3.Connection, data: str) -> None:
    """Once per database: the `env` values and secret-looking arguments that an older
    gputop-dl kept in clear (jobs' configs and infos, sessions' specs and command lines, the
    jobs' spec files beside the database) replaced by REDACTED (`workload.redact_secrets`),
    with SQLite's secure_delete on so the old text is overwritten, not just unlinked."""
    from gputop_dl.workload import redact_line, redact_secrets

    db.execute("PRAGMA secure_delete=ON")
    for table, col, fix in (("jobs", "config", redact_secrets), ("sessions", "spec", redacted_spec),
                            ("jobs", "info", redacted_info)):
        rows = db.execute(f"SELECT rowid, {col} FROM {table} WHERE {col} LIKE '%\"env\"%'"
                          f" OR {col} LIKE '%\"command\"%'").fetchall()
        for rowid, text in rows:
            try:
                old = json.loads(text)
            except ValueError:
                continue
            new = fix(old)
            if new is not old and new != old:
                db.execute(f"UPDATE {table} SET {col}=? WHERE rowid=?", (dumps(new), rowid))
    for rowid, line in db.execute("SELECT rowid, command FROM sessions").fetchall():
        if isinstance(line, str) and redact_line(line) != line:
            db.execute("UPDATE sessions SET command=? WHERE rowid=?", (redact_line(line), rowid))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('env_redacted', '1')")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('args_redacted', '1')")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA secure_delete=OFF")
    for spec in glob.glob(os.path.join(data, "sessions", "*", "*.json")):
        try:
            with open(spec, encoding="utf-8") as f:
                old = json.load(f)
            new = redact_secrets(old)
            if new is not old:
                with open(spec, "r+", encoding="utf-8") as f:  # in place: the old bytes go
                    f.write(json.dumps(new).ljust(os.path.getsize(spec)))
                    f.truncate()
        except (OSError, ValueError):
            continue
