"""The GPU use of a tick per process: NVML's per-process figures summed per PID, and a
process tree's share of them (GPU memory, SM utilisation, the GPUs it is on).

Pure values over `GpuProcess` (what `collect/nvml/gpus.py`'s `Nvml.processes()` returns): the job
samplers (`collect/jobs/found.py`, `collect/proc/proctree.py`, `engine/jobrun.py`) read it; they never
call NVML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from gputop_dl.snapshot import GpuProcess


@dataclass(frozen=True)
class GpuUse:
    """NVML's per-process figures of one tick, summed per PID (a PID may use several GPUs)."""

    mem: dict[int, int | None] = field(default_factory=dict)  # every PID listed; None: unknown
    sm: dict[int, float] = field(default_factory=dict)
    gpus: dict[int, set[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, procs: Iterable[GpuProcess]) -> GpuUse:
        use = cls()
        for p in procs:
            if p.mem_used is not None:
                use.mem[p.pid] = (use.mem.get(p.pid) or 0) + p.mem_used
            else:
                use.mem.setdefault(p.pid, None)
            if p.sm_util is not None:
                use.sm[p.pid] = use.sm.get(p.pid, 0.0) + p.sm_util
            use.gpus.setdefault(p.pid, set()).add(p.gpu_index)
        return use

    def of_pids(self, pids: Iterable[int]) -> tuple[int | None, float | None, list[int]]:
        """(GPU memory, SM utilisation, GPU indices) of a process tree; None where unknown."""
        pids = list(pids)
        mems = [m for p in pids if (m := self.mem.get(p)) is not None]
        sms = [self.sm[p] for p in pids if p in self.sm]
        gpus = sorted({i for p in pids for i in self.gpus.get(p, ())})
        return (sum(mems) if mems else None), (sum(sms) if sms else None), gpus
