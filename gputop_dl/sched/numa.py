"""Where a queued job's threads run on a box with several NUMA nodes: one node's cores when it fits there.

Pure logic for `gputop-dl queue` (engine/queue_plan.py applies it: the job is started with
its CPU affinity set to the node's CPUs). A node's budget is its CPUs this process may use
(the machine profile's NUMA layout, collect/boxprofile/cpus.py, less what the affinity or
cpuset leaves out); what is used of it is the solo CPU need (cached baseline) of the jobs
placed there and still running. A job is placed on one node when its need fits in that node's
free cores: the node near its GPU first (NVML's NUMA node of the GPU, where it fits), else the
node with the most free cores (the lowest number on a tie). It is left unpinned, on every
allowed CPU, where the box has one node, where its need is unknown (no cached baseline) or
where no single node has room: pinning a job to fewer cores than it needs would slow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from gputop_dl.text.cpulist import format_cpulist, parse_cpulist

__all__ = ["Node", "NumaPlacer", "Placement", "nodes_from"]

EPS = 1e-9


@dataclass(frozen=True)
class Node:
    node: int
    cpus: frozenset[int]  # the node's CPUs this process may use


@dataclass(frozen=True)
class Placement:
    """A job's CPUs (None: unpinned, every allowed CPU) and why."""

    cpus: frozenset[int] | None
    node: int | None
    why: str

    @property
    def cpulist(self) -> str | None:
        return None if self.cpus is None else format_cpulist(self.cpus)


def nodes_from(numa: Iterable[Mapping[str, object]], allowed: Iterable[int]) -> list[Node]:
    """The profile's NUMA nodes (`cpus` part of `gputop-dl.machine/1`), each cut to the allowed
    CPUs; nodes left with none are dropped."""
    ok = frozenset(allowed)
    out = []
    for n in numa:
        cpus = parse_cpulist(str(n.get("cpus") or "")) & ok
        node = n.get("node")
        if cpus and isinstance(node, int):
            out.append(Node(node, cpus))
    return sorted(out, key=lambda n: n.node)


@dataclass
class NumaPlacer:
    """The nodes and the jobs placed on them (job name -> (node, cores))."""

    nodes: Sequence[Node]
    placed: dict[str, tuple[int, float]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return len(self.nodes) > 1

    def free(self, node: Node) -> float:
        return len(node.cpus) - sum(c for n, c in self.placed.values() if n == node.node)

    def place(self, name: str, cores: float, near: int | None = None) -> Placement:
        """Choose `name`'s CPUs for a solo need of `cores` (0: unknown), nearest its GPU's
        node `near` where that fits; the choice is kept until `release(name)`."""
        if not self.active:
            return Placement(None, None, "one NUMA node: every allowed CPU")
        if cores <= 0:
            return Placement(None, None, "CPU need unknown (no cached solo baseline): every allowed CPU")
        fits = [n for n in self.nodes if self.free(n) + EPS >= cores]
        if not fits:
            most = max(self.free(n) for n in self.nodes)
            return Placement(None, None, f"needs {cores:.1f} cores, no node has that free "
                             f"(at most {max(0.0, most):.1f}): every allowed CPU")
        best = next((n for n in fits if n.node == near), None)
        if best is None:
            best = max(fits, key=lambda n: (self.free(n), -n.node))
        free = self.free(best)
        self.placed[name] = (best.node, cores)
        by = " (its GPU's node)" if best.node == near else ""
        return Placement(best.cpus, best.node,
                         f"NUMA node {best.node}{by}: CPUs {format_cpulist(best.cpus)}, "
                         f"{free:.1f} free cores for a need of {cores:.1f}")

    def release(self, name: str) -> None:
        self.placed.pop(name, None)
