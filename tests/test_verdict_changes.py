"""The session's verdict over time: each change of the verdict's kind recorded once
(never per tick), exported in the JSON (`verdict_changes`) and the Markdown report (a "Verdict
over time" table, marks on the charts' time axis), and an old session that did not record them
said to be "not recorded", never "no change"."""

from __future__ import annotations

import json
import re
import sqlite3
from types import SimpleNamespace

import pytest

from gputop_dl.analyse.verdict_types import Verdict
from gputop_dl.engine.monitor_plan import MonitorPlan
from gputop_dl.engine.recorder import Recorder
from gputop_dl.present.report import render_markdown, session_json
from gputop_dl.record.store import Store
from gputop_dl.snapshot import HostSample, JobSample
from tests.fakes import reports as fx
from tests.schema_check import check
from tests.test_report import fences, headings, table_with


def _v(kind: str, reason: str = "why\nmore", slowdowns: tuple[float | None, ...] = ()) -> dict:
    return {**Verdict(kind=kind, reason=reason, confidence=0.7).to_json(),
            "jobs": [{"name": f"j{i}", "slowdown": s} for i, s in enumerate(slowdowns)]}


def _rows(path: str) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT COUNT(*) FROM verdict_changes").fetchone()[0]
    finally:
        db.close()


def test_a_change_is_recorded_once_not_per_tick(tmp_path):
    path = str(tmp_path / "s.db")
    rec = Recorder(path)
    assert rec.open_monitor("gputop-dl", {}, 1.0)
    sid = rec.session_id
    for t in range(1, 6):  # five ticks of the same kind: one change, from none
        rec.verdict(_v("parallel", slowdowns=(1.1, None)), float(t))
    rec.verdict(None, 6.0)  # no verdict this tick: the last one stands, no change
    rec.verdict(_v("cpu-bound", "CPU saturated\nsecond line", (2.5, 1.8, float("nan"))), 7.0)
    rec.verdict(_v("cpu-bound"), 8.0)
    rec.verdict(_v("parallel", slowdowns=()), 9.0)
    rec.tick(9.0, HostSample(cpus=2, cpu_busy=0.5), ())
    assert _rows(path) == 3
    rec.close("finished", _v("parallel"))  # the end's verdict: same kind, nothing added
    st = Store(path, readonly=True)
    try:
        assert st.verdict_changes(sid) == [
            {"t": 1.0, "from_": None, "to": "parallel", "reason": "why", "worst_slowdown": 1.1},
            {"t": 7.0, "from_": "parallel", "to": "cpu-bound", "reason": "CPU saturated",
             "worst_slowdown": 2.5},
            {"t": 9.0, "from_": "cpu-bound", "to": "parallel", "reason": "why",
             "worst_slowdown": None}]
    finally:
        st.close()


def test_the_monitor_records_its_live_verdict_only_when_the_kind_changes(tmp_path):
    """MonitorPlan.after_tick judges every tick; the wavering live verdict writes one row per
    change of kind, none for the ticks between."""
    path = str(tmp_path / "s.db")
    rec = Recorder(path)
    plan = MonitorPlan()
    kinds = iter(["parallel"] * 4 + ["cpu-bound"] * 3 + ["parallel"] * 4)
    plan.passive = SimpleNamespace(verdict=lambda *a: (Verdict(next(kinds), "r", 0.5), {}))
    engine = SimpleNamespace(recorder=rec, env={}, interval=1.0, say=lambda *_: None)
    job = JobSample(name="train.py", pid=10, launched=False, pids=(10,), status="running")
    for t in range(11):
        plan.after_tick(engine, 100.0 + t, SimpleNamespace(
            found=(job,), host=HostSample(cpus=2), gpu_processes=(), gpus=()))
        rec.tick(100.0 + t, HostSample(cpus=2), ())
    sid = rec.session_id
    rec.close("finished", plan.verdict)
    st = Store(path, readonly=True)
    try:
        got = [(c["t"], c["from_"], c["to"]) for c in st.verdict_changes(sid) or ()]
    finally:
        st.close()
    assert got == [(100.0, None, "parallel"), (104.0, "parallel", "cpu-bound"),
                   (107.0, "cpu-bound", "parallel")]


