"""Which autogroup a process is scheduled in: the kernel's CPU group of its session, where it applies.

With `kernel.sched_autogroup_enabled` = 1 (Ubuntu's and most distributions' default), every
session (each ssh login, terminal or `setsid`) is one group to the scheduler, for the processes
in the root CPU cgroup (v1: the `cpu` controller's "/"; v2: a cgroup whose `cgroup.controllers`
lacks `cpu`, the usual case under systemd). Groups share the CPU by the autogroup's nice value,
and a process's own nice value and scheduling class count only inside its group: beside a
trainer, busy loops in another session took as much at nice 19 or in the idle class as at nice
0, and nothing once their autogroup's nice was 19 (docs/validation.md). Read from
`/proc/sys/kernel/sched_autogroup_enabled`, `/proc/PID/cgroup` and `/proc/PID/autogroup`
("/autogroup-516 nice 19"), all world-readable. Faults give None, never an exception.
"""

from __future__ import annotations

import os

from gputop_dl.collect.proc.procfs import CGROUP_ROOT, read_proc

ENABLED = "/proc/sys/kernel/sched_autogroup_enabled"


def parse_autogroup(data: bytes) -> tuple[str, int] | None:
    """/proc/PID/autogroup's "/autogroup-516 nice 19" -> ("/autogroup-516", 19)."""
    parts = data.split()
    try:
        return parts[0].decode("ascii", "replace"), int(parts[2])
    except (IndexError, ValueError):
        return None


def in_root_cpu_group(cgroup: bytes, cgroup_root: str = CGROUP_ROOT) -> bool:
    """Whether /proc/PID/cgroup's process is in the root CPU group, where autogroups apply: the
    v1 `cpu` controller's "/", or without one a v2 cgroup that has no `cpu` controller."""
    v2 = None
    for line in cgroup.decode("utf-8", "replace").splitlines():
        hid, _, rest = line.partition(":")
        ctrls, _, path = rest.partition(":")
        if "cpu" in ctrls.split(","):
            return path == "/"
        if hid == "0" and ctrls == "":
            v2 = path
    if v2 is None:
        return True  # no CPU controller anywhere: one root group
    if v2 == "/":
        return True
    try:
        controllers = read_proc(os.path.join(cgroup_root + v2.rstrip("/"), "cgroup.controllers"))
    except OSError:
        return True  # the hierarchy is not mounted here: no controller seen
    return b"cpu" not in controllers.split()


def applies(pid: int, proc: str = "/proc", enabled: str = ENABLED,
            cgroup_root: str = CGROUP_ROOT) -> bool:
    """Whether autogroups apply to `pid`: they are on and it is in the root CPU group (False
    where that cannot be read). Fixed for a process's life but for a move to another cgroup."""
    try:
        return (read_proc(enabled).strip() == b"1"
                and in_root_cpu_group(read_proc(f"{proc}/{pid}/cgroup", 65536), cgroup_root))
    except OSError:
        return False


def read_autogroup(pid: int, proc: str = "/proc") -> tuple[str, int] | None:
    """(autogroup, its nice value) from /proc/PID/autogroup, whether or not it applies."""
    try:
        return parse_autogroup(read_proc(f"{proc}/{pid}/autogroup"))
    except OSError:
        return None


def autogroup_of(pid: int, proc: str = "/proc", enabled: str = ENABLED,
                 cgroup_root: str = CGROUP_ROOT) -> tuple[str, int] | None:
    """(autogroup, its nice value) of `pid` where autogroups apply to it; None where they are
    off, it is in a CPU cgroup of its own, or its files cannot be read."""
    return read_autogroup(pid, proc) if applies(pid, proc, enabled, cgroup_root) else None
