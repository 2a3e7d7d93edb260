#!/usr/bin/env python3
"""The monitor on a crowded box: 64 found jobs and 2,000 threads ("scale").

    .venv/bin/python benchmarks/scale_tick.py                          # 64 jobs, 2,000 threads
    .venv/bin/python benchmarks/scale_tick.py --jobs 64 --threads 2000 --ticks 30 --ui-seconds 30
    .venv/bin/python benchmarks/scale_tick.py --jobs 3 --threads 30 --sleepers 3000  # a login node

A cheap fake population: `--jobs` Python processes (no torch: each maps a file at a path
containing "torch/_C", which is what discovery looks for in /proc/PID/maps), each starting its
share of `--threads` threads that sleep on an Event, as a trainer's idle pools and loader
threads do; `--busy` of them also compute 5 ms every 100 ms on their main thread. About 10 MiB
of memory per process. Every process exits when the benchmark's pipe closes (it also kills
them), so none outlives it.

1. One engine tick (`runner.monitor_engine`, py-spy off, the store in a temp GPUTOP_DL_HOME),
   thread CPU per tick at `--interval`, median over `--ticks`, in blocks alternately with the
   quiet-process skip of collect/proc/schedstat.py on and off; then as many instrumented ticks for
   its parts (timed by wrapping methods, as benchmarks/engine_tick.py does) and the CPU-wait
   reading itself (`TreeSampler._read_waits`). Target: ≤ 50 ms a tick. First with
   `--compare-threads` threads (the same jobs), to see how the tick grows with threads.
2. The real `gputop-dl --stall-budget 0` in a 160×50 tmux pane beside `top -d 1` over
   `--ui-seconds`: each process's CPU seconds / wall. Target: the monitor ≤ 5 % of one core.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("GPUTOP_DL_HOME", tempfile.mkdtemp(prefix="gdl-bench-"))

# one fake job: maps a "torch/_C" file (found as a torch process), starts its threads, and
# waits for the benchmark's pipe (stdin) to close; --busy: 5 ms of work every 100 ms
JOB = r"""
import mmap, os, sys, threading, time
path, n, busy = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
f = open(path, "rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
stop = threading.Event()
for _ in range(n - 1 - busy):
    threading.Thread(target=stop.wait, daemon=True).start()
def work():
    while not stop.is_set():
        t = time.perf_counter()
        while time.perf_counter() - t < 0.005:
            pass
        stop.wait(0.095)
if busy:
    threading.Thread(target=work, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
stop.set()
"""


class Population:
    """`jobs` processes with `threads` threads between them; `busy` of them working a little."""

    def __init__(self, jobs: int, threads: int, busy: int):
        self.dir = tempfile.mkdtemp(prefix="gdl-scale-")
        lib = os.path.join(self.dir, "torch", "_C.so")
        os.makedirs(os.path.dirname(lib))
        with open(lib, "wb") as f:
            f.write(b"\0" * 4096)
        per = [threads // jobs + (1 if i < threads % jobs else 0) for i in range(jobs)]
        self.procs = [subprocess.Popen([sys.executable, "-c", JOB, lib, str(max(1, n)), "1" if i < busy else "0"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True)
                      for i, n in enumerate(per)]
        for p in self.procs:
            p.stdout.readline()  # "ready": its threads are started

    def threads(self) -> int:
        n = 0
        for p in self.procs:
            try:
                n += len(os.listdir(f"/proc/{p.pid}/task"))
            except OSError:
                pass
        return n

    def close(self) -> None:
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def engine_ticks(ticks: int, warmup: int, interval: float) -> dict:
    """Plain ticks in blocks of IDLE_EVERY, alternately with the quiet-process skip on and off
    (schedstat.SchedReader.SKIP_IDLE), so both see the same load; then `ticks` instrumented
    ticks (skip on) for the parts."""
    from benchmarks.engine_tick import Parts
    from gputop_dl.collect.proc import procs
    from gputop_dl.collect.jobs.found import FoundJobs
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.collect.proc.schedstat import SchedReader
    from gputop_dl.runner import monitor_engine

    eng = monitor_engine(Nvml(), found=FoundJobs(stall=False))
    inside = [0.0]
    orig = procs.TreeSampler._read_waits

    def timed(*a, **kw):
        c = time.thread_time()
        try:
            return orig(*a, **kw)
        finally:
            inside[0] += time.thread_time() - c

    procs.TreeSampler._read_waits = timed
    block = SchedReader.IDLE_EVERY
    tot: dict[bool, list[float]] = {True: [], False: []}
    rd: dict[bool, list[float]] = {True: [], False: []}
    parts: dict[str, list[float]] = {}
    first = None
    try:
        for i in range(warmup + 2 * ticks + ticks):
            t0 = time.monotonic()
            inside[0] = 0.0
            plain = i < warmup + 2 * ticks
            skip = not plain or ((i - warmup) // block) % 2 == 0
            SchedReader.SKIP_IDLE = skip
            if plain:
                c0 = time.thread_time()
                eng.tick()
                spent = time.thread_time() - c0
                if first is None:
                    first = spent
                if i >= warmup:
                    tot[skip].append(spent)
                    rd[skip].append(inside[0])
            else:
                with Parts() as p:
                    c0 = time.thread_time()
                    eng.tick()
                    total = time.thread_time() - c0
                for k, v in p.spent.items():
                    parts.setdefault(k, []).append(v)
                parts.setdefault("rest", []).append(total - sum(p.spent.values()))
            time.sleep(max(0.0, interval - (time.monotonic() - t0)))
    finally:
        procs.TreeSampler._read_waits = orig
        SchedReader.SKIP_IDLE = True
    jobs = eng.snapshot.jobs
    out = {"found": len(jobs), "processes": sum(len(j.pids) for j in jobs),
           "threads": sum(j.threads or 0 for j in jobs), "first_tick_ms": 1e3 * (first or 0),
           "tick_ms": ms(tot[True]), "tick_noskip_ms": ms(tot[False]),
           "cpu_wait_reading_ms": ms(rd[True]), "cpu_wait_reading_noskip_ms": ms(rd[False]),
           "parts_ms": {k: ms(v) for k, v in parts.items()},
           "cpu_wait_known": sum(j.cpu_wait_fraction is not None for j in jobs)}
    eng.recorder.close("finished", None)
    return out


def ms(xs: list[float]) -> str:
    v = [x * 1e3 for x in xs]
    return f"{statistics.median(v):.2f} (min {min(v):.2f}, max {max(v):.2f})" if v else "n/a"


def ui_cpu(seconds: float) -> dict:
    """The real monitor in tmux beside `top -d 1`, over `seconds`: % of one core each."""
    import psutil

    from benchmarks.tui import Tmux, find_gdl, gdl_command, own_cpu, thread_cpu

    home = tempfile.mkdtemp(prefix="gdl-bench-")
    tmux = Tmux()
    top = None
    try:
        tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "50", gdl_command(home) + " --stall-budget 0")
        time.sleep(1.0)
        pane_pid = int(tmux("list-panes", "-t", "b", "-F", "#{pane_pid}").split()[0])
        gdl = find_gdl(pane_pid)
        if gdl is None:
            return {"error": "gputop-dl process not found"}
        top = subprocess.Popen(["top", "-b", "-d", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        top_p = psutil.Process(top.pid)
        time.sleep(8.0)  # past start-up and the first look at every process
        th0 = thread_cpu(gdl.pid)
        g0, t0, w0 = own_cpu(gdl), own_cpu(top_p), time.monotonic()
        time.sleep(seconds)
        g1, t1, w1 = own_cpu(gdl), own_cpu(top_p), time.monotonic()
        th1 = thread_cpu(gdl.pid)
        wall = w1 - w0
        screen = tmux("capture-pane", "-p", "-t", "b")
        tmux("send-keys", "-t", "b", "q")
        return {"wall_s": round(wall, 1), "gputop_dl_pct": round(100 * (g1 - g0) / wall, 2),
                "top_pct": round(100 * (t1 - t0) / wall, 2),
                "threads_pct": {k: round(100 * (v - th0.get(k, 0.0)) / wall, 2) for k, v in th1.items()
                                if v - th0.get(k, 0.0) > 0},
                "jobs_line": next((ln.strip() for ln in screen.splitlines() if "job(s)" in ln), "")}
    finally:
        if top is not None:
            top.terminate()
            top.wait()
        time.sleep(0.5)
        tmux.kill()
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2000, help="threads of all the jobs together")
    ap.add_argument("--busy", type=int, default=2, help="jobs whose main loop works 5 ms / 100 ms")
    ap.add_argument("--ticks", type=int, default=20, help="plain ticks (as many instrumented)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--ui-seconds", type=float, default=30.0, help="0: skip the real monitor")
    ap.add_argument("--sleepers", type=int, default=0,
                    help="this many sleeping processes beside them (not jobs: a login node's)")
    ap.add_argument("--compare-threads", type=int, default=256,
                    help="first the same jobs with this many threads (growth in threads; 0: skip)")
    args = ap.parse_args()
    sleepers = [subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
                for _ in range(args.sleepers)]
    try:
        run(args)
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()


def run(args: argparse.Namespace) -> None:
    for threads in ([args.compare_threads] if args.compare_threads else []) + [args.threads]:
        t = time.monotonic()
        with Population(args.jobs, threads, args.busy) as pop:
            print(f"\n{args.jobs} jobs, {pop.threads()} threads, {args.sleepers} sleepers "
                  f"started in {time.monotonic() - t:.1f} s; {os.cpu_count()} CPUs, "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
            res = engine_ticks(args.ticks, args.warmup, args.interval)
            print(f"engine: found {res['found']} jobs, {res['processes']} processes, "
                  f"{res['threads']} threads (CPU wait known for {res['cpu_wait_known']})")
            print(f"  first tick            {res['first_tick_ms']:.1f} ms (every process read once)")
            print(f"  tick, quiet skip on   {res['tick_ms']} ms   target ≤ 50 ms")
            print(f"  tick, quiet skip off  {res['tick_noskip_ms']} ms   (alternating blocks, same run)")
            print(f"    CPU-wait reading    on {res['cpu_wait_reading_ms']} ms, "
                  f"off {res['cpu_wait_reading_noskip_ms']} ms")
            for k, v in res["parts_ms"].items():
                print(f"    {k:<20}{v} ms")
            if args.ui_seconds > 0 and threads == args.threads:
                ui = ui_cpu(args.ui_seconds)
                print(f"monitor (real TUI, {ui.get('wall_s')} s): gputop-dl {ui.get('gputop_dl_pct')} % "
                      f"of a core, top -d 1 {ui.get('top_pct')} % (same run)   target ≤ 5 %")
                print(f"  threads {ui.get('threads_pct')}; screen: {ui.get('jobs_line')!r}", flush=True)
    print(f"\nload at the end {os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()
