"""End to end in a real terminal: `gputop-dl launch` of a tiny synthetic workload inside tmux,
and the plain monitor finding a job started by hand.

The real CLI, engine, trainer children and TUI run in a detached 160×50 tmux session on a private
tmux socket; the test reads the screen with `capture-pane`, checks the jobs table, then quits
with `q`, answers the confirmation (jobs are still running) with `y`, and checks that gputop-dl
stopped its jobs, left no trainer processes behind and exited with 130 (interrupted).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid

import psutil
import pytest

pytestmark = [pytest.mark.shares_box("a terminal's screen and keys"),
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOAD = """
[session]
name = "tmux tiny"
interval = 0.5
baseline = "none"

[defaults]
model = "synthetic"
dataset = "synthetic"
input_size = 4
num_classes = 4
num_workers = 0
batch_size = 4
epochs = 2
steps_per_epoch = 200
warmup_steps = 1
sample_cpu_ms = 0.5
step_device_ms = 30
threads = 1

[[workload]]
name = "alpha"
gpus = [0]

[[workload]]
name = "beta"
gpus = [1]
"""


class Tmux:
    def __init__(self, tmp_path):
        self.socket = f"gdl-test-{uuid.uuid4().hex[:8]}"
        self.session = "gdl"
        self.tmp = tmp_path

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        if check and out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {out.stderr}")
        return out.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session)

    def wait_for(self, pattern: str, timeout: float) -> str:
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            text = self.screen()
            if re.search(pattern, text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {pattern!r}; screen:\n{text}")

    def wait_size(self, cols: int, rows: int, timeout: float = 5.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            size = self.run("display", "-p", "-t", self.session, "#{pane_width}x#{pane_height}").strip()
            if size == f"{cols}x{rows}":
                return
            time.sleep(0.05)
        raise AssertionError(f"tmux pane is {size}, not {cols}x{rows}")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.session, *keys)

    def kill(self) -> None:
        self.run("kill-server", check=False)
        sock = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", self.socket)
        if os.path.exists(sock):
            os.unlink(sock)


def start_launch(tmp_path, wrap: str = "") -> tuple[Tmux, str, object]:
    """gputop-dl launch of the tiny workload in a fresh 160×50 tmux pane; (tmux, home, status
    file). `wrap`: a command it runs under (`setsid -w`: a session of its own, as `su -c`)."""
    home = tmp_path / "home"
    home.mkdir()
    wfile = tmp_path / "tiny.toml"
    wfile.write_text(WORKLOAD)
    status = tmp_path / "exit-status"
    # COLUMNS/LINES from the test runner's environment would override the pane's real size
    cmd = (f"cd {ROOT} && env -u COLUMNS -u LINES GPUTOP_DL_HOME={home} TERM=xterm-256color "
           f"{wrap} {sys.executable} -m gputop_dl launch {wfile}; echo $? > {status}")
    tmux = Tmux(tmp_path)
    # start a plain shell, wait until the pane really is 160×50, then type the command: a
    # program started while tmux is still sizing the pane can miss the resize
    tmux.run("-f", "/dev/null", "new-session", "-d", "-s", tmux.session, "-x", "160", "-y", "50", "sh")
    tmux.wait_size(160, 50)
    tmux.keys(cmd, "Enter")
    return tmux, str(home), status


def wait_file(path, timeout: float) -> None:
    """Until the shell in the pane has written `path` (gputop-dl's exit status), or `timeout`."""
    end = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.2)


