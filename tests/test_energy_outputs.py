"""A job's and a GPU's energy where they show: the Prometheus counters, the jobs table's column
(TUI and console), the details screen's line; unknown is "–" with the reason, never 0 J."""

from __future__ import annotations

import os

import pytest

from gputop_dl.present.energy_text import energy_line
from gputop_dl.present.headless import jobs_table
from gputop_dl.present.prometheus import SnapshotCollector
from gputop_dl.present.tui.jobs_table import COLUMN_KEYS, Palette, job_row
from gputop_dl.snapshot import GpuSample, JobSample, Snapshot, evolve
from gputop_dl.text.fmt import DASH, joules
from tests.test_serve import one, render

GPU = GpuSample(0, name="H100", uuid="GPU-x", power_w=300.0, energy_j=1234.5, energy_since=100.0,
                energy_source="counter", energy_scope="gpu")
MEASURED = JobSample("a", 7, True, pids=(7,), energy_j=900.0, energy_w=300.0,
                     energy_per_step_j=30.0, energy_per_epoch_j=3000.0, samples_per_joule=2.1,
                     energy_estimate=False, energy_source="counter")
SHARED = JobSample("b", 8, False, pids=(8,), energy_j=450.0, energy_w=150.0, energy_estimate=True,
                   energy_source="counter", energy_note="split by SM shares")
UNKNOWN = JobSample("c", 9, False, pids=(9,), energy_note="no GPU energy: NVML status no-driver")


def test_serve_has_the_gpu_and_job_energy_counters():
    c = SnapshotCollector(hostname="n")
    c.feed(Snapshot(time=110.0, gpu_status="ok", gpus=(GPU, GpuSample(1, error="GPU is lost")),
                    jobs=(MEASURED, SHARED, UNKNOWN)))
    m = render(c)
    assert one(m, "gputop_dl_gpu_energy_joules_total", gpu="0") == 1234.5
    assert one(m, "gputop_dl_gpu_energy_joules_created", gpu="0") == 100.0
    assert [lab["gpu"] for lab, _ in m["gputop_dl_gpu_energy_joules_total"]] == ["0"]  # lost: none
    assert one(m, "gputop_dl_gpu_energy_source_info", gpu="0", source="counter", scope="gpu") == 1
    assert one(m, "gputop_dl_job_energy_joules_total", job_name="a") == 900.0
    assert one(m, "gputop_dl_job_energy_joules_total", job_name="b") == 450.0
    assert not [lab for lab, _ in m["gputop_dl_job_energy_joules_total"] if lab["job_name"] == "c"]
    assert one(m, "gputop_dl_job_power_watts", job_name="a") == 300.0
    assert one(m, "gputop_dl_job_energy_per_step_joules", job_name="a") == 30.0
    assert one(m, "gputop_dl_job_samples_per_joule", job_name="a") == 2.1
    assert one(m, "gputop_dl_job_energy_estimate", job_name="a") == 0.0
    assert one(m, "gputop_dl_job_energy_estimate", job_name="b") == 1.0


def test_the_jobs_table_has_an_energy_column_marked_for_an_estimate():
    p = Palette()
    i = COLUMN_KEYS.index("energy")
    assert job_row(MEASURED, p).cells[i].text == joules(900.0)
    assert job_row(SHARED, p).cells[i].text.startswith("~")
    assert job_row(UNKNOWN, p).cells[i].text == DASH
    snap = Snapshot(time=1.0, gpu_status="ok", jobs=(MEASURED, UNKNOWN))
    cols = [c.header for c in jobs_table(snap).columns]
    assert "energy" in cols
    none = Snapshot(time=1.0, gpu_status="no-driver", jobs=(UNKNOWN,))
    assert "energy" not in [c.header for c in jobs_table(none).columns]  # nothing known: left out


def test_the_energy_line_has_each_figure_or_the_reason():
    line = energy_line(MEASURED) or ""
    for figure in (joules(900.0), joules(30.0), joules(3000.0), "300 W", "2.1"):
        assert figure in line
    assert (energy_line(UNKNOWN) or "").startswith(DASH)
    assert "no-driver" in (energy_line(UNKNOWN) or "")
    assert "0 J" not in (energy_line(UNKNOWN) or "")
    assert (energy_line(SHARED) or "").startswith("~")
    shared = energy_line(evolve(SHARED, samples_per_joule=1.5)) or ""
    assert "~1.5 samples/J" in shared  # its joules are an estimate: so is this
    assert energy_line(JobSample("d", 1, False)) is None  # nothing said: no line


