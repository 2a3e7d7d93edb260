"""Bounds on what an input file can ask for: checked before anything starts, one
line naming the file, the key and the bound, exit 2."""

import os
import subprocess
import sys

import pytest

from gputop_dl import cli
from gputop_dl.config import ConfigError, load_session
from gputop_dl.tomlcheck import MAX_DEPTH, MAX_FILE, bracket_depth, read_toml, value_depth
from tests.conftest import write

OK = '[session]\nname = "s"\nbaseline = "none"\n[[workload]]\nname = "a"\ncommand = ["true"]\n'


def one_line_error(path, **kw) -> str:
    with pytest.raises(ConfigError) as e:
        load_session(path, gpu_count=0, **kw)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("path, kind", [("/dev/zero", "a character device"),
                                        ("/dev/urandom", "a character device")])
def test_a_device_is_refused_by_its_type(path, kind):
    assert f"{path}: is {kind}, not a regular file" in one_line_error(path)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "w.toml"
    os.mkfifo(fifo)
    assert "is a FIFO (named pipe), not a regular file" in one_line_error(str(fifo))


def test_a_directory_is_refused_by_its_type(tmp_path):
    assert "is a directory, not a regular file" in one_line_error(str(tmp_path))


def test_a_file_over_the_size_cap_is_refused_before_it_is_parsed(tmp_path):
    path = write(tmp_path, "w.toml", OK + "#" * MAX_FILE)
    msg = one_line_error(path)
    assert f"the file is {MAX_FILE + len(OK)} bytes" in msg and f"at most {MAX_FILE >> 20} MiB" in msg


@pytest.mark.parametrize("deep", [
    "x = " + "[" * 1200 + "]" * 1200,
    "x = " + "{a = " * 1200 + "1" + "}" * 1200,
    "x = [" + "{a = [" * 600 + "]}" * 600 + "]",
    "a" + ".a" * 1200 + " = 1",  # dotted keys: no bracket, as deep once parsed
    "[" + ".".join(["t"] * 1200) + "]\nb = 1",
    "x = " + "[" * 1200,  # unclosed: tomllib would recurse before it found the error
])
def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path, deep):
    path = write(tmp_path, "w.toml", OK + deep + "\n")
    msg = one_line_error(path)
    assert f"nested more than {MAX_DEPTH} levels deep" in msg


def test_brackets_in_strings_and_comments_are_not_nesting(tmp_path):
    text = OK.replace('["true"]', '["echo", "' + "[" * 100 + '", \'' + "{" * 100 + "', "
                      '"""' + "[" * 100 + '"""]') + "# " + "[" * 100 + "\n"
    assert bracket_depth(text) <= 2
    _, data = read_toml(write(tmp_path, "w.toml", text), "workload")
    assert value_depth(data) == 4  # root, workload array, its table, command, a string
    assert load_session(write(tmp_path, "w.toml", text), gpu_count=0).workloads[0].command[1] == "[" * 100


def test_an_ordinary_nesting_is_fine(tmp_path):
    text = "x = " + "[" * 30 + "]" * 30 + "\ny = [[1], [2], [3]]\n"
    assert bracket_depth(text) == 30
    _, data = read_toml(write(tmp_path, "n.toml", text), "workload")
    assert value_depth(data) == 30


@pytest.mark.parametrize("cmd", ["launch", "queue", "simulate"])
def test_every_command_that_reads_a_workload_file_refuses_dev_zero(cmd, capsys):
    args = [cmd, "/dev/zero"] + (["--headless"] if cmd != "simulate" else [])
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("gputop-dl: error: /dev/zero: is a character device, not a regular file, "
                   f"expected a TOML {'trace or ' if cmd == 'simulate' else ''}workload file "
                   "(nothing was read from it)")


