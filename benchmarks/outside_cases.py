#!/usr/bin/env python3
"""Outside load against the jobs' own step times: what gputop-dl estimates, what the jobs saw.

    flock /tmp/gputop-box.lock .venv/bin/python benchmarks/outside_cases.py   # about 2 min
        [--only fits|heavy] [--repeat N]

Plain PyTorch scripts of known cost (tests/external/calibrated.py, their own per-step
timestamps) run with a fixed number of steps, each setting twice or more: without and with
outside busy loops (`python3 -c 'while True: pass'`, one core each). The live judge
(PassiveJudge over MachineSampler, 0.5 s ticks, only these scripts judged) runs beside them;
its estimates are the medians of the ticks after each job's window is full. Ground truth: a
job's median step time in a setting over the same job's in the quieter setting.

- `fits`: two one-thread jobs of a quarter core each (20 ms CPU + 60 ms asleep a step):
  alone-pair vs the pair beside 3 loops: the truth of `outside_slowdown`;
- `heavy`: one heavy job alone (two loader workers, ~1.8 cores), two together, two beside one
  loop: the truth of `slowdown` (together / alone) and of `outside_slowdown` (with the loop /
  together);
- `probe` (`--only probe`): `diagnose` with the probe on the fits pair, with nothing beside and
  beside 3 loops: each solo window's `solo_outside` and the solo step it implies on an idle box,
  against the fits pair's own step with nothing beside.
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

from gputop_dl.analyse.live.cpu_wait_model import cpu_speedup  # noqa: E402
from tests.fakes.busy import busy_loops  # noqa: E402
from gputop_dl.analyse.live.passive import WINDOW  # noqa: E402
from gputop_dl.analyse.live.passive import PassiveJudge  # noqa: E402
from gputop_dl.collect.machine import MachineSampler  # noqa: E402
from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from tests.fakes.by_hand import only_found  # noqa: E402

CAL = os.path.join(ROOT, "tests", "external", "calibrated.py")
FITS = ["--workers", "0", "--sample-cpu-ms", "5", "--compute-ms", "60", "--steps", "120"]
HEAVY = ["--sample-cpu-ms", "10", "--workers", "2", "--compute-ms", "20", "--steps", "300"]


FIRST = False  # --first: this benchmark's sessions go first on the box (see `first`)


def first(pid: int) -> None:
    """With --first, the autogroup of `pid`'s session at nice -20 (root only): the kernel shares
    the CPUs between sessions first, so the box's other sessions (other people's work) weigh
    about 1 % of each of this benchmark's, as on a quiet box, and the settings compared are
    not each measured beside a different background."""
    if not FIRST:
        return
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write("-20")
    except OSError as e:
        print(f"--first: autogroup of PID {pid} not raised ({e})", file=sys.stderr)


def reports(procs: list[subprocess.Popen]) -> list[dict]:
    """Each calibrated script's own report (its last stdout line) once it ended."""
    return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def before(k, cpus: int) -> float:
    """A tick's outside estimate by the earlier formula: the model with
    every wait put down to a CPU over the part the other jobs cause (s_all / s_cpu; the
    calibrated scripts are CPU jobs with no intra-op pool, so s_cpu is `cpu_speedup`)."""
    s_all = cpu_speedup(k.cpu_wait, k.cpu_cores, cpus, 1.0) or 1.0
    return s_all / (cpu_speedup(k.cpu_wait, k.cpu_cores, cpus, k.set_share) or 1.0)


