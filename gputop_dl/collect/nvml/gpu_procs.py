"""The processes on each GPU, with each one's memory and its recent SM utilization.

`ProcessReads` is a part of `collect/nvml/gpus.py`'s `Nvml`; summing its `processes()` per PID for
the job rows is `collect/nvml/gpu_use.py`'s `GpuUse`.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from gputop_dl.collect.nvml.base import F_GPROCS, F_PROCS, F_PUTIL, GpuGone, NvmlBase, NvmlDevice
from gputop_dl.snapshot import GpuProcess

__all__ = ["PROC_UTIL_WINDOW_S", "ProcessReads"]

PROC_UTIL_WINDOW_S = 2.0  # per-process SM samples older than this count as "idle" (0.0)


class ProcessReads(NvmlBase):
    """The process reads of `Nvml` (a mixin: `Nvml` sets the attributes declared here)."""

    _devices: tuple[NvmlDevice, ...]
    _clock: Callable[[], float]
    _fn_cprocs: Callable[..., Any] | None
    _fn_gprocs: Callable[..., Any] | None
    _fn_putil: Callable[..., Any] | None
    _ok_code: Any
    _not_found: Any

    def processes(self) -> tuple[GpuProcess, ...]:
        """Compute and graphics processes on all GPUs, with per-process SM utilization (0..1)
        where NVML gives it. A process with no utilization sample in the last
        `PROC_UTIL_WINDOW_S` seconds on a GPU that reports them gets 0.0 (it did not run
        kernels); sm_util is None where the GPU does not report them. Never raises."""
        devices = self._devices
        if not devices:
            return ()
        try:
            now_us = int(self._clock() * 1_000_000)
        except Exception:  # noqa: BLE001
            now_us = int(time.time() * 1_000_000)
        out: list[GpuProcess] = []
        for d in devices:
            if d.handle is None:
                continue
            try:
                procs = self._processes_one(d, now_us)
            except Exception:  # noqa: BLE001 - lost GPU or anything else: skip this device
                continue
            if procs:
                out.extend(procs)
        return tuple(out)

    def _processes_one(self, d: NvmlDevice, now_us: int) -> list[GpuProcess]:
        h = d.handle
        compute = self._read(d, F_PROCS, self._fn_cprocs, h)
        graphics = self._read(d, F_GPROCS, self._fn_gprocs, h)
        if not compute and not graphics:
            return []
        sm = self._process_util(d, h, now_us)
        cutoff = now_us - int(PROC_UTIL_WINDOW_S * 1_000_000)
        mem_by_pid: dict[int, int | None] = {}
        for group in (compute, graphics):
            for p in group or ():
                pid = int(p.pid)
                mem = getattr(p, "usedGpuMemory", None)
                mem = int(mem) if mem is not None else None
                if pid in mem_by_pid:
                    old = mem_by_pid[pid]
                    if mem is not None and (old is None or mem > old):
                        mem_by_pid[pid] = mem
                else:
                    mem_by_pid[pid] = mem
        out = []
        for pid, mem in mem_by_pid.items():
            util: float | None = None
            if sm is not None:
                entry = sm.get(pid)
                util = entry[0] if entry is not None and entry[1] >= cutoff else 0.0
            out.append(GpuProcess(gpu_index=d.index, pid=pid, mem_used=mem, sm_util=util))
        return out

    def _process_util(self, d: NvmlDevice, h: Any, now_us: int) -> dict[int, tuple[float, int]] | None:
        """Merge NVML per-process samples newer than the device's last-seen timestamp into
        d.pid_util (mean SM util of the new samples per pid). None = not available."""
        fn = self._fn_putil
        if fn is None or d.unsupported & F_PUTIL:
            return None
        cutoff = now_us - int(PROC_UTIL_WINDOW_S * 1_000_000)
        since = d.util_last_ts if d.util_last_ts > cutoff else cutoff
        try:
            samples = fn(h, since)
        except self._nvml_error as e:
            code = getattr(e, "value", None)
            if code == self._not_found or code == self._ok_code:
                samples = ()  # no samples since `since`: nothing ran
            elif code in self._lost_codes:
                raise GpuGone(self._lost_codes[code]) from None
            else:
                if code in self._permanent_codes:
                    d.unsupported |= F_PUTIL
                return None
        pid_util = d.pid_util
        if samples:
            acc: dict[int, list[float]] = {}  # pid -> [sum, count, newest ts]
            newest = d.util_last_ts
            for s in samples:
                ts = int(s.timeStamp)
                if ts > newest:
                    newest = ts
                if ts <= since:
                    continue
                a = acc.get(s.pid)
                if a is None:
                    acc[s.pid] = [float(s.smUtil), 1.0, float(ts)]
                else:
                    a[0] += s.smUtil
                    a[1] += 1.0
                    if ts > a[2]:
                        a[2] = float(ts)
            d.util_last_ts = newest
            for pid, (total, n, newest_ts) in acc.items():
                pid_util[int(pid)] = (min(max(total / n / 100.0, 0.0), 1.0), int(newest_ts))
        if pid_util:
            stale = [pid for pid, (_, ts) in pid_util.items() if ts < cutoff]
            for pid in stale:
                del pid_util[pid]
        return pid_util
