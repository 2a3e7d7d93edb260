"""After a queue: the simulator's prediction for the same jobs beside what happened, and measured GPU busy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from gputop_dl.analyse.recorded.queue import queue_figures
from gputop_dl.present.report.document import session_json
from gputop_dl.present.report.markdown import render_markdown
from gputop_dl.record.store import Store
from gputop_dl.sched.predict import predict_queue
from tests.schema_check import check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = {"policy": "fifo", "slots": 1, "unit": "slot", "cpus": 2.0, "cpu_aware": False,
            "ageing_s": 600.0, "v": 1.0}


def test_prediction_models_the_queues_ticks():
    """One slot, FIFO, a 2 s job then a 1 s job at 0.3 s, ticks of 0.5 s: the first end is seen
    at 2.5 s (a run of exactly 4 ticks ends after the 4th), the second job arrives at the 0.5 s
    tick and starts at 2.5 s, its end seen at 4.0 s."""
    jobs = [{"name": "a", "arrival_s": 0.0, "expected_s": 2.0, "gpus": 1, "jct_s": 2.5},
            {"name": "b", "arrival_s": 0.3, "expected_s": 1.0, "gpus": 1, "jct_s": 4.2}]
    p = predict_queue(SETTINGS, jobs, tick_s=0.5)
    assert p["jobs"]["a"]["jct_s"] == pytest.approx(2.5)
    assert p["jobs"]["b"]["start_s"] == pytest.approx(2.5)
    assert p["jobs"]["b"]["wait_s"] == pytest.approx(2.2)
    assert p["jobs"]["b"]["jct_s"] == pytest.approx(3.7)
    assert p["jct_mae"] == pytest.approx((0 + 0.5 / 4.2) / 2)
    plain = predict_queue(SETTINGS, jobs)  # no tick: the plain simulator
    assert (plain["jobs"]["a"]["jct_s"], plain["jobs"]["b"]["jct_s"]) == pytest.approx((2.0, 2.7))
    assert predict_queue(SETTINGS, [{"name": "a", "arrival_s": 0.0, "expected_s": None}]) is None


def test_prediction_replays_the_recorded_ticks():
    """A busy box ticked late and unevenly: at 0, 1.2, 1.3, 2.6, 3.0, 4.4. The 1 s job (arrived
    at 0.2) is queued at 1.2 and ends at the first tick after 2.2 (2.6); the 0.5 s job that
    arrived at 0.3 waits for the slot, starts at 2.6, is not done by 3.0 and ends at 4.4."""
    settings = dict(SETTINGS)
    jobs = [{"name": "a", "arrival_s": 0.2, "expected_s": 1.0, "gpus": 1, "jct_s": 2.4},
            {"name": "b", "arrival_s": 0.3, "expected_s": 0.5, "gpus": 1, "jct_s": 4.1}]
    p = predict_queue(settings, jobs, tick_s=0.5, ticks=[0.0, 1.2, 1.3, 2.6, 3.0, 4.4])
    assert p["ticks"] == "recorded"
    assert (p["jobs"]["a"]["start_s"], p["jobs"]["a"]["end_s"]) == pytest.approx((1.2, 2.6))
    assert (p["jobs"]["b"]["start_s"], p["jobs"]["b"]["end_s"]) == pytest.approx((2.6, 4.4))
    assert p["jct_mae"] == pytest.approx(0.0)
    never = predict_queue(dict(SETTINGS, slots=1), [{"name": "x", "arrival_s": 0.0, "expected_s": 1.0,
                                                    "gpus": 2}], tick_s=0.5)
    assert never is None  # it asks 2 slots of 1: it can never start


def recorded_queue(tmp_path, unit: str) -> tuple[Store, str]:
    from gputop_dl.snapshot import GpuSample

    st = Store(str(tmp_path / "s.db"))
    settings = dict(SETTINGS, slots=2, unit=unit)
    sid = st.create_session("q", file="q.toml", command="gputop-dl queue q.toml", kind="queue",
                            environment={"cpus": 2}, spec={"baseline": "none", "cuda": unit == "GPU",
                                                           "interval": 0.5, "queue": settings})
    t0 = st.session(sid).started
    for name, (arr, start, end) in {"a": (0.0, 0.0, 2.5), "b": (0.0, 0.0, 1.5)}.items():
        st.upsert_job(sid, name, launched=True, config={"name": name}, status="done")
        st.add_events(sid, name, "queue", [
            {"ev": "queued", "t": t0 + arr, "arrival_s": arr, "expected_s": end - 0.5, "gpus": 1,
             "cpu_cores": 0.0, "priority": 0, "klass": name},
            {"ev": "queue-start", "t": t0 + start, "start_s": start, "on": [0]},
            {"ev": "queue-end", "t": t0 + end, "end_s": end, "status": "done"}])
    for k in range(6):  # GPU 0 busy 90 %, GPU 1 busy 30 %, as the fake NVML's jobs made them
        st.add_gpu_samples(sid, t0 + 0.5 * k, [GpuSample(index=0, util=0.9), GpuSample(index=1, util=0.3)])
    st.end_session(sid, "finished")
    return st, sid


def test_slot_busy_is_measured_gpu_use_on_gpus_and_allocation_on_slots(tmp_path):
    (tmp_path / "gpu").mkdir()
    st, sid = recorded_queue(tmp_path / "gpu", "GPU")
    q = session_json(st, sid)["queue"]
    assert (q["slot_busy_fraction"], q["slot_busy_measure"]) == (pytest.approx(0.6), "gpu-util")
    assert "GPUs busy 60% over the makespan (measured GPU utilisation)" in render_markdown(session_json(st, sid))
    (tmp_path / "slot").mkdir()
    st2, sid2 = recorded_queue(tmp_path / "slot", "slot")
    q = session_json(st2, sid2)["queue"]
    assert (q["slot_busy_fraction"], q["slot_busy_measure"]) == (pytest.approx((2.5 + 1.5) / (2 * 2.5)),
                                                                 "allocation")
    assert queue_figures(SETTINGS, [])["slot_busy_measure"] is None


def test_export_has_the_prediction_beside_what_happened(tmp_path):
    (tmp_path / "x").mkdir()
    st, sid = recorded_queue(tmp_path / "x", "slot")
    data = session_json(st, sid)
    p = data["queue"]["prediction"]
    assert p["policy"] == "fifo" and p["tick_s"] == 0.5 and p["jobs_compared"] == 2
    assert p["jobs"]["a"] == {"start_s": 0.0, "end_s": 2.5, "wait_s": 0.0, "jct_s": 2.5, "real_jct_s": 2.5}
    assert p["jct_mae"] == 0.0 and p["calibration"] == {"cpu_interference": "default", "gpu_share": "default"}
    md = render_markdown(data)
    assert "### Simulated beside what happened" in md
    assert "| a | 0.0 | 0.0 | 2.5 | 2.5 | 0% |" in md


SLEEPERS = """\
[session]
interval = 0.5
policy = "sjf"
slots = 2

