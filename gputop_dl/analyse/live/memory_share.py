"""Memory in the live verdict: jobs whose data no longer fits in the page cache together.

Pure functions over one tick's `JobSample` and `HostSample` (collect/proc/memory.py, collect/proc/host.py).
When the kernel has evicted a page of a file and a job reads it again, it counts a *refault*
(`workingset_refault_file`). Jobs read from storage in one *memory domain*: the nearest cgroup
at or above theirs with a memory limit (a container's, a Slurm job's), else the host, whose
refaults are /proc/vmstat's less those inside the limited groups (`host_refaults`). A domain
whose refaults are MIN_REFAULT_BPS or more while its jobs read `R` bytes/s from storage
re-reads a share

    q = min(1, refaults / R)

of what its jobs read: data that was in memory and was pushed out. With two or more jobs reading
in the domain, the page cache no longer holds their data together. Alone, a job whose data fits
would find those pages cached: its I/O wait `w_i` (analyse/live/io_share.py) shrinks to what is left,
`(1 - q)` of it, and that with the device to itself (`/ f_i`, the io model's fetch speed-up;
1 where it has none):

    s_mem = 1 / (1 - w_i * (1 - (1 - q) / f_i))

Most of the wait being re-reads (q >= THRASH) names memory as the cause (`memory-bound`);
otherwise it stays the disk's. A job whose domain refaults with no other job reading there
re-reads its own data: it does not fit alone either, and co-running is not the cause (a line in
the evidence, no estimate). PSI memory and the group's limit events are evidence, not the
model: a cgroup v1 limit's reclaim barely shows in PSI (2 % "some" while two jobs thrashed at
30 MB/s of refaults, docs/verdict.md). Blind spots: docs/verdict.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from gputop_dl.analyse.live.cpu_wait_model import clip_wait
from gputop_dl.analyse.live.io_share import MIN_READ_BPS
from gputop_dl.snapshot import HostSample, JobSample

MIN_REFAULT_BPS = 256 * 1024  # a domain refaulting less than this is not thrashing
THRASH = 0.5  # the share of a job's storage reads that are re-reads above which memory is the cause
HOST = "host"
UNKNOWN = ("memory: page-cache refaults unknown (no workingset counter in /proc/vmstat and no "
           "readable memory cgroup): memory is not judged")


@dataclass(frozen=True)
class Domain:
    """Where jobs' page cache competes: a limited cgroup or the host, at one tick."""

    name: str  # HOST, or the cgroup ("v1:/path")
    refault_bps: float | None
    readers: tuple[str, ...]  # jobs reading from storage there
    read_bps: float  # what they read together


def _within(group: str, path: str) -> bool:
    return path == group or path.startswith(group.rstrip("/") + "/")


def domain_of(j: JobSample) -> str | None:
    """The limited group whose page cache the job's reads compete in; None: the host's. (A
    sample from before `mem_domain` was read: its own group where that has a limit.)"""
    return j.mem_domain or (j.mem_cgroup if j.mem_limited else None)


def host_refaults(jobs: Sequence[JobSample], host: HostSample | None) -> float | None:
    """The host domain's refaults: the host's (/proc/vmstat) less those inside the cgroups with a
    memory limit of their own (the host sample's reading of every such group; a judged job's
    limited group it has no rate for yet: the job's). A limited group that holds a host-domain
    job is not taken off: its re-reads may be that job's. None: the host's count unknown."""
    if host is None or host.memory_refault_bytes_per_s is None:
        return None
    inside = [j.mem_cgroup for j in jobs if j.mem_cgroup and domain_of(j) is None]
    read = host.memory_limited_refaults or ()
    off = sum(r for g, r in read if not any(_within(g, c) for c in inside))
    seen = [g for g, _ in read]
    mine = {d: j.mem_refault_bytes_per_s or 0 for j in jobs if (d := domain_of(j)) is not None}
    off += sum(r for g, r in mine.items() if not any(_within(s, g) for s in seen))
    return max(0.0, host.memory_refault_bytes_per_s - off)


