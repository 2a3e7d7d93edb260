"""CPU cost of one sampling tick with 3 jobs x (1 trainer + 4 workers): host, process trees,
NVML, and the store write. Prints the median CPU ms per tick and the share of one core at 1 Hz,
then the median of the process-tree sampling alone (the 3 `TreeSampler.sample` calls a tick).

Usage: python benchmarks/sampler_cost.py [--ticks 200] [--rounds 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gputop_dl.collect.proc.host import HostSampler  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.collect.proc.procs import TreeSampler, children_map  # noqa: E402
from gputop_dl.record.store import Store  # noqa: E402
from gputop_dl.snapshot import JobSample  # noqa: E402

TREE = ("import subprocess, sys, time\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])"
        " for _ in range(4)]\n"
        "time.sleep(600)\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    roots = [subprocess.Popen([sys.executable, "-c", TREE]) for _ in range(3)]
    time.sleep(2.0)
    try:
        host, nvml = HostSampler(), Nvml()
        trees = [TreeSampler(p.pid) for p in roots]
        store = Store(os.path.join(tempfile.mkdtemp(), "bench.db"))
        sid = store.create_session("bench", file=None, command="bench", kind="launch",
                                   environment={})
        per_tick = []
        for _ in range(args.rounds):
            c0 = time.process_time()
            for _ in range(args.ticks):
                now = time.time()
                h = host.sample()
                g = nvml.sample()
                nvml.processes()
                store.add_host_sample(sid, now, h)
                store.add_gpu_samples(sid, now, g)
                cmap = children_map()  # one /proc pass per tick, shared by the jobs
                for i, t in enumerate(trees):
                    ts = t.sample(cmap)
                    js = JobSample(name=f"j{i}", pid=roots[i].pid, launched=True, pids=ts.pids,
                                   cpu_cores=ts.cpu_cores, rss=ts.rss)
                    store.add_job_sample(sid, now, js, "co-run")
                store.heartbeat(sid, now)
                store.commit()
            per_tick.append((time.process_time() - c0) / args.ticks)
        per_tree_tick = []
        cmap = children_map()
        for _ in range(args.rounds):
            c0 = time.process_time()
            for _ in range(args.ticks):
                for t in trees:
                    t.sample(cmap)
            per_tree_tick.append((time.process_time() - c0) / args.ticks)
        nprocs = len(trees[0].sample().pids)
        med = statistics.median(per_tick)
        print(f"jobs: 3 x {nprocs} processes; NVML status: {nvml.status}")
        print(f"CPU per tick: median {med * 1e3:.2f} ms (rounds: "
              + ", ".join(f"{x * 1e3:.2f}" for x in per_tick) + ")")
        print(f"at 1 Hz: {med * 100:.2f} % of one core")
        print(f"process trees alone: median {statistics.median(per_tree_tick) * 1e3:.3f} ms"
              " per tick (rounds: " + ", ".join(f"{x * 1e3:.3f}" for x in per_tree_tick) + ")")
    finally:
        for p in roots:
            for c in __import__("psutil").Process(p.pid).children():
                c.kill()
            p.kill()


if __name__ == "__main__":
    main()