[defaults]
env = { GPUTOP_DL_HOOK = "0" }
"""


def test_after_a_real_queue_run_the_prediction_is_within_15_percent(tmp_path):
    """A real queue like workloads/queue_sleepers.toml (a long job first, then four more
    arriving over 1.5 s, on 2 slots, SJF, 0.5 s ticks) of `sleep` commands, exported: the
    simulator's per-job JCT for the same arrivals and policy is within 15 % mean absolute
    error of the measured one, and the export shows it. Each sleep ends 0.2 s after a tick
    boundary would, so a start-up delay below 0.3 s (a busy box) is still seen at the
    predicted tick."""
    sleep = shutil.which("sleep")
    body = SLEEPERS
    for name, arrival, secs in (("long", 0, 3.2), ("mid", 0.2, 1.7), ("big", 0.5, 2.2), ("short", 1, 0.7),
                                ("short2", 1.5, 0.7)):
        body += (f'\n[[workload]]\nname = "{name}"\narrival = {arrival}\ncommand = ["{sleep}", "{secs}"]\n'
                 f"duration_s = {secs}\n")
    qfile = tmp_path / "q.toml"
    qfile.write_text(body)
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-m", "gputop_dl", "queue", str(qfile), "--headless"], env=env,
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    out = tmp_path / "q.json"
    exp = subprocess.run([sys.executable, "-m", "gputop_dl", "export", str(out)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert exp.returncode == 0, exp.stderr
    q = check(json.loads(out.read_text()))["queue"]
    p = q["prediction"]
    print("real vs predicted JCT:", {n: (j["real_jct_s"], j["jct_s"]) for n, j in p["jobs"].items()},
          f"MAE {p['jct_mae']:.1%}")
    assert q["jobs_ended"] == 5 and p["jobs_compared"] == 5
    assert p["jct_mae"] <= 0.15
    md = tmp_path / "q.md"
    subprocess.run([sys.executable, "-m", "gputop_dl", "export", str(md)], env=env, check=True,
                   capture_output=True, timeout=120)
    assert "mean absolute error of the predicted JCT over 5 jobs that ended" in md.read_text()


def test_a_queue_on_gpus_records_measured_gpu_use_as_slot_busy(tmp_path):
    """A real queue on the fake NVML's two GPUs (busy 90 % and 30 %): the export's
    slot_busy_fraction is the measured GPU use (0.6), not the GPU-seconds the jobs held."""
    from gputop_dl.collect.jobs.found import FoundJobs
    from gputop_dl.collect.machine import MachineSampler
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.engine import Engine, Recorder
    from gputop_dl.engine.queue_plan import QueuePlan
    from gputop_dl.sched.model import Job, Machine
    from gputop_dl.sched.policies import Policy
    from gputop_dl.workload import SessionSpec, Workload
    from tests.fakes.nvml import FakePynvml

    fake = FakePynvml(gpus=2)
    fake.gpus[0].util, fake.gpus[1].util = 90, 30
    jobs = [Job("a", duration_s=0.3), Job("b", arrival_s=0.2, duration_s=0.3)]
    spec = SessionSpec(name="q", path="q.toml", interval=0.1, baseline="none", cuda=True,
                       workloads=tuple(Workload(name=j.name, env={"GPUTOP_DL_HOOK": "0"},
                                                command=(sys.executable, "-c", "import time; time.sleep(0.3)"))
                                       for j in jobs))
    plan = QueuePlan(spec, jobs, Policy("fifo"), Machine(gpus=2, cpus=2.0, unit="GPU"))
    engine = Engine(plan, sampler=MachineSampler(Nvml(module=fake), found=FoundJobs(stall=False)),
                    recorder=Recorder(str(tmp_path / "s.db")), interval=0.1, grace_s=2.0)
    engine.start()
    assert engine.join(60) and engine.state == "finished"
    st = Store(str(tmp_path / "s.db"))
    q = session_json(st, engine.session_id)["queue"]
    assert q["jobs_ended"] == 2 and q["unit"] == "GPU"
    assert (q["slot_busy_fraction"], q["slot_busy_measure"]) == (pytest.approx(0.6), "gpu-util")
