#!/usr/bin/env python3
"""Busy loops in one session or each in its own: what they cost two light jobs.

    flock /tmp/gputop-box.lock setsid -w .venv/bin/python benchmarks/outside_sessions.py  # ~2 min

Where the kernel's autogroup is on (/proc/sys/kernel/sched_autogroup_enabled), the CPUs are
shared between sessions first. Two one-thread jobs of a quarter core (tests/external/
calibrated.py, each in its own session as if started from a terminal) run alone, beside 3 busy
loops in this script's session (as tests/test_outside_load_real.py had them: the pytest worker's
session), the same plus 2 loops more there (the other xdist worker's load), and beside 3 loops
each in its own session; the last two settings twice, in turn. Every session of the experiment
is put at autogroup nice -20 (root; AGNICE to change) so the box's other sessions weigh about
1 % of each, as on a quiet box. Printed per setting: the jobs' own median step (truth), the
live judge's medians (0.5 s ticks, only these jobs judged) and its lowest outside estimate.
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

from gputop_dl.analyse.live.passive import WINDOW, PassiveJudge  # noqa: E402
from gputop_dl.collect.machine import MachineSampler  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from tests.fakes.by_hand import only_found  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outside_cases import reports, stop  # noqa: E402

CAL = os.path.join(ROOT, "tests", "external", "calibrated.py")
FITS = ["--workers", "0", "--sample-cpu-ms", "5", "--compute-ms", "60", "--steps", "120"]
NICE = os.environ.get("AGNICE", "-20")


def first(pid: int) -> None:
    """The autogroup of `pid`'s session at nice NICE (root only; else said, and left)."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(NICE)
    except OSError as e:
        print(f"autogroup of PID {pid} not set ({e})", file=sys.stderr)


def popen(argv: list[str], session: bool, **kw) -> subprocess.Popen:
    p = subprocess.Popen(argv, start_new_session=session, **kw)
    if session:
        first(p.pid)
    return p


def run(label: str, loops: int, own_sessions: bool, extra: int = 0) -> None:
    """The two jobs beside `loops` busy loops (each in its own session, or in this script's)
    and `extra` loops more in this script's session; one JSON line."""
    loop = [sys.executable, "-c", "while True: pass"]
    busy = [popen(loop, own_sessions) for _ in range(loops)]
    busy += [popen(loop, False) for _ in range(extra)]
    procs = [popen([sys.executable, CAL, *FITS], True, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    pids = {p.pid for p in procs}
    sampler = MachineSampler(Nvml(), found=only_found(pids, stall=False))
    judge = PassiveJudge()
    rows: list[dict] = []
    try:
        while all(p.poll() is None for p in procs):
            m = sampler.sample()
            v, est = judge.verdict(m.found, m.host, m.gpu_processes, m.gpus, m.time)
            if v is not None and len(m.found) == 2 and all(e.ticks == WINDOW for e in est.values()):
                rows.append({"kind": v.kind, "f": [e.last.cpu_wait for e in est.values()],
                             "s": [e.slowdown for e in est.values()],
                             "out": [e.outside or 1.0 for e in est.values()],
                             "share": [e.last.set_share for e in est.values()],
                             "ocores": v.evidence["outside_load"]["cores"] or 0.0})
            time.sleep(0.5)
        own = reports(procs)
    finally:
        stop(procs + busy)

    def med(key: str) -> list[float | None]:
        return [round(statistics.median(r[key][i] for r in rows), 3) if rows else None
                for i in range(2)]

    print(json.dumps({"case": label, "step_ms": [round(o["median_step_s"] * 1000, 1) for o in own],
                      "kinds": {k: sum(r["kind"] == k for r in rows) for k in {r["kind"] for r in rows}},
                      "f": med("f"), "share": med("share"), "slowdown": med("s"),
                      "outside": med("out"),
                      "lowest_outside": min((min(r["out"]) for r in rows), default=None),
                      "outside_cores": statistics.median(r["ocores"] for r in rows) if rows else None}),
          flush=True)


def main() -> None:
    first(os.getpid())  # this script's session: the "test's" (its loops, the judge)
    print(f"load before: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    run("the pair alone", 0, False)
    for _ in range(2):
        run("3 loops in this session (the old test)", 3, False)
        if _ == 0:
            run("the same + 2 loops more in this session (the xdist neighbour)", 3, False, extra=2)
        run("3 loops, each in its own session (the test now)", 3, True)


if __name__ == "__main__":
    main()
