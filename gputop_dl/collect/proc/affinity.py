"""The CPUs each GPU process may run on (its CPU affinity), for the NUMA check of the live verdict.

`CpuAffinity.annotate(gprocs)` returns NVML's per-process list with `cpus_allowed` filled
(cpulist "0-31") from `os.sched_getaffinity(pid)`, or `/proc/PID/status` `Cpus_allowed_list`
where the call is refused; None where neither can be read. Each PID is re-read at most every
`REFRESH_S` (a `taskset -cp` shows within that), and forgotten once NVML no longer lists it.
The CPUs near each GPU come from NVML (collect/nvml/gpus.py); analyse/live/gpu_clocks.py compares them.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Sequence

from gputop_dl.snapshot import GpuProcess, evolve
from gputop_dl.text.cpulist import format_cpulist

__all__ = ["CpuAffinity", "REFRESH_S", "read_affinity"]

REFRESH_S = 5.0


def read_affinity(pid: int, proc: str = "/proc") -> str | None:
    """The CPUs `pid` may run on, as a cpulist; None when it cannot be read."""
    try:
        return format_cpulist(os.sched_getaffinity(pid)) or None
    except (OSError, ValueError):
        pass
    try:
        with open(f"{proc}/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Cpus_allowed_list:"):
                    return line.split(b":", 1)[1].strip().decode() or None
    except (OSError, ValueError):
        pass
    return None


class CpuAffinity:
    """Per-PID CPU affinity, cached for `refresh_s` (no I/O for a PID read recently)."""

    def __init__(self, reader: Callable[[int], str | None] = read_affinity,
                 clock: Callable[[], float] = time.monotonic, refresh_s: float = REFRESH_S):
        self._reader = reader
        self._clock = clock
        self._refresh = refresh_s
        self._cache: dict[int, tuple[float, str | None]] = {}

    def annotate(self, gprocs: Sequence[GpuProcess]) -> tuple[GpuProcess, ...]:
        if not gprocs:
            self._cache.clear()
            return tuple(gprocs)
        now = self._clock()
        cache = self._cache
        out = []
        for p in gprocs:
            hit = cache.get(p.pid)
            if hit is None or now - hit[0] >= self._refresh:
                hit = cache[p.pid] = (now, self._reader(p.pid))
            out.append(evolve(p, cpus_allowed=hit[1]) if hit[1] is not None else p)
        if len(cache) > len(out):
            seen = {p.pid for p in gprocs}
            for pid in [q for q in cache if q not in seen]:
                del cache[pid]
        return tuple(out)
