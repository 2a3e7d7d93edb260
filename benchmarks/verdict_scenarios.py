"""Runs the calibrated synthetic scenarios and prints truth vs measured stall, slowdown, verdict.

Usage: python benchmarks/verdict_scenarios.py [--repeat N]
Each scenario is a real launch (solo baselines, then the co-run) of a file in
workloads/scenarios/; the truth is set by construction (see each file's comment).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gputop_dl.runner import run_file  # noqa: E402

HERE = os.path.join(os.path.dirname(__file__), "..", "workloads", "scenarios")
SCENARIOS = [  # file, expected verdict kind (None: single job), true stall
    ("cpu_bound_trio.toml", "cpu-bound", None),
    ("light_pair.toml", "parallel", None),
    ("shared_gpu_pair.toml", "gpu-contended", None),
    ("injected_stall.toml", None, 0.40),
    ("compute_only.toml", None, 0.0),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    os.environ.setdefault("GPUTOP_DL_HOME", tempfile.mkdtemp(prefix="gdl-bench-"))
    print(f"{'scenario':<24} {'expect':<14} {'verdict':<14} {'stall (truth→measured)':<26} "
          f"{'slowdowns':<28} {'STP':>5} {'secs':>5}")
    for name, kind, stall in SCENARIOS:
        for _ in range(args.repeat):
            t0 = time.time()
            eng = run_file(os.path.join(HERE, name))
            v = eng.verdict or {}
            slows = ", ".join(f"{j['name']} {j['slowdown']:.2f}" for j in v.get("jobs", [])
                              if j.get("slowdown"))
            stalls = [j.get("stall") for j in v.get("jobs", []) if j.get("stall") is not None]
            measured = statistics.fmean(stalls) if stalls else None
            st = (f"{stall:.0%} → {measured:.1%}" if stall is not None and measured is not None
                  else ", ".join(f"{j['solo_stall'] or 0:.0%}→{j['stall'] or 0:.0%}"
                                 for j in v.get("jobs", [])))
            stp = v.get("evidence", {}).get("stp")
            print(f"{name[:-5]:<24} {kind or '-':<14} {v.get('kind', '-'):<14} {st:<26} "
                  f"{slows or '-':<28} {stp if stp is not None else '-':>5} "
                  f"{time.time() - t0:5.0f}", flush=True)


if __name__ == "__main__":
    main()
