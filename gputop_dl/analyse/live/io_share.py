"""Disk sharing in the live verdict: jobs that wait on reads from one busy device.

Pure functions over one tick's `JobSample` and `HostSample` (collect/proc/diskio.py reads them).
Jobs that read from storage on the same filesystem (the device of their open files) while the
host's I/O pressure (PSI io "some") is IO_BUSY or more share a device that is the bottleneck:
alone, a job would have the others' reads too. Job i, reading `r_i` of the jobs' `R` bytes/s,
would fetch `f_i = R / r_i` times faster alone. A share `w_i` of its wall time waits on I/O
with nothing else moving (ticks with a process in D and none running, over the window), so

    s_io = 1 / (1 - w_i * (1 - 1 / f_i))

Two jobs that read alike and wait on the disk 95 % of the time: f = 2, s = 1.9. The model and
its blind spots (page-cache hits read nothing from storage; FUSE and some network filesystems
do not count `read_bytes`; reads from outside the jobs would still be there alone):
docs/verdict.md.
"""

from __future__ import annotations

from typing import Sequence

from gputop_dl.analyse.live.cpu_wait_model import clip_wait
from gputop_dl.snapshot import HostSample, JobSample

IO_BUSY = 0.10  # host PSI io "some avg10" at or above which a shared device is the bottleneck
MIN_READ_BPS = 64 * 1024  # a job reading less than this from storage does not share the device


def io_ratios(jobs: Sequence[JobSample], host: HostSample | None) -> dict[str, float]:
    """job -> f_i = R / r_i for jobs reading from a device that another job reads from too,
    on a host under I/O pressure (IO_BUSY); jobs absent elsewhere."""
    psi = host.io_pressure_some10 if host is not None else None
    if psi is None or psi < IO_BUSY:
        return {}
    by_dev: dict[int, dict[str, float]] = {}
    for j in jobs:
        r = j.io_read_bytes_per_s
        if j.io_device is not None and r is not None and r >= MIN_READ_BPS:
            by_dev.setdefault(j.io_device, {})[j.name] = float(r)
    out: dict[str, float] = {}
    for readers in by_dev.values():
        if len(readers) < 2:
            continue
        total = sum(readers.values())
        for name, rate in readers.items():
            out[name] = total / rate
    return out


def io_slowdown(wait: float, ratio: float) -> float:
    """s_io from the wait share and the fetch speed-up alone (both as in the docstring)."""
    return max(1.0, 1.0 / (1.0 - clip_wait(wait) * (1.0 - 1.0 / max(1.0, ratio))))
