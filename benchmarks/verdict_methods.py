"""Truth against measured for every way gputop-dl gets a solo figure: measure, cache, probe, diagnose, estimate.

    python benchmarks/verdict_methods.py [--runs 1]

Ground truth comes from tests/external/calibrated.py, a plain PyTorch script of known cost:
the "light" job sleeps (no CPU: several run truly in parallel), the "heavy" one burns about 1.8
cores in its two loader workers (three on 2 cores are CPU-bound). Each script prints its own
median and mean step time. Truth solo step = the script run alone; the script's own slowdown =
its median (and mean) step over its whole run / the same alone. That run includes the tail a
job ran alone after the others ended and, with the probe, its own solo window; gputop-dl's
slowdown is the median over the overlap window only.

For each scenario and method the table gives the verdict, its confidence, gputop-dl's solo step
against the truth, its slowdowns against the truth, and the time to verdict: from the co-run's
start to the first verdict of the final kind with confidence >= 0.8 (measure: the solo
baselines ran before; they are counted separately as "baseline s").

`estimate` is the live verdict (analyse/live/passive.py): the scripts started by hand, the monitor's
engine watching them for ESTIMATE_S seconds, nothing paused; its slowdown is the median of the
jobs' estimated slowdowns over the judged ticks, its time to verdict counted from the first tick
that saw every script. benchmarks/verdict_live.py sets each script's own slowdown beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.runner import diagnose_engine, launch_engine, monitor_engine, open_spec  # noqa: E402
from tests.fakes.by_hand import only_found  # noqa: E402

CAL = os.path.join(os.path.dirname(HERE), "tests", "external", "calibrated.py")
SCENARIOS = {
    "light pair": (2, ["--sample-io-ms", "10", "--compute-ms", "60"], 60),
    "heavy trio": (3, ["--sample-cpu-ms", "10", "--workers", "2", "--compute-ms", "20"], 150),
}


def own_steps(log_path: str) -> tuple[float, float] | None:
    """The script's own (median, mean) step time, from its last stdout line."""
    try:
        with open(log_path) as f:
            d = json.loads([ln for ln in f.read().splitlines() if ln.strip()][-1])
        return d["median_step_s"], d["step_time_s"]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def truth_solo(args: list[str], steps: int) -> tuple[float, float]:
    out = subprocess.run([sys.executable, CAL, "--steps", str(steps), *args], capture_output=True,
                         text=True, check=True)
    d = json.loads(out.stdout.splitlines()[-1])
    return d["median_step_s"], d["step_time_s"]


def write_file(work: str, n: int, args: list[str], steps: int, method: str) -> str:
    argv = [sys.executable, CAL, "--steps", str(steps), *args]
    body = (f'[session]\nname = "methods"\ninterval = 0.5\nbaseline = "{method}"\n'
            f'baseline_steps = 10\n[defaults]\nwarmup_steps = 3\ncommand = {json.dumps(argv)}\n')
    body += "".join(f'[[workload]]\nname = "j{i}"\n' for i in range(n))
    path = os.path.join(work, f"{method}.toml")
    with open(path, "w") as f:
        f.write(body)
    return path


def run_launch(path: str) -> dict:
    nvml = Nvml()
    eng = launch_engine(open_spec(path, nvml), nvml, command="benchmark")
    marks: dict = {"corun": None, "first": []}

    def watch(snap):
        if snap.phase == "co-run" and marks["corun"] is None:
            marks["corun"] = snap.time
        v = snap.verdict
        if v and marks["corun"] is not None:
            marks["first"].append((snap.time, v["kind"], v.get("confidence") or 0))

    eng.subscribe(watch)
    t0 = time.time()
    eng.start()
    eng.join()
    final = eng.verdict or {}
    ttv = next((t - marks["corun"] for t, k, c in marks["first"]
                if k == final.get("kind") and c >= 0.8), None)
    own = {n: own_steps(r.proc.log_path) for n, r in eng.runs.items()}
    return {"verdict": final, "ttv": ttv, "solo": {n: (s or {}).get("step_time_s")
                                                  for n, s in eng.plan.baselines.solo.items()},
            "own": own, "baseline_s": (marks["corun"] - t0) if marks["corun"] else None}