def run(args: list[str], jobs: int, loops: int) -> dict:
    """`jobs` copies of the script beside `loops` busy loops; each job's own median step time
    and the judge's medians (slowdown, outside slowdown, kind) over its full windows."""
    busy = busy_loops(loops, own_session=False)
    procs = [subprocess.Popen([sys.executable, CAL, *args], stdout=subprocess.PIPE, text=True)
             for _ in range(jobs)]
    pids = {p.pid for p in procs}
    sampler = MachineSampler(Nvml(), found=only_found(pids, stall=False))
    judge = PassiveJudge()
    kinds: list[str] = []
    slow: dict[int, list[float]] = {}
    out: dict[int, list[float]] = {}
    old: dict[int, list[float]] = {}  # the outside estimate as it was before (s_all / s_cpu)
    named: list[list[int]] = []
    try:
        while all(p.poll() is None for p in procs):
            m = sampler.sample()
            v, est = judge.verdict(m.found, m.host, m.gpu_processes, m.gpus, m.time)
            byname = {j.name: j.pid for j in m.found}
            if v is not None and len(m.found) == jobs and all(e.ticks == WINDOW for e in est.values()):
                kinds.append(v.kind)
                for name, e in est.items():
                    slow.setdefault(byname[name], []).append(e.slowdown or 1.0)
                    out.setdefault(byname[name], []).append(e.outside or 1.0)
                    old.setdefault(byname[name], []).append(before(e.last, m.host.cpus))
                cons = v.evidence["outside_load"]["consumers"] or []
                named.append([c["pid"] for c in cons])
            time.sleep(0.5)
        own = reports(procs)
    finally:
        stop(procs + busy)
    loop_pids = {b.pid for b in busy}
    return {"jobs": jobs, "loops": loops,
            "median_step_s": [round(o["median_step_s"], 4) for o in own],
            "est_slowdown": [round(statistics.median(v), 2) for v in slow.values()],
            "est_outside": [round(statistics.median(v), 2) for v in out.values()],
            "est_outside_before": [round(statistics.median(v), 2) for v in old.values()],
            "kinds": {k: kinds.count(k) for k in dict.fromkeys(kinds)},
            "loop_named": sum(bool(loop_pids & set(n)) for n in named), "ticks": len(kinds)}


def probe(loops: int) -> dict:
    """`diagnose` (with the probe) on the fits pair beside `loops` busy loops: each job's solo
    step as py-spy timed it in its window (the other job paused, the loops running on), the
    window's `solo_outside`, and the solo step it implies on an idle box (their ratio), to be
    held against the pair's own step time with nothing beside it (the `fits` case)."""
    from gputop_dl.runner.engines import diagnose_engine
    from tests.fakes.by_hand import ByHand

    busy = busy_loops(loops)
    for b in busy:
        first(b.pid)
    scripts = ByHand()
    try:
        pids = scripts.start(FITS[:-2], 2)  # until killed
        for pid in pids:
            first(pid)
        eng = diagnose_engine(Nvml(), pids=pids, interval=0.5, seconds=12, record=False)
        eng.start()
        eng.join()
        v, res = eng.verdict or {}, eng.plan.result()
    finally:
        scripts.stop()
        for b in busy:
            b.kill()
            b.wait()
    loop_pids = {b.pid for b in busy}
    jobs = []
    for j in res["jobs"]:
        out = j["solo_outside"] or {}
        solo, s_out = j["solo_step_time_s"], out.get("slowdown")
        jobs.append({"solo_step_ms": solo and round(solo * 1000, 1),
                     "together_step_ms": j["step_time_s"] and round(j["step_time_s"] * 1000, 1),
                     "solo_outside": s_out, "window_wait": out.get("wait"),
                     "outside_cores": out.get("outside_cores"),
                     "loop_named": bool(loop_pids & {c["pid"] for c in out.get("consumers") or []}),
                     "idle_solo_ms": round(solo / s_out * 1000, 1) if solo and s_out else None,
                     "slowdown": j["slowdown"], "source": j["slowdown_source"]})
    return {"case": "probe", "loops": loops, "kind": v.get("kind"), "jobs": jobs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("fits", "heavy", "probe"),
                    help="one case (default: fits and heavy)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each case (default 1)")
    ap.add_argument("--first", action="store_true",
                    help="its sessions at autogroup nice -20 (root): the box's other work "
                         "weighs ~1 %% of each, as on a quiet box; for the scripts' own truths "
                         "and the probe, not the live split (it still counts the other "
                         "sessions' threads as competitors)")
    a = ap.parse_args()
    if a.first:
        global FIRST
        FIRST = True
        try:
            os.setsid()  # a session of its own, its jobs' and loops' (they inherit it)
        except OSError:
            pass
        first(os.getpid())
    print(f"load before: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for _ in range(a.repeat):
        for name, args, settings in (("fits", FITS, [(2, 0), (2, 3)]),
                                     ("heavy", HEAVY, [(1, 0), (2, 0), (2, 1)])):
            if a.only in (None, name):
                for jobs, loops in settings:
                    r = run(args, jobs, loops)
                    print(json.dumps({"case": name, **r}), flush=True)
        if a.only == "probe":
            for loops in (0, 3):
                print(json.dumps(probe(loops)), flush=True)


if __name__ == "__main__":
    main()