def test_the_details_screen_shows_the_energy_line():
    from gputop_dl.present.tui.job_detail import job_detail_lines

    text = job_detail_lines(MEASURED, None).plain
    row = next(line for line in text.splitlines() if line.startswith("energy"))
    assert joules(30.0) in row and joules(900.0) in row
    assert not any(line.startswith("energy") for line in
                   job_detail_lines(JobSample("d", 1, False), None).plain.splitlines())


@pytest.mark.parametrize("x,want", [(0.5, "0.50 J"), (850.0, "850 J"), (999.9, "1.00 kJ"),
                                    (12_345.0, "12.3 kJ"), (4.56e6, "4.56 MJ")])
def test_joules_text(x, want):
    assert joules(x) == want


def _launch_store(tmp_path):
    """A launch session with two jobs, each a solo baseline then a co-run, their energy
    recorded per tick as the engine records it (a JobSample per tick)."""
    import time

    from gputop_dl.record.store import Store

    store = Store(str(tmp_path / "s.db"))
    sid = store.create_session("pair", file=None, command="gputop-dl launch", kind="launch",
                               environment={"cpus": 2}, spec={"interval": 1.0})
    t0 = time.time() - 100
    # alone: 300 W for 600 samples/s (2 samples/J); together: 250 W for 250 samples/s (1 /J)
    for name, pid in (("a", 10), ("b", 20)):
        store.upsert_job(sid, name, launched=True, config={"name": name}, status="done")
        for phase, base, watts, sps, est in (("baseline", pid, 300.0, 600.0, False),
                                             ("co-run", pid + 1, 250.0, 250.0, True)):
            for k in range(1, 4):
                j = JobSample(name, base, True, pids=(base,), energy_j=watts * k, energy_w=watts,
                              energy_per_step_j=watts * 0.1, samples_per_joule=sps / watts,
                              energy_estimate=est, energy_source="counter")
                store.add_job_sample(sid, t0 + k + (50 if phase == "co-run" else 0), j, phase)
    store.commit()
    return store, sid


def test_the_export_and_report_carry_each_job_s_energy_and_the_corun_against_alone(tmp_path):
    from gputop_dl.analyse.recorded.energy_phases import corun_energy
    from gputop_dl.present.report.document import session_json
    from gputop_dl.present.report.markdown import render_markdown

    store, sid = _launch_store(tmp_path)
    try:
        doc = session_json(store, sid)  # checked against schemas/session.json by conftest
    finally:
        store.close()
    a = next(j for j in doc["jobs"] if j["name"] == "a")
    by = {p["phase"]: p for p in a["energy"]}
    assert by["baseline"]["joules"] == pytest.approx(900.0)
    assert by["baseline"]["samples_per_joule"] == pytest.approx(2.0)
    assert by["baseline"]["estimate"] is False and by["co-run"]["estimate"] is True
    assert by["co-run"]["joules"] == pytest.approx(750.0) and by["co-run"]["samples"] == 3
    c = corun_energy([j["energy"] for j in doc["jobs"]])
    assert c is not None and c["ratio"] == pytest.approx(2.0) and c["estimate"] is True
    md = render_markdown(doc)
    assert "2.00×" in md and joules(900.0) in md and "~" + joules(750.0) in md


def test_the_launch_summary_has_the_energy_column_and_the_corun_line(tmp_path):
    from rich.console import Console

    from gputop_dl.analyse.recorded.energy_phases import corun_energy
    from gputop_dl.analyse.recorded.summary import summarize
    from gputop_dl.present.energy_text import corun_text
    from gputop_dl.present.headless import summary_table

    store, sid = _launch_store(tmp_path)
    try:
        jobs = summarize(store, sid).jobs
    finally:
        store.close()
    out = Console(width=250, record=True)
    out.print(summary_table(jobs))
    said = corun_text(corun_energy([j.energy for j in jobs]))
    assert said and "2.00×" in said
    assert out.export_text().count("~" + joules(750.0)) == 2  # both jobs' co-run, estimates


