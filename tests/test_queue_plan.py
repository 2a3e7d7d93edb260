"""The live queue (engine/queue_plan.py): real command jobs started by a policy as slots free up."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

from gputop_dl.collect.jobs.found import FoundJobs
from gputop_dl.collect.machine import MachineSampler
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.engine import Engine, Recorder
from gputop_dl.engine.queue_plan import QueuePlan
from gputop_dl.record.store import Store
from gputop_dl.sched.model import Job, Machine
from gputop_dl.sched.policies import Policy
from gputop_dl.sched.predict import replay_on_ticks, tick_times
from gputop_dl.workload import SessionSpec, Workload


def sleeper(name: str, seconds: float) -> Workload:
    """A job that only sleeps: `sleep` starts in milliseconds even on a busy box (an interpreter
    can take a second, which its expected duration would leave out)."""
    return Workload(name=name, command=(shutil.which("sleep"), str(seconds)), env={"GPUTOP_DL_HOOK": "0"})


def queue_engine(jobs: list[Job], policy: str, slots: int, tmp_path, cpus: float = 64.0):
    spec = SessionSpec(name="queue", path="queue.toml", interval=0.1, baseline="none",
                       workloads=tuple(sleeper(j.name, j.duration_s) for j in jobs), cuda=False)
    machine = Machine(gpus=slots, cpus=cpus, unit="slot")
    plan = QueuePlan(spec, jobs, Policy(policy), machine)
    engine = Engine(plan, sampler=MachineSampler(Nvml(), found=FoundJobs(stall=False)),
                    recorder=Recorder(str(tmp_path / "s.db")), interval=0.1, grace_s=2.0)
    return engine, plan, machine


@pytest.mark.shares_box("sleeping jobs, compared at the ticks the queue recorded")
def test_end_to_end_queue_starts_jobs_as_slots_free_and_matches_the_simulator(tmp_path):
    """Two slots, five sleeping jobs (one long first): SJF runs the short ones around it; every
    job runs once, no more than two at a time, and the simulator's per-job JCT for the same
    arrivals is within 15 % mean absolute error of the measured one."""
    jobs = [Job("long", arrival_s=0.0, duration_s=4.5), Job("a", arrival_s=0.2, duration_s=1.5),
            Job("b", arrival_s=0.2, duration_s=2.2), Job("c", arrival_s=0.4, duration_s=1.5),
            Job("d", arrival_s=1.0, duration_s=3.0)]
    engine, plan, machine = queue_engine(jobs, "sjf", 2, tmp_path)
    engine.start()
    assert engine.join(60)
    assert engine.state == "finished" and engine.exit_code() == 0
    s = plan.summary()
    assert all({"start_s", "end_s", "wait_s", "jct_s"} <= set(r) for r in s["jobs"].values())
    spans = sorted((r["start_s"], r["end_s"]) for r in s["jobs"].values())
    for t, _ in spans:  # at most two at once (an end noticed at the same tick frees its slot)
        assert sum(a <= t + 1e-6 < b for a, b in spans) <= 2
    for name, r in s["jobs"].items():
        assert r["start_s"] >= r["arrival_s"] and r["jct_s"] >= plan.jobs[name].duration_s
    # the simulator at the queue's recorded ticks (sched/predict.py): a busy box ticks late
    st = Store(str(tmp_path / "s.db"))
    ticks = [h[0] - st.session(engine.session_id).started for h in st.host_samples(engine.session_id)]
    st.close()
    print(f"{len(ticks)} ticks recorded, first {ticks[0]:.3f} s, last {ticks[-1]:.3f} s")
    pred = replay_on_ticks(Policy("sjf"), jobs, machine, tick_times(ticks, 0.1), cpu_aware=True)
    sim = {n: end - plan.jobs[n].arrival_s for n, (_start, end, _gpus) in pred.items()}
    assert sim.keys() == s["jobs"].keys()
    err = sum(abs(s["jobs"][n]["jct_s"] - sim[n]) / sim[n] for n in sim) / len(sim)
    print("real vs simulated JCT:", {n: (round(s["jobs"][n]["jct_s"], 2), round(sim[n], 2)) for n in sim},
          f"MAE {err:.1%}")
    assert err <= 0.15
    st = Store(str(tmp_path / "s.db"))
    assert {j["name"]: j["status"] for j in st.jobs(engine.session_id)} == {n: "done" for n in sim}


@pytest.mark.shares_box("a stop and statuses")
def test_end_to_end_queue_stop_stops_running_and_waiting_jobs_and_keeps_the_session(tmp_path):
    jobs = [Job(f"j{i}", arrival_s=0.0, duration_s=30.0) for i in range(3)]
    engine, plan, _ = queue_engine(jobs, "fifo", 1, tmp_path)
    engine.start()
    deadline = time.time() + 20
    while "start_s" not in plan.times["j0"] and time.time() < deadline:
        time.sleep(0.05)
    threading.Timer(0.3, engine.request_stop).start()
    assert engine.join(30)
    assert engine.state == "interrupted" and engine.exit_code() == 130
    assert not engine.live_jobs()
    st = Store(str(tmp_path / "s.db"))
    rows = {j["name"]: j["status"] for j in st.jobs(engine.session_id)}
    assert rows == {"j0": "stopped", "j1": "stopped", "j2": "stopped"}
    assert st.session(engine.session_id).state == "interrupted"


@pytest.mark.shares_box("the queue state file")
def test_end_to_end_queue_state_lists_waiting_jobs_in_policy_order_with_reasons(tmp_path):
    """What the TUI's queue panel gets: with one slot and SJF, the shorter waiting job first,
    each with its wait and reason, while the first job runs."""
    jobs = [Job("first", duration_s=30.0), Job("long", arrival_s=0.3, duration_s=20.0),
            Job("short", arrival_s=0.3, duration_s=10.0)]
    engine, plan, _ = queue_engine(jobs, "sjf", 1, tmp_path)
    seen = []
    engine.subscribe(lambda snap: seen.append(snap.queue))
    engine.start()
    deadline = time.time() + 20
    while not any(q and q["jobs"][0]["state"] == "waiting" for q in seen) and time.time() < deadline:
        time.sleep(0.05)
    engine.request_stop()
    assert engine.join(30)
    q = next(q for q in seen if q and q["jobs"][0]["state"] == "waiting")
    states = [(j["name"], j["state"]) for j in q["jobs"]]
    assert states == [("short", "waiting"), ("long", "waiting"), ("first", "running")]
    assert q["jobs"][0]["reason"].startswith("the slot is busy; reserved in") and q["jobs"][0]["waited_s"] >= 0
    assert (q["policy"], q["slots"], q["unit"]) == ("sjf", 1, "slot")
