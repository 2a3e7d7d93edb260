"""Another user's jobs seen without root: how fast three CPU-bound scripts of one user are found by another user's gputop-dl, its verdict, and its estimates against the scripts' own step times.

    sudo python benchmarks/other_users.py [--steps 150]

Needs root to create the two throw-away users (tests/fakes/users.py): `gputopdl_alice` runs
tests/external/calibrated.py (a plain PyTorch script of known cost, two DataLoader workers, about
1.8 cores alone: the verdict_live.py "heavy trio"), first one copy alone (the truth's solo mean
step), then three copies at once. Over the same co-run two monitors' engines watch (py-spy
on, as `gputop-dl` runs), each ticking every second and keeping alice's jobs: one as
`gputopdl_bob` (no root), one as root, for the comparison on the same run.

Printed, per monitor and copy: the seconds from its DataLoader workers' fork (it trains) to bob's first tick
that lists it (target 3 s) and from its process start; how it was found (`found_by`); its
estimated slowdown (median over the ticks when all three ran and a verdict was judged) against
the truth (its own co-run mean step / the solo mean step; target within 30 %); the verdict's
kinds (truth: cpu-bound).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

ALICE = "gputopdl_alice"


def watch(seconds: float) -> None:
    """Bob's side: the monitor's engine for `seconds`; one JSON line per tick (alice's jobs)."""
    from gputop_dl.collect.jobs.found import FoundJobs
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner import monitor_engine

    class Alices(FoundJobs):
        def sample(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            jobs, notes = super().sample(*args, **kwargs)
            return [j for j in jobs if j.user == ALICE], notes

    lock = threading.Lock()

    def on(snap) -> None:  # type: ignore[no-untyped-def]
        line = {"t": time.time(), "verdict": (snap.verdict or {}).get("kind"),
                "jobs": {str(j.pid): {"slowdown": j.slowdown, "found_by": j.found_by,
                                      "source": j.slowdown_source} for j in snap.jobs}}
        with lock:
            print(json.dumps(line), flush=True)

    eng = monitor_engine(Nvml(), interval=1.0, record=False, found=Alices())
    eng.subscribe(on)
    eng.start()
    time.sleep(seconds)
    eng.request_stop()
    eng.join(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--watch", type=float, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.watch is not None:
        watch(a.watch)
        return
    import psutil

    from tests.fakes.by_hand import CALIBRATED, HEAVY
    from tests.fakes.users import Users, why_not

    why = why_not()
    if why:
        sys.exit(f"other_users.py: {why}")
    users = Users.make()
    try:
        script = users.write("calibrated.py", open(CALIBRATED).read())
        argv = [sys.executable, script, "--steps", str(a.steps), *HEAVY]
        solo = users.run("alice", argv, timeout=900)
        solo_mean = json.loads(solo.stdout.strip().splitlines()[-1])["step_time_s"]
        seconds = max(60.0, solo_mean * a.steps * 4 + 30)
        me = [sys.executable, os.path.abspath(__file__), "--watch", str(seconds)]
        watchers = {"gputopdl_bob (no root)": users.popen("bob", me, stdout=subprocess.PIPE,
                                                          text=True),
                    "root": subprocess.Popen(me, stdout=subprocess.PIPE, text=True, cwd=ROOT)}
        seen: dict[str, list[dict]] = {k: [] for k in watchers}
        readers = [threading.Thread(target=lambda w=w, k=k: seen[k].extend(
            json.loads(ln) for ln in w.stdout if ln.startswith("{")), daemon=True)
            for k, w in watchers.items()]
        for r in readers:
            r.start()
        while not all(seen.values()):  # both monitors tick: start the scripts
            time.sleep(0.2)
        outs = [os.path.join(users.dir, f"corun-{i}.out") for i in range(3)]
        procs = [users.popen("alice", argv, stdout=open(o, "w"), stderr=subprocess.DEVNULL)
                 for o in outs]
        started = {p.pid: time.time() for p in procs}
        trains: dict[int, float] = {}
        while len(trains) < 3 and all(p.poll() is None for p in procs):
            for p in procs:
                try:
                    if p.pid not in trains and len(psutil.Process(p.pid).children()) >= 2:
                        trains[p.pid] = time.time()
                except psutil.Error:
                    pass
            time.sleep(0.05)
        for p in procs:
            p.wait(timeout=900)
        for w in watchers.values():
            w.terminate()
            w.wait(30)
        for r in readers:
            r.join(10)
        own = {}
        for p, o in zip(procs, outs):
            with open(o) as f:
                own[p.pid] = json.loads(f.read().strip().splitlines()[-1])["step_time_s"]
    finally:
        users.close()
    print(f"solo mean step {solo_mean:.3f} s; load1 at the end {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs")
    for who, lines in seen.items():
        report(who, lines, own, solo_mean, trains, started)


def report(who: str, lines: list[dict], own: dict[int, float], solo_mean: float,
           trains: dict[int, float], started: dict[int, float]) -> None:
    all3 = [ln for ln in lines if all(str(p) in ln["jobs"] for p in own)]
    judged = [ln for ln in all3 if ln["verdict"] not in (None, "insufficient-data")]
    print(f"\nmonitor as {who}: {len(lines)} ticks, {len(all3)} with all three, "
          f"{len(judged)} judged")
    print("| copy | found after workers fork (s) | after start (s) | found by | co-run mean step (s) "
          "| true slowdown | estimated | estimate / truth | within 30 % |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|")
    for i, (pid, mean) in enumerate(own.items()):
        seen = next((ln for ln in lines if str(pid) in ln["jobs"]), None)
        ests = [ln["jobs"][str(pid)]["slowdown"] for ln in judged
                if ln["jobs"][str(pid)]["slowdown"] is not None]
        est = statistics.median(ests) if ests else None
        truth = mean / solo_mean
        ratio = est / truth if est else None
        by = seen["jobs"][str(pid)]["found_by"] if seen else None
        print(f"| {i + 1} | {_f(seen['t'] - trains[pid] if seen and pid in trains else None)} | "
              f"{_f(seen['t'] - started[pid] if seen else None)} | {by} | {mean:.3f} | "
              f"{truth:.2f} | {_f(est, '.2f')} | {_f(ratio, '.2f')} | "
              f"{'yes' if ratio and abs(ratio - 1) <= 0.30 else 'no'} |")
    kinds: dict[str, int] = {}
    for ln in judged:
        kinds[ln["verdict"]] = kinds.get(ln["verdict"], 0) + 1
    print(f"verdict kinds over the judged ticks with all three: {kinds} (truth: cpu-bound)")


def _f(x: float | None, f: str = ".1f") -> str:
    return "–" if x is None else format(x, f)


if __name__ == "__main__":
    main()
