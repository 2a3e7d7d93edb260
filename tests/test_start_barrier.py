"""The co-run's start barrier for `command` jobs: scripts wait at their main loader's first pass
until every job is ready, so the co-run's first steps run together."""

from __future__ import annotations

import json
import os
import shlex
import sys
import types

import pytest

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.engine import start_barrier
from gputop_dl.engine.start_barrier import GO_WAIT_S, barrier_jobs, go_now
from gputop_dl.record.store import Store
from gputop_dl.runner import run_file
from tests.conftest import write

CALIBRATED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "external", "calibrated.py")


def fake_engine(*runs):
    eng = types.SimpleNamespace(runs={r.name: r for r in runs}, log=[])
    eng.say = eng.log.append
    return eng


def run(name, command=True, alive=True, ready=False, info=None):
    return types.SimpleNamespace(name=name, alive=alive, ready=ready, info=info or {},
                                 status="running" if alive else "done",
                                 w=types.SimpleNamespace(is_command=command))


def test_go_once_every_job_is_ready_or_ended(tmp_path, monkeypatch):
    go = str(tmp_path / "co-run.go")
    monkeypatch.setattr(start_barrier.time, "time", lambda: 100.0)
    eng = fake_engine(run("a", ready=True), run("b"), run("c", alive=False),
                      run("d", command=False, info={"ev": "started"}))
    waits = {"a", "b", "c", "d"}
    go_now(eng, go, 95.0, waits)
    assert not os.path.exists(go)  # b is not at its first pass yet
    # the jobs held at the barrier say so, once each, and show it as their status
    assert eng.log == ["co-run: a is ready; it waits for b before its first step",
                       "co-run: d is ready; it waits for b before its first step"]
    assert [r.status for r in eng.runs.values()] == ["ready", "running", "done", "ready"]
    go_now(eng, go, 95.0, waits)
    assert len(eng.log) == 2
    eng.runs["b"].ready = True
    go_now(eng, go, 95.0, waits)
    assert os.path.exists(go) and eng.log[2:] == ["co-run: all jobs ready after 5.0 s: go"]
    assert [r.status for r in eng.runs.values()] == ["running", "running", "done", "running"]


def test_a_script_that_never_reaches_a_dataloader_is_not_waited_for_past_the_limit(
        tmp_path, monkeypatch):
    go = str(tmp_path / "co-run.go")
    eng = fake_engine(run("a", ready=True), run("b"), run("c"))
    monkeypatch.setattr(start_barrier.time, "time", lambda: GO_WAIT_S - 0.1)
    go_now(eng, go, 0.0, {"a", "b", "c"})
    assert not os.path.exists(go)
    monkeypatch.setattr(start_barrier.time, "time", lambda: GO_WAIT_S)
    go_now(eng, go, 0.0, {"a", "b", "c"})
    assert os.path.exists(go)
    assert eng.log == ["co-run: a is ready; it waits for b, c before its first step",
                       f"co-run: b, c have not reached a DataLoader pass after {GO_WAIT_S:.0f} "
                       "s: go without waiting for them"]
    assert eng.runs["a"].status == "running"


def test_a_builtin_trainer_still_building_is_waited_for_past_the_limit(tmp_path, monkeypatch):
    go = str(tmp_path / "co-run.go")
    eng = fake_engine(run("a", ready=True), run("t", command=False))
    monkeypatch.setattr(start_barrier.time, "time", lambda: 10 * GO_WAIT_S)
    go_now(eng, go, 0.0, {"a", "t"})
    assert not os.path.exists(go)  # it always says "started" or ends


def test_a_command_without_the_hook_is_not_waited_for(tmp_path, monkeypatch):
    go = str(tmp_path / "co-run.go")
    monkeypatch.setattr(start_barrier.time, "time", lambda: 1.0)
    eng = fake_engine(run("a", ready=True), run("b", ready=True), run("noise"))
    go_now(eng, go, 0.0, {"a", "b"})  # "noise": GPUTOP_DL_HOOK = "0", never waited for
    assert os.path.exists(go) and eng.log == ["co-run: all jobs ready after 1.0 s: go"]


