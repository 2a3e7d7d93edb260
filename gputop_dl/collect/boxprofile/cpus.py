"""The box's CPUs: model, cores and threads, NUMA nodes and their CPUs, the cgroup CPU quota.

Read from files only (`/proc/cpuinfo`, `/sys/devices/system/{cpu,node}`, the cgroup's
`cpu.max` or, on cgroup v1, `cpu.cfs_quota_us` / `cpu.cfs_period_us`), each root a parameter so
tests hand in a fake tree. Nothing is measured here.
"""

from __future__ import annotations

import os
from typing import Callable

from gputop_dl.text.cpulist import format_cpulist, parse_cpulist
from gputop_dl.collect.boxprofile.part import Part

__all__ = ["read_cpus", "cgroup_quota", "numa_nodes"]


def _text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_model(proc: str) -> str | None:
    text = _text(os.path.join(proc, "cpuinfo")) or ""
    for line in text.splitlines():
        if line.startswith("model name") or line.startswith("Model"):
            return line.split(":", 1)[1].strip() or None
    return None


def physical_cores(sys: str, cpus: frozenset[int]) -> int | None:
    """Distinct (package, core) pairs among `cpus`; None when the topology is not readable."""
    seen = set()
    for c in cpus:
        base = os.path.join(sys, "devices/system/cpu", f"cpu{c}", "topology")
        pkg, core = _text(os.path.join(base, "physical_package_id")), _text(os.path.join(base, "core_id"))
        if pkg is None or core is None:
            return None
        seen.add((pkg, core))
    return len(seen) or None


def numa_nodes(sys: str) -> list[Part]:
    """[{"node": 0, "cpus": "0-15", "mem_total": bytes | None}] from /sys/devices/system/node."""
    base = os.path.join(sys, "devices/system/node")
    try:
        names = sorted((n for n in os.listdir(base) if n.startswith("node") and n[4:].isdigit()),
                       key=lambda n: int(n[4:]))
    except OSError:
        return []
    out = []
    for n in names:
        cpus = _text(os.path.join(base, n, "cpulist"))
        mem = None
        for line in (_text(os.path.join(base, n, "meminfo")) or "").splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] == "MemTotal:":
                mem = int(parts[3]) * 1024
        out.append({"node": int(n[4:]), "cpus": cpus or "", "mem_total": mem})
    return out


def cgroup_quota(cgroup: str) -> tuple[float | None, str | None]:
    """(CPUs the quota allows, its source) from cgroup v2 `cpu.max`, else v1's cfs files;
    (None, None) when there is no quota."""
    v2 = _text(os.path.join(cgroup, "cpu.max"))
    if v2:
        parts = v2.split()
        if len(parts) >= 2 and parts[0] != "max":
            try:
                return int(parts[0]) / int(parts[1]), "cpu.max " + v2
            except (ValueError, ZeroDivisionError):
                return None, None
        return None, None
    for base in (os.path.join(cgroup, "cpu"), os.path.join(cgroup, "cpu,cpuacct"), cgroup):
        q, p = _text(os.path.join(base, "cpu.cfs_quota_us")), _text(os.path.join(base, "cpu.cfs_period_us"))
        if q is not None and p is not None:
            try:
                quota, period = int(q), int(p)
            except ValueError:
                return None, None
            if quota > 0 and period > 0:
                return quota / period, f"cpu.cfs_quota_us {quota} / cpu.cfs_period_us {period}"
            return None, None
    return None, None


def read_cpus(proc: str = "/proc", sys: str = "/sys", cgroup: str = "/sys/fs/cgroup",
              affinity: Callable[[], set[int]] | None = None) -> Part:
    """The CPU part of the machine profile (docs/machine.md): model, threads online, physical
    cores, the CPUs this process may use, NUMA nodes, the cgroup quota and the usable cores
    (the smaller of the affinity and the quota)."""
    online = parse_cpulist(_text(os.path.join(sys, "devices/system/cpu/online")))
    if not online:
        online = frozenset(range(os.cpu_count() or 1))
    try:
        allowed = frozenset(affinity() if affinity else os.sched_getaffinity(0))
    except OSError:
        allowed = online
    quota, source = cgroup_quota(cgroup)
    usable = float(len(allowed))
    notes = []
    if quota is not None and quota < usable:
        usable = quota
        notes.append(f"a cgroup CPU quota allows {quota:g} CPUs ({source}), fewer than the "
                     f"{len(allowed)} this process may run on")
    return {"model": cpu_model(proc), "threads": len(online),
            "cores": physical_cores(sys, online), "allowed": format_cpulist(allowed),
            "allowed_count": len(allowed), "quota_cpus": quota, "quota_source": source,
            "usable_cpus": usable, "numa": numa_nodes(sys), "notes": notes}
