"""CPU cost of one monitor-mode engine tick (`gputop-dl` with no arguments), 0 and N found jobs.

    .venv/bin/python benchmarks/engine_tick.py                     # 0 and 3 jobs, 30 ticks each
    .venv/bin/python benchmarks/engine_tick.py --jobs 3 --ticks 30 --interval 1.0
    .venv/bin/python benchmarks/engine_tick.py --jobs 3 --only-jobs --jobs-kind light

Builds the monitor's engine (`runner.monitor_engine`) in this process (py-spy stall sampling off, the session store
in a temp `GPUTOP_DL_HOME`) and calls its tick at `--interval` in the calling thread, timing it
with `time.thread_time()`. The N jobs are plain PyTorch loops outside gputop-dl
(`tests/external/stall_script.py`, each a trainer + 4 loader workers), as in `benchmarks/tui.py`.
After `--warmup` ticks, blocks of 2 plain ticks (totals) alternate with blocks of 2 instrumented
ticks (a block's mean per tick: the busiest processes are read every second tick), whose parts are
timed by wrapping methods from the outside (the engine holds no timing code): host sample, NVML,
discovery pass (`FoundJobs.refresh`), found-jobs sampling (`FoundJobs.sample`), the busiest
processes (`BusiestSampler.sample`, on a busy host), the live judge (`PassiveJudge.verdict`),
store writes and commit, snapshot build; "rest" is the tick minus the parts. Prints median (min, max) ms.

    .venv/bin/python benchmarks/engine_tick.py --cpu-wait --jobs 3 --ticks 100 --interval 0.5

`--cpu-wait` prices the CPU-wait reading (collect/proc/schedstat.py: every thread's schedstat and the
cgroup's cpu.stat, read every `schedstat.READ_EVERY` ticks) instead: with the N found jobs,
blocks of READ_EVERY ticks alternate between the reading on and off (`TreeSampler.cpu_wait`),
so both halves see the same load; prints the median CPU per tick of each (a block's mean), their
ratio (target: at most 1.10), and the CPU time spent in the reading itself (timed by wrapping
it).
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
os.environ["GPUTOP_DL_HOME"] = tempfile.mkdtemp(prefix="gdl-bench-")

from gputop_dl.engine import core as engine_core  # noqa: E402
from gputop_dl.analyse.live.passive import PassiveJudge  # noqa: E402
from gputop_dl.collect.proc.busiest import BusiestSampler  # noqa: E402
from gputop_dl.collect.jobs.found import FoundJobs  # noqa: E402
from gputop_dl.collect.proc.host import HostSampler  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.record.store import Store  # noqa: E402
from gputop_dl.runner import monitor_engine  # noqa: E402

# part -> (owner, attribute names): every call of these counts toward the part
PARTS = {
    "host sample": [(HostSampler, ("sample",))],
    "NVML": [(Nvml, ("sample", "processes"))],
    "discovery pass": [(FoundJobs, ("refresh",))],
    "found-jobs sampling": [(FoundJobs, ("sample",))],
    "busiest processes": [(BusiestSampler, ("sample",))],
    "live judge": [(PassiveJudge, ("verdict",))],
    "store writes+commit": [(Store, ("__init__", "create_session", "upsert_job", "add_events",
                                     "add_host_sample", "add_gpu_samples", "add_job_sample",
                                     "heartbeat", "commit"))],
    "snapshot build": [(engine_core, ("Snapshot",))],
}


# the jobs' arguments: busy (as `benchmarks/tui.py` starts them: the host busy, the jobs waiting)
# or light (as `benchmarks/screen_speed.py` does: a batch every 400 ms, nobody waits)
JOB_ARGS = {"busy": ["--data-ms", "40", "--compute-ms", "10", "--num-workers", "4"],
            "light": ["--data-ms", "400", "--compute-ms", "5", "--num-workers", "2"]}


def start_jobs(n: int, seconds: float, kind: str = "busy") -> list[subprocess.Popen]:
    """n plain PyTorch loops outside gputop-dl."""
    script = os.path.join(ROOT, "tests", "external", "stall_script.py")
    return [subprocess.Popen([sys.executable, script, "--seconds", str(seconds), *JOB_ARGS[kind]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


class Parts:
    """Wraps the PARTS' functions while active; sums their thread CPU time per part."""

    def __init__(self):
        self.spent: dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self._orig = [(owner, a, getattr(owner, a)) for ps in PARTS.values()
                      for owner, attrs in ps for a in attrs]

    def _wrap(self, part: str, fn):
        spent, clock = self.spent, time.thread_time

        def timed(*args, **kw):
            t0 = clock()
            try:
                return fn(*args, **kw)
            finally:
                spent[part] += clock() - t0
        return timed

    def __enter__(self):
        for part, ps in PARTS.items():
            for owner, attrs in ps:
                for a in attrs:
                    setattr(owner, a, self._wrap(part, getattr(owner, a)))
        return self

    def __exit__(self, *exc):
        for owner, a, fn in self._orig:
            setattr(owner, a, fn)


