"""The report's resource sections: per job its CPU wait, disk I/O and memory
refaults, each only when some job has figures. From a `session_json` dict's jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputop_dl.text.fmt import num, pct, rate
from gputop_dl.text.markdown import md_cell, table

if TYPE_CHECKING:
    from gputop_dl.present.report.document import JobDoc


def cpu_wait_section(jobs: list[JobDoc]) -> str | None:
    """CPU wait: per job, the mean share of its threads' runnable time spent waiting
    for a CPU, over the samples that have one; None when no job has any."""
    rows = []
    for j in jobs:
        cw = j.get("cpu_wait")
        if not cw:
            continue
        rows.append([md_cell(j["name"]), pct(cw.get("mean")), pct(cw.get("max")),
                     pct(cw.get("trainer")), pct(cw.get("workers")), pct(cw.get("throttled")),
                     str(cw.get("samples") or 0)])
    if not rows:
        return None
    return "\n".join([
        "## CPU wait", "",
        table(["job", "CPU wait (mean)", "max", "trainer", "loader workers", "quota throttled",
               "samples"], rows, "lrrrrrr"), "",
        "- CPU wait = time the job's threads were runnable but waited for a CPU (run-queue "
        "delay, /proc/PID/task/TID/schedstat) over their runnable time, per sampling interval, "
        "averaged over the samples; trainer = the trainer (rank) processes' threads, loader "
        "workers = the other processes' threads; quota throttled = share of the interval the "
        "job's cgroup was throttled by its CPU quota (– without a quota)."])


def disk_section(jobs: list[JobDoc]) -> str | None:
    """Disk I/O: per job, what it read from storage and how long it waited on it;
    None when no job read anything from storage."""
    rows = []
    for j in jobs:
        d = j.get("disk")
        if not d or not (d.get("max_read_bytes_per_s") or d.get("io_wait")):
            continue
        rows.append([md_cell(j["name"]), rate(d.get("read_bytes_per_s")),
                     rate(d.get("max_read_bytes_per_s")), pct(d.get("io_wait")),
                     num(d.get("major_faults_per_s"), ".1f"), str(d.get("samples") or 0)])
    if not rows:
        return None
    return "\n".join([
        "## Disk I/O", "",
        table(["job", "read from storage (mean)", "peak", "waited on I/O", "major faults/s",
               "samples"], rows, "lrrrrr"), "",
        "- Read from storage = /proc/PID/io read_bytes of the job's processes per second "
        "(page-cache hits are not counted); waited on I/O = the share of the live verdict's "
        "window on which a process of the job was in D state and none was running (docs/verdict.md)."])


def memory_section(jobs: list[JobDoc]) -> str | None:
    """Memory: per job, the page-cache refaults of its cgroup and its wait on
    re-reads of evicted pages; None when no job had any."""
    rows = []
    for j in jobs:
        d = j.get("memory")
        if not d or not (d.get("max_refault_bytes_per_s") or d.get("memory_wait")):
            continue
        rows.append([md_cell(j["name"]), rate(d.get("refault_bytes_per_s")),
                     rate(d.get("max_refault_bytes_per_s")), pct(d.get("memory_wait")),
                     str(d.get("samples") or 0)])
    if not rows:
        return None
    return "\n".join([
        "## Memory", "",
        table(["job", "page-cache refaults (mean)", "peak", "waited on re-reads", "samples"],
              rows, "lrrrr"), "",
        "- Refaults = file pages the job's cgroup read again after the kernel had evicted them "
        "(memory.stat workingset_refault_file; the host's /proc/vmstat where the cgroup has no "
        "limit of its own); waited on re-reads = the part of its I/O wait those re-reads explain "
        "(docs/verdict.md)."])