def test_the_jobs_that_wait_are_trainers_and_hooked_scripts_two_at_least(monkeypatch):
    from gputop_dl.workload import Workload

    monkeypatch.delenv("GPUTOP_DL_HOOK", raising=False)
    trainer, script = Workload(name="t"), Workload(name="s", command=("python", "train.py"))
    off = Workload(name="n", command=("dd", "if=/dev/zero"), env={"GPUTOP_DL_HOOK": "0"})
    assert barrier_jobs([trainer, script, off]) == {"t", "s"}  # "n" cannot wait: no hook
    assert barrier_jobs([trainer, off]) == set()  # one job alone waits for nobody
    assert barrier_jobs([]) == set()


@pytest.mark.shares_box("the order of the start barrier, not its speed")
def test_real_launch_a_script_that_starts_late_is_waited_for(tmp_path):
    """Two calibrated scripts, the second started 8 s late (a shell sleeps first): the first
    says "ready" and waits, so both scripts' first steps begin after the go, and the
    verdict's window holds the warm steps of both."""
    argv = [sys.executable, CALIBRATED, "--steps", "30", "--sample-io-ms", "5",
            "--compute-ms", "20"]
    late = ["sh", "-c", "sleep 8; exec " + shlex.join(argv)]
    body = ('[session]\nname = "barrier"\ninterval = 0.5\nbaseline = "none"\n'
            '[defaults]\nwarmup_steps = 3\n'
            f'[[workload]]\nname = "a"\ncommand = {json.dumps(argv)}\n'
            f'[[workload]]\nname = "b"\ncommand = {json.dumps(late)}\n')
    eng = run_file(write(tmp_path, "b.toml", body), nvml=Nvml())
    said = [(t, line) for t, line in eng.log if line.startswith("co-run: all jobs ready")]
    assert len(said) == 1, eng.log
    held = [(t, line) for t, line in eng.log if "is ready; it waits" in line]
    assert [line for _, line in held] == [  # a said it waited for b, once, before the go
        "co-run: a is ready; it waits for b before its first step"], eng.log
    assert held[0][0] < said[0][0]
    store = Store()
    ready = {n: store.events(eng.session_id, job=n, ev="ready", phase="co-run") for n in "ab"}
    assert all(len(ready[n]) == 1 for n in "ab"), ready
    assert ready["a"][0]["t"] < ready["b"][0]["t"]  # b slept first: a was ready before it
    go_t = said[0][0]
    for n in "ab":
        r = eng.runs[n]
        assert r.status == "done" and len(r.steps) == 30, (n, r.status, r.stderr_tail)
        first = r.steps[0]
        assert first["t"] - first["t_step"] >= go_t - 0.5  # no step before the go
        assert first["t"] - first["t_step"] >= ready["b"][0]["t"] - 0.1  # a waited for b
        assert first["t_step"] < 1.0  # the wait is no part of the first step
    assert all(j["steps"] >= 20 for j in eng.verdict["jobs"]), eng.verdict


def test_who_gets_the_hook_and_so_can_wait():
    from gputop_dl.control.launch import hooked
    from gputop_dl.workload import Workload

    script = Workload(name="s", command=("python", "train.py"))
    assert hooked(script, {}) and not hooked(script, {"GPUTOP_DL_HOOK": "0"})
    off = Workload(name="n", command=("dd", "if=/dev/zero"), env={"GPUTOP_DL_HOOK": "0"})
    assert not hooked(off, {})
    assert not hooked(Workload(name="t"), {})  # the built-in trainer reports by itself


def test_a_job_at_the_barrier_reads_ready_and_live_everywhere():
    from dataclasses import replace

    from gputop_dl.analyse.recorded.summary import status_after
    from gputop_dl.present.tui.epoch_panel import current_epoch
    from gputop_dl.present.tui.jobs_table import status_text
    from gputop_dl.snapshot import JobSample

    j = JobSample(name="a", pid=10, launched=True, pids=(10,), status="ready")
    assert status_text(j) == "ready: waits for the others"
    live = replace(j, step=2, step_time_s=0.5, steps_per_epoch=10)
    assert current_epoch(live) == (1.0, 5.0)  # a live job's running epoch, not an ended one's
    assert current_epoch(replace(live, status="done")) is None
    # a session killed while a job waited at the barrier: the job reads interrupted
    assert status_after("ready", "interrupted") == "interrupted"
    assert status_after("ready", None) == "ready"
