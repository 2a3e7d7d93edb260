#!/usr/bin/env python3
"""Outside load and the live verdict: the host's runnable mean against the load average.

    .venv/bin/python benchmarks/outside_load.py        # about 85 s

Two light plain-PyTorch jobs (tests/external/stall_script.py) run throughout; from tick 10 to
tick 35 three outside busy loops (not training jobs) run beside them. The monitor's own engine
ticks once a second; every few ticks this prints the load average, the runnable threads read
(/proc/stat procs_running) and their mean (the one the live verdict uses, docs/verdict.md),
each job's share of its competition that is the other job (`set_share`), the verdict and the
estimated slowdowns. Ground truth: while the loops run, most of each job's CPU wait is theirs;
once they stop, the jobs' waits are the jobs' own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.runner.engines import monitor_engine  # noqa: E402
from tests.fakes.busy import busy_loops  # noqa: E402

PY = sys.executable
SCRIPT = os.path.join(ROOT, "tests", "external", "stall_script.py")
HOGS_ON, HOGS_OFF, TICKS = 10, 35, 70


def main() -> int:
    os.environ["GPUTOP_DL_HOME"] = tempfile.mkdtemp(prefix="gdl-outside-")
    jobs = [subprocess.Popen([PY, SCRIPT, "--seconds", "150", "--data-ms", "5", "--compute-ms", "20",
                              "--num-workers", "1"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(2)]
    hogs: list[subprocess.Popen] = []
    try:
        time.sleep(12)  # torch imported, loaders started
        engine = monitor_engine(Nvml(), stall_budget=0, record=False)
        for t in range(TICKS):
            if t == HOGS_ON:
                hogs = busy_loops(3, own_session=False)
            if t == HOGS_OFF:
                for h in hogs:
                    h.kill()
            engine.tick()
            v = engine.plan.verdict or {}
            ev = v.get("evidence") or {}
            h = engine.snapshot.host if engine.snapshot else None
            if h is not None and (t % 3 == 0 or t in (HOGS_ON + 1, HOGS_ON + 2, HOGS_OFF + 1)):
                shares = " ".join(f"{x:.2f}" for x in (ev.get("set_share") or {}).values())
                ests = " ".join(f"{x:.2f}" for x in (ev.get("estimated_slowdowns") or {}).values())
                print(f"t={t:2d} loops {'on ' if HOGS_ON <= t < HOGS_OFF else 'off'}  load1 "
                      f"{h.load1:4.2f}  runnable {h.runnable}  mean {ev.get('runnable_mean')}  "
                      f"set_share {shares or '–'}  {v.get('kind')}  estimates {ests or '–'}",
                      flush=True)
            time.sleep(1)
    finally:
        for p in jobs + hogs:
            p.kill()
            p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
