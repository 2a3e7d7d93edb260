"""The live verdict against the box's measured disk peak, on a disk of known speed.

A cgroup whose reads are throttled (cgroup v1 blkio, `--rate` MiB/s) is the disk of known
speed. `gputop-dl machine --data DIR` runs inside it, so its O_DIRECT read rates should read the
throttle; then two copies of tests/external/disk_reader.py (O_DIRECT reads of random 128 KiB
blocks, 1 MiB a step) run in it together and `gputop-dl --once --json` is taken `--onces` times
with that profile stored. Printed: the profile's rates against the throttle, and each --once's
`box_peaks` disk entry (the pair's reads together, the peak, the share, the line) against the
pair's own read rate (1 MiB per step over their own step times at that moment). Needs root
and the v1 blkio controller.

Usage: python benchmarks/verdict_disk_peaks.py [--rate 4] [--onces 3]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.test_io_verdict_real import SCRIPT, _reports, _start, _why_not, throttled_cgroup  # noqa: E402

MIB = 1 << 20


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=4.0, help="MiB/s the disk gives (the throttle)")
    ap.add_argument("--onces", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="verdict-peaks-")
    if why := _why_not(tmp):
        print(f"cannot run here: {why}")
        return 2
    data = os.path.join(tmp, "shard.bin")
    subprocess.run([sys.executable, SCRIPT, "--file", data, "--make", "64"], check=True)
    env = dict(os.environ, PYTHONPATH=ROOT, GPUTOP_DL_HOME=os.path.join(tmp, "home"))
    try:
        with throttled_cgroup(data, int(args.rate * MIB), "peaks") as cg:
            onces, st, reps = _run(cg, data, tmp, env, args.onces)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _print(args.rate, st, onces, reps)
    return 0


def _run(cg: str, data: str, tmp: str, env: dict, n: int) -> tuple[list, dict, list]:
    """The profile measured inside the cgroup, then `n` --once runs while two readers read there."""
    prof = subprocess.run(
        ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "{sys.executable}" -m gputop_dl '
                     f'machine --data "{tmp}" --json'],
        capture_output=True, text=True, env=env, timeout=300, check=True)
    st = json.loads(prof.stdout)["storage"][0]
    procs = [_start(cg, data, "--seconds", str(8 + 4 * n), "--report-every", "2") for _ in range(2)]
    for p in procs:
        for _ in range(3):  # past the warm-up
            p.stdout.readline()
    onces = []
    for _ in range(n):
        t0 = time.time()
        out = subprocess.run([sys.executable, "-m", "gputop_dl", "--once", "--json"],
                             capture_output=True, text=True, env=env, timeout=60)
        v = json.loads(out.stdout)["verdict"] or {}
        bp = (v.get("evidence") or {}).get("box_peaks") or {}
        disk = next(iter(bp.get("disks") or []), None)
        line = next((x for x in v.get("evidence_lines") or () if " at most" in x), None)
        onces.append((t0, time.time(), v.get("kind"), disk, line))
    return onces, st, [_reports(p) for p in procs]


def _print(rate: float, st: dict, onces: list, reps: list) -> None:
    print(f"disk throttled to {rate:g} MiB/s = {rate * MIB / 1e6:.2f} MB/s (cgroup v1 blkio)")
    print(f"machine profile: sequential {st['seq_bps'] / 1e6:.2f} MB/s "
          f"({st['seq_bps'] / (rate * MIB) - 1:+.1%}), random 128 KiB {st['rand_bps'] / 1e6:.2f} MB/s "
          f"({st['rand_bps'] / (rate * MIB) - 1:+.1%}), O_DIRECT {st['page_cache_bypassed']}")
    print("once  kind       pair reads (verdict)  pair's own rate  peak (profile)  share  line")
    for i, (t0, t1, kind, disk, line) in enumerate(onces, 1):
        own = 0.0
        for r in reps:  # each script's rate over its reports around this --once
            steps = [x["recent_step_s"] for x in r if "recent_step_s" in x and t0 - 2 <= x["t"] <= t1 + 2]
            own += MIB / statistics.median(steps) if steps else float("nan")
        if disk is None:
            print(f"{i:>4}  {kind:<9}  no disk entry")
            continue
        print(f"{i:>4}  {kind:<9}  {disk['read_bps'] / 1e6:8.2f} MB/s         {own / 1e6:6.2f} MB/s"
              f"      {(disk['seq_bps'] or 0) / 1e6:6.2f} MB/s     {disk['share']}  {line}")


if __name__ == "__main__":
    sys.exit(main())
