"""The busiest-process pass (collect/proc/busiest.py) on a box with thousands of processes.

The pass reads every process's `stat` while a job waits for a CPU, every second tick. Here, in
one run, for each count of extra processes (`--counts`, sleeping children: a login node's
shells and daemons): the pass's CPU time (median of `--passes`, every pass a full one), with
the files kept open as the monitor keeps them (as many as `keep_files()` allows) and with
none kept; and, as references in the same run, `ps -e -o pid,time` and `top -b -n 1` (CPU time
of the child, median of 5). Prints milliseconds and the ratios to `ps`.

Usage: python benchmarks/busiest_scale.py [--counts 0 1000 3000] [--passes 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gputop_dl.collect.proc.busiest import BusiestSampler, keep_files  # noqa: E402
from gputop_dl.collect.proc.procfs import ProcFiles  # noqa: E402
from benchmarks.limited_groups_cost import cpu_us  # noqa: E402  (median CPU µs of fn over n)


def child_cpu_ms(argv: list[str], n: int = 5) -> float:
    """Median CPU milliseconds (user + system) of a command run to its end."""
    out = []
    for _ in range(n):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e3)
    return statistics.median(out)


def sleepers(n: int) -> list[subprocess.Popen]:
    """n sleeping children; each ends when its stdin closes (none outlives the benchmark)."""
    return [subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL,
                             start_new_session=True) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", type=int, nargs="+", default=[0, 1000, 3000])
    ap.add_argument("--passes", type=int, default=20)
    a = ap.parse_args()
    print(f"files kept open: {keep_files()} (open-file limit "
          f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]})")
    print("extra  processes  pass kept  pass none    ps   top  kept/ps  none/ps")
    extra: list[subprocess.Popen] = []
    try:
        for n in sorted(a.counts):
            extra += sleepers(n - len(extra))
            procs = sum(1 for d in os.listdir("/proc") if d.isdigit())
            kept = BusiestSampler(every=1)
            kept.sample()
            kept_ms = cpu_us(kept.sample, a.passes) / 1e3
            kept.forget()
            none = BusiestSampler(every=1)
            none._files = ProcFiles(own_max=0)  # every file opened and closed each pass
            none.sample()
            none_ms = cpu_us(none.sample, a.passes) / 1e3
            ps = child_cpu_ms(["ps", "-e", "-o", "pid,time"])
            top = child_cpu_ms(["top", "-b", "-n", "1"])
            print(f"{n:5d}  {procs:9d}  {kept_ms:7.2f}ms  {none_ms:7.2f}ms  {ps:5.1f}  "
                  f"{top:4.1f}  {kept_ms / ps:7.2f}  {none_ms / ps:7.2f}")
    finally:
        for p in extra:
            p.kill()
        for p in extra:
            p.wait()


if __name__ == "__main__":
    main()
