"""The live verdict on a shared slow disk against the scripts' own step times.

Two copies of tests/external/disk_reader.py (O_DIRECT reads of random 128 KiB blocks) run in
one cgroup whose reads are throttled (cgroup v1 blkio, `--rate` MiB/s): first one alone, then
both together, `--repeats` times. While the pair runs, `gputop-dl --once --json` is taken
`--onces` times; each estimate is compared with the scripts' own co-run/solo ratio. Needs root
and the v1 blkio controller.

Usage: python benchmarks/verdict_disk.py [--rate 4] [--repeats 3] [--onces 3] [--workers 1]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.test_io_verdict_real import (SCRIPT, _reports, _start, _why_not,  # noqa: E402
                                        throttled_cgroup)

start = _start  # each copy started as from a shell, re-parented (see the test)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=4.0, help="MiB/s the readers share")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--onces", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="verdict-disk-")
    why = _why_not(tmp)
    if why:
        print(f"cannot run here: {why}")
        return 2
    data = os.path.join(tmp, "shard.bin")
    subprocess.run([sys.executable, SCRIPT, "--file", data, "--make", "64"], check=True)
    rows = []
    with throttled_cgroup(data, int(args.rate * (1 << 20)), "bench") as cg:
        w = ["--workers", str(args.workers)]
        for rep in range(args.repeats):
            solo = _reports(start(cg, data, "--steps", "16", "--report-every", "0", *w))[-1]
            procs = [start(cg, data, "--seconds", str(6 + 3 * args.onces), "--report-every", "2", *w)
                     for _ in range(2)]
            for p in procs:
                for _ in range(3):
                    p.stdout.readline()
            env = dict(os.environ, PYTHONPATH=ROOT)
            ests, kinds = [], []
            for _ in range(args.onces):
                out = subprocess.run([sys.executable, "-m", "gputop_dl", "--once", "--json"],
                                     capture_output=True, text=True, env=env, timeout=60)
                snap = json.loads(out.stdout)
                kinds.append(snap["verdict"]["kind"])
                ests += [j["slowdown"] for j in snap["jobs"] if j["name"].startswith("disk_reader.py")
                         and j["slowdown"] is not None]
            own = [_reports(p)[-1]["median_step_s"] / solo["median_step_s"] for p in procs]
            truth = statistics.mean(own)
            errs = [abs(e - truth) / truth for e in ests]
            rows.append((rep + 1, solo["median_step_s"], truth, ests, kinds, max(errs) if errs else None))
    print(f"disk throttled to {args.rate:g} MiB/s for both; {args.workers} loader worker(s) each")
    print("run  solo step  own ratio  --once estimates                  kinds                  worst error")
    for rep, solo_s, truth, ests, kinds, worst in rows:
        print(f"{rep:>3}  {solo_s:8.3f} s  {truth:8.2f}×  {', '.join(f'{e:.2f}×' for e in ests):<32}  "
              f"{', '.join(sorted(set(kinds))):<21}  {'–' if worst is None else f'{worst:.0%}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
