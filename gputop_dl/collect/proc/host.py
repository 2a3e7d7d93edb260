"""Host sampler: per-core CPU, load, pressure (PSI: CPU, I/O, memory), cgroup throttling, memory, from /proc.

A tick reads /proc/stat, /proc/meminfo, /proc/vmstat (the page cache's refaults) and
/proc/pressure/{cpu,io,memory} directly, one `pread` each of a
file kept open (`procfs.ProcFiles`); psutil's `cpu_percent` and `virtual_memory` cost more than
twice the CPU. The figures are computed exactly as psutil computes them, and psutil stays the fallback
where there is no /proc.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from gputop_dl.collect.proc.memory_groups import LimitedGroups
from gputop_dl.collect.proc.procfs import CGROUP_ROOT, PROC, ProcFiles, _TICK, read_proc
from gputop_dl.collect.proc.rapl import POWERCAP, RaplReader
from gputop_dl.snapshot import HostSample

PSI_CPU = "/proc/pressure/cpu"
PSI_IO = "/proc/pressure/io"
PSI_MEMORY = "/proc/pressure/memory"
VMSTAT = "/proc/vmstat"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def parse_cpu_times(data: bytes) -> list[list[float]]:
    """Per-CPU times in seconds from /proc/stat (the `cpuN` lines, psutil's fields and order)."""
    out = []
    for line in data.split(b"\n")[1:]:  # the first line is all CPUs together
        if not line.startswith(b"cpu"):
            break
        try:
            out.append([int(v) / _TICK for v in line.split()[1:11]])
        except ValueError:  # not the kernel's /proc/stat: no per-CPU figure this tick
            return []
    return out


def parse_procs_running(data: bytes) -> int | None:
    """The threads runnable right now (running or in a run queue) from /proc/stat's
    `procs_running` line; None when it is missing."""
    at = data.find(b"\nprocs_running ")
    if at < 0:
        return None
    try:
        return int(data[at + 15:data.index(b"\n", at + 1)])
    except ValueError:
        return None


def busy_percent(t1: list[float], t2: list[float]) -> float:
    """One CPU's busy percent between two `parse_cpu_times` rows: psutil.cpu_percent's arithmetic
    (negative deltas count as 0, guest time is already in user time, idle and iowait are idle)."""
    d = [max(0, b - a) for a, b in zip(t1, t2)]
    total = sum(d)
    for guest in d[8:10]:
        total -= guest
    return round((total - d[3] - d[4]) / total * 100, 1) if total else 0.0


def parse_meminfo(data: bytes) -> tuple[int, int] | None:
    """(used, total) bytes from /proc/meminfo, used = total - available as psutil.virtual_memory
    has it; None unless the first lines are MemTotal, MemFree and a non-zero MemAvailable (older
    kernels: psutil estimates what is available)."""
    m = {}
    try:
        for line in data.split(b"\n", 3)[:3]:
            key, _, val = line.partition(b":")
            m[key] = int(val.split()[0]) * 1024
    except (IndexError, ValueError):
        return None
    total, free, avail = m.get(b"MemTotal"), m.get(b"MemFree"), m.get(b"MemAvailable")
    if total is None or free is None or not avail:
        return None
    return total - (free if avail > total else avail), total  # avail > total: a container


def read_psi_some10(path: str = PSI_CPU, read: Callable[[str], bytes] = read_proc,
                    kind: bytes = b"some") -> float | None:
    """A PSI file's "some avg10" (`/proc/pressure/cpu` unless told; `kind` b"full": its "full"
    line) as a fraction, or None where the kernel has no PSI."""
    try:
        for line in read(path).split(b"\n"):
            if line.startswith(kind):
                for part in line.split():
                    if part.startswith(b"avg10="):
                        return float(part[6:]) / 100.0
    except (OSError, ValueError):
        return None
    return None


def parse_vmstat_refaults(data: bytes) -> int | None:
    """/proc/vmstat's file refaults (pages read again after eviction from the page cache; before
    Linux 5.9 one counter, `workingset_refault`, for file and anonymous pages); None: absent."""
    for key in (b"\nworkingset_refault_file ", b"\nworkingset_refault "):
        at = data.find(key)
        if at >= 0:
            try:
                return int(data[at + len(key):data.index(b"\n", at + 1)])
            except ValueError:
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


def read_cgroup_throttled_usec(root: str = CGROUP_ROOT,
                               read: Callable[[str], bytes] = read_proc) -> int | None:
    try:
        for line in read(os.path.join(root, "cpu.stat")).split(b"\n"):
            if line.startswith(b"throttled_usec"):
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

    def __init__(self, rapl_root: str = POWERCAP) -> None:
        """`rapl_root`: the powercap directory (tests give a fake one)."""
        self._files = ProcFiles()  # kept open: one system call a read
        self._running: int | None = None  # procs_running of the latest /proc/stat read
        self.cpus = allowed_cpus()
        self._affinity: list[int] | None
        try:
            self._affinity = sorted(os.sched_getaffinity(0))
        except AttributeError:
            self._affinity = None
        if PROC:  # the start of the first tick's CPU delta
            self._times = self._cpu_times()
        else:
            import psutil  # no /proc: psutil's reading (imported here: not on Linux's path)

            psutil.cpu_percent(percpu=True)
        self._thr = read_cgroup_throttled_usec(read=self._files.read)
        self._cgroup = self._thr is not None  # no cgroup v2 cpu.stat: not looked for again
        self._psi = read_psi_some10(read=self._files.read) is not None  # no PSI: the same
        self._refaults = self._read_refaults()  # (monotonic time, pages) of the last reading
        self._limited = LimitedGroups() if PROC else None  # the refaults vmstat counts inside them
        if self._limited is not None:
            self._limited.read(time.monotonic())  # the start of the first tick's rates
        self._t = time.monotonic()
        self._rapl = RaplReader(rapl_root)
        self._rapl.read(self._t)  # the start of the first tick's energy

    def _cpu_times(self) -> list[list[float]]:
        data = self._files.read("/proc/stat", 1 << 16)
        self._running = parse_procs_running(data)
        return parse_cpu_times(data)

    def _per_cpu_percent(self) -> list[float]:
        if not PROC:
            import psutil

            return list(psutil.cpu_percent(percpu=True))
        times = self._cpu_times()
        per = [busy_percent(a, b) for a, b in zip(self._times, times)]
        self._times = times
        return per

    def _read_refaults(self) -> tuple[float, int] | None:
        try:
            pages = parse_vmstat_refaults(self._files.read(VMSTAT, 1 << 16)) if PROC else None
        except OSError:
            pages = None
        return None if pages is None else (time.monotonic(), pages)

    def _refault_rate(self) -> float | None:
        """Bytes/s of file pages the host read again after evicting them."""
        if self._refaults is None:
            return None
        last, self._refaults = self._refaults, self._read_refaults()
        if self._refaults is None or self._refaults[0] <= last[0]:
            return None
        return max(0, self._refaults[1] - last[1]) * _PAGE / (self._refaults[0] - last[0])

    def _memory(self) -> tuple[int, int]:
        """(used, total) bytes."""
        mem = parse_meminfo(self._files.read("/proc/meminfo")) if PROC else None
        if mem is None:
            import psutil

            vm = psutil.virtual_memory()
            mem = vm.total - vm.available, vm.total
        return mem

    def sample(self) -> HostSample:
        per = self._per_cpu_percent()
        if self._affinity is not None and len(per) > max(self._affinity, default=-1):
            per = [per[i] for i in self._affinity]
        per_cpu = tuple(round(p / 100.0, 4) for p in per)
        busy = sum(per_cpu) / len(per_cpu) if per_cpu else None
        now = time.monotonic()
        thr = read_cgroup_throttled_usec(read=self._files.read) if self._cgroup else None
        throttled = None
        if thr is not None and self._thr is not None and now > self._t:
            throttled = max(0.0, min(1.0, (thr - self._thr) / 1e6 / (now - self._t)))
        self._thr, self._t = thr, now
        l1: float | None
        l5: float | None
        l15: float | None
        try:
            l1, l5, l15 = os.getloadavg()
        except OSError:
            l1 = l5 = l15 = None
        used, total = self._memory()
        rapl = self._rapl.read(now)
        mem_psi = None
        if self._psi:
            try:
                data = self._files.read(PSI_MEMORY)
                mem_psi = lambda _path: data  # noqa: E731  (one read for its two lines)
            except OSError:
                pass
        return HostSample(
            cpus=self.cpus, cpu_busy=None if busy is None else round(busy, 4), per_cpu=per_cpu,
            load1=l1, load5=l5, load15=l15,
            # the reading thread itself is running as it reads: not part of the demand
            runnable=None if self._running is None or not PROC else max(0, self._running - 1),
            cpu_pressure_some10=read_psi_some10(read=self._files.read) if self._psi else None,
            io_pressure_some10=read_psi_some10(PSI_IO, read=self._files.read) if self._psi else None,
            memory_pressure_some10=read_psi_some10(PSI_MEMORY, read=mem_psi) if mem_psi else None,
            memory_pressure_full10=(read_psi_some10(PSI_MEMORY, read=mem_psi, kind=b"full")
                                    if mem_psi else None),
            memory_refault_bytes_per_s=None if (r := self._refault_rate()) is None else round(r),
            memory_limited_refaults=(self._limited.read(time.monotonic())
                                     if self._limited is not None else None),
            cgroup_throttled_frac=throttled, mem_used=used, mem_total=total,
            cpu_energy_j=rapl.joules, cpu_power_w=rapl.power_w, cpu_energy_note=rapl.note)
