"""A py-spy burst ends with the process that started it, however that ends (`kill -9`)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from gputop_dl.collect.pyspy import run as pyspy

SPY = ("import sys\nfrom gputop_dl.collect.pyspy import run as pyspy\n"
       "pyspy.record_stall(int(sys.argv[1]), 30, 10, check=False)\n")


def test_a_burst_ends_with_its_process_killed_mid_burst():
    """Before, py-spy ran on for the rest of its burst (up to 32 s in the monitor) after
    gputop-dl was killed; now the kernel ends it with its parent (PR_SET_PDEATHSIG)."""
    assert pyspy.pyspy_path() is not None, "py-spy is a dependency of gputop-dl"
    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    parent = subprocess.Popen([sys.executable, "-c", SPY, str(target.pid)])
    kids: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while not kids and time.monotonic() < deadline:  # until its py-spy runs
            kids = [c for c in psutil.Process(parent.pid).children() if "py-spy" in c.name()]
            time.sleep(0.05)
        assert kids, "py-spy never started"
        parent.kill()
        parent.wait()
        _, alive = psutil.wait_procs(kids, timeout=10)  # its burst had 30 s to go
        assert not alive, [p.pid for p in alive]
    finally:
        for p in kids:
            if p.is_running():
                p.kill()
        parent.kill()
        target.kill()
        target.wait()
