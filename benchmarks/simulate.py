"""Simulator speed: jobs simulated per second, per policy, median of runs.

    .venv/bin/python benchmarks/simulate.py                    # 10 000 jobs, loads 0.8 and 1.5, 5 runs
    .venv/bin/python benchmarks/simulate.py --jobs 10000 --runs 5 --loads 0.8,1.5
    .venv/bin/python benchmarks/simulate.py --jobs-per-gpu 2 --gpu-share 1.15   # shared GPUs

The job mix is the example trace's (workloads/queue_trace.toml when it exists, else a built-in
copy of its kinds): 1-GPU, 2-GPU and CPU-only jobs on 4 GPUs and 16 cores, CPU-aware. The
arrival rate is set from the offered load: rate = load x GPUs / mean GPU-seconds per job, so
load 1.5 means a queue that grows all along (the hard case: thousands of jobs waiting).
With --jobs-per-gpu 2 jobs share (time-slice) a GPU, slowed by --gpu-share x their summed busy
fractions (the calibrated shared-GPU model). Prints, per load and policy, the median (min,
max) wall time and jobs/s over the runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gputop_dl.sched.model import Job, Machine  # noqa: E402
from gputop_dl.sched import POLICIES  # noqa: E402
from gputop_dl.sched.policies import Policy  # noqa: E402
from gputop_dl.sched.simulate import JobKind, poisson_jobs, simulate  # noqa: E402

KINDS = [JobKind(Job("mobilenet-bs32", duration_s=3.0, gpus=1, cpu_cores=3.0, gpu_util=0.7), 4),
         JobKind(Job("resnet50-ddp", duration_s=8.0, gpus=2, cpu_cores=6.0, gpu_util=0.95), 1),
         JobKind(Job("tiny-bs8", duration_s=1.0, gpus=1, cpu_cores=1.5, gpu_util=0.3), 4),
         JobKind(Job("preprocess", duration_s=2.0, gpus=0, cpu_cores=2.0), 1)]
MACHINE = Machine(gpus=4, cpus=16)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--loads", default="0.8,1.5")
    ap.add_argument("--jobs-per-gpu", type=int, default=1)
    ap.add_argument("--gpu-share", type=float, default=1.0)
    args = ap.parse_args()
    machine = Machine(gpus=MACHINE.gpus, cpus=MACHINE.cpus, jobs_per_gpu=args.jobs_per_gpu)
    total = sum(k.share for k in KINDS)
    gpu_s = sum(k.share * k.job.duration_s * max(k.job.gpus, 1) for k in KINDS) / total
    print(f"{args.jobs} jobs, {args.runs} runs, machine {machine.gpus} GPUs x {machine.jobs_per_gpu} jobs "
          f"/ {machine.cpus:g} cores, gpu_share {args.gpu_share:g}")
    print(f"{'load':>5} {'rate/s':>7} {'policy':<14} {'wall s: median (min, max)':<28} jobs/s")
    for load in (float(x) for x in args.loads.split(",")):
        rate = load * machine.gpus / gpu_s
        jobs = poisson_jobs(KINDS, rate, args.jobs, seed=1)
        for name in POLICIES:
            walls = []
            for _ in range(args.runs):
                t = time.perf_counter()
                out = simulate(Policy(name), jobs, machine, gpu_share=args.gpu_share)
                walls.append(time.perf_counter() - t)
                assert len(out) == args.jobs
            med = statistics.median(walls)
            print(f"{load:>5.2f} {rate:>7.3f} {name:<14} {med:.3f} ({min(walls):.3f}, {max(walls):.3f})"
                  f"{'':<8} {args.jobs / med:,.0f}")


if __name__ == "__main__":
    main()
