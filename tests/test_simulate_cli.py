"""`gputop-dl simulate`: the trace file, the JSON contract, the report, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gputop_dl.cli import main
from gputop_dl.config import ConfigError
from gputop_dl.config.trace import load_trace
from tests.schema_check import check

ROOT = os.path.join(os.path.dirname(__file__), "..")
EXAMPLE = os.path.join(ROOT, "workloads", "queue_trace.toml")

SMALL = """\
[trace]
name = "small"
jobs = 60
seeds = 2

[machine]
gpus = 2
cpus = 8

[[workload]]
name = "long"
duration_s = 100
cpu_cores = 2

[[workload]]
name = "short"
share = 3
steps = 100
step_time_s = 0.1
priority = 2
"""


def write(tmp_path, text: str, name: str = "trace.toml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_the_example_trace_loads_and_its_offered_load_is_as_documented():
    t = load_trace(EXAMPLE)
    assert t.machine.gpus == 4 and t.machine.cpus == 16 and t.policies == ("fifo", "sjf", "priority", "lyapunov")
    kinds = {k.job.name: k for k in t.kinds}
    assert kinds["mobilenet-bs32"].job.duration_s == pytest.approx(3.0)  # steps x step time
    assert kinds["preprocess"].job.gpus == 0 and kinds["resnet50-ddp"].job.priority == 1
    assert t.offered_load(1.0) == pytest.approx(3.4 / 4)  # the file's comment


def test_json_contract_and_markdown_report(tmp_path, capsys):
    trace = write(tmp_path, SMALL)
    out = tmp_path / "report.md"
    assert main(["simulate", trace, "--policies", "fifo,sjf", "--rates", "0.01,0.02", "--json",
                 "--out", str(out)]) == 0
    doc = check(json.loads(capsys.readouterr().out))
    assert doc["schema"] == "gputop-dl.simulation/1"
    assert {(r["policy"], r["rate"], r["seed"]) for r in doc["results"]} == \
        {(p, r, s) for p in ("fifo", "sjf") for r in (0.01, 0.02) for s in (1, 2)}
    for r in doc["results"]:
        assert set(r) >= {"policy", "rate", "seed", "mean_jct_s", "p95_jct_s", "makespan_s", "mean_wait_s"}
        assert r["jobs"] == 60 and r["mean_jct_s"] >= 10  # no job is faster than alone
    md = out.read_text()
    assert md.startswith("# Simulated job queue: small") and "```mermaid" in md


def test_a_listed_trace_is_replayed_as_listed(tmp_path, capsys):
    listed = """[machine]\ngpus = 1\ncpus = 4\n
