"""A job's processes as a tree (trainer, ranks, loader workers), from what the tick already read.

    procs = proc_tree(root, cmap, tree.stats(), ts.cpu_by_pid, ranks_of(dist), gpu)

No /proc read of its own: the tree sampler's stats (CPU time, RSS, state) of this tick, its CPU
per process, the PPID map and NVML's per-PID figures. Root first, depth-first, children by PID.
"""

from __future__ import annotations

from gputop_dl.collect.nvml.gpu_use import GpuUse
from gputop_dl.collect.proc.procs import Stat
from gputop_dl.snapshot import Distributed, ProcSample


def ranks_of(dist: Distributed | None) -> dict[int, int]:
    """PID -> global rank of a distributed job's ranks on this node."""
    return {r.pid: r.rank for r in dist.ranks} if dist is not None else {}


def proc_tree(root: int, cmap: dict[int, list[int]], stats: dict[int, Stat],
              cpu_by_pid: dict[int, float] | None, ranks: dict[int, int],
              gpu: GpuUse) -> tuple[ProcSample, ...]:
    out: list[ProcSample] = []
    stack: list[tuple[int, int | None, int]] = [(root, None, 0)]
    while stack:
        pid, ppid, depth = stack.pop()
        st = stats.get(pid)
        if st is None:  # not in this job's tree (another job's), or gone
            continue
        role = f"rank {ranks[pid]}" if pid in ranks else "main" if depth == 0 else "worker"
        out.append(ProcSample(pid, ppid, depth, role,
                              cpu_by_pid.get(pid) if cpu_by_pid is not None else None,
                              st.rss, st.state or None, gpu.mem.get(pid), gpu.sm.get(pid)))
        for child in sorted(cmap.get(pid, ()), reverse=True):
            stack.append((child, pid, depth + 1))
    return tuple(out)
