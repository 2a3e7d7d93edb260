"""Stuck calls on calibrated jobs: how soon a hang is called, and no false call on busy or slow.

    python benchmarks/stuck_calls.py [--runs N] [--stuck-after S]

Each run launches one job of tests/stuck_jobs.py under a launch engine (interval 0.5 s) with
the stuck threshold's floor at S seconds (default 3; the product's default is 60): a loader
whose worker sleeps forever after 20 samples, a lock taken twice after 10 steps and two DDP
ranks on gloo where rank 1 sleeps in its own code after 10 steps (hangs:
the seconds from the wall time the job wrote as it hung to the snapshot that called it stuck,
and that less the threshold), a 9 s busy "checkpoint" after 40 steps and a loop of 1.5 s steps asleep with every
4th of 4.5 s (neither may ever be called stuck). Prints one line per run and a summary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tests.test_stuck_real as T  # noqa: E402 - the tests' harness, after the path

HANGS = {"loader-hang": ("loader-hang", 20), "lock": ("lock", 10), "ddp": ("ddp", 10)}
BUSY = {"checkpoint": ("checkpoint", 40, 9), "slow": ("slow", 8, 4.5)}


def hang(args: tuple[object, ...], d: Path) -> tuple[float, float, str, str | None]:
    with T.Watch(d, *args) as w:
        got = w.until(lambda j: j.status == "stuck", 120 + T.STUCK_AFTER)
    if got is None:
        return float("nan"), float("nan"), "not called", None
    st = got[1].stuck
    s = w.wall_of(got) - w.hung_at()  # from the moment the job itself says it hung
    return s, s - st.threshold_s, st.where, st.frame


def busy(args: tuple[object, ...], d: Path) -> tuple[bool, float]:
    with T.Watch(d, *args) as w:
        w.until(lambda j: j.status in ("done", "failed"), 120)
    ages = [j.progress_age_s for _, j in w.rows if j.progress_age_s is not None]
    return any(j.status == "stuck" for _, j in w.rows), max(ages, default=0.0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--stuck-after", type=float, default=3.0)
    p.add_argument("--only", default="")
    a = p.parse_args()
    T.STUCK_AFTER = a.stuck_after
    only = set(a.only.split(",")) - {""}
    os.environ.setdefault("GPUTOP_DL_HOME", tempfile.mkdtemp(prefix="gdl-stuck-"))
    for name, args in HANGS.items():
        if only and name not in only:
            continue
        lat = []
        for i in range(a.runs):
            with tempfile.TemporaryDirectory() as d:
                s, over, where, frame = hang(args, Path(d))
            lat.append(over)
            print(f"{name} run {i + 1}: called {s:.1f} s after it hung "
                  f"(threshold + {over:.1f} s), where {where} at {frame}", flush=True)
        print(f"{name}: threshold + {statistics.median(lat):.1f} s median, "
              f"+ {max(lat):.1f} s at most over {len(lat)} runs", flush=True)
    for name, args in BUSY.items():
        if only and name not in only:
            continue
        false = 0
        for i in range(a.runs):
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory() as d:
                called, age = busy(args, Path(d))
            false += called
            print(f"{name} run {i + 1}: {'STUCK (false)' if called else 'not stuck'}, "
                  f"{age:.1f} s without a step at most, {time.monotonic() - t0:.0f} s",
                  flush=True)
        print(f"{name}: {false} false stuck call(s) in {a.runs} runs", flush=True)


if __name__ == "__main__":
    main()
