"""How long `q` (or Ctrl-C) takes to end the live monitor: the key sent to a real `gputop-dl`
in a 160×50 tmux pane, then its process watched until it is gone (polled every 2 ms).

    python benchmarks/quit_time.py [--rounds 5] [--key q|C-c] [--job] [--stall-budget PCT]

`--job` starts a plain PyTorch loop by hand first (tests/external/stall_script.py), so the
monitor finds it, records a session and samples it with py-spy (unless --stall-budget 0):
what a quit must then finish, the store's last rows and its close. Each round starts a fresh
monitor, waits for its key bar and for `--settle` seconds of ticks, sends the key and times
the exit. Prints each round and the median.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Pane:
    """A detached tmux session on a private socket."""

    def __init__(self) -> None:
        self.socket = f"gdl-quit-{uuid.uuid4().hex[:8]}"

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=10).stdout

    def start(self) -> None:
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "q", "-x", "160", "-y", "50", "sh")
        end = time.monotonic() + 5
        while time.monotonic() < end:  # a program started while tmux sizes the pane misses it
            if self.tmux("display", "-p", "-t", "q", "#{pane_width}x#{pane_height}").strip() \
                    == "160x50":
                return
            time.sleep(0.05)

    def wait_for(self, text: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.tmux("capture-pane", "-p", "-t", "q"):
                return
            time.sleep(0.1)
        raise SystemExit(f"timed out waiting for {text!r} on the screen")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "q", *keys)

    def kill(self) -> None:
        self.tmux("kill-server")


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in (b"Z", b"X")


def one_round(home: str, key: str, settle: float, budget: str | None,
              job_name: str | None) -> float:
    pane = Pane()
    pidfile = os.path.join(home, f"pid-{uuid.uuid4().hex[:6]}")
    extra = f" --stall-budget {budget}" if budget is not None else ""
    try:
        pane.start()
        pane.keys(f"cd {ROOT} && echo $$ > {pidfile} && exec env -u COLUMNS -u LINES "
                  f"GPUTOP_DL_HOME={home} TERM=xterm-256color {sys.executable} -m gputop_dl"
                  f"{extra}", "Enter")
        pane.wait_for("Quit", 60)
        if job_name:
            pane.wait_for(job_name, 240)
        time.sleep(settle)
        with open(pidfile) as f:
            pid = int(f.read())
        t0 = time.monotonic()
        pane.keys(key)
        while not gone(pid):
            if time.monotonic() - t0 > 60:
                raise SystemExit("gputop-dl did not end within 60 s")
            time.sleep(0.002)
        return time.monotonic() - t0
    finally:
        pane.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--key", default="q", help="the key tmux sends: q, or C-c for Ctrl-C")
    ap.add_argument("--settle", type=float, default=4.0, help="seconds of ticks before the key")
    ap.add_argument("--job", action="store_true", help="a PyTorch loop started by hand first")
    ap.add_argument("--stall-budget", default=None, help="the monitor's --stall-budget")
    a = ap.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed")
    home = tempfile.mkdtemp(prefix="gdl-quit-")
    job = None
    if a.job:
        script = os.path.join(ROOT, "tests", "external", "stall_script.py")
        job = subprocess.Popen([sys.executable, script, "--seconds", "600", "--data-ms", "50",
                                "--compute-ms", "5"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    times = []
    try:
        for i in range(a.rounds):
            s = one_round(home, a.key, a.settle, a.stall_budget,
                          "stall_script.py" if a.job else None)
            times.append(s)
            print(f"round {i + 1}: {a.key} -> gone in {s * 1000:.0f} ms", flush=True)
    finally:
        if job is not None:
            job.kill()
            job.wait()
        shutil.rmtree(home, ignore_errors=True)
    print(f"median {statistics.median(times) * 1000:.0f} ms, range "
          f"{min(times) * 1000:.0f}-{max(times) * 1000:.0f} ms over {len(times)} rounds "
          f"(key {a.key}, job {'yes' if a.job else 'no'}, stall budget "
          f"{a.stall_budget if a.stall_budget is not None else 'default'})")


if __name__ == "__main__":
    main()