def test_a_session_without_energy_has_null_and_no_line(tmp_path):
    import time

    from gputop_dl.present.report.document import session_json
    from gputop_dl.record.store import Store

    store = Store(str(tmp_path / "s.db"))
    sid = store.create_session("monitor", file=None, command="gputop-dl", kind="monitor",
                               environment={"cpus": 2}, spec={"interval": 1.0})
    store.upsert_job(sid, "x.py", launched=False, config=None, status="running")
    store.add_job_sample(sid, time.time(), JobSample("x.py", 5, False, pids=(5,),
                                                     energy_note="no GPU energy"), None)
    store.commit()
    try:
        doc = session_json(store, sid)
    finally:
        store.close()
    assert doc["jobs"][0]["energy"] is None


@pytest.mark.shares_box("a fake GPU's counters over time, not CPU")
def test_a_launched_job_on_a_fake_gpu_records_its_energy_real_launch(tmp_path):
    """A launch engine over fake NVML (its counter grows by power x the real clock): the built-in
    trainer (on the CPU) is put on fake GPU 0 once it runs; its co-run rows carry the GPU's
    joules, the store keeps them and the export shows them."""
    import time

    from gputop_dl.collect.machine import MachineSampler
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.engine import Engine, LaunchPlan, Recorder
    from gputop_dl.present.report.document import session_json
    from gputop_dl.record.store import Store
    from gputop_dl.runner import open_spec
    from tests.fakes.nvml import FakeProcess, FakePynvml

    wl = tmp_path / "one.toml"
    wl.write_text('[session]\nname = "one"\ninterval = 0.2\nbaseline = "none"\n'
                  '[[workload]]\nname = "a"\nmodel = "synthetic"\ninput_size = 4\n'
                  'num_classes = 2\nbatch_size = 2\nnum_workers = 0\nstep_device_ms = 20.0\n'
                  'epochs = 1\nsteps_per_epoch = 60\nwarmup_steps = 1\n')
    fake = FakePynvml(gpus=2)
    nvml = Nvml(module=fake)
    spec = open_spec(str(wl), nvml)
    db = str(tmp_path / "s.db")
    engine = Engine(LaunchPlan(spec, "test"), sampler=MachineSampler(nvml, found=None),
                    recorder=Recorder(db), interval=spec.interval)
    seen = None
    try:
        engine.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and engine.running:
            run = engine.runs.get("a")
            if run is not None and run.proc.pid and not fake.gpus[0].processes:
                fake.gpus[0].processes = [FakeProcess(pid=run.proc.pid)]
            snap = engine.snapshot
            job = next((j for j in snap.jobs if j.name == "a"), None) if snap else None
            if job is not None and job.energy_j is not None and job.energy_w is not None:
                seen = job
            time.sleep(0.1)
        assert engine.join(120), "the launch did not end"
    finally:
        engine.request_stop()
        engine.join(30)
    assert seen is not None, "the launched job never showed energy"
    assert seen.energy_source == "counter" and seen.energy_estimate is False
    assert seen.energy_w == pytest.approx(300.0, rel=0.3)  # the fake GPU draws 300 W
    store = Store(db, readonly=True)
    try:
        doc = session_json(store, engine.session_id)
        steps = store.step_rows(engine.session_id, "a", "co-run", offset=1)  # past warm-up
    finally:
        store.close()
    phases = doc["jobs"][0]["energy"]
    assert phases and phases[0]["phase"] == "co-run" and phases[0]["joules"] > 0
    # ground truth: the fake GPU's 300 W over the job's own recorded steps
    mean_step = sum(r[1] for r in steps) / len(steps)
    samples_per_s = sum(r[3] for r in steps) / sum(r[1] for r in steps)
    p = phases[0]
    assert p["power_w"] == pytest.approx(300.0, rel=0.05)
    assert p["per_step_j"] == pytest.approx(300.0 * mean_step, rel=0.05)
    assert p["samples_per_joule"] == pytest.approx(samples_per_s / 300.0, rel=0.05)


