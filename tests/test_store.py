"""The session store: schema upgrades, lossless step storage, compact per-core CPU."""

import sqlite3

from gputop_dl.record.schema import SCHEMA_VERSION
from gputop_dl.record.store import Store
from gputop_dl.record.store_samples import unpack_per_cpu
from gputop_dl.record.store_write import pack_per_cpu
from gputop_dl.snapshot import HostSample


def test_a_database_of_another_schema_is_kept_aside_not_rewritten(tmp_path, capsys):
    path = str(tmp_path / "sessions.db")
    old = sqlite3.connect(path)
    old.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
                      "INSERT INTO meta VALUES ('schema', '1');"
                      "CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT);"
                      "INSERT INTO sessions VALUES ('old-session', 'kept');")
    old.commit()
    old.close()
    st = Store(path)
    assert st.sessions() == []
    assert st.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == str(SCHEMA_VERSION)
    st.close()
    kept = sqlite3.connect(str(tmp_path / "sessions.v1.db"))
    assert kept.execute("SELECT name FROM sessions").fetchall() == [("kept",)]
    assert "older gputop-dl" in capsys.readouterr().err


def test_steps_and_other_events_read_back_in_order_and_lossless(tmp_path):
    st = Store(str(tmp_path / "s.db"))
    sid = st.create_session("s", file=None, command="x", kind="launch", environment={})
    st.upsert_job(sid, "a", launched=True, config={"name": "a"}, status="running")
    evs = [{"ev": "started", "t": 1.0, "device": "cpu"},
           {"ev": "step", "t": 2.0, "epoch": 1, "step": 1, "t_data": 0.25, "t_step": 0.5, "samples": 8},
           {"ev": "step", "t": 3.0, "epoch": 1, "step": 2, "t_data": 0.5, "t_step": 1.0, "samples": 8,
            "extra": "kept"},  # an unknown field: stored as a JSON event, not dropped
           {"ev": "epoch", "t": 3.0, "epoch": 1, "time_s": 1.5}]
    st.add_events(sid, "a", "co-run", evs)
    st.add_events(sid, "b", "co-run", [{"ev": "note", "t": 2.5, "message": "job made on demand"}])
    got = st.events(sid)
    assert [(e["job"], e["ev"], e["t"]) for e in got] == [
        ("a", "started", 1.0), ("a", "step", 2.0), ("b", "note", 2.5), ("a", "step", 3.0),
        ("a", "epoch", 3.0)]
    assert got[1] == {"ev": "step", "t": 2.0, "epoch": 1, "step": 1, "t_data": 0.25,
                      "t_step": 0.5, "samples": 8, "job": "a", "phase": "co-run"}
    assert got[3]["extra"] == "kept"
    assert [e["step"] for e in st.events(sid, job="a", ev="step", phase="co-run")] == [1, 2]
    assert st.step_count(sid, "a", "co-run") == 1  # the numeric table; see step_rows
    assert st.step_rows(sid, "a", "co-run") == [(2.0, 0.5, 0.25, 8)]
    assert [j["name"] for j in st.jobs(sid)] == ["a", "b"]


def test_per_cpu_is_one_byte_per_core(tmp_path):
    assert unpack_per_cpu(pack_per_cpu((0.0, 0.123, 0.5, 1.0, 1.7, -0.2))) == (0.0, 0.12, 0.5, 1.0, 1.0, 0.0)
    st = Store(str(tmp_path / "s.db"))
    sid = st.create_session("s", file=None, command="x", kind="launch", environment={})
    st.add_host_sample(sid, 10.0, HostSample(cpus=4, cpu_busy=0.5, per_cpu=(0.25, 0.5, 0.75, 1.0)))
    assert st.per_cpu_samples(sid) == [(10.0, (0.25, 0.5, 0.75, 1.0))]
    assert st.host_samples(sid)[0][:2] == (10.0, 0.5)


def test_a_found_jobs_samples_are_kept_under_the_name_it_was_recorded_by(tmp_path):
    """The monitor records each found job under one name for its life: a later job of an ended
    job's name gets "name (PID)", and a live name that changes as other copies come and go (the
    tell-apart names) does not move its samples to another job."""
    from gputop_dl.engine.recorder import Recorder
    from gputop_dl.snapshot import JobSample

    def job(name, pid, cores):
        return JobSample(name=name, pid=pid, launched=False, pids=(pid,), status="running",
                         cpu_cores=cores)

    rec = Recorder(str(tmp_path / "s.db"))
    assert rec.open_monitor("gputop-dl", {}, 1.0)
    sid = rec.session_id
    rec.found(1.0, (job("train.py", 10, 1.0),))
    rec.found(2.0, (job("train.py", 10, 1.0), job("train.py 09:30:12", 20, 2.0)))
    rec.found(3.0, (job("train.py", 20, 2.0),))  # 10 ended: 20 now shows the plain name
    rec.found(4.0, ())
    rec.found(5.0, (job("train.py", 30, 3.0),))  # a later job of an ended job's name
    rec.close("finished", None)
    st = Store(str(tmp_path / "s.db"))
    names = [j["name"] for j in st.jobs(sid)]
    assert names == ["train.py", "train.py 09:30:12", "train.py (30)"]
    by_job: dict[str, list] = {}
    for t, name, _phase, cores, *_ in st.job_samples(sid):
        by_job.setdefault(name, []).append((t, cores))
    assert by_job == {"train.py": [(1.0, 1.0), (2.0, 1.0)],
                      "train.py 09:30:12": [(2.0, 2.0), (3.0, 2.0)],
                      "train.py (30)": [(5.0, 3.0)]}
