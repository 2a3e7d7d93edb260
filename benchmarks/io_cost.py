"""What the disk I/O reading (collect/proc/diskio.py) adds to a sampling tick, 12 jobs.

Twelve job trees (a root and 2 workers each, asleep) are sampled as the monitor samples them:
the host, NVML, one /proc pass, each job's `TreeSampler.sample` (stat, schedstat every second
tick) and the live verdict's judge. Rounds alternate between the trees with their `DiskReader`
(/proc/PID/io per process, the open files every 5 ticks) and without it, in the same run, so
both see the same machine. Prints the median CPU ms per tick of each and the ratio.

Usage: python benchmarks/io_cost.py [--jobs 12] [--ticks 100] [--rounds 7]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gputop_dl.analyse.live.passive import PassiveJudge  # noqa: E402
from gputop_dl.collect.proc.diskio import io_fields  # noqa: E402
from gputop_dl.collect.proc.host import HostSampler  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.collect.proc.procs import TreeSampler, children_map  # noqa: E402
from gputop_dl.collect.proc.cpu_wait import tree_wait, wait_fields  # noqa: E402
from gputop_dl.snapshot import JobSample  # noqa: E402

TREE = ("import subprocess, sys, time\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])"
        " for _ in range(2)]\n"
        "time.sleep(600)\n")


def tick(host, nvml, trees, roots, judge, now):
    h = host.sample()
    nvml.sample()
    nvml.processes()
    cmap = children_map()
    jobs = []
    for i, t in enumerate(trees):
        ts = t.sample(cmap)
        jobs.append(JobSample(name=f"j{i}", pid=roots[i].pid, launched=False, pids=ts.pids,
                              cpu_cores=ts.cpu_cores, rss=ts.rss,
                              **wait_fields(tree_wait(ts, roots[i].pid)), **io_fields(ts)))
    judge.verdict(jobs, h, t=now)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--ticks", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    roots = [subprocess.Popen([sys.executable, "-c", TREE]) for _ in range(args.jobs)]
    time.sleep(3.0)
    try:
        host, nvml = HostSampler(), Nvml()
        with_io = [TreeSampler(p.pid) for p in roots]
        without = [TreeSampler(p.pid) for p in roots]
        for t in without:
            t._disk.close()
            t._disk = None
        cost = {"with": [], "without": []}
        for r in range(args.rounds * 2):
            key, trees = ("with", with_io) if r % 2 == 0 else ("without", without)
            judge = PassiveJudge()
            c0 = time.process_time()
            for k in range(args.ticks):
                tick(host, nvml, trees, roots, judge, float(k))
            cost[key].append((time.process_time() - c0) / args.ticks)
        w, wo = statistics.median(cost["with"]), statistics.median(cost["without"])
        nprocs = len(with_io[0].sample().pids)
        print(f"jobs: {args.jobs} x {nprocs} processes; {args.ticks} ticks x {args.rounds} rounds each")
        for key in ("without", "with"):
            print("tick without the disk reading: " if key == "without" else
                  "tick with the disk reading:    ", end="")
            print(f"median {statistics.median(cost[key]) * 1e3:.2f} ms CPU (rounds: "
                  + ", ".join(f"{x * 1e3:.2f}" for x in cost[key]) + ")")
        print(f"the disk reading adds {(w / wo - 1) * 100:+.1f} % to the tick")
    finally:
        for p in roots:
            for c in __import__("psutil").Process(p.pid).children():
                c.kill()
            p.kill()


if __name__ == "__main__":
    main()