def processes_using(path: str) -> list[int]:
    """Processes with `path` in their command line (gputop-dl and its trainers for this test)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(path in part for part in p.info["cmdline"] or ()):
                out.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def wait_gone(path: str, timeout: float) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = processes_using(path)
        if not left:
            return []
        time.sleep(0.2)
    return processes_using(path)


def test_launch_in_tmux_shows_jobs_and_quits_cleanly(tmp_path):
    tmux, home, status = start_launch(tmp_path)
    try:
        # both jobs appear in the jobs table, running, and make progress (which other columns
        # show depends on the width: device and batch go before the live figures)
        text = tmux.wait_for(r"● alpha\s.*\brunning\b.*\b1/2 · \d+/200", timeout=40)
        assert "gputop-dl · launch · tmux tiny · session " in text, "\n" + text
        assert "No NVIDIA GPU" in text or "GPUs" in text
        # the step-time columns are hidden while every value in them is still unknown: they come
        # once a step time is measured, however late that is on a loaded machine
        tmux.wait_for(r"job\s.*\bdata-wait\s.*\bstep\s+status\s.*\bsamples/s\s+epoch · step", timeout=40)
        text = tmux.wait_for(r"● beta\s.*\brunning\b.*\b1/2 · \d+/200", timeout=20)
        assert "co-run" in text

        tmux.keys("q")
        text = tmux.wait_for(r"Stop them and quit\?", timeout=10)
        assert "2 launched job(s) still running: alpha, beta" in text
        tmux.keys("y")
        wait_file(status, 40)
        assert status.exists(), tmux.screen()
        assert status.read_text().strip() == "130"  # interrupted by the user
        after = tmux.screen()
        assert re.search(r"session \S+ \(interrupted\)", after), after
    finally:
        tmux.kill()
    assert wait_gone(str(tmp_path), 20) == []  # neither gputop-dl nor a trainer left behind


@pytest.mark.parametrize("wrap", ["", "setsid -w"])
def test_terminal_hangup_stops_jobs_and_exits(tmp_path, wrap):
    """ssh drops / tmux dies: SIGHUP stops the jobs, records the session, and the process ends.
    In a session of its own on the pane's terminal (`setsid -w`, as `su -c`), the hang-up's
    SIGHUP goes to the pane's shell only: its input's end does the same (it had kept running
    and recording, unseen, for hours)."""
    from gputop_dl.record.store import Store

    tmux, home, _status = start_launch(tmp_path, wrap=wrap)
    try:
        tmux.wait_for(r"● alpha\s.*\b(starting|running)\b", timeout=40)  # its trainer process exists
        assert len(processes_using(str(tmp_path))) >= 2  # gputop-dl and at least one trainer
    finally:
        tmux.kill()  # the pane's terminal goes away: SIGHUP
    assert wait_gone(str(tmp_path), 30) == []
    store = Store(os.path.join(home, "sessions.db"))
    try:
        assert [s.state for s in store.sessions()] == ["interrupted"]
    finally:
        store.close()


def test_monitor_in_tmux_draws_the_host_first_then_finds_a_job(tmp_path):
    """Plain `gputop-dl`: the engine is built after the first frame (runner/deferred.py); the
    found job's row comes from it, the screen ends whole (table, key bar), and `q` quits at once
    (nothing launched), printing the session of the jobs it saw."""
    if importlib.util.find_spec("torch") is None:  # not imported here: this process is no job
        pytest.skip("torch is not installed (the found job is a plain PyTorch loop)")
    script = os.path.join(ROOT, "tests", "external", "stall_script.py")
    home = tmp_path / "home"
    home.mkdir()
    status = tmp_path / "exit-status"
    # the job starts from the pane's shell, outside this test's process tree (a job is found
    # with the training processes above it)
    cmd = (f"cd {ROOT} && {sys.executable} {script} --seconds 120 --data-ms 50 --compute-ms 5 "
           f">/dev/null 2>&1 & cd {ROOT} && env -u COLUMNS -u LINES GPUTOP_DL_HOME={home} "
           f"TERM=xterm-256color {sys.executable} -m gputop_dl --stall-budget 0; "
           f"echo $? > {status}; kill %1")
    tmux = Tmux(tmp_path)
    try:
        tmux.run("-f", "/dev/null", "new-session", "-d", "-s", tmux.session, "-x", "160", "-y", "50", "sh")
        tmux.wait_size(160, 50)
        tmux.keys(cmd, "Enter")
        text = tmux.wait_for(r"of \d+ CPUs?", timeout=30)
        assert "gputop-dl · monitor" in text
        # the engine, built after that frame, finds the job (once torch is imported)
        tmux.wait_for(r"stall_script\.py", timeout=90)
        text = tmux.wait_for(r"\bQuit\b", timeout=10)  # the key bar: the whole layout is drawn
        assert "reading NVML" not in text and "looking for training jobs" not in text
        db = home / "sessions.db"
        last = newest_sample(db, after=0.0, timeout=30)  # a tick has recorded the job
        last = newest_sample(db, after=last, timeout=10)  # the next one: q follows it at once
        t_q = time.time()
        tmux.keys("q")
        wait_file(status, 30)
        quit_s = time.time() - t_q
        assert status.exists(), tmux.screen()
        assert status.read_text().strip() == "0"
        assert re.search(r"session \S+ \(\w+\): the training jobs this monitor saw", tmux.screen())
    finally:
        tmux.kill()
    assert wait_gone(script, 20) == []
    # the UI went at once, the engine's last sample and the session's close were not lost
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = [t for (t,) in con.execute("SELECT t FROM job_samples")]
        state, ended = con.execute("SELECT state, ended FROM sessions").fetchone()
    finally:
        con.close()
    assert any(t_q - 1.0 <= t <= t_q for t in rows), (t_q, sorted(rows)[-3:])  # the last second
    assert any(t > t_q for t in rows)  # the sample taken as it stopped, after q
    assert state == "finished" and ended is not None and ended >= t_q
    assert quit_s < 5.0  # the exit status file is polled every 0.2 s; benchmarks/quit_time.py times it


def newest_sample(db, after: float, timeout: float) -> float:
    """The newest job sample's time once one newer than `after` is committed (read-only)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if db.exists():
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
            try:
                (t,) = con.execute("SELECT max(t) FROM job_samples").fetchone()
            except sqlite3.OperationalError:  # not created yet, or locked this moment
                t = None
            finally:
                con.close()
            if t is not None and t > after:
                return float(t)
        time.sleep(0.05)
    raise AssertionError(f"no job sample newer than {after} in {db} within {timeout} s")
