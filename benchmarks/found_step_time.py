"""A found job's step time (py-spy bursts) against the job's own per-step timestamps.

    python benchmarks/found_step_time.py [--stack plain|lightning|hf] [--readings 4] [--stall 3]
                                          [--copies 2] [--debug]

Per stack, `--copies` scripts are started by hand (no gputop-dl in them), each writing its own
step starts (`time.monotonic()`); once each has warmed up, `--readings` one-shot snapshots are
taken as `gputop-dl --once --json --stall S` takes them (`collect.machine.snapshot_once`, a
`--stall`-second burst of every job at once). Truth for a reading: the mean gap between the
job's own step starts inside that reading's window. Printed per reading and job: the found
job's `step_time_s` (or null with its reason), the truth, and their ratio; then, per stack, the
median ratio and the share of readings that gave a figure (target: within 15 % where given).

Stacks: plain (tests/external/stall_script.py: a DataLoader loop, 40 ms data + 60 ms compute),
lightning (tests/external/lightning_tiny.py, `Trainer.fit`, 40/40/40/20 ms phases), hf
(tests/external/hf_tiny.py, `transformers.Trainer`, 40/40/40/20 ms phases). Run it under the
box lock: its figures are timings.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from gputop_dl.collect.pyspy import run as pyspy  # noqa: E402
from gputop_dl.collect.jobs.found import FoundJobs  # noqa: E402
from gputop_dl.collect.machine import snapshot_once  # noqa: E402

EXT = os.path.join(ROOT, "tests", "external")
PHASES = ["--data-ms", "40", "--fwd-ms", "40", "--bwd-ms", "40", "--opt-ms", "20"]
STACKS = {
    "plain": lambda stamps: [os.path.join(EXT, "stall_script.py"), "--seconds", "600",
                             "--data-ms", "40", "--compute-ms", "60", "--stamps", stamps],
    "lightning": lambda stamps: [os.path.join(EXT, "lightning_tiny.py"), *PHASES,
                                 "--batches", "20000", "--epochs", "1", "--stamps", stamps],
    "hf": lambda stamps: [os.path.join(EXT, "hf_tiny.py"), *PHASES, "--samples", "80000",
                          "--epochs", "1", "--stamps", stamps],
}


def stamps_of(path: str) -> list[float]:
    try:
        with open(path, encoding="utf-8") as f:
            return [float(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def truth(stamps: list[float], t0: float, t1: float) -> float | None:
    """The mean gap between the job's own step starts inside [t0, t1]."""
    inside = [t for t in stamps if t0 <= t <= t1]
    if len(inside) < 3:
        return None
    return (inside[-1] - inside[0]) / (len(inside) - 1)


def run_stack(stack: str, readings: int, stall_s: float, copies: int, debug: bool) -> list[dict]:
    tmp = tempfile.mkdtemp(prefix="gdl-found-step-")
    procs = []
    for k in range(copies):
        stamps = os.path.join(tmp, f"{stack}{k}.txt")
        cmd = [sys.executable, *STACKS[stack](stamps)]
        procs.append((subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True), stamps))
    rows = []
    try:
        deadline = time.monotonic() + 120
        while any(len(stamps_of(s)) < 8 for _, s in procs):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in procs):
                raise SystemExit(f"{stack}: a script did not start training")
            time.sleep(0.5)
        pids = {p.pid for p, _ in procs}
        for r in range(readings):
            t0 = time.monotonic()
            snap = snapshot_once(settle_s=0.5, stall_s=stall_s, found=FoundJobs(stall=False))
            t1 = time.monotonic()
            for j in snap.jobs:
                if j.pid not in pids:
                    continue
                own = truth(stamps_of(next(s for p, s in procs if p.pid == j.pid)), t0, t1)
                got = j.step_time_s
                rows.append({"stack": stack, "reading": r, "job": j.name, "pid": j.pid,
                             "step_time_s": got, "why": getattr(j, "step_time_note", None),
                             "own_s": round(own, 4) if own else None,
                             "ratio": round(got / own, 3) if got and own else None,
                             "phase_shares": dict(j.phase_shares) or None})
                print(json.dumps(rows[-1]), flush=True)
            if debug:
                for p, _ in procs:
                    est, err = pyspy.record_stall(p.pid, stall_s, 50)
                    print(f"  debug pid {p.pid}: {est} {err}", flush=True)
    finally:
        for p, _ in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p, _ in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stack", choices=sorted(STACKS), action="append")
    ap.add_argument("--readings", type=int, default=4)
    ap.add_argument("--stall", type=float, default=3.0)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--debug", action="store_true")
    a = ap.parse_args()
    for stack in a.stack or sorted(STACKS):
        rows = run_stack(stack, a.readings, a.stall, a.copies, a.debug)
        ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
        given = sum(1 for r in rows if r["step_time_s"] is not None)
        print(f"{stack}: {given}/{len(rows)} readings gave a step time; ratio to the script's "
              f"own: median {statistics.median(ratios) if ratios else None}, "
              f"range {min(ratios) if ratios else None}..{max(ratios) if ratios else None}",
              flush=True)


if __name__ == "__main__":
    main()
