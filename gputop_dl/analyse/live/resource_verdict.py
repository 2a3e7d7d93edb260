"""The verdicts that name a resource other than the CPU and the GPU: `io-bound` and
`memory-bound` (and, beside them, the reason's words for such jobs in a CPU-bound set).

Built by analyse/live/passive.py's `judge_passive` from the jobs' smoothed estimates
(analyse/live/job_estimate.py); the models: analyse/live/io_share.py, analyse/live/memory_share.py and
docs/verdict.md.
"""

from __future__ import annotations

from typing import Sequence

from gputop_dl.analyse.live.job_estimate import Estimate
from gputop_dl.analyse.live.memory_share import HOST, memory_lines, pressure_text
from gputop_dl.analyse.verdict_types import Evidence, Fix, JobVerdict, Verdict
from gputop_dl.snapshot import HostSample, JobSample
from gputop_dl.text.fmt import num


def io_reason(io_slowed: Sequence[Estimate], host: HostSample | None) -> str:
    devs = sorted({e.last.io_device for e in io_slowed if e.last.io_device})
    where = " and ".join(devs) if devs else "one device"
    names = ", ".join(f"{e.name} (waits {e.io_wait or 0:.0%})" for e in io_slowed)
    total = sum(e.last.io_read_bps or 0 for e in io_slowed)
    psi = host.io_pressure_some10 if host is not None else None
    return (f"{names} wait on reads from {where}, which they share: {total / 1e6:.1f} MB/s "
            f"together, host I/O pressure {num(psi, '.0%')}")


def io_bound(io_slowed: Sequence[Estimate], others: Sequence[Estimate],
              host: HostSample | None, evidence: Evidence,
              lines: list[str], conf: float, rows: tuple[JobVerdict, ...]) -> Verdict:
    """The disk is what the slowest jobs wait for (a job slowed by something else beside them,
    CPU-starved or re-reading evicted data, is named too)."""
    evidence["io_devices"] = {e.name: e.last.io_device for e in io_slowed}
    lines.append("disk: " + "; ".join(
        f"{e.name} reads {(e.last.io_read_bps or 0) / 1e6:.1f} MB/s from "
        f"{e.last.io_device or 'an unnamed device'}, waits on I/O {e.io_wait or 0:.0%} of the "
        f"time, alone {e.mem or e.io or 1:.2f}× faster" for e in io_slowed))
    reason = io_reason(io_slowed, host) + _also(others, host)
    names = tuple(e.name for e in io_slowed)
    fixes = [Fix("dataset-location", names, "copy the dataset to a faster local disk or into "
                 "memory (it then reads from the page cache), or read it through a cache every "
                 "job shares"),
             Fix("shards", names, "pre-decoded, larger shards read in order instead of many "
                 "small random reads"),
             Fix("stagger-reads", names, "run the jobs that read from this device one at a "
                 "time, or stagger their epochs")]
    loaders = tuple(e.name for e in io_slowed if e.last.workers)  # none: no workers to cut
    if loaders:
        fixes.append(Fix("num-workers", loaders, f"{', '.join(loaders)}: fewer loader workers "
                         "reading at once"))
    return Verdict.fixed(fixes, kind="io-bound", confidence=conf, evidence=evidence,
                         evidence_lines=tuple(lines), jobs=rows,
                         reason=reason + " (estimated live, nothing paused)")


def _also(others: Sequence[Estimate], host: HostSample | None) -> str:
    """"; and ..." for the slowed jobs whose cause is another one."""
    out = ""
    cpu = [e for e in others if e.cause == "cpu"]
    if cpu:
        names = ", ".join(f"{e.name} (waits {e.last.critical_wait or 0:.0%})" for e in cpu)
        out += f"; and the critical path of {names} waits for a CPU"
    disk = [e for e in others if e.cause == "io"]
    if disk:
        out += f"; and {io_reason(disk, host)}"
    mem = [e for e in others if e.cause == "memory"]
    if mem:
        out += f"; and {memory_reason(mem, host)}"
    return out


def memory_reason(mem_slowed: Sequence[Estimate], host: HostSample | None) -> str:
    names = ", ".join(f"{e.name} (waits {e.mem_wait or 0:.0%} on re-reads)" for e in mem_slowed)
    doms = sorted({e.last.mem_domain or HOST for e in mem_slowed})
    where = "this host's memory" if doms == [HOST] else "memory cgroup " + " and ".join(
        d for d in doms if d != HOST)
    q = max(e.mem_q or 0.0 for e in mem_slowed)
    return (f"the data of {names} no longer fits in the page cache of {where} together: up to "
            f"{q:.0%} of what they read from storage are pages evicted since they read them "
            f"({pressure_text(host)})")


def memory_bound(mem_slowed: Sequence[Estimate], others: Sequence[Estimate],
                 host: HostSample | None, evidence: Evidence,
                 lines: list[str], conf: float, rows: tuple[JobVerdict, ...]) -> Verdict:
    """The page cache is what the slowest jobs lose to each other: they wait on re-reads of
    data that was in memory (others slowed beside them are named too)."""
    evidence["memory_domains"] = {e.name: e.last.mem_domain for e in mem_slowed}
    lines.append("memory: " + "; ".join(
        f"{e.name} reads {(e.last.io_read_bps or 0) / 1e6:.1f} MB/s from storage, "
        f"{e.mem_q or 0:.0%} of it re-reads of evicted pages, waits on I/O "
        f"{e.io_wait or 0:.0%} of the time, alone {e.mem or 1:.2f}× faster" for e in mem_slowed))
    names = tuple(e.name for e in mem_slowed)
    fixes = (Fix("queue", names, "run fewer of these jobs at once, or one after another: each "
                 "one's data alone may fit in the page cache"),
             Fix("shards", names, "smaller or pre-decoded (compressed) shards, so the jobs' data "
                 "fits in memory together"),
             Fix("memory", names, "more memory for them (the host, or the memory.max of their "
                 "cgroup)"),
             Fix("memory-high", names, "a memory.high per job (e.g. systemd-run -p "
                 "MemoryHigh=...) so one job's page cache does not evict the other's"))
    return Verdict.fixed(fixes, kind="memory-bound", confidence=conf, evidence=evidence,
                         evidence_lines=tuple(lines), jobs=rows,
                         reason=memory_reason(mem_slowed, host) + _also(others, host)
                         + " (estimated live, nothing paused)")


def memory_evidence(est: Sequence[Estimate], host: HostSample | None) -> Evidence:
    """The verdict's evidence figures on memory."""
    return {"memory_pressure_some10": host.memory_pressure_some10 if host else None,
            "memory_pressure_full10": host.memory_pressure_full10 if host else None,
            "memory_refault_bytes_per_s": host.memory_refault_bytes_per_s if host else None,
            "refault_share": {e.name: e.mem_q for e in est},
            "memory_wait": {e.name: e.mem_wait for e in est}}


def with_memory_lines(v: Verdict, jobs: Sequence[JobSample], host: HostSample | None) -> Verdict:
    """The verdict with memory's evidence lines (analyse/live/memory_share.py `memory_lines`)."""
    extra = memory_lines(jobs, host)
    return v.replace(evidence_lines=v.evidence_lines + tuple(extra)) if extra else v
