"""What reading the box's limited memory groups (collect/proc/memory_groups.py) costs a tick.

In one run: the host sampler's tick as the monitor takes it (`HostSampler.sample`, the groups
read in it), the groups' reading alone on this box's hierarchy, and on made-up hierarchies in a
temporary folder (N directories of which K are limited: the walk every RESCAN_S seconds, and
the reading of the K groups every tick). Prints medians of CPU microseconds and the ratios to
the host tick. A made-up hierarchy on tmpfs is not cgroupfs: its reads may cost less there.

Usage: python benchmarks/limited_groups_cost.py [--ticks 200]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gputop_dl.collect.proc.host import HostSampler  # noqa: E402
from gputop_dl.collect.proc.memory_groups import (COST_SHARE, RESCAN_S, LimitedGroups,  # noqa: E402
                                                  top_limited)


def cpu_us(fn, n: int) -> float:
    """Median CPU microseconds of `fn()` over n calls."""
    out = []
    for _ in range(n):
        t0 = time.process_time_ns()
        fn()
        out.append((time.process_time_ns() - t0) / 1e3)
    return statistics.median(out)


def made_up(root: str, dirs: int, limited: int) -> None:
    """A v2-like hierarchy: `dirs` groups in slices of 50, the first `limited` with a limit."""
    with open(os.path.join(root, "cgroup.controllers"), "w") as f:
        f.write("cpu memory\n")
    for i in range(dirs):
        d = os.path.join(root, f"s{i // 50}.slice", f"g{i}")
        os.makedirs(d)
        for name, val in (("memory.max", "1073741824" if i < limited else "max"),
                          ("memory.high", "max"), ("memory.stat", f"workingset_refault_file {i}\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(val + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=200)
    a = ap.parse_args()
    host = HostSampler()
    host_us = cpu_us(host.sample, a.ticks)
    here = LimitedGroups()
    here_us = cpu_us(lambda: here.read(time.monotonic()), a.ticks)
    print(f"host tick {host_us:.0f} us CPU (median of {a.ticks}); this box's groups read "
          f"{here_us:.0f} us ({here_us / host_us:.1%} of it); {len(here.read(0.0) or ())} limited")
    for dirs, limited in ((300, 5), (4096, 200)):
        with tempfile.TemporaryDirectory() as tmp:
            made_up(tmp, dirs, limited)
            walk = cpu_us(lambda: top_limited(tmp, False), 5)
            lg = LimitedGroups(cgroup_root=tmp, v1_root=os.path.join(tmp, "none"))
            read = cpu_us(lambda g=lg: g.read(time.monotonic()), a.ticks)
            every = max(RESCAN_S, walk / 1e6 / COST_SHARE)
            print(f"{dirs} groups, {limited} limited: walk {walk / 1e3:.1f} ms CPU (every "
                  f"{every:.0f} s: {walk / 1e6 / every:.2%} of a core), a tick's reading "
                  f"{read:.0f} us ({read / host_us:.0%} of the host tick)")


if __name__ == "__main__":
    main()