def test_compare_says_whether_the_fix_saved_energy_per_sample(tmp_path):
    import time

    from rich.console import Console

    from gputop_dl.present.report.compare import compare_sessions, comparison_table
    from gputop_dl.record.store import Store
    from tests.schema_check import check

    db = str(tmp_path / "s.db")
    store = Store(db)
    sids = []
    for k, (watts, sps) in enumerate(((300.0, 300.0), (200.0, 400.0))):  # 1 J, then 0.5 J/sample
        sid = store.create_session(f"run{k}", file=None, command="gputop-dl launch",
                                   kind="launch", environment={"cpus": 2}, spec={"interval": 1.0})
        store.upsert_job(sid, "a", launched=True, config={"name": "a"}, status="done")
        for i in range(1, 4):
            store.add_job_sample(sid, time.time() - 100 + i, JobSample(
                "a", 10, True, pids=(10,), energy_j=watts * i, energy_w=watts,
                samples_per_joule=sps / watts, energy_estimate=k == 0), "co-run")
        sids.append(sid)
        time.sleep(0.01)
    store.commit()
    store.close()
    doc = check(compare_sessions(sids[0], sids[1], store_path=db), "comparison")
    job = doc["jobs"][0]
    assert job["a"]["energy_per_sample_j"] == pytest.approx(1.0)
    assert job["b"]["energy_per_sample_j"] == pytest.approx(0.5)
    assert job["change"]["energy_per_sample_j"] == pytest.approx(0.5)
    out = Console(width=200, record=True)
    out.print(comparison_table(doc))
    shown = out.export_text()
    assert "J/sample" in shown and "×0.50" in shown
    assert job["a"]["energy_estimate"] is True and job["b"]["energy_estimate"] is False
    assert f"~{joules(1.0)} → {joules(0.5)}" in shown  # A shared its GPU: an estimate


def test_tensorboard_has_the_energy_scalars(tmp_path):
    acc_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                  reason="the tensorboard package (test extra) reads the files back")
    from gputop_dl.present.report.tensorboard import export_tensorboard

    store, sid = _launch_store(tmp_path)
    try:
        written = dict((os.path.basename(d), d) for d, *_ in
                       export_tensorboard(store, sid, str(tmp_path / "tb")))
    finally:
        store.close()
    acc = acc_mod.EventAccumulator(written["a"], size_guidance={"scalars": 0})  # its co-run
    acc.Reload()
    assert [e.value for e in acc.Scalars("job/energy_j")] == pytest.approx([250.0, 500.0, 750.0])
    assert all(e.value == pytest.approx(1.0) for e in acc.Scalars("job/samples_per_joule"))
    solo = acc_mod.EventAccumulator(written["a.solo"], size_guidance={"scalars": 0})
    solo.Reload()
    assert all(e.value == pytest.approx(300.0) for e in solo.Scalars("job/power_w"))


def test_once_shows_each_gpu_s_joules_and_what_they_are():
    from rich.console import Console

    from gputop_dl.present.once import print_once

    module = GpuSample(0, name="GH200", power_w=500.0, energy_j=501.0, energy_since=1.0,
                       energy_source="counter", energy_scope="module",
                       energy_note="module power: CPU and memory included")
    old = GpuSample(1, name="P100", power_w=200.0, energy_j=199.0, energy_since=1.0,
                    energy_source="power-integral", energy_scope="gpu")
    none = GpuSample(2, name="x", power_w=None)
    out = Console(width=220, record=True)
    print_once(Snapshot(time=2.0, gpu_status="ok", gpus=(module, old, none)), out)
    shown = out.export_text()
    rows = {line.split("│")[1].strip(): line for line in shown.splitlines() if line.count("│") > 5}
    assert joules(501.0) in rows["0"] and joules(199.0) in rows["1"]
    assert DASH in rows["2"].split("│")[7]  # the energy cell: unknown, never 0 J
    assert "module power: CPU and memory included" in shown
    assert rows["0"].split("│")[7].strip() == joules(501.0)  # the counter's
    assert rows["1"].split("│")[7].strip() != joules(199.0)  # power x time: marked as such

