"""The live verdict when the jobs' datasets no longer fit in the page cache together.

Two copies of tests/external/disk_reader.py read random 128 KiB blocks of their own file
(`--size` MiB each) through the page cache (`--buffered`). Both run in one cgroup v1 memory
group whose limit leaves `--budget` MiB for the page cache above the processes' own memory: one
file fits, both do not. The group's reads are throttled to `--rate` MiB/s (cgroup v1 blkio), so
a block that fell out of the cache costs what it costs on a slow disk. Each file is read once
into the cache before its job starts (and dropped from the cache before that, so no earlier
copy outside the group serves it).

First one job alone, then both together, `--repeats` times. Each job's step time is its own
(the medians it reports after the limit is set and `--settle` seconds have passed). While the
pair runs, `gputop-dl diagnose --no-probe --json` (the live judge over several ticks) and
`gputop-dl --once --json` are taken; each estimate is compared with the scripts' own ratio.
Needs root and the cgroup v1 memory and blkio controllers. Run it under the box's lock.

Usage: python benchmarks/verdict_memory.py [--size 64] [--budget 80] [--rate 16] [--workers 0] [--repeats 2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.test_io_verdict_real import BLKIO, SCRIPT, _disk_of, remove_cgroup  # noqa: E402
from tests.test_memory_verdict_real import (Job, drop_cache, group_rss, in_group,  # noqa: E402
                                            why_not, write)
from tests.test_memory_verdict_real import MEMORY  # noqa: E402

def run(files: list[str], cgs: list[str], args, seconds: float, judge: bool) -> dict:
    mem_cg, blk_cg = cgs
    write(os.path.join(mem_cg, "memory.limit_in_bytes"), "-1")
    write(os.path.join(blk_cg, "blkio.throttle.read_bps_device"), f"{_disk_of(files[0])} 0\n")
    for f in files:
        drop_cache(f)
        in_group(cgs, "cat", f, ">", "/dev/null")  # into the cache, charged to the group
    jobs = [Job(cgs, f, seconds, args.workers) for f in files]
    for j in jobs:
        j.first_report()
    write(os.path.join(blk_cg, "blkio.throttle.read_bps_device"),
          f"{_disk_of(files[0])} {int(args.rate * (1 << 20))}\n")
    rss = group_rss(mem_cg)
    write(os.path.join(mem_cg, "memory.limit_in_bytes"), str(rss + (args.budget << 20)))
    t_set = time.time()
    out: dict = {"rss_mib": rss >> 20}
    if judge:
        time.sleep(args.settle)  # a benchmark: the thrash's steady state, and PSI's 10 s average
        env = dict(os.environ, PYTHONPATH=ROOT)
        t0 = time.time()
        diag = subprocess.run([sys.executable, "-m", "gputop_dl", "diagnose", "--no-probe",
                               "--json", "--seconds", "8"], capture_output=True, text=True,
                              env=env, timeout=120)
        t1 = time.time()
        once = subprocess.run([sys.executable, "-m", "gputop_dl", "--once", "--json"],
                              capture_output=True, text=True, env=env, timeout=60)
        out["windows"] = {"diagnose": (t0, t1), "once": (t1, time.time())}
        out["diagnose"] = json.loads(diag.stdout) if diag.returncode == 0 else diag.stderr
        out["once"] = json.loads(once.stdout) if once.returncode == 0 else once.stderr
    reps = [j.finish() for j in jobs]
    out["step_s"] = [statistics.median(r["recent_step_s"] for r in rep
                                       if r["t"] > t_set + args.settle) for rep in reps]
    # each job's own median step while each judge looked (reports are every 4 steps)
    out["window_step_s"] = {
        what: [statistics.median([r["recent_step_s"] for r in rep if a <= r["t"] <= b + 0.3]
                                 or [float("nan")]) for rep in reps]
        for what, (a, b) in out.get("windows", {}).items()}
    with open(os.path.join(mem_cg, "memory.stat"), encoding="ascii") as f:
        out["refaults"] = [x.strip() for x in f if x.startswith("total_workingset_refault_file")]
    return out


def brief(doc, names=("disk_reader.py",)) -> tuple[str, list]:
    if not isinstance(doc, dict):
        return f"failed: {str(doc)[-200:]}", []
    v = doc.get("verdict") or {}
    ests = [(j.get("slowdown"), (j.get("waits") or {})) for j in doc.get("jobs") or []
            if str(j.get("name", "")).startswith(names)]
    return v.get("kind", "–"), ests


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64, help="MiB each job's file holds")
    ap.add_argument("--budget", type=int, default=80, help="MiB of page cache the group allows")
    ap.add_argument("--rate", type=float, default=16.0, help="MiB/s the group may read")
    ap.add_argument("--workers", type=int, default=0,
                    help="loader workers (0: the trainer reads, so its state says when it waits)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--settle", type=float, default=12.0)
    ap.add_argument("--seconds", type=float, default=45.0, help="each co-run's length")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="verdict-memory-", dir="/var/tmp")
    why = why_not(tmp)
    if why:
        print(f"cannot run here: {why}")
        return 2
    files = [os.path.join(tmp, f"{n}.bin") for n in "ab"]
    for f in files:
        subprocess.run([sys.executable, SCRIPT, "--file", f, "--make", str(args.size)], check=True)
    cgs = [os.path.join(MEMORY, f"gputop-dl-mem-{os.getpid()}"),
           os.path.join(BLKIO, f"gputop-dl-mem-{os.getpid()}")]
    for cg in cgs:
        os.makedirs(cg, exist_ok=True)
    rows = []
    try:
        for rep in range(args.repeats):
            solo = run(files[:1], cgs, args, args.settle + 8, judge=False)
            pair = run(files, cgs, args, args.seconds, judge=True)
            rows.append((rep + 1, solo, pair))
    finally:
        for cg in cgs:
            remove_cgroup(cg)
        for f in files:
            os.unlink(f)
        os.rmdir(tmp)
    print(f"files {args.size} MiB each, page-cache budget {args.budget} MiB, reads {args.rate:g} "
          "MiB/s; own medians after the limit is set")
    for rep, solo, pair in rows:
        s = solo["step_s"][0]
        ratios = [p / s for p in pair["step_s"]]
        print(f"run {rep}: solo {s * 1000:.0f} ms (refaults: {solo['refaults']}); together "
              + ", ".join(f"{p * 1000:.0f} ms" for p in pair["step_s"])
              + f" -> own ratio {', '.join(f'{r:.2f}×' for r in ratios)} "
              f"(group rss {pair['rss_mib']} MiB; {pair['refaults']})")
        truth = statistics.mean(ratios)
        for what in ("diagnose", "once"):
            kind, ests = brief(pair[what])
            during = [p / s for p in pair["window_step_s"][what]]
            print(f"  {what}: the scripts' own ratio while it looked: "
                  + ", ".join(f"{r:.2f}×" for r in during))
            errs = [abs(e - truth) / truth for e, _ in ests if e is not None]
            print(f"  {what}: {kind}; estimates " + ", ".join(
                f"{e if e is None else round(e, 2)}× waits {w}" for e, w in ests)
                + (f"; worst error {max(errs):.0%}" if errs else ""))
            if isinstance(pair[what], dict):
                print("   reason:", (pair[what].get("verdict") or {}).get("reason", "")[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
