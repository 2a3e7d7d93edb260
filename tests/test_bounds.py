"""Bounds on what an input file can ask for (issue 37): checked before anything starts, one
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
