"""Where a spinning pool's threads run: one CPU or two, against the job's own slowdown.

    python benchmarks/pool_placement.py [--seconds 24] [--wait-policy passive] [EXAMPLE ...]

Two copies of the same multi-threaded script (tests/external/mt_examples.py, 2 intra-op
threads and one loader worker each; default `dcgan dcgan`) read the same schedstat figures in
every run, yet ran 6.6× to 26× slower than alone. Were a pool's two threads queued on one CPU
(they could never run at once)? Each example runs alone for its rate, then all together; during
the co-run each job's two busiest threads are looked at every 2-8 ms (a random gap): the CPU
each was last on (field 39 of /proc/PID/task/TID/stat). Prints per job its rate alone and
together, the true slowdown, the share of looks that found its two threads on one CPU, and per
2 s its iterations a second beside that share. Run it under the box's lock.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# the same scripts, sizes, threads and rates as the estimate's benchmark
from verdict_threads import EXAMPLES as ARGS, argv, rate  # noqa: E402


def start(example: str, seconds: float) -> subprocess.Popen:
    return subprocess.Popen(argv(example, seconds), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def stamps(p: subprocess.Popen, out: list[float]) -> None:
    assert p.stdout is not None
    for ln in p.stdout:
        if ln.startswith("it "):
            out.append(float(ln.split()[2]))


def look(pid: int, tid: str) -> tuple[int, int]:
    """(processor it last ran on, utime + stime ticks) of one thread."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[36]), int(rest[11]) + int(rest[12])


def run(examples: list[str], seconds: float
        ) -> tuple[list[subprocess.Popen], list[list[float]],
                   list[tuple[float, dict[int, tuple[int, ...]]]]]:
    ps = [start(e, seconds) for e in examples]
    outs: list[list[float]] = [[] for _ in ps]
    readers = [threading.Thread(target=stamps, args=(p, o), daemon=True) for p, o in zip(ps, outs)]
    for r in readers:
        r.start()
    while any(len(o) < 2 for o in outs) and all(p.poll() is None for p in ps):
        time.sleep(0.05)  # every job past its first iterations: its pool exists
    pools: dict[int, list[str]] = {}
    for p in ps:
        try:
            busy = sorted(((look(p.pid, t)[1], t) for t in os.listdir(f"/proc/{p.pid}/task")),
                          reverse=True)
        except OSError:
            continue
        pools[p.pid] = [t for _, t in busy[:2]]
    looks: list[tuple[float, dict[int, tuple[int, ...]]]] = []  # (when, pid -> its threads' CPUs)
    while all(p.poll() is None for p in ps):
        try:
            looks.append((time.time(), {pid: tuple(look(pid, t)[0] for t in tids)
                                        for pid, tids in pools.items()}))
        except OSError:
            break  # a job ended
        time.sleep(random.uniform(0.002, 0.008))
    for p in ps:
        p.wait()
    for r in readers:
        r.join(5)
    return ps, outs, looks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples", nargs="*", default=["dcgan", "dcgan"],
                    help=f"the scripts started together, of {', '.join(sorted(ARGS))}")
    ap.add_argument("--seconds", type=float, default=24.0)
    ap.add_argument("--wait-policy", choices=("default", "passive"), default="default")
    a = ap.parse_args()
    if bad := [e for e in a.examples if e not in ARGS]:
        ap.error(f"unknown example {bad[0]!r}: expected one of {', '.join(sorted(ARGS))}")
    if a.wait_policy == "passive":
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    alone = {}
    for e in sorted(set(a.examples)):
        _, outs, _ = run([e], 10.0)
        ts = outs[0]
        alone[e] = rate(ts, ts[3], ts[-1]) if len(ts) > 4 else None
    ps, outs, looks = run(a.examples, a.seconds)
    lo = max(o[3] for o in outs if len(o) > 3)
    hi = min(o[-1] for o in outs if o)
    print(f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}; "
          f"{len(looks)} looks over {hi - lo:.0f} s; load1 {os.getloadavg()[0]:.2f}")
    print("| job | alone it/s | together it/s | true slowdown | looks with its pool on one CPU "
          "| per 2 s: it/s (share on one CPU) |\n|---|---:|---:|---:|---:|---|")
    for e, p, ts in zip(a.examples, ps, outs):
        r = rate(ts, lo, hi)
        mine = [(t, cpus) for t, row in looks if lo <= t <= hi and (cpus := row.get(p.pid))]
        one = [len(set(c)) == 1 for _, c in mine]
        bins, b = [], lo
        while b + 2 <= hi:
            sb = [len(set(c)) == 1 for t, c in mine if b <= t < b + 2]
            its = len([t for t in ts if b <= t < b + 2]) / 2
            bins.append(f"{its:.1f} ({sum(sb) / max(1, len(sb)):.0%})")
            b += 2
        base = alone[e]
        print(f"| {e} ({p.pid}) | {base or 0:.2f} | {r or 0:.2f} | "
              f"{base / r if base and r else float('nan'):.2f} | "
              f"{sum(one) / max(1, len(one)):.0%} | {', '.join(bins)} |")


if __name__ == "__main__":
    main()
