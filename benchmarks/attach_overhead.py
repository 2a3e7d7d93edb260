"""Cost of watching jobs not launched here: py-spy attach overhead on the target, and discovery per tick.

1. Overhead: tests/external/stall_script.py in fixed-work mode (a known number of matmuls per
   step plus a short sleeping data wait) runs `--runs` times alone and `--runs` times with a
   py-spy burst attached for its whole run (non-blocking, `--idle --threads`, the monitor's
   rate), alternating. Reported: median samples/s of each, the ratio, and the overhead while
   attached (A, the worst case). B: the monitor's duty cycle, 12 s runs alone against 12 s
   runs with one 2 s burst in the middle (the monitor samples a job 2 s in every ~12 s).
2. Discovery: idle processes are started until the box has `--procs` processes, then
   `Discoverer.refresh() + find()` is timed per tick (cold first tick, then steady state),
   next to `procs.children_map()`, the one /proc pass per tick it replaces.

    .venv/bin/python benchmarks/attach_overhead.py [--runs 5] [--seconds 4] [--procs 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gputop_dl.collect.pyspy import run as pyspy  # noqa: E402
from gputop_dl.collect.jobs.discover import Discoverer  # noqa: E402
from gputop_dl.collect.proc.procs import children_map  # noqa: E402

SCRIPT = os.path.join(ROOT, "tests", "external", "stall_script.py")


def one_run(seconds: float, attach: bool, rate: int, iters: int, data_ms: float,
            burst_s: float | None = None) -> dict:
    """One run of the target; with `attach`, py-spy is attached for the whole run, or for one
    `burst_s` burst in its middle (the monitor's duty cycle)."""
    p = subprocess.Popen([sys.executable, SCRIPT, "--seconds", str(seconds), "--data-ms",
                          str(data_ms), "--compute-iters", str(iters)],
                         stdout=subprocess.PIPE, text=True)
    json.loads(p.stdout.readline())  # ready: the timed loop starts now
    est = None
    if attach:
        if burst_s:
            time.sleep((seconds - burst_s) / 2)
        est, err = pyspy.record_stall(p.pid, burst_s or seconds, rate)
        if err:
            raise SystemExit(f"py-spy: {err}")
    out = p.stdout.read()
    p.wait()
    res = json.loads(out.strip().splitlines()[-1])
    res["pyspy_samples"] = est.samples if est else None
    res["pyspy_stall"] = est.fraction if est else None
    return res


def overhead(args, seconds: float, burst_s: float | None = None) -> dict:
    plain, spied, stalls = [], [], []
    for i in range(args.runs):
        for attach in ((False, True) if i % 2 == 0 else (True, False)):
            r = one_run(seconds, attach, args.rate, args.iters, args.data_ms, burst_s)
            (spied if attach else plain).append(r["samples_per_s"])
            if attach:
                stalls.append((r["stall"], r["pyspy_stall"], r["pyspy_samples"]))
            print(f"  run {i + 1} {'py-spy' if attach else 'alone '}: "
                  f"{r['samples_per_s']:.1f} samples/s, own stall {r['stall']:.3f}"
                  + (f", py-spy stall {r['pyspy_stall']:.3f} ({r['pyspy_samples']} samples)"
                     if attach else ""), flush=True)
    a, b = statistics.median(plain), statistics.median(spied)
    over = 1 - b / a
    return {"alone_median": a, "attached_median": b, "ratio": b / a,
            "overhead_attached": over, "overhead_monitor_duty": over * 2.0 / 12.0,
            "stall_pairs": stalls}


def discovery(args) -> dict:
    have = sum(1 for n in os.listdir("/proc") if n.isdigit())
    extra = []
    for _ in range(max(0, args.procs - have)):
        extra.append(subprocess.Popen(["sleep", "600"]))
    try:
        time.sleep(0.5)
        n = sum(1 for n in os.listdir("/proc") if n.isdigit())
        d = Discoverer()
        t = time.perf_counter()
        d.refresh()
        found = d.find()
        cold = time.perf_counter() - t
        ticks, cpu = [], []
        for _ in range(args.ticks):
            t, c = time.perf_counter(), time.thread_time()
            d.refresh()
            d.find()
            ticks.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
            time.sleep(0.01)
        cm = []
        for _ in range(args.ticks):
            t = time.perf_counter()
            children_map()
            cm.append(time.perf_counter() - t)
        # churn: 5 new short-lived processes per tick (the cost of classifying new PIDs)
        churn = []
        for _ in range(20):
            kids = [subprocess.Popen(["sleep", "5"]) for _ in range(5)]
            time.sleep(0.05)
            t = time.perf_counter()
            d.refresh()
            d.find()
            churn.append(time.perf_counter() - t)
            for k in kids:
                k.kill()
                k.wait()
        return {"processes": n, "jobs_found": len(found), "cold_ms": cold * 1e3,
                "steady_ms_median": statistics.median(ticks) * 1e3,
                "steady_ms_p90": sorted(ticks)[int(0.9 * len(ticks))] * 1e3,
                "steady_cpu_ms_mean": statistics.fmean(cpu) * 1e3,
                "children_map_ms_median": statistics.median(cm) * 1e3,
                "churn5_ms_median": statistics.median(churn) * 1e3}
    finally:
        for p in extra:
            p.kill()
        for p in extra:
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rate", type=int, default=25, help="py-spy rate (default 25: the monitor's)")
    ap.add_argument("--iters", type=int, default=1200, help="matmuls per step (fixed work)")
    ap.add_argument("--data-ms", type=float, default=20.0)
    ap.add_argument("--procs", type=int, default=300)
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--duty-seconds", type=float, default=12.0,
                    help="run length for the duty-cycle comparison (0 = skip it)")
    ap.add_argument("--skip-overhead", action="store_true")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    d = discovery(args)
    print(f"discovery with {d['processes']} processes ({d['jobs_found']} torch/GPU jobs): "
          f"cold tick {d['cold_ms']:.1f} ms, steady {d['steady_ms_median']:.2f} ms/tick "
          f"(p90 {d['steady_ms_p90']:.2f}; CPU time {d['steady_cpu_ms_mean']:.2f} ms/tick mean); 5 new processes per tick {d['churn5_ms_median']:.2f} ms; "
          f"procs.children_map() {d['children_map_ms_median']:.2f} ms")
    if args.skip_overhead:
        return
    print(f"A. worst case: {args.runs} alternating pairs of {args.seconds:.0f} s runs, py-spy at "
          f"{args.rate} Hz attached for the whole run")
    o = overhead(args, args.seconds)
    print(f"samples/s median: alone {o['alone_median']:.2f}, with py-spy {o['attached_median']:.2f}; "
          f"ratio {o['ratio']:.3f}; overhead while attached {o['overhead_attached']:+.1%} "
          f"(x 2/12 = {o['overhead_monitor_duty']:+.1%})")
    if args.duty_seconds:
        print(f"B. monitor duty cycle: {args.runs} alternating pairs of {args.duty_seconds:.0f} s "
              f"runs, one 2 s burst at {args.rate} Hz in each py-spy run")
        o = overhead(args, args.duty_seconds, 2.0)
        print(f"samples/s median: alone {o['alone_median']:.2f}, with one burst "
              f"{o['attached_median']:.2f}; ratio {o['ratio']:.3f}; overhead "
              f"{o['overhead_attached']:+.1%}")


if __name__ == "__main__":
    main()
