"""Found jobs' trees from candidate processes: which are roots, each tree to where another begins.

Grouping (collect/jobs/discover.py picks the candidates: torch or GPU processes, and other
users' processes judged training): a candidate whose parent is also a candidate is a worker
of it (data-loader workers, torchrun ranks under the torchrun agent); the others are roots,
and a job is a root plus its descendants, down to where another job's (or a launched job's)
tree begins. Pure functions over the PPID map (`ppid`: PID -> parent) and its children map
(`cmap`: PPID -> children); `marked(pid)` says whether a process carries the launch marker.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence

TORCHRUN_MARKS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


def excluded(pids: Iterable[int], listed: Container[int],
             cmap: Mapping[int, Sequence[int]]) -> set[int]:
    """`pids` (root PIDs left out: the engine's launched jobs) and, for those `listed`, every
    descendant: whole subtrees."""
    skip = set(pids)
    todo = [p for p in skip if p in listed]
    while todo:
        c = todo.pop()
        for k in cmap.get(c, ()):
            if k not in skip:
                skip.add(k)
                todo.append(k)
    return skip


def ancestors(pid: int, ppid: Mapping[int, int]) -> list[int]:
    """`pid`'s parent, its parent's parent, ... as far as the PPID map knows (no loops)."""
    out, seen = [], {pid}
    p = ppid.get(pid)
    while p is not None and p not in seen and p > 0:
        out.append(p)
        seen.add(p)
        p = ppid.get(p)
    return out


def job_roots(cand: Collection[int], ppid: Mapping[int, int], skip: Container[int], own: int,
              marked: Callable[[int], bool]) -> list[int]:
    """The candidates that root a job, in PID order: not left out (`skip`), not a worker of a
    candidate parent, and not a marked process under this one (`own`: launched here)."""
    roots: list[int] = []
    for pid in sorted(cand):
        if pid in skip:
            continue
        parent = ppid.get(pid)
        if parent is not None and parent in cand and parent not in skip:
            # a worker (or rank) of its parent's job, unless a gputop-dl launched it from
            # a torch process (a test runner, a notebook): then it is a job of its own
            if not marked(pid) or marked(parent):
                continue
        if own in ancestors(pid, ppid) and marked(pid):
            continue  # launched by an engine of this process, not claimed yet
        roots.append(pid)
    return roots


def job_cmap(cmap: dict[int, list[int]], ppid: Mapping[int, int], roots: Iterable[int],
             skip: Iterable[int], own: int) -> dict[int, list[int]]:
    """`cmap` without the edges into another job's tree (or a left-out one): a job's tree
    stops where another begins. `cmap` itself where no edge is cut."""
    cut = (set(roots) | set(skip)) - {own}
    parents = {pp for p in cut if (pp := ppid.get(p)) is not None} & cmap.keys()
    if not parents:
        return cmap
    out = dict(cmap)
    for pp in parents:
        out[pp] = [c for c in out[pp] if c not in cut]
    return out


def tree(root: int, jcmap: Mapping[int, Sequence[int]]) -> list[int]:
    """`root` and its descendants in a `job_cmap` map (unsorted)."""
    pids = [root]
    todo = list(jcmap.get(root, ()))
    while todo:
        c = todo.pop()
        pids.append(c)
        todo.extend(jcmap.get(c, ()))
    return pids


def profile_target(root: int, cmdline: Sequence[str], cmap: Mapping[int, Sequence[int]],
                   cand: Container[int]) -> int:
    """The process to profile: under a torchrun agent, its first rank (the lowest candidate
    child); else the root."""
    if any(m in " ".join(cmdline[:3]) for m in TORCHRUN_MARKS):
        ranks = sorted(k for k in cmap.get(root, ()) if k in cand)
        if ranks:
            return ranks[0]
    return root
