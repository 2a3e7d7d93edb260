"""CPU wait in every output: serve, the session store (old databases too), exports, TensorBoard,
the headless table."""

from __future__ import annotations

import sqlite3
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputop_dl.present.headless import jobs_table
from gputop_dl.present.prometheus import SnapshotCollector
from gputop_dl.present.report.document import session_json
from gputop_dl.present.report.markdown import render_markdown
from gputop_dl.record.store import Store
from gputop_dl.snapshot import JobSample, Snapshot
from tests.schema_check import check

JOB = JobSample(name="train.py", pid=777, launched=False, pids=(777, 778), cpu_cores=1.5,
                cpu_wait_fraction=0.45, cpu_wait_trainer=0.2, cpu_wait_workers=0.6,
                cpu_throttled_fraction=None, cpu_wait_note=None)


def _samples(collector) -> dict[str, list]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_serve_has_one_cpu_wait_series_per_thread_group_known():
    c = SnapshotCollector(hostname="node1")
    unknown = JobSample(name="other", pid=9, launched=False)
    c.feed(Snapshot(time=time.time(), gpu_status="ok", jobs=(JOB, unknown)))
    got = {(lab["job_name"], lab["threads"]): v
           for lab, v in _samples(c)["gputop_dl_job_cpu_wait_ratio"]}
    assert got == {("train.py", "all"): 0.45, ("train.py", "trainer"): 0.2,
                   ("train.py", "workers"): 0.6}  # unknown: no sample, never a 0
    assert "gputop_dl_job_cpu_throttled_ratio" not in _samples(c)


def _session(store: Store) -> str:
    sid = store.create_session("monitor", file=None, command="gputop-dl", kind="monitor",
                               environment={"cpus": 2}, spec={"interval": 1.0})
    store.upsert_job(sid, "train.py", launched=False, config=None, status="running")
    t0 = time.time() - 10
    for i in range(4):
        j = JobSample(**{**JOB.__dict__, "cpu_wait_fraction": 0.3 + 0.1 * i})
        store.add_job_sample(sid, t0 + i, j, None)
    store.commit()
    return sid


def test_store_exports_and_markdown_carry_cpu_wait(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    sid = _session(store)
    rows = store.job_cpu_wait(sid, "train.py")
    assert [r[1] for r in rows] == pytest.approx([0.3, 0.4, 0.5, 0.6])
    assert rows[0][2:] == (0.2, 0.6, None)
    doc = check(session_json(store, sid))
    cw = doc["jobs"][0]["cpu_wait"]
    assert cw == {"mean": 0.45, "max": 0.6, "trainer": 0.2, "workers": 0.6, "throttled": None,
                  "samples": 4}
    md = render_markdown(doc)
    assert "## CPU wait" in md and "| train.py | 45% | 60% | 20% | 60% | – | 4 |" in md
    store.close()


def test_a_database_from_before_cpu_wait_reads_as_not_recorded(tmp_path):
    path = str(tmp_path / "s.db")
    store = Store(path)
    sid = _session(store)
    store.close()
    db = sqlite3.connect(path)
    for col in ("cpu_wait", "cpu_wait_trainer", "cpu_wait_workers", "cpu_throttled"):
        db.execute(f"ALTER TABLE job_samples DROP COLUMN {col}")
    db.commit()
    db.close()
    ro = Store(path, readonly=True)
    assert ro.job_cpu_wait(sid, "train.py") == [] and ro.job_cpu_wait_means(sid, "train.py") is None
    doc = check(session_json(ro, sid))
    assert doc["jobs"][0]["cpu_wait"] is None and "## CPU wait" not in render_markdown(doc)
    ro.close()
    rw = Store(path)  # opened to write: the columns are added, old rows read NULL
    assert rw.has_column("job_samples", "cpu_wait") and rw.job_cpu_wait_means(sid, "train.py") is None
    rw.close()


def test_tensorboard_has_the_cpu_wait_scalars(tmp_path):
    acc_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                  reason="the tensorboard package (test extra) reads the files back")
    from gputop_dl.present.report.tensorboard import export_tensorboard
    store = Store(str(tmp_path / "s.db"))
    sid = _session(store)
    written = export_tensorboard(store, sid, str(tmp_path / "tb"))
    acc = acc_mod.EventAccumulator(written[0][0], size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"job/cpu_wait", "job/cpu_wait_trainer", "job/cpu_wait_workers"} <= tags
    assert "job/cpu_throttled" not in tags  # never known: never written
    assert "job/io_read_bytes_per_s" not in tags  # no disk figure recorded: none written
    assert [round(e.value, 3) for e in acc.Scalars("job/cpu_wait")] == [0.3, 0.4, 0.5, 0.6]
    store.close()


def test_tensorboard_has_the_disk_scalars(tmp_path):
    acc_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                  reason="the tensorboard package (test extra) reads the files back")
    from gputop_dl.present.report.tensorboard import export_tensorboard
    store = Store(str(tmp_path / "s.db"))
    sid = store.create_session("monitor", file=None, command="gputop-dl", kind="monitor",
                               environment={"cpus": 2}, spec={"interval": 1.0})
    store.upsert_job(sid, "reader.py", launched=False, config=None, status="running")
    t0 = time.time() - 10
    for i in range(3):
        store.add_job_sample(sid, t0 + i, JobSample(
            name="reader.py", pid=7, launched=False, pids=(7,), cpu_cores=0.01,
            io_read_bytes_per_s=1_000_000 * (i + 1), io_wait_fraction=0.9), None)
    store.commit()
    written = export_tensorboard(store, sid, str(tmp_path / "tb"))
    acc = acc_mod.EventAccumulator(written[0][0], size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.value for e in acc.Scalars("job/io_read_bytes_per_s")] == [1e6, 2e6, 3e6]
    assert [round(e.value, 3) for e in acc.Scalars("job/io_wait")] == [0.9, 0.9, 0.9]
    assert "job/major_faults_per_s" not in set(acc.Tags()["scalars"])
    store.close()


def test_headless_table_has_a_cpu_wait_column():
    from rich.console import Console
    con = Console(width=160, record=True)
    con.print(jobs_table(Snapshot(time=0.0, gpu_status="ok", jobs=(JOB,))))
    out = con.export_text()
    assert "CPU wait" in out and "45%" in out
