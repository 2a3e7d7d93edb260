"""`command` workloads get the verdict built-in ones get: solo baselines measured (or cached)
for a user's own script, then the co-run judged. Real processes running tests/external/
calibrated.py, a plain PyTorch script whose cost per step is known by construction."""

from __future__ import annotations

import json
import os
import sys
import time

import psutil
import pytest

from gputop_dl.collect.jobs.fingerprint import fingerprint
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.runner import run_file
from gputop_dl.workload import Workload
from tests.conftest import write

CALIBRATED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "external", "calibrated.py")
LIGHT = ["--steps", "30", "--sample-io-ms", "10", "--compute-ms", "60"]  # ~0.1 s/step, no CPU
HEAVY = ["--steps", "60", "--sample-cpu-ms", "10", "--workers", "2", "--compute-ms", "20"]


def session(tmp_path, jobs: dict[str, list[str]], baseline="measure", steps=8, extra=""):
    body = (f'[session]\nname = "cmd"\ninterval = 0.3\nbaseline = "{baseline}"\n'
            f'baseline_steps = {steps}\n{extra}\n[defaults]\nwarmup_steps = 3\n')
    for name, argv in jobs.items():
        body += f'[[workload]]\nname = "{name}"\ncommand = {json.dumps(argv)}\n'
    return write(tmp_path, "w.toml", body)


def script(*args):
    return [sys.executable, CALIBRATED, *args]


def own_step_time(run) -> float:
    with open(run.proc.log_path, encoding="utf-8") as f:
        return json.loads([ln for ln in f.read().splitlines() if ln.strip()][-1])["step_time_s"]


def test_real_launch_light_command_pair_is_parallel_with_measured_baselines(tmp_path):
    eng = run_file(session(tmp_path, {"a": script(*LIGHT), "b": script(*LIGHT)}), nvml=Nvml())
    v = eng.verdict
    assert v is not None and v["kind"] == "parallel", v
    assert v["confidence"] >= 0.6
    for name in ("a", "b"):
        solo = eng.plan.baselines.solo[name]
        assert solo["steps"] >= 8 and solo["cpu_cores"] is not None
        # the solo step agrees with the script's own clock in its co-run (both ~0.1 s)
        assert abs(solo["step_time_s"] / own_step_time(eng.runs[name]) - 1) < 0.15
        assert eng.runs[name].status == "done"
    assert {j["name"]: j["slowdown"] for j in v["jobs"]}.keys() == {"a", "b"}


@pytest.fixture(scope="module")
def heavy_trio(tmp_path_factory):
    """Three heavy scripts launched with measured baselines, once for the module: the launch
    (its verdict), and its store, which caches their solo baselines for the queue. Called from
    the test, so the launch runs while the test holds the box (conftest.heavy_lock)."""
    made: list = []

    def launched():
        if not made:
            d = tmp_path_factory.mktemp("heavy-trio")
            store = str(d / "sessions.db")
            jobs = {"a": script(*HEAVY), "b": script(*HEAVY), "c": script(*HEAVY)}
            made.append((run_file(session(d, jobs), nvml=Nvml(), store_path=store), d, jobs,
                         store))
        return made[0]

    return launched


def test_real_launch_heavy_command_pair_is_cpu_bound(heavy_trio):
    eng = heavy_trio()[0]
    v = eng.verdict
    assert v["kind"] == "cpu-bound", v["reason"]
    assert max(v["evidence"]["slowdowns"].values()) > 1.3
    assert v["evidence"]["solo_cpu_need_cores"] > 2.0
    # the hook reported each script's loader workers: the workers advice uses them
    assert any("6 data-loader workers" in r for r in v["recommendations"])
    # its solo baselines are cached, each measured now
    assert all(not eng.plan.baselines.solo[n].get("cached") for n in "abc")


