"""Truth for `gputop-dl machine`: its memory copy and disk read figures beside references, same run.

Each round, interleaved, on the same buffers and the same file:

- memory copy, one process and one per usable CPU: collect/boxprofile/memory.py's figure
  beside a C memcpy loop of the same 64 MiB buffers (compiled here with `cc -O2`; the
  reference), and `dd if=/dev/zero of=/dev/null bs=64M` for context (a zero-fill: write-only,
  so not a copy; no ratio);
- disk, on a test file of `--mib` MiB written into `--dir` (default: the working directory):
  the sequential pass beside `dd if=FILE of=/dev/null bs=128k iflag=direct` and fio's
  sequential read (direct=1, bs=128k, psync), and the random 128 KiB reads beside fio's
  randread (direct=1, bs=128k, iodepth 1, psync), for the same seconds.

Each pair is ours and its reference back to back (the order flips every round), since this
box's memory rate drifts by a factor of 5 within a minute; the ratio is the median of the pairs'
ratios. Prints the ratios per round, the medians and ranges (target: within 15 %).
Run it under the shared lock:

    flock /tmp/gputop-box.lock env PYTHONPATH=$PWD python benchmarks/machine_check.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from gputop_dl.collect.boxprofile.memory import measure_copy
from gputop_dl.collect.boxprofile.storage import read_rates

C_MEMCPY = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    double secs = atof(argv[1]); size_t n = (size_t)atoi(argv[2]) << 20; double start = atof(argv[3]);
    char *s = malloc(n), *d = malloc(n); memset(s, 0x5a, n); memcpy(d, s, n);
    struct timespec w; clock_gettime(CLOCK_REALTIME, &w);
    double wall = w.tv_sec + w.tv_nsec / 1e9;
    if (start > wall) { struct timespec z = { (time_t)(start - wall), (long)((start - wall - (time_t)(start - wall)) * 1e9) }; nanosleep(&z, 0); }
    double t0 = now(), t; size_t done = 0;
    do { memcpy(d, s, n); done += n; t = now(); } while (t - t0 < secs);
    volatile char sink = d[n / 2]; (void)sink;
    printf("%zu %f\n", done, t - t0); return 0;
}
"""


def c_copy(binary: str, seconds: float, procs: int, mib: int = 64) -> float:
    start = time.time() + 0.3 + 0.05 * procs
    ps = [subprocess.Popen([binary, str(seconds), str(mib), repr(start)], stdout=subprocess.PIPE,
                           text=True) for _ in range(procs)]
    total = 0.0
    for p in ps:
        b, s = p.communicate()[0].split()
        total += int(b) / float(s)
    return total


def dd_rate(args: list[str]) -> float:
    r = subprocess.run(["dd", *args],
                       capture_output=True, text=True)
    m = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", r.stderr)
    if not m:
        raise RuntimeError(f"dd said: {r.stderr.strip()}")
    return int(m.group(1)) / float(m.group(2))


def fio_rate(path: str, rw: str, seconds: float) -> float:
    r = subprocess.run(["fio", "--name=ref", f"--filename={path}", f"--rw={rw}", "--bs=128k",
                        "--direct=1", "--ioengine=psync", "--iodepth=1", "--numjobs=1",
                        f"--runtime={seconds:g}", "--time_based" if rw == "randread" else "--size=100%",
                        "--output-format=json"], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"fio said: {r.stderr.strip()[-200:]}")
    j = json.loads(r.stdout[r.stdout.index("{"):])
    return float(j["jobs"][0]["read"]["bw_bytes"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5, help="per memory figure")
    ap.add_argument("--pairs", type=int, default=4, help="memory pairs per round")
    ap.add_argument("--disk-seconds", type=float, default=2.0, help="per random-read figure")
    ap.add_argument("--mib", type=int, default=512, help="test file size")
    ap.add_argument("--dir", default=".")
    a = ap.parse_args()
    procs = len(os.sched_getaffinity(0))
    tmp = tempfile.mkdtemp(prefix="machine-check-")
    binary = os.path.join(tmp, "memcpy")
    with open(binary + ".c", "w") as f:
        f.write(C_MEMCPY)
    subprocess.run(["cc", "-O2", "-o", binary, binary + ".c"], check=True)
    path = os.path.join(a.dir, f".machine-check-{os.getpid()}")
    with open(path, "wb") as f:
        for _ in range(a.mib):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    have_fio = shutil.which("fio") is not None
    rows: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}

    def add(k: str, v: float) -> float:
        rows.setdefault(k, []).append(v)
        return v

    def pair(name: str, ours, ref, flip: bool) -> None:
        """One figure of ours and its reference, back to back (the order flips each round)."""
        a, b = (ref(), ours()) if flip else (ours(), ref())
        o, r = (b, a) if flip else (a, b)
        add(f"{name} ours", o)
        add(f"{name} reference", r)
        ratios.setdefault(name, []).append(o / r)

    def seq_ours() -> float:
        return read_rates(path, seconds=60.0, random_reads=False)["seq_bps"]

    dd_seq = [f"if={path}", "of=/dev/null", "bs=128k", "iflag=direct"]
    try:
        for i in range(a.rounds):
            flip = bool(i % 2)
            for _ in range(a.pairs):  # short slices, back to back: this VM's memory rate drifts
                pair("memory copy, 1 process (C memcpy)",
                     lambda: measure_copy(a.seconds, 1)["single_bps"],
                     lambda: c_copy(binary, a.seconds, 1), flip)
                pair(f"memory copy, {procs} processes (C memcpy)",
                     lambda: measure_copy(a.seconds, procs)["all_bps"],
                     lambda: c_copy(binary, a.seconds, procs), flip)
            add("memory dd zero-fill (context, write-only)",
                dd_rate(["if=/dev/zero", "of=/dev/null", "bs=64M", "count=32"]))
            pair("sequential 128 KiB (dd iflag=direct)", seq_ours, lambda: dd_rate(dd_seq), flip)
            if have_fio:
                pair("sequential 128 KiB (fio read)", seq_ours,
                     lambda: fio_rate(path, "read", 60), flip)
                pair("random 128 KiB (fio randread)",
                     lambda i=i: read_rates(path, seconds=a.disk_seconds, seed=i)["rand_bps"],
                     lambda: fio_rate(path, "randread", a.disk_seconds), flip)
            print(f"round {i + 1}: " + "; ".join(f"{k} {v[-1]:.2f}" for k, v in ratios.items()),
                  flush=True)
    finally:
        os.unlink(path)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{a.rounds} rounds, {procs} CPUs, {a.mib} MiB file in {a.dir}; medians in MB/s:")
    for k, v in rows.items():
        print(f"  {k:<48} {statistics.median(v) / 1e6:8.0f}  (range {min(v) / 1e6:.0f}-{max(v) / 1e6:.0f})")
    print("ours / reference, median of the back-to-back pairs (target 0.85-1.15):")
    for k, v in ratios.items():
        print(f"  {k:<48} {statistics.median(v):.2f}  (pairs {len(v)}, range {min(v):.2f}-{max(v):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
