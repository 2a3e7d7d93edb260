"""`gputop-dl simulate` on the workload file that `queue` runs, calibrated from this machine's recordings."""

from __future__ import annotations

import json
import sys

import pytest

from gputop_dl.cli import main
from gputop_dl.record.store import Store
from tests.schema_check import check

PY = json.dumps(sys.executable)


def queue_file(tmp_path, jobs: list[tuple[str, float, float | None]], slots: int = 1, extra: str = "") -> str:
    """A workload file as `gputop-dl queue` runs it: (name, arrival, duration_s or None)."""
    body = f'[session]\npolicy = "sjf"\nslots = {slots}\n{extra}\n'
    for name, arrival, dur in jobs:
        body += (f'[[workload]]\nname = "{name}"\narrival = {arrival}\ncommand = [{PY}, "-c", "pass"]\n'
                 + (f"duration_s = {dur}\n" if dur else "") + "\n")
    path = tmp_path / "q.toml"
    path.write_text(body)
    return str(path)


LONG_FIRST = [("long1", 0, 10), ("long2", 0.1, 10), ("short1", 0.2, 1), ("short2", 0.3, 1)]


def test_simulate_runs_the_queue_file_and_sjf_beats_fifo_on_a_long_job_first_queue(tmp_path, capsys):
    path = queue_file(tmp_path, LONG_FIRST)
    assert main(["simulate", path, "--json", "--policies", "fifo,sjf"]) == 0
    out = capsys.readouterr()
    doc = check(json.loads(out.out))
    res = {r["policy"]: r for r in doc["results"]}
    assert {r["rate"] for r in doc["results"]} == {None}  # the listed arrivals, replayed once
    assert all(r["jobs"] == 4 for r in doc["results"])
    # FIFO: long1, long2, short1, short2; SJF: long1, short1, short2, long2
    assert res["fifo"]["mean_jct_s"] == pytest.approx((10 + 19.9 + 20.8 + 21.7) / 4)
    assert res["sjf"]["mean_jct_s"] == pytest.approx((10 + 10.8 + 11.7 + 21.9) / 4)
    assert res["sjf"]["mean_jct_s"] <= res["fifo"]["mean_jct_s"]
    assert doc["setup"]["machine"]["gpus"] == 1  # [session] slots = 1, no CUDA here
    assert doc["setup"]["job_sources"]["short1"].startswith("1.0 s from duration_s")
    assert "cpu_interference = 1, the file's or the default (no recorded co-run" in out.err


def test_simulate_the_queue_file_with_rates_draws_poisson_arrivals(tmp_path, capsys):
    path = queue_file(tmp_path, LONG_FIRST, slots=2)
    assert main(["simulate", path, "--json", "--policies", "fifo", "--rates", "0.1", "--jobs", "40",
                 "--seeds", "2"]) == 0
    rows = check(json.loads(capsys.readouterr().out))["results"]
    assert [(r["rate"], r["seed"], r["jobs"]) for r in rows] == [(0.1, 1, 40), (0.1, 2, 40)]