@pytest.mark.shares_box("a cached baseline reused: its flag and its stored figure; no timing")
def test_real_launch_cache_reuses_a_commands_baseline_until_its_script_changes(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(open(CALIBRATED).read())
    argv = [sys.executable, str(mine), *LIGHT[:1], "16", *LIGHT[2:]]
    path = session(tmp_path, {"a": argv}, baseline="cache", steps=4)
    first = run_file(path, nvml=Nvml())
    assert "a" in first.plan.baselines.solo and not first.plan.baselines.solo["a"].get("cached")
    second = run_file(path, nvml=Nvml())
    assert second.plan.baselines.solo["a"].get("cached") is True
    assert second.plan.baselines.solo["a"]["step_time_s"] == first.plan.baselines.solo["a"]["step_time_s"]
    w = second.spec.workloads[0]
    before = fingerprint(w, False, second.env)
    os.utime(mine, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert fingerprint(w, False, second.env) != before


def test_fingerprint_of_a_command_follows_argv_env_and_cwd():
    w = Workload(name="a", command=("python", "x.py"))
    env = {"cpus": 2}
    fp = fingerprint(w, False, env)
    assert fp == fingerprint(w.with_(name="b"), False, env)  # the name is not the job
    for other in (w.with_(command=("python", "y.py")), w.with_(env={"K": "1"}),
                  w.with_(cwd="/elsewhere"), w.with_(shell=True)):
        assert fingerprint(other, False, env) != fp
    assert fingerprint(w, True, env) != fp


@pytest.mark.shares_box("what a baseline cut short saw: counts, no timing")
def test_real_launch_a_script_that_ends_during_its_baseline_gives_what_was_seen(tmp_path):
    eng = run_file(session(tmp_path, {"a": script("--steps", "7", "--compute-ms", "30"),
                                      "b": script("--steps", "7", "--compute-ms", "30")},
                           steps=8), nvml=Nvml())
    solo = eng.plan.baselines.solo["a"]
    assert solo["steps"] == 4 and "ended after 7 of 11 solo steps" in solo["note"]
    assert any("ended after 7 of 11" in text for _, text in eng.log)


@pytest.mark.shares_box("no DataLoader seen: the verdict's kind and reason; no timing")
def test_real_launch_a_command_without_a_dataloader_gets_insufficient_data_with_the_reason(
        tmp_path):
    quiet = [sys.executable, "-c", "import time; time.sleep(2.5)"]
    eng = run_file(session(tmp_path, {"a": quiet, "b": script(*LIGHT)}, steps=4,
                           extra="baseline_timeout_s = 1.5"), nvml=Nvml())
    assert "a" not in eng.plan.baselines.solo and "no DataLoader steps in 2 s" in eng.plan.baselines.no_solo["a"]
    v = eng.verdict
    assert v["kind"] == "insufficient-data"
    assert "start-up hook has seen no DataLoader steps of a" in v["reason"]


STUBBORN = ("import runpy, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


@pytest.mark.shares_box("a signal and its escalation")
def test_real_launch_a_script_that_ignores_sigterm_in_its_baseline_is_killed(tmp_path):
    argv = [sys.executable, "-c", STUBBORN, CALIBRATED, "--steps", "12", "--compute-ms", "30"]
    eng = run_file(session(tmp_path, {"a": argv}, steps=4), nvml=Nvml())
    solo = eng.plan.baselines.solo["a"]
    assert solo["steps"] >= 4 and "note" not in solo  # stopped once it had its steps
    killed = [text for _, text in eng.log if text.startswith("a (baseline)")]
    assert killed == ["a (baseline) stopped"]
    assert eng.runs["a"].status == "done"  # the co-run copy ran to its end
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if STUBBORN in (p.info["cmdline"] or [])]
    assert not leftovers


def test_real_launch_then_queue_jobs_running_together_in_a_queue_get_a_verdict(heavy_trio):
    """Three heavy scripts: a launch measured and cached their solo baselines (the module's
    launch, the test above); queued on 3 slots (not CPU-aware) they run together, and the
    queue judges them as a launch would."""
    from gputop_dl.runner import open_spec, queue_engine

    _, d, jobs, store = heavy_trio()
    nvml = Nvml()
    qfile = d / "q.toml"
    qfile.write_text(open(session(d, jobs)).read().replace(
        '[session]\n', '[session]\npolicy = "fifo"\nslots = 3\ncpu_aware = false\n', 1))
    eng = queue_engine(open_spec(str(qfile), nvml), nvml, store_path=store)
    eng.start()
    eng.join()
    v = eng.verdict
    assert v is not None and v["evidence"]["together"] == ["a", "b", "c"]
    assert v["kind"] == "cpu-bound", v["reason"]
    assert set(v["evidence"]["slowdowns"]) == {"a", "b", "c"}  # from the cached baselines
    assert all(r.solo and r.solo.get("cached") for r in eng.runs.values())


@pytest.mark.shares_box("a queue that never overlaps: no verdict at all")
def test_real_launch_a_queue_that_never_runs_two_jobs_at_once_has_no_verdict(tmp_path):
    from gputop_dl.runner import open_spec, queue_engine

    quick = script("--steps", "8", "--compute-ms", "20")
    qfile = tmp_path / "q.toml"
    qfile.write_text(open(session(tmp_path, {"a": quick, "b": quick})).read().replace(
        '[session]\n', '[session]\npolicy = "fifo"\nslots = 1\n', 1))
    nvml = Nvml()
    eng = queue_engine(open_spec(str(qfile), nvml), nvml)
    eng.start()
    eng.join()
    assert eng.verdict is None and all(r.status == "done" for r in eng.runs.values())
