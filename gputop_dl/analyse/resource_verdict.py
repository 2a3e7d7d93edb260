"""The verdicts that name a resource other than the CPU and the GPU: `io-bound` (and, beside
it, the reason's line for disk-bound jobs in a CPU-bound set).

Built by analyse/passive.py's `judge_passive` from the jobs' smoothed estimates
(analyse/job_estimate.py); the models: analyse/io_share.py and docs/verdict.md.
"""

from __future__ import annotations

from typing import Sequence

from gputop_dl.analyse.job_estimate import Estimate
from gputop_dl.analyse.verdict_types import Verdict
from gputop_dl.snapshot import HostSample
from gputop_dl.text.fmt import num


def io_reason(io_slowed: Sequence[Estimate], host: HostSample | None) -> str:
    devs = sorted({e.last.io_device for e in io_slowed if e.last.io_device})
    where = " and ".join(devs) if devs else "one device"
    names = ", ".join(f"{e.name} (waits {e.io_wait or 0:.0%})" for e in io_slowed)
    total = sum(e.last.io_read_bps or 0 for e in io_slowed)
    psi = host.io_pressure_some10 if host is not None else None
    return (f"{names} wait on reads from {where}, which they share: {total / 1e6:.1f} MB/s "
            f"together, host I/O pressure {num(psi, '.0%')}")


def io_bound(io_slowed: Sequence[Estimate], cpu_slowed: Sequence[Estimate],
              host: HostSample | None, evidence: dict,
              lines: list[str], conf: float, rows: tuple) -> Verdict:
    """The disk is what the slowest jobs wait for (a CPU-starved job beside them is named too)."""
    evidence["io_devices"] = {e.name: e.last.io_device for e in io_slowed}
    lines.append("disk: " + "; ".join(
        f"{e.name} reads {(e.last.io_read_bps or 0) / 1e6:.1f} MB/s from "
        f"{e.last.io_device or 'an unnamed device'}, waits on I/O {e.io_wait or 0:.0%} of the "
        f"time, alone {e.io or 1:.2f}× faster" for e in io_slowed))
    reason = io_reason(io_slowed, host)
    if cpu_slowed:
        names = ", ".join(f"{e.name} (waits {e.last.critical_wait or 0:.0%})" for e in cpu_slowed)
        reason += f"; and the critical path of {names} waits for a CPU"
    recs = ("copy the dataset to a faster local disk or into memory (it then reads from the "
            "page cache), or read it through a cache every job shares",
            "pre-decoded, larger shards read in order instead of many small random reads",
            "run the jobs that read from this device one at a time, or stagger their epochs; "
            "fewer loader workers reading at once")
    return Verdict(kind="io-bound", confidence=conf, evidence=evidence,
                   evidence_lines=tuple(lines), jobs=rows, recommendations=recs,
                   reason=reason + " (estimated live, nothing paused)")
