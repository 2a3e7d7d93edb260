"""Several writers and readers in one data directory: the store stays whole.

POSIX locks belong to a process: closing any descriptor of sessions.db drops every lock the
process holds on it, SQLite's included, and another process then checkpoints and deletes the
WAL under a live connection. The first tests watch this process's locks in /proc/locks across
every way gputop-dl opens or checks the database; the last runs the real thing (the monitor's
engine recording beside two launches and readers) and checks the database and every session.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from gputop_dl.record.recovery import damage, moved_aside
from gputop_dl.record.schema import SCHEMA_VERSION
from gputop_dl.record.store import Store
from gputop_dl.record.store_open import check_store

LOCKS = Path("/proc/locks")
needs_proc_locks = pytest.mark.skipif(not LOCKS.exists(), reason="needs Linux /proc/locks")


def my_locks(path: str) -> list[str]:
    """This process's POSIX locks on the file at `path` (/proc/locks: "POSIX ... PID maj:min:inode")."""
    ino = os.stat(path).st_ino
    rows = [line.split()[1:] for line in LOCKS.read_text().splitlines()]  # less the list's index
    return sorted(" ".join(r) for r in rows if r[0] == "POSIX" and r[3] == str(os.getpid())
                  and r[4].rsplit(":", 1)[1] == str(ino))


@pytest.fixture
def writer(gdl_home):
    st = Store()
    st.sessions()  # a read: the connection holds its WAL lock from here on
    assert my_locks(st.path), "a WAL connection holds a lock on the database file"
    yield st
    st.close()


@needs_proc_locks
@pytest.mark.parametrize("other", ["readonly store", "second writer", "check_store", "damage",
                                   "moved_aside"])
def test_opening_or_checking_the_database_keeps_this_process_locks(writer, other):
    before = my_locks(writer.path)
    if other == "readonly store":
        Store(readonly=True).close()
    elif other == "second writer":
        Store().close()
    elif other == "check_store":
        check_store(writer.path)
    elif other == "damage":
        assert damage(writer.path) is None
    else:
        assert moved_aside(writer.path, SCHEMA_VERSION) is None
    assert my_locks(writer.path) == before


def test_a_plain_open_and_close_does_drop_them(writer):
    """The mechanism the tests above guard against, shown on this kernel: if this ever stops
    holding, the tests above prove nothing."""
    if not LOCKS.exists():
        pytest.skip("needs Linux /proc/locks")
    with open(writer.path, "rb") as f:
        f.read(100)
    assert my_locks(writer.path) == []


def test_damage_names_garbage_and_truncation_without_opening_the_file(tmp_path):
    db = tmp_path / "x.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [(os.urandom(400),) for _ in range(100)])
    con.commit()
    con.close()
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    why = damage(str(db))
    assert why is not None and f"{len(data) // 2} of {len(data)}" in why
    db.write_bytes(os.urandom(3000))
    assert damage(str(db)) is not None
    db.write_bytes(b"")
    assert damage(str(db)) is None


def _soak():
    spec = importlib.util.spec_from_file_location(
        "store_soak", Path(__file__).parent.parent / "scripts" / "store_soak.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["store_soak"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow("scripts/store_soak.py, loaded at run time, starts a monitor, launches, readers")
def test_the_monitor_two_launches_and_readers_in_one_home_leave_every_session_whole(tmp_path):
    """scripts/store_soak.py's run, twice (the 50-run figure is in docs/validation.md)."""
    soak = _soak()
    for seed in (1, 2):
        assert soak.one_run(str(tmp_path), seed=seed) == []
