#!/usr/bin/env python3
"""Outside load against the jobs' own step times: what gputop-dl estimates, what the jobs saw.

    flock /tmp/gputop-box.lock .venv/bin/python benchmarks/outside_cases.py   # about 2 min

Plain PyTorch scripts of known cost (tests/external/calibrated.py, their own per-step
timestamps) run with a fixed number of steps, each setting twice or more: without and with
outside busy loops (`python3 -c 'while True: pass'`, one core each). The live judge
(PassiveJudge over MachineSampler, 0.5 s ticks, only these scripts judged) runs beside them;
its estimates are the medians of the ticks after each job's window is full. Ground truth: a
job's median step time in a setting over the same job's in the quieter setting.

- `fits`: two one-thread jobs of a quarter core each (20 ms CPU + 60 ms asleep a step):
  alone-pair vs the pair beside 3 loops: the truth of `outside_slowdown`;
- `heavy`: one heavy job alone (two loader workers, ~1.8 cores), two together, two beside one
  loop: the truth of `slowdown` (together / alone) and of `outside_slowdown` (with the loop /
  together).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gputop_dl.analyse.passive import WINDOW  # noqa: E402
from gputop_dl.analyse.passive import PassiveJudge  # noqa: E402
from gputop_dl.collect.machine import MachineSampler  # noqa: E402
from gputop_dl.collect.nvml import Nvml  # noqa: E402
from tests.fakes.by_hand import only_found  # noqa: E402

CAL = os.path.join(ROOT, "tests", "external", "calibrated.py")
FITS = ["--workers", "0", "--sample-cpu-ms", "5", "--compute-ms", "60", "--steps", "120"]
HEAVY = ["--sample-cpu-ms", "10", "--workers", "2", "--compute-ms", "20", "--steps", "300"]


def run(args: list[str], jobs: int, loops: int) -> dict:
    """`jobs` copies of the script beside `loops` busy loops; each job's own median step time
    and the judge's medians (slowdown, outside slowdown, kind) over its full windows."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(loops)]
    procs = [subprocess.Popen([sys.executable, CAL, *args], stdout=subprocess.PIPE, text=True)
             for _ in range(jobs)]
    pids = {p.pid for p in procs}
    sampler = MachineSampler(Nvml(), found=only_found(pids, stall=False))
    judge = PassiveJudge()
    kinds: list[str] = []
    slow: dict[int, list[float]] = {}
    out: dict[int, list[float]] = {}
    named: list[list[int]] = []
    try:
        while all(p.poll() is None for p in procs):
            m = sampler.sample()
            v, est = judge.verdict(m.found, m.host, m.gpu_processes, m.gpus, m.time)
            byname = {j.name: j.pid for j in m.found}
            if v is not None and len(m.found) == jobs and all(e.ticks == WINDOW for e in est.values()):
                kinds.append(v.kind)
                for name, e in est.items():
                    slow.setdefault(byname[name], []).append(e.slowdown or 1.0)
                    out.setdefault(byname[name], []).append(e.outside or 1.0)
                cons = v.evidence["outside_load"]["consumers"] or []
                named.append([c["pid"] for c in cons])
            time.sleep(0.5)
        own = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    finally:
        for p in procs + busy:
            p.kill()
            p.wait()
    loop_pids = {b.pid for b in busy}
    return {"jobs": jobs, "loops": loops,
            "median_step_s": [round(o["median_step_s"], 4) for o in own],
            "est_slowdown": [round(statistics.median(v), 2) for v in slow.values()],
            "est_outside": [round(statistics.median(v), 2) for v in out.values()],
            "kinds": {k: kinds.count(k) for k in dict.fromkeys(kinds)},
            "loop_named": sum(bool(loop_pids & set(n)) for n in named), "ticks": len(kinds)}


def main() -> None:
    print(f"load before: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for name, args, settings in (("fits", FITS, [(2, 0), (2, 3)]),
                                 ("heavy", HEAVY, [(1, 0), (2, 0), (2, 1)])):
        for jobs, loops in settings:
            r = run(args, jobs, loops)
            print(json.dumps({"case": name, **r}), flush=True)


if __name__ == "__main__":
    main()