BLOCK = 2  # ticks per block (see measure)


def fmt(xs: list[float]) -> str:
    ms = [x * 1e3 for x in xs]
    return f"{statistics.median(ms):6.3f} ms  (min {min(ms):.3f}, max {max(ms):.3f})"


def measure(n_jobs: int, ticks: int, warmup: int, interval: float) -> None:
    eng = monitor_engine(Nvml(), found=FoundJobs(stall=False))  # the monitor's, minus py-spy
    totals, parts = [], {p: [] for p in PARTS}
    # blocks of BLOCK ticks, plain and instrumented in turn, each figure a block's mean per tick:
    # the busiest processes are read every second tick (collect/proc/busiest.py READ_EVERY), so
    # single ticks in turn would put every pass on the same side
    block: list[float] = []
    spent: dict[str, float] = dict.fromkeys(PARTS, 0.0)
    for i in range(warmup + 2 * ticks):
        t0 = time.monotonic()
        k = i - warmup
        if k < 0 or (k // BLOCK) % 2 == 0:
            c0 = time.thread_time()
            eng.tick()
            if k >= 0:
                block.append(time.thread_time() - c0)
                if len(block) == BLOCK:
                    totals.append(statistics.fmean(block))
                    block = []
        else:
            with Parts() as p:
                c0 = time.thread_time()
                eng.tick()
                total = time.thread_time() - c0
            for name, v in p.spent.items():
                spent[name] += v
            spent["rest"] = spent.get("rest", 0.0) + total - sum(p.spent.values())
            if k % BLOCK == BLOCK - 1:
                for name, v in spent.items():
                    parts.setdefault(name, []).append(v / BLOCK)
                spent = dict.fromkeys(PARTS, 0.0)
        time.sleep(max(0.0, interval - (time.monotonic() - t0)))
    found = len(eng.snapshot.jobs)
    print(f"\n{n_jobs} jobs started, {found} found "
          f"({sum(len(j.pids) for j in eng.snapshot.jobs)} processes), "
          f"{ticks} ticks at {interval:g} s")
    print(f"  tick (plain)          {fmt(totals)}")
    for k, v in parts.items():
        print(f"    {k:<20}{fmt(v)}")
    eng.recorder.close("finished", None)


def measure_cpu_wait(n_jobs: int, ticks: int, warmup: int, interval: float) -> None:
    """Plain ticks, alternately with and without the CPU-wait reading; both medians."""
    from gputop_dl.collect.jobs import found as found_mod
    from gputop_dl.collect.proc import cpu_wait, procs
    from gputop_dl.collect.proc import schedstat

    eng = monitor_engine(Nvml(), found=FoundJobs(stall=False))
    on, off, inside = [], [], []
    spent_in = [0.0]

    def timed(fn):
        def wrapper(*args, **kw):
            c = time.thread_time()
            try:
                return fn(*args, **kw)
            finally:
                spent_in[0] += time.thread_time() - c
        return wrapper

    # the reading itself: every tree's schedstat and cpu.stat reads, and the per-job shares
    orig = procs.TreeSampler._read_waits, found_mod.tree_wait
    procs.TreeSampler._read_waits = timed(orig[0])
    found_mod.tree_wait = timed(cpu_wait.tree_wait)
    try:
        every = schedstat.READ_EVERY  # ticks per reading: compare blocks of that many ticks
        for i in range(warmup + 2 * ticks // every):
            reading = i % 2 == 0
            spent_in[0], spent = 0.0, 0.0
            for _ in range(every):
                t0 = time.monotonic()
                for tree in getattr(eng.sampler.found, "_trees", {}).values():
                    tree.cpu_wait = reading
                c0 = time.thread_time()
                eng.tick()
                spent += time.thread_time() - c0
                time.sleep(max(0.0, interval - (time.monotonic() - t0)))
            if i >= warmup:
                (on if reading else off).append(spent / every)  # per tick
                if reading:
                    inside.append(spent_in[0] / every)
    finally:
        procs.TreeSampler._read_waits, found_mod.tree_wait = orig
    jobs = eng.snapshot.jobs
    print(f"\n{n_jobs} jobs started, {len(jobs)} found ({sum(len(j.pids) for j in jobs)} "
          f"processes, {sum(j.threads or 0 for j in jobs)} threads), {ticks} ticks each at "
          f"{interval:g} s, read every {schedstat.READ_EVERY} ticks")
    print(f"  tick with CPU wait    {fmt(on)}")
    print(f"  tick without          {fmt(off)}")
    print(f"  ratio of the medians  {statistics.median(on) / statistics.median(off):.3f}")
    print(f"  the reading itself    {fmt(inside)}  = "
          f"{statistics.median(inside) / statistics.median(off):.1%} of the tick without")
    print("  CPU wait of the jobs  " + ", ".join(
        f"{j.cpu_wait_fraction if j.cpu_wait_fraction is not None else '-'}" for j in jobs))
    eng.recorder.close("finished", None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3, help="found jobs of the second run")
    ap.add_argument("--ticks", type=int, default=30, help="plain ticks (as many instrumented)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--only-jobs", action="store_true", help="skip the 0-job run")
    ap.add_argument("--jobs-kind", choices=sorted(JOB_ARGS), default="busy",
                    help="busy: 4 workers, a batch every 40 ms (the host busy; default); "
                         "light: screen_speed.py's jobs (2 workers, a batch every 400 ms)")
    ap.add_argument("--cpu-wait", action="store_true",
                    help="price the CPU-wait reading: ticks with and without it, N jobs")
    args = ap.parse_args()
    span = (args.warmup + 2 * args.ticks) * args.interval + 30
    if args.cpu_wait:
        with_jobs(args.jobs, span, args.jobs_kind, lambda: measure_cpu_wait(args.jobs, args.ticks, args.warmup,
                                                            args.interval))
        return
    print(f"CPU per monitor tick (thread_time), {os.cpu_count()} CPUs; "
          f"{args.ticks} plain ticks, the same number instrumented")
    if not args.only_jobs:
        measure(0, args.ticks, args.warmup, args.interval)
    if args.jobs:
        with_jobs(args.jobs, span, args.jobs_kind, lambda: measure(args.jobs, args.ticks, args.warmup,
                                                   args.interval))


def with_jobs(n: int, span: float, kind: str, run) -> None:
    """Start `n` jobs for `span` seconds, give them 8 s to import torch, `run()`, stop them."""
    jobs = start_jobs(n, span, kind)
    try:
        time.sleep(8.0)  # torch imported, workers forked
        run()
    finally:
        for j in jobs:
            j.terminate()
        for j in jobs:
            try:
                j.wait(10)
            except subprocess.TimeoutExpired:  # a loaded machine: do not leave it running
                j.kill()
                j.wait()

if __name__ == "__main__":
    main()
