#!/usr/bin/env python3
"""The tick's cost of what reading other users' jobs added, on benchmarks/scale_tick.py's crowded box (64 jobs, 2,000 threads).

    .venv/bin/python benchmarks/privilege_cost.py [--jobs 64] [--threads 2000] [--ticks 20]
    sudo .venv/bin/python benchmarks/privilege_cost.py --other-user [--entry c] # alice's, bob's monitor

The same fake population as scale_tick.py; one monitor engine (py-spy off) ticks every second.
Timed by wrapping them (thread CPU), per tick: the judge of processes whose maps are closed
(`Discoverer._judge_hidden`), the list of those not judged jobs (`Discoverer.unjudged`), the
per-job rights and notes (`FoundJobs.access_notes`, `privilege.Access.limits`, the owner's
`stat`), and each job's cgroup v2 I/O reading (`CgroupIO.read`, its set-up included), against
the whole tick. Target: at most 5 % of the tick. As root the population's maps are readable
(the judge does not run). `--other-user` (root needed to make the users, tests/fakes/users.py):
`gputopdl_alice` runs the population as scripts (`python job.py`, a training entry point, no
forked twins, idle threads: none is judged a job, so each is judged again and again, with
back-off, the judge's worst case) and `gputopdl_bob` runs the monitor. The wrappers' own cost
counts in that figure (the judge is called for each such process every tick, and returns at
once until its next look is due), so the tick is also compared with `--entry c`: the same
population as `python -c` scripts, ruled out at their first look (no judge after it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.scale_tick import Population  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2000)
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--other-user", action="store_true")
    ap.add_argument("--entry", choices=("script", "c"), default="script",
                    help="with --other-user: alice's population as scripts or as python -c")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        measure(a.ticks, a.warmup, None)
    elif a.other_user:
        other_user(a)
    else:
        with Population(a.jobs, a.threads, 2) as pop:
            measure(a.ticks, a.warmup, pop)


def other_user(a: argparse.Namespace) -> None:
    """The population as alice's scripts, the measurement as bob."""
    import subprocess

    from benchmarks.scale_tick import JOB
    from tests.fakes.users import Users, why_not

    why = why_not()
    if why:
        sys.exit(f"privilege_cost.py: {why}")
    users = Users.make()
    try:
        os.makedirs(os.path.join(users.dir, "torch"))
        lib = users.write(os.path.join("torch", "_C.so"), "\0" * 4096)
        job = users.write("job.py", JOB)
        prog = [job] if a.entry == "script" else ["-c", JOB]
        per = [a.threads // a.jobs + (1 if i < a.threads % a.jobs else 0) for i in range(a.jobs)]
        procs = [users.popen("alice", [sys.executable, *prog, lib, str(max(1, n)),
                                       "1" if i < 2 else "0"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for i, n in enumerate(per)]
        for p in procs:
            p.stdout.readline()  # "ready": its threads are started
        out = users.run("bob", [sys.executable, os.path.abspath(__file__), "--inner",
                                "--ticks", str(a.ticks), "--warmup", str(a.warmup)],
                        timeout=600, env={"PYTHONPATH": ROOT})
        print(out.stdout + out.stderr[-2000:])
    finally:
        users.close()


def measure(n_ticks: int, warmup: int, pop: Population | None) -> None:
    """Tick the monitor's engine; print the tick and the added reads' share of it."""
    from gputop_dl.collect.jobs import discover
    from gputop_dl.collect.jobs import found
    from gputop_dl.collect.jobs import privilege
    from gputop_dl.collect.proc import cgroup_io
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner import monitor_engine

    spent = [0.0]
    setup = [0.0]

    def timed(owner: Any, name: str, bucket: list[float]) -> Callable[[], None]:
        orig = getattr(owner, name)

        def wrapper(*args: Any, **kw: Any) -> Any:
            c = time.thread_time()
            try:
                return orig(*args, **kw)
            finally:
                bucket[0] += time.thread_time() - c

        setattr(owner, name, wrapper)
        return lambda: setattr(owner, name, orig)

    undo = [timed(discover.Discoverer, "_judge_hidden", spent),
            timed(discover.Discoverer, "unjudged", spent),
            timed(found.FoundJobs, "access_notes", spent),
            timed(privilege.Access, "limits", spent),
            timed(found, "owner", spent),
            timed(cgroup_io.CgroupIO, "read", spent),
            timed(cgroup_io.CgroupIO, "__init__", setup)]
    eng = monitor_engine(Nvml(), found=found.FoundJobs(stall=False), record=False)
    ticks, mine = [], []
    try:
        for i in range(warmup + n_ticks):
            t0 = time.monotonic()
            spent[0] = 0.0
            c0 = time.thread_time()
            eng.tick()
            total = time.thread_time() - c0
            if i == 0:
                first = (total, spent[0] + setup[0])
            elif i >= warmup:
                ticks.append(total)
                mine.append(spent[0])
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    finally:
        for u in undo:
            u()
    jobs = eng.snapshot.jobs
    judged = eng.sampler.found.disc if eng.sampler.found else None
    threads = pop.threads() if pop is not None else None
    tick, add = statistics.median(ticks) * 1e3, statistics.median(mine) * 1e3
    unjudged = len(judged.unjudged()) if judged is not None else None
    print(f"as uid {os.geteuid()}: {len(jobs)} jobs found, {unjudged} Python processes of other "
          f"users not judged jobs, population threads {threads if threads is not None else '?'}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"tick {tick:.2f} ms (median of {len(ticks)}); the added reads {add:.3f} ms "
          f"({100 * add / tick:.2f} % of it; target <= 5 %)")
    print(f"first tick {first[0] * 1e3:.1f} ms, of which the added reads and set-up "
          f"{first[1] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
