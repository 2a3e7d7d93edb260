"""Plain PyTorch scripts of known cost (tests/external/calibrated.py) started as from a terminal.

    scripts = ByHand()
    pids = scripts.start(HEAVY, 3)   # the scripts' PIDs, once each has loaded torch
    ...
    scripts.stop()                   # kill -9 to each one's process group

Each script runs through `sh -c`, as from a terminal: the test process may have imported torch
(another test did), and discovery then counts its direct children as its own workers (a
notebook's DataLoader workers look like that).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

import psutil

CALIBRATED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "external", "calibrated.py")
LIGHT = ["--sample-io-ms", "10", "--compute-ms", "60"]  # sleeps: no CPU to speak of
HEAVY = ["--sample-cpu-ms", "10", "--workers", "2", "--compute-ms", "20"]  # ~1.8 cores alone


def training(pid: int) -> bool:
    """Whether the process has loaded torch and started its loader workers or first steps."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "libtorch" in f.read()
    except OSError:
        return False


class ByHand:
    """Scripts started by hand; `stop()` ends every one."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, args: list[str], n: int, *, cwd: str | None = None,
              env: dict[str, str] | None = None, program: list[str] | None = None) -> set[int]:
        """`n` copies of the calibrated script (`program`: how a terminal would name it, run
        in `cwd`), started through `sh -c`; their PIDs once each is training."""
        argv = (program or [sys.executable, CALIBRATED]) + ["--steps", "0", *args]
        cmd = " ".join(shlex.quote(a) for a in argv)
        mine = []
        for _ in range(n):
            p = subprocess.Popen(["sh", "-c", cmd + "; exit 0"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True, cwd=cwd,
                                 env=env)
            self.procs.append(p)
            mine.append(p)
        scripts: list[int] = []
        deadline = time.monotonic() + 60  # torch imported and training (slow on a busy box)
        while time.monotonic() < deadline:
            scripts = [c.pid for p in mine for c in psutil.Process(p.pid).children()]
            if len(scripts) == n and all(training(pid) for pid in scripts):
                break
            time.sleep(0.2)
        time.sleep(1)
        return set(scripts)

    def stop(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
            p.wait()
        self.procs.clear()


def never_left_stopped(pids) -> bool:
    """No process of these jobs' trees is stopped (SIGSTOP) now."""
    for pid in pids:
        try:
            procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for p in procs:
            try:
                if p.status() == psutil.STATUS_STOPPED:
                    return False
            except psutil.NoSuchProcess:
                continue
    return True


def only_found(pids: set[int], **kw):
    """A `FoundJobs` that finds only the jobs with these root PIDs (the box runs other
    people's jobs; a test or a benchmark judges its own). `kw`: FoundJobs' arguments."""
    from gputop_dl.collect.found import FoundJobs

    class OnlyFound(FoundJobs):
        def sample(self, *args, **kwargs):
            jobs, notes = super().sample(*args, **kwargs)
            return [j for j in jobs if j.pid in pids], notes

    return OnlyFound(**kw)
