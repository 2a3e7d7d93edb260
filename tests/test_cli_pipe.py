"""A closed stdout (`gputop-dl schema snapshot | head -1`) is a quiet exit 141, never a
BrokenPipeError traceback; a broken pipe that is not stdout's still shows."""

import os
import subprocess
import sys

import pytest

from gputop_dl import cli, runner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=ROOT)


@pytest.mark.parametrize("argv", [["schema", "snapshot"], ["--once", "--json"], ["sessions", "--json"],
                                  ["machine", "--quick", "--json"]])
def test_a_reader_gone_before_the_output_is_exit_141_without_a_traceback(argv, tmp_path):
    """The read end is closed before the child has even started Python: its first write to
    stdout meets no reader, whatever the output's size."""
    p = subprocess.Popen([sys.executable, "-m", "gputop_dl", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=_env(), cwd=tmp_path)
    p.stdout.close()
    _, err = p.communicate(timeout=120)
    err = err.decode()
    assert p.returncode == cli.EXIT_PIPE, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err
    assert all(line.startswith("gputop-dl: ") for line in err.splitlines()), err


def test_piped_into_head_c_1_no_traceback():
    """The shell's way. The schema (28 kB) may fit in the pipe before `head` exits (exit 0) or
    meet its closed end (exit 141); either way stderr stays empty."""
    r = subprocess.run(["bash", "-c", f"'{sys.executable}' -m gputop_dl schema snapshot | head -c 1;"
                        " echo \" ${PIPESTATUS[0]}\""], capture_output=True, text=True, env=_env(),
                       timeout=60)
    assert r.stdout.startswith("{") and r.stdout.split()[-1] in ("0", str(cli.EXIT_PIPE)), r.stdout
    assert r.stderr == ""


def test_a_broken_pipe_that_is_not_stdout_is_raised(monkeypatch, capsys):
    def broken(*a, **k):
        raise BrokenPipeError(32, "Broken pipe")  # as a socket or a child's stdin would

    monkeypatch.setattr(runner, "run_schema", broken)
    with pytest.raises(BrokenPipeError):
        cli.main(["schema", "snapshot"])


@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_a_headless_launch_into_head_1_is_141_with_its_jobs_stopped_and_session_kept(tmp_path,
                                                                                      reader):
    """Rich's console ended a headless launch with exit 1 from inside a print; the reader
    gone is 141 as for every other command, the jobs stopped, the session kept. `true` reads
    nothing: the header's first line already finds the reader gone (the session was left
    running when the header was printed outside the launch's stop on a closed pipe)."""
    import sqlite3

    from tests.conftest import write

    job = ('[[workload]]\nname = "{n}"\nmodel = "synthetic"\ninput_size = 8\nnum_classes = 10\n'
           'batch_size = 4\nnum_workers = 0\nstep_device_ms = 20.0\nepochs = 1\n'
           'steps_per_epoch = 400\nwarmup_steps = 1\n')
    path = write(tmp_path, "w.toml", '[session]\nname = "p"\ninterval = 0.3\nbaseline = "none"\n'
                 + job.format(n="a") + job.format(n="b"))
    home = tmp_path / "home"
    r = subprocess.run(["bash", "-c", f"'{sys.executable}' -m gputop_dl launch '{path}' --headless"
                        f" | {reader} >/dev/null; echo ${{PIPESTATUS[0]}}"], capture_output=True,
                       text=True, env=dict(_env(), GPUTOP_DL_HOME=str(home)), timeout=120)
    assert r.stdout.split()[-1] == str(cli.EXIT_PIPE), r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    db = sqlite3.connect(f"file:{home / 'sessions.db'}?mode=ro", uri=True)
    [(state,)] = db.execute("SELECT state FROM sessions").fetchall()
    statuses = {s for (s,) in db.execute("SELECT status FROM jobs")}
    assert state in ("interrupted", "cut short") and "running" not in statuses, (state, statuses)
