"""Truth in the fault messages: a SIGKILL is blamed on the OOM killer only when
the kernel's counters say so."""

import pytest

from gputop_dl.collect.proc.oomkill import OomCounts, cgroup_file, oom_killed, read_counts
from gputop_dl.control.stop import describe_exit
from tests.conftest import write


def fake_machine(tmp_path, vmstat: int, events: int | None, line: str = "0::/jobs/a"):
    proc, root = tmp_path / "proc", tmp_path / "cg"
    (proc / "42").mkdir(parents=True, exist_ok=True)
    (proc / "vmstat").write_text(f"pgfault 7\noom_kill {vmstat}\nnr_foo 1\n")
    (proc / "42" / "cgroup").write_text(line + "\n")
    if events is not None:
        d = root / "jobs" / "a"
        d.mkdir(parents=True, exist_ok=True)
        (d / "memory.events").write_text(f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {events}\n")
    return str(proc), str(root)


def test_a_rise_of_the_jobs_cgroup_oom_kill_count_is_an_oom_kill(tmp_path):
    proc, root = fake_machine(tmp_path, vmstat=5, events=0)
    before = read_counts(42, proc=proc, root=root)
    assert before == OomCounts(5, 0, f"{root}/jobs/a/memory.events")
    fake_machine(tmp_path, vmstat=5, events=1)
    assert oom_killed(before, read_counts(None, where=before.cgroup_file, proc=proc)) is True


def test_a_rise_of_the_hosts_count_alone_is_an_oom_kill_too(tmp_path):
    proc, root = fake_machine(tmp_path, vmstat=5, events=None, line="0::/")
    before = read_counts(42, proc=proc, root=root)
    assert before.cgroup is None and before.host == 5
    fake_machine(tmp_path, vmstat=6, events=None, line="0::/")
    assert oom_killed(before, read_counts(None, where=None, proc=proc)) is True


def test_flat_counters_mean_no_oom_kill_and_unreadable_ones_mean_unknown(tmp_path):
    proc, root = fake_machine(tmp_path, vmstat=5, events=2)
    before = read_counts(42, proc=proc, root=root)
    assert oom_killed(before, read_counts(None, where=before.cgroup_file, proc=proc)) is False
    nothing = OomCounts(None, None, None)
    assert oom_killed(nothing, nothing) is None and oom_killed(None, before) is None


def test_a_cgroup_v1_memory_controller_is_read_too(tmp_path):
    proc, root = fake_machine(tmp_path, vmstat=0, events=None, line="4:memory:/box")
    (tmp_path / "cg" / "memory" / "box").mkdir(parents=True)
    (tmp_path / "cg" / "memory" / "box" / "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert read_counts(42, proc=proc, root=root).cgroup == 3
    assert cgroup_file(43, proc=proc, root=root) is None  # no such process


@pytest.mark.parametrize("oom, words", [
    (True, "killed by SIGKILL by the kernel's OOM killer (its oom_kill count rose while the job ran)"),
    (False, "killed by SIGKILL (sent by another process)"),
    (None, "killed by SIGKILL (sent by another process, or the OOM killer: its counters could not be read"),
])
def test_a_sigkill_is_blamed_on_what_the_kernel_says(oom, words):
    assert describe_exit(-9, False, oom).startswith(words)
    assert describe_exit(-9, True, oom) == "killed by SIGKILL"
    assert "OOM" not in describe_exit(-15, False, True)


def test_real_job_killed_by_hand_is_not_blamed_on_the_oom_killer(tmp_path):
    """A job that SIGKILLs itself (as `kill -9` by hand would): the kernel killed nothing."""
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner.engines import run_file

    before = read_counts(None)
    path = write(tmp_path, "w.toml", '[session]\nname = "k"\nbaseline = "none"\ninterval = 0.2\n'
                 '[[workload]]\nname = "k"\ncommand = ["sh", "-c", "kill -9 $$"]\n')
    eng = run_file(path, nvml=Nvml())
    if oom_killed(before, read_counts(None)):
        pytest.skip("the host's OOM killer killed something meanwhile")
    assert eng.runs["k"].failure == "killed by SIGKILL (sent by another process)"


def test_a_finished_sessions_verdict_never_says_so_far():
    from gputop_dl.analyse.verdict import judge
    from tests.test_verdict import CALM, job

    jobs = [job("a", steps=1), job("b", gpus=(1,))]
    live = judge(jobs, CALM).to_json()
    assert "so far" in live["reason"] and live["title"] == "not enough data yet"
    final = judge(jobs, CALM, final=True).to_json()
    assert "so far" not in final["reason"] and "yet" not in final["title"]
    assert final["reason"].startswith("fewer than 3 co-run steps for a in the whole session")
    assert judge([], CALM, final=True).reason == "no launched job ran"


def test_one_job_alone_is_no_co_run_and_has_no_stp():
    from gputop_dl.analyse.verdict import judge
    from tests.test_verdict import CALM, job

    v = judge([job("a", 0.99)], CALM).to_json()
    assert not any(line.startswith("STP") for line in v["evidence_lines"])
    assert any("one job ran, alone: a 0.99× its solo step time" in line for line in v["evidence_lines"])
    two = judge([job("a", 1.0), job("b", 1.0, gpus=(1,))], CALM).to_json()
    assert any(line.startswith("STP 2.00 for 2 jobs") for line in two["evidence_lines"])


def test_real_job_that_failed_its_baseline_is_not_started_again(tmp_path):
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner.engines import run_file

    path = write(tmp_path, "w.toml", '[session]\nname = "b"\nbaseline = "measure"\ninterval = 0.2\n'
                 'baseline_timeout_s = 20\n[[workload]]\nname = "bad"\ncommand = ["sh", "-c", "exit 3"]\n'
                 '[[workload]]\nname = "good"\ncommand = ["true"]\n')
    eng = run_file(path, nvml=Nvml())
    assert {n: (r.phase, r.status) for n, r in eng.runs.items()} == {
        "bad": ("baseline", "failed"), "good": ("co-run", "done")}  # bad ran once, alone
    assert eng.exit_code() == 1
    v = eng.plan.verdict
    assert v["evidence"]["failed_baseline"] == {"bad": "exited with code 3"}
    assert "bad failed its solo baseline (exited with code 3): not started again for the co-run" in v["evidence_lines"]
    assert "so far" not in v["reason"] and not any(line.startswith("STP") for line in v["evidence_lines"])