def test_launch_of_a_deep_file_is_exit_2_and_one_line(tmp_path):
    path = write(tmp_path, "w.toml", OK + "x = " + "[" * 1200 + "]" * 1200 + "\n")
    p = subprocess.run([sys.executable, "-m", "gputop_dl", "launch", path, "--headless"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "nested more than" in p.stderr


# ---- values: counts, lengths, durations ----------------------------------------------------

def workload_file(tmp_path, session: str = "", job: str = "") -> str:
    name = "" if "name =" in session else 'name = "s"\n'
    command = "" if "command =" in job else 'command = ["true"]\n'
    return write(tmp_path, "w.toml", f'[session]\n{name}baseline = "none"\n{session}\n'
                 f'[[workload]]\nname = "a"\n{command}{job}\n')


@pytest.mark.parametrize("key", ["nproc", "threads", "num_workers"])
def test_processes_and_threads_are_bounded_by_the_cores(tmp_path, monkeypatch, key):
    monkeypatch.setattr("gputop_dl.config.usable_cpus", lambda: 2)
    msg = one_line_error(workload_file(tmp_path, job=f"{key} = 100000"))
    assert f"key '{key}'" in msg and f"{key} = 100000 is more than 4 per usable core (2 here)" in msg
    assert "at most 8 (or [session] oversubscribe = N, now 4, up to 64)" in msg
    spec = load_session(workload_file(tmp_path, job=f"{key} = 8"), gpu_count=0)
    assert getattr(spec.workloads[0], key) == 8


def test_oversubscribe_raises_the_bound_up_to_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr("gputop_dl.config.usable_cpus", lambda: 2)
    path = workload_file(tmp_path, "oversubscribe = 8", "num_workers = 16")
    assert load_session(path, gpu_count=0).workloads[0].num_workers == 16
    msg = one_line_error(workload_file(tmp_path, "oversubscribe = 8", "num_workers = 17"))
    assert "at most 16 ([session] oversubscribe = 8, up to 64)" in msg
    assert "expected nproc, threads and num_workers per usable core, 1 to 64" in one_line_error(
        workload_file(tmp_path, "oversubscribe = 65"))


@pytest.mark.parametrize("session, job, words", [
    ('name = "' + "n" * 5_000_000 + '"', "", "[session] key 'name' (line 3): name has 5000000 characters, "
     "expected at most 200"),
    ("", "gpus = [" + ", ".join(map(str, range(100_000))) + "]", "gpus lists 100000 GPUs, expected at most 64"),
    ("", "gpus = [0, 100]", "has the index 100, expected GPU indexes from 0 to 63"),
    ("", "priority = 99999999999999999999999", "does not fit in 64 bits"),
    ("", "arrival = 1e12", "expected at most 31622400 seconds (a year)"),
    ("", "duration_s = 1e12", "expected at most 31622400 seconds (a year)"),
    ("baseline_timeout_s = 1e12", "", "expected at most 31622400 seconds (a year)"),
    ("", "nnodes = 100000", "nnodes = 100000, expected at most 4096"),
    ("slots = 100000", "", "slots = 100000, expected at most 4096"),
    ("", 'cwd = "' + "d/" * 3000 + '"', "cwd has 6000 characters, expected a path of at most 4096"),
    ("", 'env = {A = "1"}\ncommand = ["echo", "' + "x" * 70_000 + '"]', "command[1] has 70000 characters"),
    ("", 'command = ["echo", ' + ", ".join(['"' + "x" * 60_000 + '"'] * 3) + "]",
     "command holds 180008 bytes, expected at most 131072 bytes in all"),
])
def test_lengths_counts_and_durations_are_bounded(tmp_path, session, job, words):
    assert words in one_line_error(workload_file(tmp_path, session, job))


def test_a_trace_is_bounded_too(tmp_path):
    from gputop_dl.errors import UsageError
    from gputop_dl.config.trace import MAX_SIMULATED, load_trace, with_overrides

    body = '[trace]\n{}\n[machine]\ngpus = 2\n[[workload]]\nname = "a"\nduration_s = 10\n'
    for line, words in (("jobs = 10000000", "jobs = 10000000, expected at most 1000000"),
                        ("seeds = 5000", "seeds = 5000, expected at most 1000"),
                        ("rates = [" + ", ".join(["1"] * 100) + "]", "rates has 100 rates, expected at most 64"),
                        ('name = "' + "t" * 300 + '"', "name has 300 characters")):
        with pytest.raises(ConfigError, match=words.replace("[", r"\[")):
            load_trace(write(tmp_path, "t.toml", body.format(line)))
    trace = load_trace(write(tmp_path, "t.toml", body.format("")))
    with pytest.raises(UsageError, match=f"simulated jobs, expected at most {MAX_SIMULATED}"):
        with_overrides(trace, jobs=1_000_000, seeds=10)
    with pytest.raises(UsageError, match="--seeds 5000: expected 1 to 1000"):
        with_overrides(trace, seeds=5000)


@pytest.mark.parametrize("name", [".", ".."])
def test_the_names_dot_and_dot_dot_are_refused(tmp_path, name):
    path = write(tmp_path, "w.toml", OK.replace('name = "a"', f'name = "{name}"'))
    msg = one_line_error(path)
    assert f"[[workload]] #1 key 'name' (line 5): name = \"{name}\" names a folder itself" in msg
    ok = load_session(write(tmp_path, "w.toml", OK.replace('name = "a"', 'name = "..."')), gpu_count=0)
    assert ok.workloads[0].name == "..."


@pytest.mark.parametrize("argv", [
    ["--interval", "1e9"], ["--interval", "0"], ["--interval", "nan"],
    ["serve", "--interval", "1e9"], ["--interval", "1e9", "diagnose"],
    ["--interval", "4", "diagnose", "--seconds", "9"],  # a third observing: 3 s, one sample
    ["--once", "--interval", "2"], ["--nodes", "127.0.0.1:1", "--interval", "0.01"],
    ["diagnose", "--pid", "999999999"],
])
def test_every_interval_is_bounded_and_a_missing_pid_refused_before_anything_runs(argv, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gputop-dl: error: --")
