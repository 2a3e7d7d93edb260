"""What the memory reading (collect/proc/memory.py) adds to a sampling tick, 12 jobs.

As benchmarks/io_cost.py: twelve job trees (a root and 2 workers each, asleep) sampled as the
monitor samples them (the host, NVML, one /proc pass, each job's `TreeSampler.sample` with its
CPU wait and disk reading, the live verdict's judge). Rounds alternate between the trees and
host with the memory reading (each job's cgroup memory.stat and limit events every second tick,
the host's /proc/vmstat refaults every tick) and without it, in the same run, so both see the
same machine. Prints the median CPU ms per tick of each and the ratio.

Usage: python benchmarks/memory_cost.py [--jobs 12] [--ticks 60] [--rounds 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.io_cost import TREE  # noqa: E402
from gputop_dl.analyse.live.passive import PassiveJudge  # noqa: E402
from gputop_dl.collect.proc.diskio import io_fields  # noqa: E402
from gputop_dl.collect.proc.host import HostSampler  # noqa: E402
from gputop_dl.collect.proc.memory import memory_fields  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.collect.proc.procs import TreeSampler, children_map  # noqa: E402
from gputop_dl.collect.proc.cpu_wait import tree_wait, wait_fields  # noqa: E402
from gputop_dl.snapshot import JobSample  # noqa: E402


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
                              **wait_fields(tree_wait(ts, roots[i].pid)), **io_fields(ts),
                              **memory_fields(ts)))
    judge.verdict(jobs, h, t=now)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--ticks", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    roots = [subprocess.Popen([sys.executable, "-c", TREE]) for _ in range(args.jobs)]
    time.sleep(3.0)
    try:
        nvml = Nvml()
        with_mem = (HostSampler(), [TreeSampler(p.pid) for p in roots])
        without = (HostSampler(), [TreeSampler(p.pid) for p in roots])
        without[0]._refaults = None  # no /proc/vmstat reading
        for t in without[1]:
            t._mem.close()
            t._mem = None
        cost: dict[str, list[float]] = {"with": [], "without": []}
        for r in range(args.rounds * 2):
            key, (host, trees) = ("with", with_mem) if r % 2 == 0 else ("without", without)
            judge = PassiveJudge()
            c0 = time.process_time()
            for k in range(args.ticks):
                tick(host, nvml, trees, roots, judge, float(k))
            cost[key].append((time.process_time() - c0) / args.ticks)
        w, wo = statistics.median(cost["with"]), statistics.median(cost["without"])
        print(f"jobs: {args.jobs}; {args.ticks} ticks x {args.rounds} rounds each; cgroup "
              f"{with_mem[1][0].sample().memory}")
        for key, label in (("without", "without the memory reading: "),
                           ("with", "with the memory reading:    ")):
            print(label + f"median {statistics.median(cost[key]) * 1e3:.2f} ms CPU (rounds: "
                  + ", ".join(f"{x * 1e3:.2f}" for x in cost[key]) + ")")
        print(f"the memory reading adds {(w / wo - 1) * 100:+.1f} % to the tick")
    finally:
        for p in roots:
            for c in __import__("psutil").Process(p.pid).children():
                c.kill()
            p.kill()


if __name__ == "__main__":
    main()
