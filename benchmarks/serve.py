#!/usr/bin/env python3
"""`gputop-dl serve` benchmarks: its CPU at 1 Hz with 3 jobs, scrape latency, render cost.

    .venv/bin/python benchmarks/serve.py                       # all (about 2 minutes)
    .venv/bin/python benchmarks/serve.py --only cpu --cpu-seconds 60 --cpu-runs 3
    .venv/bin/python benchmarks/serve.py --only scrape --scrapes 200

1. serve CPU at 1 Hz: the same method as `benchmarks/tui.py --only cpu`: the real
   `gputop-dl serve` process, after 5 s of start-up, CPU seconds over --cpu-seconds of the
   process itself and with its py-spy bursts (its reaped children), per OS thread; with no job
   and with --jobs found PyTorch jobs of 5 processes each (tui.py's `start_jobs`). It is
   not scraped meanwhile (a Prometheus scrape every 15 s is counted in 2).
2. scrape latency: --scrapes GETs of /metrics from this process, one after the other, against
   the same server with the same jobs running; wall time per scrape (request to the last
   byte) and the server's CPU per scrape (its CPU over the scrapes, minus its 1 Hz rate).
3. render cost: the collector's `generate_latest` in process for a snapshot with 8 GPUs and
   16 jobs (tests/fakes/source.py), no HTTP.

Medians are printed (with min/max).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.tui import med, own_cpu, proc_tree_cpu, start_jobs, thread_cpu  # noqa: E402

PY = sys.executable


def start_serve(home: str) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, GPUTOP_DL_HOME=home, PYTHONPATH=ROOT)
    p = subprocess.Popen([PY, "-m", "gputop_dl", "serve", "--listen", "127.0.0.1:0"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                         cwd=ROOT)
    line = p.stderr.readline()
    if "serving" not in line:
        p.kill()
        raise SystemExit(f"serve did not start: {line}{p.stderr.read()[-2000:]}")
    return p, line.split()[-1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def serve_cpu(seconds: float, n_jobs: int, scrapes: int) -> dict:
    home = tempfile.mkdtemp(prefix="gdl-bench-")
    jobs = start_jobs(n_jobs, seconds + scrapes * 0.2 + 60) if n_jobs else []
    p = None
    try:
        if jobs:
            time.sleep(8.0)  # torch imported, workers forked
        p, url = start_serve(home)
        gdl = psutil.Process(p.pid)
        time.sleep(5.0)  # past start-up
        th0 = thread_cpu(p.pid)
        g0, o0, w0 = proc_tree_cpu(gdl), own_cpu(gdl), time.monotonic()
        time.sleep(seconds)
        g1, o1, w1 = proc_tree_cpu(gdl), own_cpu(gdl), time.monotonic()
        th1 = thread_cpu(p.pid)
        wall = w1 - w0
        threads = {k: 100 * (v - th0.get(k, 0.0)) / wall for k, v in th1.items()}
        text = get(url).decode()
        seen = len({line.split('job_name="')[1].split('"')[0] for line in text.splitlines()
                    if line.startswith("gputop_dl_job_info{")})
        out = {"own_pct": 100 * (o1 - o0) / wall, "with_spy_pct": 100 * (g1 - g0) / wall,
               "threads_pct": threads, "jobs_seen": seen, "rss": gdl.memory_info().rss,
               "bytes": len(text)}
        if scrapes:
            rate = (o1 - o0) / wall  # its own CPU per second between scrapes
            lat = []
            c0, t0 = own_cpu(gdl), time.monotonic()
            for _ in range(scrapes):
                s = time.perf_counter()
                get(url)
                lat.append((time.perf_counter() - s) * 1000)
            c1, t1 = own_cpu(gdl), time.monotonic()
            out["latency_ms"] = lat
            out["cpu_per_scrape_ms"] = 1000 * ((c1 - c0) - rate * (t1 - t0)) / scrapes
        return out
    finally:
        if p is not None:
            p.terminate()
            p.wait(30)
        for j in jobs:
            j.terminate()
        for j in jobs:
            j.wait()


def render_cost(n: int) -> list[float]:
    from dataclasses import replace

    from prometheus_client import CollectorRegistry, generate_latest

    from gputop_dl.collect.nvml.gpu_sample import REASON_LABELS
    from gputop_dl.present.prometheus import SnapshotCollector
    from tests.fakes.source import jobs, make_snapshot

    base = jobs(1)
    many = tuple(replace(base[i % 3], name=f"job{i:02d}", pid=10_000 + i) for i in range(16))
    c = SnapshotCollector(hostname="bench", reasons=REASON_LABELS)
    c.feed(make_snapshot(1, n_gpus=8, jobs=many))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(c)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        generate_latest(reg)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("cpu", "scrape", "render"))
    ap.add_argument("--cpu-seconds", type=float, default=30.0)
    ap.add_argument("--cpu-runs", type=int, default=1, help="runs per case (median printed)")
    ap.add_argument("--jobs", type=int, default=3, help="found PyTorch jobs, started outside gputop-dl (default 3)")
    ap.add_argument("--scrapes", type=int, default=100, help="scrapes timed (default 100)")
    args = ap.parse_args()
    print(f"machine: {psutil.cpu_count()} CPUs, python {sys.version.split()[0]}")

    if args.only in (None, "cpu", "scrape"):
        cases = [args.jobs] if args.only == "scrape" else sorted({0, args.jobs})
        for n in cases:
            what = "no jobs" if n == 0 else f"{n} found jobs x 5 processes"
            runs = []
            for _ in range(args.cpu_runs):
                scrapes = args.scrapes if n == args.jobs and args.only != "cpu" else 0
                r = serve_cpu(args.cpu_seconds if args.only != "scrape" else 10.0, n, scrapes)
                runs.append(r)
                per_thread = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["threads_pct"].items()))
                print(f"1. serve at 1 Hz, {what} ({r['jobs_seen']} served): {r['own_pct']:.2f}% "
                      f"of one core itself [{per_thread}], {r['with_spy_pct']:.2f}% with its "
                      f"py-spy bursts (RSS {r['rss'] / 2**20:.0f} MiB, /metrics {r['bytes']} B)")
                if "latency_ms" in r:
                    print(f"2. scrape latency over {scrapes} scrapes: {med(r['latency_ms'])} ms; "
                          f"server CPU per scrape {r['cpu_per_scrape_ms']:.2f} ms")
            if len(runs) > 1:
                print(f"   {what}, {len(runs)} runs: itself {med([r['own_pct'] for r in runs])} %; "
                      f"with py-spy {med([r['with_spy_pct'] for r in runs])} %")
    if args.only in (None, "render"):
        costs = render_cost(200)
        print(f"3. render (generate_latest), 8 GPUs, 16 jobs: {med(costs)} ms "
              f"(mean {statistics.mean(costs):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
