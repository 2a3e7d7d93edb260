#!/usr/bin/env python3
"""CPU use of other terminal monitors at a 1 s refresh, measured like `gputop-dl` in benchmarks/tui.py.

    .venv/bin/python benchmarks/reference_monitors.py                          # about 15 minutes
    .venv/bin/python benchmarks/reference_monitors.py --runs 3 --seconds 30 --jobs 3

Monitors: `htop -d 10`, `glances -t 1`, `top -d 1` (interactive) and `gputop-dl` (with
GPUTOP_DL_HOME in a temp dir). Each runs alone in a detached 160×50 tmux pane with
TERM=xterm-256color (the reference monitors with HOME in a temp dir, so on their default
settings); after 4 s of start-up, the CPU seconds of its process over --seconds are read
(user + system, from /proc via psutil) and divided by the wall time: % of one core.
"own + children" adds its descendants and reaped children (gputop-dl's short py-spy runs).
RSS is the monitor's own, at the end of the window. "tmux server" is the CPU of that pane's
tmux server (the terminal emulation of what the monitor writes; not in the other numbers);
"whole machine busy" is all CPU use on the machine during the window, jobs and strangers included,
and "jobs started here" the CPU of the --jobs jobs.

First with --jobs found PyTorch jobs (started outside gputop-dl) running (started once, 5 processes each, from
benchmarks/tui.py's start_jobs), then with none. --runs rounds per case, the monitors taken
round-robin within each round (start rotated per round), so slow drifts in machine load hit
all of them alike. Medians with min/max. glances is run from its own venv (--glances,
default /tmp/glances-venv/bin/glances; make it with `python -m venv /tmp/glances-venv &&
/tmp/glances-venv/bin/pip install glances`) and skipped with a note when missing.
Needs tmux. Run it on an otherwise quiet machine: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.tui import (GDL, Tmux, find_gdl, find_proc, gdl_command, med, own_cpu,  # noqa: E402
                            proc_tree_cpu, start_jobs)

STARTUP_S = 4.0
DEFAULT_GLANCES = "/tmp/glances-venv/bin/glances"


def busy() -> float:
    """CPU seconds the whole machine has spent busy (all CPUs; everything but idle and iowait)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def jobs_cpu(jobs: list[psutil.Process]) -> float:
    total = 0.0
    for p in jobs:
        try:
            total += proc_tree_cpu(p)
        except psutil.NoSuchProcess:
            pass
    return total


def jobs_on_screen(screen: str) -> int:
    """gputop-dl's jobs-table footer, "N job(s)" (0 when absent)."""
    m = re.search(r"(\d+) job\(s\)", screen)
    return int(m.group(1)) if m else 0


def ref_command(argv: list[str], home: str) -> str:
    env = f"env -u COLUMNS -u LINES HOME={home} TERM=xterm-256color"
    return f"cd {ROOT} && exec {env} {shlex.join(argv)}"


def monitors(glances: str) -> list[dict]:
    out = [{"name": "htop -d 10", "argv": ["htop", "-d", "10"], "exe": "htop"}]
    if os.path.exists(glances):
        out.append({"name": "glances -t 1", "argv": [glances, "-t", "1"], "exe": "glances"})
    else:
        print(f"note: glances not found at {glances}: skipped "
              f"(python -m venv /tmp/glances-venv && /tmp/glances-venv/bin/pip install glances)")
    out.append({"name": "top -d 1", "argv": ["top", "-d", "1"], "exe": "top"})
    if not os.path.exists(GDL):
        print(f"note: {GDL} not found: gputop-dl runs as `python -m gputop_dl`")
    out.append({"name": "gputop-dl", "argv": None, "exe": None})
    return out


def measure(mon: dict, seconds: float, jobs: list[psutil.Process]) -> dict:
    """One monitor in its own tmux server: CPU over `seconds` after STARTUP_S of start-up."""
    home = tempfile.mkdtemp(prefix="gdl-refmon-")
    tmux = Tmux()
    try:
        cmd = gdl_command(home) if mon["argv"] is None else ref_command(mon["argv"], home)
        t_start = time.monotonic()
        tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", cmd)
        time.sleep(1.0)
        panes = tmux("list-panes", "-t", "b", "-F", "#{pane_pid}").split()
        if not panes:
            return {"error": "tmux pane gone within 1 s (monitor exited at once?)"}
        pane_pid = int(panes[0])
        p = find_gdl(pane_pid) if mon["exe"] is None else find_proc(pane_pid, lambda part: os.path.basename(part) == mon["exe"])
        if p is None:
            return {"error": "process not found in pane; screen: " + tmux("capture-pane", "-p", "-t", "b")[:300]}
        server = psutil.Process(int(tmux("display-message", "-p", "-t", "b", "#{pid}").strip()))
        time.sleep(max(0.0, STARTUP_S - (time.monotonic() - t_start)))
        o0, c0, s0, m0, j0, w0 = (own_cpu(p), proc_tree_cpu(p), own_cpu(server), busy(), jobs_cpu(jobs),
                                  time.monotonic())
        time.sleep(seconds)
        if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE:
            return {"error": "exited during the window; screen: " + tmux("capture-pane", "-p", "-t", "b")[:300]}
        o1, c1, s1, m1, j1, w1 = (own_cpu(p), proc_tree_cpu(p), own_cpu(server), busy(), jobs_cpu(jobs),
                                  time.monotonic())
        rss = p.memory_info().rss
        screen = tmux("capture-pane", "-p", "-t", "b")
        wall = w1 - w0
        tmux("send-keys", "-t", "b", "q")
        try:
            p.wait(3.0)
        except psutil.TimeoutExpired:
            pass
        odd = [line.strip() for line in screen.splitlines() if re.search(r"Traceback|Error|error:", line)]
        return {"own": 100 * (o1 - o0) / wall, "tree": 100 * (c1 - c0) / wall, "tmux": 100 * (s1 - s0) / wall,
                "machine": (m1 - m0) / wall, "jobs": (j1 - j0) / wall,
                "rss": rss / 2**20, "jobs_seen": jobs_on_screen(screen),
                "blank": not screen.strip(), "odd": odd, "screen": screen}
    finally:
        tmux.kill()
        shutil.rmtree(home, ignore_errors=True)
        time.sleep(0.5)