@pytest.fixture()
def store(tmp_path):
    s = Store(str(tmp_path / "sessions.db"))
    yield s
    s.close()


def test_parallel_cpu_bound_parallel_in_the_json_and_the_markdown(store):
    sid = fx.make_session(store, ticks=120)
    t0 = store.session(sid).started
    store.add_verdict_change(sid, t0 + 10, None, "parallel", "the jobs keep their pace", 1.05)
    store.add_verdict_change(sid, t0 + 40, "parallel", "cpu-bound", "CPU saturated", 2.5)
    store.add_verdict_change(sid, t0 + 80, "cpu-bound", "parallel", "recovered", None)
    store.commit()
    data = check(json.loads(json.dumps(session_json(store, sid))))
    assert data["verdict_changes_recorded"] is True
    assert [(c["t"] - t0, c["from"], c["to"], c["worst_slowdown"])
            for c in data["verdict_changes"]] == [
        (10, None, "parallel", 1.05), (40, "parallel", "cpu-bound", 2.5),
        (80, "cpu-bound", "parallel", None)]
    text = render_markdown(data)
    assert "Verdict over time" in headings(text)
    tbl = table_with(text, "worst slowdown")
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in tbl["rows"]] == [
        ("+0:10", "(none)", "parallel", "1.05×", "the jobs keep their pace"),
        ("+0:40", "parallel", "cpu-bound", "2.50×", "CPU saturated"),
        ("+1:20", "cpu-bound", "parallel", "–", "recovered")]
    # the two changes between kinds (not the first verdict) are marked on every time chart
    timed = [c for c in fences(text, "mermaid") if "x-axis \"time" in c]
    assert timed
    n = len(data["series"]["t"])
    for c in timed:
        (bars,) = re.findall(r"^\s*bar \[(.*)\]$", c, re.M)
        top = re.search(r"y-axis .* 0 --> (\S+)", c).group(1)
        at = [i for i, v in enumerate(bars.split(", ")) if v != "0"]
        assert len(at) == 2 and all(bars.split(", ")[i] == top for i in at)
        s = data["series"]
        expect = [int((t0 + dt - s["t0"]) / (s["points"] * s["bucket_s"]) * n) for dt in (40, 80)]
        assert at == expect
    assert "parallel → cpu-bound at" in text and "cpu-bound → parallel at" in text
    marks = table_with(text, "step time")["rows"][0]
    # the slowdown's start solid, its end (back to parallel) dashed, in that order
    assert marks[0] == "verdict changed" and marks[1].count("┃") == marks[1].count("╎") == 1
    assert marks[1].index("┃") < marks[1].index("╎")


def _old(path: str, sid: str, *, migrated: bool) -> None:
    """Make the database what an older gputop-dl left: without the table and column (never
    opened by this version), or migrated but with a session recorded before (flag NULL)."""
    db = sqlite3.connect(path)
    if migrated:
        db.execute("UPDATE sessions SET verdict_history=NULL WHERE id=?", (sid,))
    else:
        db.execute("DROP TABLE verdict_changes")
        db.execute("ALTER TABLE sessions DROP COLUMN verdict_history")
    db.commit()
    db.close()


@pytest.mark.parametrize("migrated", [False, True])
def test_an_old_session_exports_its_changes_as_not_recorded(tmp_path, migrated):
    path = str(tmp_path / "sessions.db")
    st = Store(path)
    sid = fx.make_session(st)
    st.close()
    _old(path, sid, migrated=migrated)
    st = Store(path, readonly=True)
    try:
        data = check(json.loads(json.dumps(session_json(st, sid))))
    finally:
        st.close()
    assert data["verdict_changes"] == [] and data["verdict_changes_recorded"] is False
    text = render_markdown(data)
    assert "Not recorded in this session" in text and "No change recorded" not in text
    assert "verdict changed" not in text  # no marks drawn from nothing
    # a JSON export saved by an older gputop-dl (no such keys) reads the same
    old = {k: v for k, v in data.items() if not k.startswith("verdict_changes")}
    assert "Not recorded in this session" in render_markdown(old)


def test_a_session_that_recorded_no_verdict_says_so(store):
    sid = fx.make_session(store, verdict=None)
    text = render_markdown(session_json(store, sid))
    assert "No verdict was reached in this session" in text