def domains(jobs: Sequence[JobSample], host: HostSample | None) -> dict[str, Domain]:
    """job -> its memory domain (every job, readers or not)."""
    key: dict[str, str] = {}
    refault: dict[str, float | None] = {HOST: host_refaults(jobs, host)}
    for j in jobs:
        if (d := domain_of(j)) is not None:
            k = d
            refault[k] = j.mem_refault_bytes_per_s
        else:
            k = HOST
            if refault[k] is None and j.mem_cgroup and j.mem_refault_bytes_per_s is not None:
                refault[k] = j.mem_refault_bytes_per_s  # the host's counter missing: its group's
        key[j.name] = k
    readers: dict[str, list[JobSample]] = {}
    for j in jobs:
        if (j.io_read_bytes_per_s or 0) >= MIN_READ_BPS:
            readers.setdefault(key[j.name], []).append(j)
    out = {}
    for j in jobs:
        k = key[j.name]
        rs = readers.get(k, [])
        out[j.name] = Domain(k, refault[k], tuple(r.name for r in rs),
                             float(sum(r.io_read_bytes_per_s or 0 for r in rs)))
    return out


def refault_share(d: Domain) -> float | None:
    """q: the share of the domain's storage reads that are re-reads (None: refaults unknown)."""
    if d.refault_bps is None:
        return None
    if d.refault_bps < MIN_REFAULT_BPS or d.read_bps <= 0:
        return 0.0
    return min(1.0, d.refault_bps / d.read_bps)


def memory_shares(jobs: Sequence[JobSample], host: HostSample | None,
                  doms: dict[str, Domain] | None = None) -> dict[str, tuple[float | None, bool]]:
    """job -> (q, shared): its domain's re-read share (None: unknown; 0 for a job that does not
    read from storage) and whether another job reads in that domain too. `doms`: `domains`'
    answer, where the caller has it."""
    out: dict[str, tuple[float | None, bool]] = {}
    for name, d in (doms if doms is not None else domains(jobs, host)).items():
        q = refault_share(d)
        if name not in d.readers and q is not None:
            q = 0.0
        out[name] = (q, name in d.readers and len(d.readers) >= 2)
    return out


def memory_slowdown(wait: float, q: float, ratio: float | None) -> float:
    """s_mem from the I/O wait, the re-read share and the io model's fetch speed-up."""
    left = (1.0 - q) / max(1.0, ratio or 1.0)
    return max(1.0, 1.0 / (1.0 - clip_wait(wait) * (1.0 - left)))


def memory_lines(jobs: Sequence[JobSample], host: HostSample | None) -> list[str]:
    """Evidence lines: memory unknown (one line), a job that re-reads its own data alone, the
    groups' limit events."""
    readers = [j for j in jobs if (j.io_read_bytes_per_s or 0) >= MIN_READ_BPS]
    if not readers and not any(v for j in jobs for _, v in j.mem_events):
        return []  # the usual case, once a tick: nothing to say
    shares = memory_shares(jobs, host)
    out = []
    if readers and all(shares[j.name][0] is None for j in readers):
        out.append(UNKNOWN)
    for j in readers:
        q, shared = shares[j.name]
        if q is not None and q >= THRASH and not shared:
            out.append(f"memory: {j.name} re-reads data the page cache evicted ({q:.0%} of its "
                       "reads) with no other job reading beside it: its data does not fit "
                       "alone either")
    seen = set()
    for j in jobs:
        ev = {k: v for k, v in j.mem_events if v}
        group = domain_of(j) or j.mem_cgroup  # the limit's events are its domain's
        if ev and group not in seen:
            seen.add(group)
            out.append(f"memory: cgroup {group} hit its limit: "
                       + ", ".join(f"{k} {v}" for k, v in ev.items()) + " in the last interval")
    return out


def pressure_text(host: HostSample | None) -> str:
    """"PSI memory some 2 %, full 0 %" (or why it is unknown)."""
    if host is None or host.memory_pressure_some10 is None:
        return "PSI memory unknown (a kernel without PSI)"
    full = host.memory_pressure_full10
    return (f"PSI memory some {host.memory_pressure_some10:.0%}"
            + (f", full {full:.0%}" if full is not None else ""))
