"""The ranks of a distributed job on this node: which processes of its tree are ranks, and where.

torchrun (torchelastic) gives each rank its place in the run in its environment: RANK,
LOCAL_RANK, WORLD_SIZE, GROUP_RANK (the node's rank), GROUP_WORLD_SIZE (the nodes) and
TORCHELASTIC_RUN_ID (`channel.RANK_ENV`). `RankReader` reads them from `/proc/PID/environ`
(psutil's `Process.environ()`) for the processes of one job's tree, walking down from the
job's root: the first process on a path that has RANK is a rank, and its descendants (its
data-loader workers, which inherit RANK) are not read at all. A process's environment does not
change after exec, so each PID is read once and kept while it is in the tree (one whose
environment reads empty, caught inside execve, is read again); a process that denies access
or vanished is unknown (never an error), and its subtree is searched further.

The same reader serves launched jobs (`engine/jobrun.py`) and found jobs (`collect/jobs/found.py`):
one reader per job, so each keeps only its own tree's PIDs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import psutil

from gputop_dl.injob.channel import RANK_ENV, RankInfo, rank_info
from gputop_dl.collect.proc.procs import TreeSample, children_map, descendants
from gputop_dl.snapshot import Distributed, RankProc

__all__ = ["RankReader", "distributed_of", "rank_cpu"]


# `_read_env` of a process whose environment reads empty: one caught inside execve (its new
# environment is not in place yet), or one started with none; read again on the next tick
NOT_YET: RankInfo = {}
_T = TypeVar("_T")


def _read_env(pid: int) -> RankInfo | None:
    """The rank variables of `pid` (`channel.rank_info`), {} when it has none, None when unknown,
    NOT_YET when its environment reads empty."""
    try:
        env = psutil.Process(pid).environ()
    except (psutil.Error, OSError):  # gone, not ours to read, or a zombie
        return None
    if not env:
        return NOT_YET
    return rank_info({k: env[k] for k in RANK_ENV if k in env})


class RankReader:
    """One job's ranks across ticks; `read(root, cmap)` each tick (cheap: cached per PID)."""

    def __init__(self, read_env: Callable[[int], RankInfo | None] = _read_env) -> None:
        self._read_env = read_env
        self._cache: dict[int, RankInfo | None] = {}  # PID -> its rank variables (None: unknown)

    def _info(self, pid: int) -> RankInfo | None:
        if pid not in self._cache:
            info = self._read_env(pid)
            if info is NOT_YET:
                return None  # not kept: its environment may be there on the next read
            self._cache[pid] = info
        return self._cache[pid]

    def read(self, root: int, cmap: Mapping[int, list[int]] | None = None) -> Distributed | None:
        """The job's ranks on this node, or None when no process of the tree is a rank.
        `cmap`: this tick's PPID -> children map (one is built when None)."""
        cmap = children_map() if cmap is None else cmap
        ranks: list[tuple[int, RankInfo]] = []
        visited: set[int] = set()
        todo = [root]
        while todo:
            pid = todo.pop()
            if pid in visited:
                continue
            visited.add(pid)
            info = self._info(pid)
            if info and "rank" in info:
                ranks.append((pid, info))
                continue  # its descendants are its workers
            todo.extend(cmap.get(pid, ()))
        for pid in [p for p in self._cache if p not in visited]:
            del self._cache[pid]
        return distributed_of(ranks)


def distributed_of(ranks: list[tuple[int, RankInfo]]) -> Distributed | None:
    """The job-level figures from its ranks' `rank_info` (pid, info): what all of them agree on
    (a figure they disagree on, or that none has, is unknown)."""
    if not ranks:
        return None

    def common(vals: set[_T | None]) -> _T | None:
        return vals.pop() if len(vals) == 1 else None

    procs = tuple(sorted(
        (RankProc(rank=info["rank"], local_rank=info.get("local_rank"), pid=pid,
                  group_rank=info.get("group_rank")) for pid, info in ranks),
        key=lambda r: (r.rank, r.pid)))
    return Distributed(run_id=common({i.get("run_id") for _, i in ranks}),
                       world_size=common({i.get("world_size") for _, i in ranks}),
                       nnodes=common({i.get("nnodes") for _, i in ranks}),
                       group_rank=common({i.get("group_rank") for _, i in ranks}), ranks=procs)


def rank_cpu(d: Distributed | None, ts: TreeSample | None,
             cmap: Mapping[int, list[int]] | None) -> tuple[tuple[int, float], ...]:
    """Each rank's CPU cores this tick, its loader workers included: (rank, cores), from the
    per-process figures the tree sampler read anyway; () when unknown (first tick, no ranks)."""
    if d is None or ts is None or ts.cpu_by_pid is None:
        return ()
    cmap = children_map() if cmap is None else cmap
    by = ts.cpu_by_pid
    return tuple((r.rank, round(sum(by.get(p, 0.0) for p in (r.pid, *descendants(r.pid, cmap))), 3))
                 for r in d.ranks if r.pid in by)
