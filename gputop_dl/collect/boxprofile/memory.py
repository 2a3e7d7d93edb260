"""The box's memory: total and available (`/proc/meminfo`), the NUMA split, and the measured copy rate.

The copy rate is memcopy.py's memcpy of a large buffer, timed: once in this process (one
thread) and once in one process per usable CPU at the same time (their rates summed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from gputop_dl.child import die_with_parent
from gputop_dl.collect.boxprofile.memcopy import copy_rate
from gputop_dl.collect.boxprofile.part import Part

__all__ = ["read_memory", "measure_copy"]

BUFFER_MIB = 64


def meminfo(proc: str = "/proc") -> dict[str, int]:
    out = {}
    try:
        with open(os.path.join(proc, "meminfo"), encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[key] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    except OSError:
        pass
    return out


def read_memory(proc: str = "/proc", numa: list[Part] | None = None) -> Part:
    info = meminfo(proc)
    return {"total": info.get("MemTotal"), "available": info.get("MemAvailable"),
            "numa": [{"node": n["node"], "total": n.get("mem_total")} for n in numa or []]}


def measure_copy(seconds: float, procs: int, mib: int = BUFFER_MIB) -> Part:
    """{"single_bps", "all_bps", "procs", "seconds", "buffer_mib", "method"}: bytes copied per
    second by one process, and summed over `procs` processes copying at the same time."""
    done, secs = copy_rate(seconds, mib)
    out: Part = {"single_bps": done / secs, "all_bps": None, "procs": procs, "seconds": seconds,
                 "buffer_mib": mib, "method": f"memcpy of a {mib} MiB buffer (Python memoryview "
                 "slice copy), bytes copied per second; all threads: one process per usable CPU "
                 "at once, summed", "note": None}
    if procs <= 1:
        out["all_bps"] = out["single_bps"]
        return out
    start = time.time() + 0.5 + 0.05 * procs  # every child allocated before the start line
    cmd = [sys.executable, "-m", "gputop_dl.collect.boxprofile.memcopy", repr(start),
           repr(start + seconds), str(mib)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    children = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                 preexec_fn=die_with_parent) for _ in range(procs)]
    total, ok = 0.0, 0
    for c in children:
        try:
            text, _ = c.communicate(timeout=seconds + 30)
            b, s = text.split()
            total += int(b) / float(s)
            ok += 1
        except (subprocess.TimeoutExpired, ValueError):
            c.kill()
            c.wait()
    if ok == procs:
        out["all_bps"] = total
    else:
        out["note"] = f"{procs - ok} of {procs} copy processes gave no figure: all-threads rate unknown"
    return out