def run_diagnose(n: int, args: list[str]) -> dict:
    procs = [subprocess.Popen([sys.executable, CAL, "--steps", "0", *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True) for _ in range(n)]
    try:
        time.sleep(4)
        t0 = time.time()
        eng = diagnose_engine(Nvml(), seconds=15, interval=0.5, pids={p.pid for p in procs})
        eng.start()
        eng.join()
        res = eng.plan.result()
        return {"verdict": eng.verdict or {}, "ttv": time.time() - t0,
                "solo": {j["name"]: j["solo_step_time_s"] for j in res["jobs"]},
                "slow": {j["name"]: j["slowdown"] for j in res["jobs"]}, "own": {},
                "baseline_s": None}
    finally:
        for p in procs:
            p.kill()
            p.wait()


ESTIMATE_S = 15.0


def run_estimate(n: int, args: list[str]) -> dict:
    procs = [subprocess.Popen([sys.executable, CAL, "--steps", "0", *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True) for _ in range(n)]
    seen: list = []
    try:
        time.sleep(4)
        eng = monitor_engine(Nvml(), interval=1.0, record=False,
                             found=only_found({p.pid for p in procs}))
        eng.subscribe(lambda snap: seen.append(snap) if len(snap.jobs) == n else None)
        eng.start()
        time.sleep(ESTIMATE_S)
        eng.request_stop()
        eng.join(10)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    judged = [s for s in seen if s.verdict and s.verdict["kind"] != "insufficient-data"]
    final = judged[-1].verdict if judged else {}
    ttv = next((s.time - seen[0].time for s in judged if s.verdict["kind"] == final.get("kind")
                and (s.verdict.get("confidence") or 0) >= 0.8), None)
    slow: dict[str, list[float]] = {}
    for s in judged:
        for j in s.jobs:
            if j.slowdown is not None:
                slow.setdefault(j.name, []).append(j.slowdown)
    jobs = [{"name": k, "slowdown": statistics.median(v)} for k, v in slow.items()]
    return {"verdict": dict(final, jobs=jobs), "ttv": ttv, "solo": {}, "own": {},
            "baseline_s": None}


def fmt(x, f=".3f"):
    return "–" if x is None else format(x, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=tuple(SCENARIOS))
    ap.add_argument("--methods", default="measure,cache,probe,diagnose,estimate",
                    help="comma-separated subset of the methods")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        os.environ["GPUTOP_DL_HOME"] = os.path.join(work, "home")
        for name, (n, args, steps) in SCENARIOS.items():
            if a.only and a.only != name:
                continue
            truth = truth_solo(args, 40)
            for method in a.methods.split(","):
                if method == "diagnose":
                    r = run_diagnose(n, args)
                elif method == "estimate":
                    r = run_estimate(n, args)
                else:
                    r = run_launch(write_file(work, n, args, steps, method))
                v = r["verdict"]
                solos = [s for s in r["solo"].values() if s]
                slows = [j.get("slowdown") for j in v.get("jobs", []) if j.get("slowdown")]
                med = [o[0] / truth[0] for o in r["own"].values() if o]
                mean = [o[1] / truth[1] for o in r["own"].values() if o]
                rows.append((name, method, v.get("kind"), v.get("confidence"),
                             truth[0], statistics.median(solos) if solos else None,
                             statistics.median(med) if med else None,
                             statistics.median(mean) if mean else None,
                             statistics.median(slows) if slows else None,
                             r["ttv"], r["baseline_s"]))
    print("| scenario | method | verdict | confidence | true solo step | measured solo step "
          "| script's own slowdown: median step | : mean step | measured slowdown "
          "| time to verdict ≥ 0.8 (s) | baselines (s) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {fmt(r[3], '.2f')} | {fmt(r[4])} | {fmt(r[5])} | "
              f"{fmt(r[6], '.2f')} | {fmt(r[7], '.2f')} | {fmt(r[8], '.2f')} | {fmt(r[9], '.1f')} "
              f"| {fmt(r[10], '.1f')} |")


if __name__ == "__main__":
    main()
