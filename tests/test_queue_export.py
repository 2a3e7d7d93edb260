"""A queue session in the export: per-job times in the session JSON, the "queue" figures, the Markdown section."""

from __future__ import annotations

import pytest

from gputop_dl.present.report.document import session_json
from gputop_dl.present.report.markdown import render_markdown
from gputop_dl.record.store import Store

SETTINGS = {"policy": "sjf", "slots": 2, "unit": "slot", "cpus": 2.0, "cpu_aware": True,
            "ageing_s": 600.0, "v": 1.0}
# name: (arrival, start, end or None, slots); c was still waiting when the run was stopped
TIMES = {"a": (0.0, 0.0, 4.0, 1), "b": (0.5, 0.5, 2.5, 1), "c": (1.0, 2.5, 3.5, 1), "d": (1.0, None, None, 2)}


def queue_store(tmp_path, kind="queue", with_queue=True) -> tuple[Store, str]:
    st = Store(str(tmp_path / "s.db"))
    sid = st.create_session("q", file="q.toml", command="gputop-dl queue q.toml", kind=kind,
                            environment={"cpus": 2}, spec={"baseline": "measure", "cuda": False,
                                                           **({"queue": SETTINGS} if with_queue else {})})
    t0 = 1000.0
    for name, (arr, start, end, slots) in TIMES.items():
        st.upsert_job(sid, name, launched=True, config={"name": name},
                      status="done" if end is not None else "stopped")
        if not with_queue:
            continue
        evs = [{"ev": "queued", "t": t0 + arr, "arrival_s": arr, "expected_s": 2.0, "gpus": slots,
                "cpu_cores": 0.5, "priority": 0}]
        if start is not None:
            evs.append({"ev": "queue-start", "t": t0 + start, "start_s": start, "on": [0],
                        "wait_s": start - arr, "waited_because": "all 2 slots busy" if start > arr else None})
        if end is not None:
            evs.append({"ev": "queue-end", "t": t0 + end, "end_s": end, "status": "done"})
        st.add_events(sid, name, "queue", evs)
    st.end_session(sid, "interrupted")
    return st, sid


def test_session_json_has_each_jobs_times_and_the_queue_figures(tmp_path):
    st, sid = queue_store(tmp_path)
    data = session_json(st, sid)
    jobs = {j["name"]: j for j in data["jobs"]}
    assert {k: jobs["c"][k] for k in ("arrival_s", "start_s", "end_s", "wait_s", "jct_s")} == \
        {"arrival_s": 1.0, "start_s": 2.5, "end_s": 3.5, "wait_s": 1.5, "jct_s": 2.5}
    assert jobs["c"]["queue"]["waited_because"] == "all 2 slots busy"
    assert {k: jobs["d"][k] for k in ("start_s", "end_s", "wait_s", "jct_s")} == dict.fromkeys(
        ("start_s", "end_s", "wait_s", "jct_s"))
    q = data["queue"]
    assert (q["policy"], q["slots"], q["jobs_ended"]) == ("sjf", 2, 3)
    assert q["makespan_s"] == 4.0
    assert q["mean_jct_s"] == pytest.approx((4.0 + 2.0 + 2.5) / 3, abs=1e-4)
    assert q["mean_wait_s"] == pytest.approx((0 + 0 + 1.5) / 3, abs=1e-4)
    assert q["slot_busy_fraction"] == pytest.approx((4 + 2 + 1) / (2 * 4.0), abs=1e-4)


def test_a_launch_has_no_queue_and_null_job_times(tmp_path):
    st, sid = queue_store(tmp_path, kind="launch", with_queue=False)
    data = session_json(st, sid)
    assert data["queue"] is None
    assert all(j["arrival_s"] is None and "queue" not in j for j in data["jobs"])
    assert "## Queue" not in render_markdown(data)


def test_markdown_has_a_queue_section(tmp_path):
    st, sid = queue_store(tmp_path)
    md = render_markdown(session_json(st, sid))
    section = md.split("## Queue", 1)[1].split("\n## ", 1)[0]
    assert "Policy **sjf** on 2 slots, CPU-aware admission. 3 of 4 jobs ended: makespan 4.0 s, " \
        "mean JCT 2.8 s, mean wait 500 ms, slots busy 88% of the makespan" in section
    assert "| c | done | 1 | 1.0 | 2.5 | 3.5 | 1.5 | 1.0 | 2.5 | 2.0 | all 2 slots busy |" in section
    assert "| d | stopped | 2 | 1.0 | – | – | – | – | – | 2.0 | – |" in section
