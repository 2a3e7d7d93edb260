"""Calibrated synthetic scenarios, run for real (trainer subprocesses), where the truth is known."""

import os

import pytest

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.runner import run_file

SCEN = os.path.join(os.path.dirname(__file__), "..", "workloads", "scenarios")



def run(name):
    eng = run_file(os.path.join(SCEN, name), nvml=Nvml())
    assert eng.error is None and eng.state == "finished"
    assert all(r.status == "done" for r in eng.runs.values())
    return eng


def test_cpu_bound_trio_on_two_cores():
    if (os.cpu_count() or 1) > 3:
        pytest.skip("the trio needs ~3.3 cores: CPU-bound only on a machine with <= 3 cores")
    v = run("cpu_bound_trio.toml").verdict
    assert v["kind"] == "cpu-bound", v
    # each solo run's reading of what ran beside it (one slowdown read <= 1.2 once, in
    # a suite run; a solo baseline timed beside outside load is slow, its slowdown too small):
    # a job's slowdown against an idle box is its figure times what the load cost its solo run
    beside = v["evidence"]["baseline_outside"]
    assert set(beside) == {"a", "b", "c"} and all(b["wait"] is not None for b in beside.values())
    idle = {j["name"]: j["slowdown"] * (beside[j["name"]]["slowdown"] or 1) for j in v["jobs"]}
    assert all(s > 1.2 for s in idle.values()), (idle, beside)
    assert all(j["stall"] - j["solo_stall"] >= 0.05 for j in v["jobs"])
    # the cause attribution names the synthetic augmentation (py-spy on a loader worker)
    assert any("spin_cpu" in line for line in v["evidence_lines"]), v["evidence_lines"]


TRIO_PAIR = """
[session]
name = "two of the trio's jobs: 1.9 cores on 2"
interval = 0.5
baseline = "measure"
baseline_steps = 12
[defaults]
model = "synthetic"
input_size = 8
num_classes = 10
batch_size = 8
num_workers = 1
sample_cpu_ms = 6.0
step_device_ms = 40.0
step_cpu_ms = 5.0
epochs = 1
steps_per_epoch = 30
warmup_steps = 4
[[workload]]
name = "a"
gpus = [0]
[[workload]]
name = "b"
gpus = [1]
"""


def test_busy_loops_beside_the_solo_baselines_are_named_and_the_kind_kept(tmp_path):
    """Outside load while the solo baselines are measured: two busy loops of other
    sessions run until the co-run starts. Each job's solo run waited behind them: the verdict
    names them per job, with what they cost its solo figure, and says to measure again; a
    cached baseline so slowed is measured again, not reused."""
    import dataclasses
    import time

    from gputop_dl.runner.engines import launch_engine, open_spec
    from tests.fakes.busy import busy_loops, stop

    path = tmp_path / "pair.toml"
    path.write_text(TRIO_PAIR)
    spec = open_spec(str(path), Nvml())
    store = str(tmp_path / "sessions.db")
    engine = launch_engine(spec, Nvml(), store_path=store)
    loops = busy_loops(2)
    try:
        engine.start()
        deadline = time.monotonic() + 300
        while engine.phase != "co-run" and engine.running and time.monotonic() < deadline:
            time.sleep(0.05)  # wait for the event: the co-run has started
    finally:
        stop(loops)
    engine.join()
    assert engine.error is None and engine.state == "finished"
    v = engine.verdict
    beside = v["evidence"]["baseline_outside"]
    assert all(beside[n]["slowdown"] > 1.1 for n in ("a", "b")), beside
    assert all(any(str(p.pid) == str(c["pid"]) for c in beside[n]["consumers"] for p in loops)
               for n in ("a", "b")), beside
    for n in ("a", "b"):
        assert any(x.startswith(f"solo baseline: {n} was not alone") and "while True" in x
                   for x in v["evidence_lines"]), v["evidence_lines"]
    assert any("measure the solo baselines again" in r for r in v["recommendations"])
    # baseline = "cache": the slowed baselines are not reused, they are measured again (quiet);
    # the session is stopped once both are said to be (its co-run would show nothing more)
    again = launch_engine(dataclasses.replace(spec, baseline="cache"), Nvml(), store_path=store)

    def remeasured():
        return sum("was not alone" in t and "measuring it again" in t for _, t in list(again.log))

    again.start()
    try:
        deadline = time.monotonic() + 120
        while remeasured() < 2 and again.running and time.monotonic() < deadline:
            time.sleep(0.05)  # wait for the event: the second baseline's decision is logged
    finally:
        again.request_stop()
        assert again.join(60)
    assert remeasured() == 2, [text for _, text in again.log]


def test_light_pair_is_parallel():
    v = run("light_pair.toml").verdict
    assert v["kind"] == "parallel", v
    assert all(j["slowdown"] <= 1.10 for j in v["jobs"])


@pytest.mark.shares_box("two jobs queued on one emulated GPU, a lock of their own; 6 of 6 passed "
                        "beside two busy loops, 3 of them with a training script too")
def test_shared_gpu_pair_is_gpu_contended():
    v = run("shared_gpu_pair.toml").verdict
    assert v["kind"] == "gpu-contended", v
    assert all(1.5 < j["slowdown"] < 2.6 for j in v["jobs"]), [
        (j["name"], j["slowdown"]) for j in v["jobs"]]


@pytest.mark.shares_box("a stall of sleeps against its own step; 6 of 6 passed beside two busy "
                        "loops, 3 of them with a training script too")
def test_injected_stall_within_3_points():
    eng = run("injected_stall.toml")
    (job,) = eng.verdict["jobs"]
    assert abs(job["stall"] - 0.40) <= 0.03, job
    assert eng.verdict["kind"] == "no-baseline"


@pytest.mark.shares_box("no loader wait at all; 6 of 6 passed beside two busy loops, 3 of them "
                        "with a training script too")
def test_compute_only_has_no_stall():
    eng = run("compute_only.toml")
    (job,) = eng.verdict["jobs"]
    assert job["stall"] < 0.03, job
