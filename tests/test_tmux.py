"""End to end in a real terminal: `gputop-dl launch` of a tiny synthetic workload inside tmux.

The real CLI, engine, trainer children and TUI run in a detached 160×50 tmux session on a private
tmux socket; the test reads the screen with `capture-pane`, checks the jobs table, then quits
with `q`, answers the confirmation (jobs are still running) with `y`, and checks that gputop-dl
stopped its jobs, left no trainer processes behind and exited with 130 (interrupted).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import psutil
import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

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

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.session, *keys)

    def kill(self) -> None:
        self.run("kill-server", check=False)


def test_launch_in_tmux_shows_jobs_and_quits_cleanly(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    wfile = tmp_path / "tiny.toml"
    wfile.write_text(WORKLOAD)
    status = tmp_path / "exit-status"
    cmd = (f"cd {ROOT} && env GPUTOP_DL_HOME={home} TERM=xterm-256color {sys.executable} -m gputop_dl "
           f"launch {wfile}; echo $? > {status}; sleep 30")
    tmux = Tmux(tmp_path)
    try:
        tmux.run("new-session", "-d", "-s", tmux.session, "-x", "160", "-y", "50", cmd)
        # both jobs appear in the jobs table, running on the CPU, and make progress
        text = tmux.wait_for(r"● alpha\s+running\s+cpu\s+4\s+1/2 · \d+/200", timeout=40)
        assert re.search(r"● beta\s+running\s+cpu\s+4\s+1/2 · \d+/200", text) or \
            re.search(r"● beta\s+(starting|running)", text), text
        assert "gputop-dl · launch · tmux tiny · session " in text
        assert "No NVIDIA GPU" in text or "GPUs" in text
        assert re.search(r"job\s+status\s+device\s+batch\s+epoch · step", text)
        text = tmux.wait_for(r"● beta\s+running\s+cpu\s+4\s+1/2 · \d+/200", timeout=20)
        assert "phase: co-run" in text or "co-run" in text

        tmux.keys("q")
        text = tmux.wait_for(r"Stop them and quit\?", timeout=10)
        assert "2 launched job(s) still running: alpha, beta" in text
        tmux.keys("y")
        end = time.monotonic() + 40
        while not status.exists() and time.monotonic() < end:
            time.sleep(0.2)
        assert status.exists(), tmux.screen()
        assert status.read_text().strip() == "130"  # interrupted by the user
        after = tmux.screen()
        assert re.search(r"session \S+ \(interrupted\)", after), after
    finally:
        tmux.kill()
    # no trainer left behind: nothing runs with this test's data dir in its command line
    leftovers = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(str(home) in part for part in p.info["cmdline"] or ()):
                leftovers.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    assert leftovers == []