[[workload]]\nname = "long"\nduration_s = 100\narrival = 0\n
[[workload]]\nname = "s1"\nduration_s = 10\narrival = 1\n
[[workload]]\nname = "s2"\nduration_s = 10\narrival = 2\n"""
    assert main(["simulate", write(tmp_path, listed), "--policies", "fifo,sjf", "--json"]) == 0
    rows = {r["policy"]: r for r in check(json.loads(capsys.readouterr().out))["results"]}
    assert rows["fifo"]["rate"] is None and rows["fifo"]["seed"] is None
    assert rows["fifo"]["mean_jct_s"] == pytest.approx((100 + 109 + 118) / 3)
    assert rows["sjf"]["mean_jct_s"] == pytest.approx((100 + 109 + 118) / 3)  # long was alone first
    assert rows["fifo"]["makespan_s"] == pytest.approx(120)


def test_the_console_table(tmp_path, capsys):
    assert main(["simulate", write(tmp_path, SMALL), "--rates", "0.02", "--seeds", "1"]) == 0
    text = capsys.readouterr().out
    for policy in ("fifo", "sjf", "priority", "lyapunov"):
        assert policy in text
    assert "machine: 2 GPUs, 8 cores" in text


BAD_TRACES = [
    ("[trace]\npolicies = [\"fifo\", \"lifo\"]\n", "[trace] key 'policies' (line 2): unknown policy \"lifo\""),
    ("[trace]\nrates = [1, -0.5]\n", "[trace] key 'rates' (line 2): rates[1] = -0.5, expected a list of arrival rates"),
    ("[[workload]]\nname = \"x\"\nduration_s = 5\narrival = -3\n",
     "[[workload]] 'x' key 'arrival' (line 7): arrival = -3.0, expected a number 0 or more"),
    ("[[workload]]\nname = \"x\"\nduration_s = 5\npriority = 1.5\n",
     "[[workload]] 'x' key 'priority' (line 7): priority = 1.5 is a number, expected an integer"),
    ("[[workload]]\nname = \"x\"\nduration_s = 5\ngpus = 3\n",
     "[[workload]] 'x' key 'gpus' (line 7): gpus = 3 but the machine has 2 GPUs, expected at most 2"),
    ("[[workload]]\nname = \"x\"\nsteps = 5\n",
     "[[workload]] 'x' key 'steps' (line 6): steps without step_time_s"),
    ("[[workload]]\nname = \"x\"\n", "[[workload]] 'x' (line 4): no expected duration"),
    ("[[workload]]\nname = \"x\"\nduration_s = 5\nbatch_size = 4\n",
     "[[workload]] 'x' (line 7): unknown key 'batch_size'"),
    ("[[workload]]\nname = \"x\"\nduration_s = 5\narrival = 1\n[[workload]]\nname = \"y\"\nduration_s = 5\n",
     "[[workload]] 'y' (line 8): arrival on some workloads only"),
]


@pytest.mark.parametrize("extra,message", BAD_TRACES)
def test_bad_trace_is_one_line_naming_file_and_key_exit_2(tmp_path, capsys, extra, message):
    body = "[machine]\ngpus = 2\ncpus = 8\n"
    text = extra.replace("[[workload]]", body + "[[workload]]", 1) if extra.startswith("[[") else \
        extra + body + "[[workload]]\nname = \"ok\"\nduration_s = 5\n"
    path = write(tmp_path, text)
    with pytest.raises(ConfigError):
        load_trace(path)
    assert main(["simulate", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"gputop-dl: error: {path}: ")
    assert message in err, err


@pytest.mark.parametrize("args,message", [
    (["--policies", "fifo,lifo"], "--policies 'fifo,lifo': unknown policy 'lifo', expected comma-separated names from fifo, fifo-backfill, sjf, priority, lyapunov"),
    (["--rates", "1,-2"], "--rates '1,-2': expected arrival rates per second > 0"),
    (["--rates", "fast"], "--rates 'fast': expected arrival rates per second > 0"),
    (["--seeds", "0"], "--seeds 0: expected a positive integer"),
    (["--jobs", "-5"], "--jobs -5: expected a positive integer"),
])
def test_bad_arguments_are_one_line_exit_2(tmp_path, capsys, args, message):
    assert main(["simulate", write(tmp_path, SMALL), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gputop-dl: error: {message}")
    assert err.count("\n") == 1


def test_missing_machine_gpus_and_missing_file(tmp_path, capsys):
    path = write(tmp_path, "[[workload]]\nname = \"x\"\nduration_s = 5\n")
    assert main(["simulate", path]) == 2
    assert "[machine]: missing key 'gpus', expected the GPUs (or slots)" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml: cannot read the file" in capsys.readouterr().err


def test_simulate_from_the_command_line_exits_2_without_traceback(tmp_path):
    """The installed entry point, as a user runs it (a subprocess, so nothing is caught for us)."""
    path = write(tmp_path, "[machine]\ngpus = 1\n[[workload]]\nname = \"x\"\nduration_s = 5\ngpus = 2\n")
    r = subprocess.run([sys.executable, "-m", "gputop_dl", "simulate", path], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert "key 'gpus' (line 6): gpus = 2 but the machine has 1 GPU, expected at most 1" in r.stderr
    assert r.stderr.count("\n") == 1


def test_interference_alpha_from_a_recorded_co_run():
    from gputop_dl.analyse.recorded.interference import cpu_alpha

    v = {"evidence": {"solo_cpu_need_cores": 3.2, "cpus": 2, "slowdowns": {"a": 2.4, "b": 2.2,
                                                                             "c": 2.1}}}
    alpha, how = cpu_alpha(v)
    assert alpha == pytest.approx((2.2 - 1) / ((3.2 - 2) / 2)) and "median slowdown 2.20" in how
    # undersubscribed, or no slowdowns measured: nothing to read
    assert cpu_alpha({"evidence": {"solo_cpu_need_cores": 1.5, "cpus": 2,
                                   "slowdowns": {"a": 1.3}}}) is None
    assert cpu_alpha({"evidence": {"solo_cpu_need_cores": 3.0, "cpus": 2}}) is None
    assert cpu_alpha(None) is None


def test_simulate_calibrate_takes_alpha_from_the_newest_recorded_co_run(tmp_path, capsys):
    from gputop_dl.record.store import Store

    trace = os.path.join(os.path.dirname(__file__), "..", "workloads", "queue_trace.toml")
    assert main(["simulate", trace, "--calibrate", "--json", "--rates", "1", "--seeds", "1",
                 "--jobs", "50"]) == 2
    assert "no recorded sessions" in capsys.readouterr().err
    store = Store()
    sid = store.create_session("co-run", file=None, command="x", kind="launch", environment={})
    store.end_session(sid, "finished", {"kind": "cpu-bound", "evidence": {
        "solo_cpu_need_cores": 6.0, "cpus": 4, "slowdowns": {"a": 2.0, "b": 2.0}}})
    store.commit()
    store.close()
    assert main(["simulate", trace, "--calibrate", "--json", "--rates", "1", "--seeds", "1",
                 "--jobs", "50"]) == 0
    out = capsys.readouterr()
    assert f"cpu_interference = 2, from session {sid}" in out.err
    assert check(json.loads(out.out))["setup"]["cpu_interference"] == 2.0
