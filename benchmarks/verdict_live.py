"""The live verdict against ground truth: calibrated scripts started by hand, each script's own
co-run / solo mean step against gputop-dl's estimated slowdown (nothing paused).

    python benchmarks/verdict_live.py [--only "heavy trio"] [--steps-scale 1.0]

Ground truth: tests/external/calibrated.py, a plain PyTorch script of known cost that prints its
own mean step time (after its warm-up) when it ends. Per scenario:

1. one copy alone, for the solo mean step (the truth's denominator);
2. n copies started at once by hand (no gputop-dl in them), each for the same number of steps,
   watched by the monitor's engine (found jobs, this run's scripts only, py-spy stall on, as
   `gputop-dl` runs): each job's estimated slowdown is the median of its estimates over the
   ticks when every copy ran and a verdict was judged;
3. truth = each copy's own co-run mean step / the solo mean step.

Scenarios: a heavy trio (each about 1.8 cores alone, on the 2-core box: CPU-bound), a light pair
(each mostly waiting on an emulated GPU: parallel), a pair sharing one emulated GPU (a lock file:
they queue for it; no NVML sees it, so the live verdict cannot: a blind spot, shown as such).

Printed: per job, truth and estimate and their ratio (target within 25 %); per scenario, the
verdict's kind (and the kind the truth says), the seconds from the first tick that saw every
copy to the first judged verdict of the final kind (target 10 s), and whether any job was ever
stopped (target: never). The CPU-wait reading's cost per tick is benchmarks/sampler_cost.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.runner import monitor_engine  # noqa: E402
from tests.fakes.by_hand import CALIBRATED, HEAVY, LIGHT, never_left_stopped, only_found  # noqa: E402

SLOW = 1.10


def scenarios(work: str) -> dict:
    lock = os.path.join(work, "emulated-gpu-0.lock")
    return {  # name: (copies, args, steps, the kind the truth says)
        "heavy trio": (3, HEAVY, 200, "cpu-bound"),
        "light pair": (2, LIGHT, 60, "parallel"),
        "fake-GPU pair": (2, ["--sample-io-ms", "5", "--compute-ms", "60", "--gpu-lock", lock],
                          60, "gpu-contended"),
    }


def own_mean(text: str) -> float | None:
    try:
        return json.loads([ln for ln in text.splitlines() if ln.strip()][-1])["step_time_s"]
    except (ValueError, KeyError, IndexError):
        return None


def solo(args: list[str], steps: int) -> float | None:
    out = subprocess.run([sys.executable, CALIBRATED, "--steps", str(steps), *args],
                         capture_output=True, text=True, timeout=600)
    return own_mean(out.stdout)


def corun(n: int, args: list[str], steps: int, work: str) -> dict:
    logs = [os.path.join(work, f"corun-{i}.out") for i in range(n)]
    procs = [subprocess.Popen([sys.executable, CALIBRATED, "--steps", str(steps), *args],
                              stdout=open(p, "w"), stderr=subprocess.DEVNULL,
                              start_new_session=True) for p in logs]
    pids = {p.pid for p in procs}
    ticks: list = []
    stopped = []

    def on(snap):
        if len(snap.jobs) == n:
            ticks.append((snap.time, snap.verdict, {j.pid: j for j in snap.jobs}))
            stopped.append(not never_left_stopped(pids))

    eng = monitor_engine(Nvml(), interval=1.0, record=False, found=only_found(pids))
    eng.subscribe(on)
    eng.start()
    try:
        for p in procs:
            p.wait(timeout=900)
    finally:
        eng.request_stop()
        eng.join(10)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    own = {}
    for p, log in zip(procs, logs):
        with open(log) as f:
            own[p.pid] = own_mean(f.read())
    return {"ticks": ticks, "own": own, "stopped": any(stopped)}


def summarise(name: str, n: int, want: str, truth_solo: float | None, r: dict) -> list[str]:
    ticks = [t for t in r["ticks"] if t[1] and t[1]["kind"] not in ("insufficient-data",)]
    final = ticks[-1][1]["kind"] if ticks else None
    t_first = r["ticks"][0][0] if r["ticks"] else None
    ttv = next((t - t_first for t, v, _ in ticks if v["kind"] == final), None)
    out = []
    for pid, mean in r["own"].items():
        ests = [jobs[pid].slowdown for _, _, jobs in ticks
                if pid in jobs and jobs[pid].slowdown is not None]
        est = statistics.median(ests) if ests else None
        truth = mean / truth_solo if mean and truth_solo else None
        ratio = est / truth if est and truth else None
        out.append(f"| {name} | {pid} | {_f(truth_solo, '.3f')} | {_f(mean, '.3f')} | "
                   f"{_f(truth, '.2f')} | {_f(est, '.2f')} | {_f(ratio, '.2f')} | "
                   f"{'yes' if ratio and abs(ratio - 1) <= 0.25 else 'no'} |")
    kinds = sorted({v["kind"] for _, v, _ in ticks})
    out.append(f"| {name}: verdict **{final}** (truth: {want}; kinds seen {', '.join(kinds)}), "
               f"first judged verdict of that kind {_f(ttv, '.1f')} s after every copy was seen, "
               f"{len(r['ticks'])} ticks, a job paused: {'YES' if r['stopped'] else 'never'} "
               "| | | | | | |")
    return out


def _f(x, f):
    return "–" if x is None else format(x, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None)
    ap.add_argument("--steps-scale", type=float, default=1.0)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        os.environ["GPUTOP_DL_HOME"] = os.path.join(work, "home")
        for name, (n, args, steps, want) in scenarios(work).items():
            if a.only and a.only != name:
                continue
            steps = max(20, int(steps * a.steps_scale))
            truth_solo = solo(args, max(20, steps // 3))
            r = corun(n, args, steps, work)
            rows += summarise(name, n, want, truth_solo, r)
    print(f"load1 at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("| scenario | pid | solo mean step (s) | co-run mean step (s) | true slowdown "
          "| estimated | estimate / truth | within 25 % |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
