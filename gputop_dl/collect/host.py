"""Host sampler: per-core CPU, load, CPU pressure (PSI), cgroup throttling, memory (psutil + /proc)."""

from __future__ import annotations

import os
import time

import psutil

from gputop_dl.snapshot import HostSample

PSI_CPU = "/proc/pressure/cpu"
CGROUP_ROOT = "/sys/fs/cgroup"


def read_psi_some10(path: str = PSI_CPU) -> float | None:
    """`/proc/pressure/cpu` "some avg10" as a fraction, or None where the kernel has no PSI."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("some"):
                    for part in line.split():
                        if part.startswith("avg10="):
                            return float(part[6:]) / 100.0
    except (OSError, ValueError):
        return None
    return None


def cgroup_cpu_limit(root: str = CGROUP_ROOT) -> float | None:
    """CPUs allowed by the cgroup v2 `cpu.max` quota, or None when unlimited / not cgroup v2."""
    try:
        with open(os.path.join(root, "cpu.max"), encoding="ascii") as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def read_cgroup_throttled_usec(root: str = CGROUP_ROOT) -> int | None:
    try:
        with open(os.path.join(root, "cpu.stat"), encoding="ascii") as f:
            for line in f:
                if line.startswith("throttled_usec"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def allowed_cpus() -> int:
    """Logical CPUs this process may use: affinity mask, capped by a cgroup quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None:
        n = max(1, min(n, int(limit + 0.999)))
    return n


class HostSampler:
    """Call `sample()` once per tick; CPU figures are averages since the previous call."""

    def __init__(self):
        self.cpus = allowed_cpus()
        try:
            self._affinity = sorted(os.sched_getaffinity(0))
        except AttributeError:
            self._affinity = None
        psutil.cpu_percent(percpu=True)  # prime the delta
        self._thr = read_cgroup_throttled_usec()
        self._t = time.monotonic()

    def sample(self) -> HostSample:
        per = psutil.cpu_percent(percpu=True)
        if self._affinity is not None and len(per) > max(self._affinity, default=-1):
            per = [per[i] for i in self._affinity]
        per_cpu = tuple(round(p / 100.0, 4) for p in per)
        busy = sum(per_cpu) / len(per_cpu) if per_cpu else None
        now = time.monotonic()
        thr = read_cgroup_throttled_usec()
        throttled = None
        if thr is not None and self._thr is not None and now > self._t:
            throttled = max(0.0, min(1.0, (thr - self._thr) / 1e6 / (now - self._t)))
        self._thr, self._t = thr, now
        try:
            l1, l5, l15 = os.getloadavg()
        except OSError:
            l1 = l5 = l15 = None
        vm = psutil.virtual_memory()
        return HostSample(
            cpus=self.cpus, cpu_busy=None if busy is None else round(busy, 4), per_cpu=per_cpu,
            load1=l1, load5=l5, load15=l15, cpu_pressure_some10=read_psi_some10(),
            cgroup_throttled_frac=throttled, mem_used=vm.total - vm.available, mem_total=vm.total)
