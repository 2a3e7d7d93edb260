#!/usr/bin/env python3
"""Two checkouts of gputop-dl side by side in one window: before and after a change.

    git worktree add ../gdl-before COMMIT      # the code to compare with, once
    .venv/bin/python benchmarks/screen_ab.py --before ../gdl-before            # about 5 minutes
    .venv/bin/python benchmarks/screen_ab.py --before ../gdl-before --jobs 3 --seconds 90

Single runs of `screen_speed.py` move by ±20 % with the load of a shared box, more than most
changes; this puts both on the same load. For each job count: `screen_speed.py`'s jobs (light
plain-PyTorch loops found running, 3 processes each) start, then `gputop-dl --stall-budget 0` of
this checkout and of `--before`, each in its own 160×50 tmux pane; after 15 s of start-up, each
process's CPU seconds over the same `--seconds` window (% of one core) and per thread (the UI,
gdl-engine). Then the first non-empty screen of both and of a bare Textual app, alternating,
`--runs` rounds (screen_speed.py's measure, `FIRST`, with the CPU each process used until
then); `--jobs ""`: the first screen only.
Both checkouts' bytecode is compiled first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.screen_speed import (FIRST, PY, commands, first_screen, start_jobs,  # noqa: E402
                                     stop_all, wait_jobs_ready)
from benchmarks.tui import Tmux, find_proc, own_cpu, thread_cpu  # noqa: E402


def gdl(root: str, home: str) -> str:
    return (f"cd {root} && exec env -u COLUMNS -u LINES PYTHONPATH={root} GPUTOP_DL_HOME={home} "
            f"TERM=xterm-256color {PY} -m gputop_dl --stall-budget 0")


def cpu_pair(roots: dict[str, str], n_jobs: int, seconds: float) -> dict[str, dict[str, float]]:
    """name -> {"all": % of a core, thread name: %} over one window, both beside the same jobs."""
    jobs = start_jobs(n_jobs, seconds + 120)
    panes: dict[str, Tmux] = {}
    try:
        wait_jobs_ready(jobs)
        for name, root in roots.items():
            panes[name] = Tmux()
            panes[name]("new-session", "-d", "-s", "b", "-x", "160", "-y", "50",
                        gdl(root, tempfile.mkdtemp(prefix="gdl-ab-")))
        time.sleep(2.0)
        procs = {}
        for name, tmux in panes.items():
            pane_pid = int(tmux("list-panes", "-t", "b", "-F", "#{pane_pid}").split()[0])
            procs[name] = find_proc(pane_pid, lambda part: part == "gputop_dl")
        if any(p is None for p in procs.values()):
            raise SystemExit(f"not found: {[k for k, p in procs.items() if p is None]}")
        time.sleep(13.0)  # past start-up and the first full /proc pass
        c0 = {k: own_cpu(p) for k, p in procs.items()}
        t0 = {k: thread_cpu(p.pid) for k, p in procs.items()}
        w0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - w0
        out = {}
        for k, p in procs.items():
            t1 = thread_cpu(p.pid)
            out[k] = {"all": 100 * (own_cpu(p) - c0[k]) / wall,
                      **{n: 100 * (v - t0[k].get(n, 0.0)) / wall for n, v in t1.items()
                         if v > t0[k].get(n, 0.0)}}
        return out
    finally:
        stop_all(panes, jobs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="a checkout of the code to compare with")
    ap.add_argument("--jobs", default="3,12", help="found jobs, one window each (default 3,12)")
    ap.add_argument("--seconds", type=float, default=60.0, help="CPU window (default 60)")
    ap.add_argument("--runs", type=int, default=9, help="first-screen rounds (default 9; 0: skip)")
    args = ap.parse_args()
    before = os.path.abspath(args.before)
    if not os.path.isdir(os.path.join(before, "gputop_dl")):
        print(f"--before {args.before}: not a checkout of gputop-dl (no gputop_dl folder)")
        return 2
    roots = {"after": ROOT, "before": before}
    for root in roots.values():
        subprocess.run([PY, "-m", "compileall", "-q", os.path.join(root, "gputop_dl")], check=True)
    print(f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}")
    for n in [int(x) for x in args.jobs.split(",") if x]:
        r = cpu_pair(roots, n, args.seconds)
        for name in roots:
            threads = ", ".join(f"{k} {v:.2f}" for k, v in r[name].items() if k != "all")
            print(f"{n:3d} jobs, {name:6s}: {r[name]['all']:.2f} % of a core ({threads})")
        print(f"{n:3d} jobs, after / before: {r['after']['all'] / r['before']['all']:.2f}  "
              f"(load {os.getloadavg()[0]:.2f})")
    if args.runs:
        home = tempfile.mkdtemp(prefix="gdl-ab-")
        bare, pattern = commands(home)["bare textual"]
        cmds = {**{k: (gdl(v, home), FIRST) for k, v in roots.items()},
                "bare textual": (bare, pattern)}
        times: dict[str, list[float]] = {k: [] for k in cmds}
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        for r in range(args.runs):
            names = list(cmds)[r % len(cmds):] + list(cmds)[:r % len(cmds)]  # rotate the order
            for name in names:
                cmd, pat = cmds[name]
                t = first_screen(cmd, pat, cpu=cpu[name])
                if isinstance(t, float):
                    times[name].append(t)
        bare_t, bare_c = statistics.median(times["bare textual"]), statistics.median(cpu["bare textual"])
        for name, ts in times.items():
            c = statistics.median(cpu[name])
            print(f"first screen, {name:12s}: {statistics.median(ts):.3f} s ({min(ts):.3f}–{max(ts):.3f}),"
                  f" {statistics.median(ts) / bare_t:.2f}× bare Textual, "
                  f"{1000 * (statistics.median(ts) - bare_t):+.0f} ms; CPU until then {1000 * c:.0f} ms "
                  f"({1000 * min(cpu[name]):.0f}–{1000 * max(cpu[name]):.0f}), {1000 * (c - bare_c):+.0f} ms")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