def test_a_job_with_no_duration_and_no_cached_profile_is_one_line_exit_2(tmp_path, capsys):
    path = queue_file(tmp_path, [("a", 0, 2), ("nodur", 0.5, None)])
    assert main(["simulate", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}: [[workload]] 'nodur' (line " in err
    assert "no expected duration for job 'nodur' and no cached solo profile, expected duration_s" in err


def test_a_built_in_job_takes_its_duration_and_cpu_need_from_its_cached_solo_profile(tmp_path, capsys):
    from gputop_dl.collect.environment import environment
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.config import load_session
    from gputop_dl.collect.jobs.fingerprint import fingerprint

    path = tmp_path / "q.toml"
    path.write_text('[session]\nslots = 1\n\n[[workload]]\nname = "syn"\nmodel = "synthetic"\n'
                    'epochs = 2\nsteps_per_epoch = 10\narrival = 0\n')
    assert main(["simulate", str(path)]) == 2  # nothing cached yet
    assert "launch " + str(path) + " --only syn` once to cache its solo profile" in capsys.readouterr().err
    nvml = Nvml()
    w = load_session(str(path), gpu_count=nvml.device_count()).workloads[0]
    st = Store()
    sid = st.create_session("solo", file=None, command="x", kind="launch", environment={})
    st.save_baseline(fingerprint(w, False, environment(nvml)), sid, "syn",
                     {"step_time_s": 0.05, "cpu_cores": 1.5})
    st.commit()
    st.close()
    assert main(["simulate", str(path), "--json"]) == 0
    out = capsys.readouterr()
    assert "job syn: 1.0 s from 20 steps x solo 0.050 s; CPU 1.5 cores from cached solo baseline" in out.err
    doc = check(json.loads(out.out))
    assert doc["setup"]["cpu_aware"] is True  # a cached CPU need turns admission on, as in `queue`
    assert all(r["mean_jct_s"] == pytest.approx(1.0) for r in doc["results"])


def test_a_trace_and_a_workload_file_mixed_in_one_file_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "mixed.toml"
    path.write_text('[session]\npolicy = "sjf"\n\n[machine]\ngpus = 2\n\n[[workload]]\nname = "a"\nduration_s = 1\n')
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}: top level: a trace and a workload file mixed in one file ([machine] is a trace's, " \
           "[session] a workload file's)" in err
    path.write_text('[[workload]]\nname = "a"\nduration_s = 1\nshare = 2\ncommand = ["true"]\n')
    assert main(["simulate", str(path)]) == 2
    assert "mixed in one file (key 'share' is a trace's, key 'command' a workload file's)" in capsys.readouterr().err


def record_verdict(verdict: dict) -> str:
    st = Store()
    sid = st.create_session("co-run", file=None, command="x", kind="launch", environment={})
    st.end_session(sid, "finished", verdict)
    st.commit()
    st.close()
    return sid


def test_simulate_is_calibrated_by_default_from_recorded_co_runs_cpu_and_shared_gpu(tmp_path, capsys):
    """The CPU coefficient from the newest co-run that measured it; the shared-GPU factor from
    a co-run whose jobs shared a GPU (two emulated-GPU jobs on GPU 0, as the fake NVML shows
    them), each said on stderr with its session."""
    trace = tmp_path / "t.toml"
    trace.write_text('[trace]\njobs = 20\nseeds = 1\nrates = [1]\n\n[machine]\ngpus = 2\ncpus = 4\n'
                     'jobs_per_gpu = 2\n\n[[workload]]\nname = "a"\nduration_s = 1\ncpu_cores = 1\n')
    cpu_sid = record_verdict({"kind": "cpu-bound", "evidence": {
        "solo_cpu_need_cores": 6.0, "cpus": 4, "slowdowns": {"a": 2.0, "b": 2.0}}})
    gpu_sid = record_verdict({"kind": "gpu-bound", "evidence": {
        "shared_gpus": {"0": ["x", "y"]}, "slowdowns": {"x": 2.4, "y": 2.2}}})
    assert main(["simulate", str(trace), "--json"]) == 0
    out = capsys.readouterr()
    assert f"cpu_interference = 2, from session {cpu_sid}" in out.err
    assert f"gpu_share = 1.15, from session {gpu_sid}: 2 jobs on GPU 0, median slowdown 2.30" in out.err
    setup = check(json.loads(out.out))["setup"]
    assert (setup["cpu_interference"], setup["gpu_share"]) == (2.0, 1.15)
    assert main(["simulate", str(trace), "--json", "--no-calibrate"]) == 0
    out = capsys.readouterr()
    assert "cpu_interference = 1, the file's or the default (--no-calibrate)" in out.err
    assert check(json.loads(out.out))["setup"]["gpu_share"] == 1.0


def test_the_shared_gpu_factor_scales_the_time_slice_slowdown():
    from gputop_dl.sched.model import Job, Machine, Running
    from gputop_dl.sched.simulate import slowdowns

    m = Machine(gpus=1, cpus=8, jobs_per_gpu=2)
    two = [Running(Job("a", gpu_util=0.8), 0, (0,)), Running(Job("b", gpu_util=0.7), 0, (0,))]
    assert slowdowns(two, m) == pytest.approx([1.5, 1.5])
    assert slowdowns(two, m, gpu_share=1.2) == pytest.approx([1.8, 1.8])
    alone = [Running(Job("a", gpu_util=0.8), 0, (0,))]
    assert slowdowns(alone, m, gpu_share=1.2) == [1.0]  # no sharing, no slowdown