def run_case(mons: list[dict], runs: int, seconds: float, jobs: list[subprocess.Popen]) -> dict[str, list[dict]]:
    res: dict[str, list[dict]] = {m["name"]: [] for m in mons}
    procs = [psutil.Process(j.pid) for j in jobs]
    for r in range(runs):
        order = mons[r % len(mons):] + mons[:r % len(mons)]
        for m in order:
            if jobs and any(j.poll() is not None for j in jobs):
                print(f"   note: {sum(j.poll() is not None for j in jobs)} job(s) ended before run {r + 1} "
                      f"of {m['name']}")
            out = measure(m, seconds, procs)
            if "error" in out:
                print(f"   {m['name']} run {r + 1}: {out['error']}")
            else:
                if out["blank"]:
                    print(f"   {m['name']} run {r + 1}: pane blank at the end of the window")
                for line in out["odd"][:3]:
                    print(f"   {m['name']} run {r + 1}, pane line: {line[:150]}")
                res[m["name"]].append(out)
            print(f"   .. round {r + 1}/{runs} {m['name']}: "
                  + (f"{out['own']:.2f}% own" if "own" in out else "failed"), flush=True)
    return res


def report(res: dict[str, list[dict]], n_jobs: int) -> None:
    for name, rs in res.items():
        print(f"   {name}")
        if not rs:
            print("     no successful run")
            continue
        print(f"     own CPU, % of one core:     {med([r['own'] for r in rs])}")
        print(f"     own + children, %:          {med([r['tree'] for r in rs])}")
        print(f"     RSS, MiB:                   {med([r['rss'] for r in rs])}")
        print(f"     tmux server, %:             {med([r['tmux'] for r in rs])}")
        print(f"     whole machine busy, cores:  {med([r['machine'] for r in rs])}")
        if n_jobs:
            print(f"     jobs started here, cores:   {med([r['jobs'] for r in rs])}")
        if name == "gputop-dl":  # jobs of others on the machine show up here too (and cost py-spy time)
            print(f"     jobs on screen:             {[r['jobs_seen'] for r in rs]} (started here: {n_jobs})")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0, help="measurement window per run (default 30)")
    ap.add_argument("--runs", type=int, default=3, help="rounds per case (default 3)")
    ap.add_argument("--jobs", type=int, default=3, help="found PyTorch jobs (started outside gputop-dl) of 5 processes each for the "
                    "loaded case (default 3; 0: idle case only)")
    ap.add_argument("--glances", default=DEFAULT_GLANCES, help=f"glances binary (default {DEFAULT_GLANCES})")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("tmux not installed: nothing to measure")
        return 1
    mons = []
    for m in monitors(args.glances):
        if m["argv"] is not None and shutil.which(m["argv"][0]) is None:
            print(f"note: {m['argv'][0]} not installed: skipped")
        else:
            mons.append(m)
    print(f"machine: {psutil.cpu_count()} CPUs, python {sys.version.split()[0]}; "
          f"{args.runs} runs × {args.seconds:.0f} s per monitor and case, after {STARTUP_S:.0f} s of start-up")
    print(f"load average before: {load()}")

    if args.jobs:
        per_run = args.seconds + 10
        jobs = start_jobs(args.jobs, 8 + args.runs * len(mons) * per_run + 60)
        try:
            time.sleep(8.0)  # torch imported, workers forked
            print(f"\n{args.jobs} found jobs × 5 processes running (load now {load()})", flush=True)
            res = run_case(mons, args.runs, args.seconds, jobs)
        finally:
            for j in jobs:
                j.terminate()
            for j in jobs:
                j.wait()
        report(res, args.jobs)
        time.sleep(5.0)

    print(f"\nno jobs (load now {load()})", flush=True)
    report(run_case(mons, args.runs, args.seconds, []), 0)
    print(f"\nload average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
