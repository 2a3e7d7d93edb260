"""The fleet's cells, shared by `--nodes ... --once` (rich tables here) and the live fleet view
(present/tui/fleet_app.py): one row per node, all jobs with their node, the distributed jobs.

Nodes, jobs and the distributed groups are duck-typed (collect/fleet/nodes.py's `Node`, `NodeJob`
and `group_distributed` dicts): present never imports collect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from rich.table import Table

from gputop_dl.analyse.live.distributed import JobLike, NodeLike
from gputop_dl.present.verdict_text import row_slowdown
from gputop_dl.text.fmt import DASH, GiB, num, pct, secs, size
from gputop_dl.text.safe import text

STALE_S = 10.0  # a node whose latest sample is older than this is "stale"


class FleetJob(JobLike, Protocol):
    """What the cells read of a node's job (`collect.fleet.nodes.NodeJob`)."""

    @property
    def cpu_cores(self) -> float | None: ...
    @property
    def stall_fraction(self) -> float | None: ...
    @property
    def slowdown(self) -> float | None: ...
    @property
    def slowdown_at_least(self) -> float | None: ...
    @property
    def slowdown_source(self) -> str | None: ...
    @property
    def outside_slowdown(self) -> float | None: ...
    @property
    def gpu_mem(self) -> float | None: ...
    @property
    def phase(self) -> str | None: ...


class FleetNode(NodeLike, Protocol):
    """What the cells read of a node (`collect.fleet.nodes.Node`), beyond what the grouping reads."""

    @property
    def error(self) -> str | None: ...
    @property
    def age_s(self) -> float | None: ...
    @property
    def cpus(self) -> float | None: ...
    @property
    def cpu_busy(self) -> float | None: ...
    @property
    def load1(self) -> float | None: ...
    @property
    def gpus(self) -> Sequence[Mapping[str, Any]]: ...  # index, util, mem_used, mem_total
    @property
    def jobs(self) -> Sequence[FleetJob]: ...
    @property
    def verdict(self) -> str | None: ...
    @property
    def confidence(self) -> float | None: ...
    @property
    def name(self) -> str | None: ...  # the node list's name for it
    @property
    def mode(self) -> str | None: ...


class FleetSnap(Protocol):
    """What the live fleet view reads of one poll (`collect.fleet.poll.FleetSnapshot`)."""

    @property
    def time(self) -> float: ...
    @property
    def nodes(self) -> Sequence[FleetNode]: ...
    @property
    def distributed(self) -> Sequence[Mapping[str, Any]]: ...  # analyse.live.distributed's groups
    @property
    def poll_s(self) -> float | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def last_ok(self) -> Mapping[str, float]: ...  # address -> when it last answered

# (header, right-justified)
NODE_COLUMNS = (("node", False), ("host", False), ("state", False), ("GPUs", True),
                ("GPU util", True), ("GPU mem", True), ("CPU busy", True), ("load", True),
                ("jobs", True), ("verdict", False))
JOB_COLUMNS = (("node", False), ("job", False), ("pid", True), ("status", False),
               ("CPU cores", True), ("data-wait", True), ("step", True), ("slowdown", True),
               ("GPU mem", True), ("ranks", False))
DIST_COLUMNS = (("run id", False), ("job", False), ("world", True), ("ranks seen", True),
                ("missing", False), ("nodes: ranks", False), ("slowest step", False))


def node_state(n: FleetNode, now: float | None = None, last_ok: float | None = None) -> tuple[str, str]:
    """(state text, tone): ok / stale N s / the error (unreachable (...), not a gputop-dl
    exporter, not Prometheus text); tone is "ok", "warn" or "err"."""
    if not n.ok:
        why = n.error or "unreachable"
        if last_ok is not None and now is not None and why.startswith("unreachable"):
            why = f"unreachable for {max(0.0, now - last_ok):.0f} s" + why[len("unreachable"):]
        return why, "err"
    if n.age_s is not None and n.age_s >= STALE_S:
        return f"stale {n.age_s:.0f} s", "warn"
    return "ok", "ok"


def node_cells(n: FleetNode) -> list[str]:
    """The cells after node and state: host, GPUs, GPU util, GPU mem, CPU busy, load, jobs,
    verdict (dashes for a node that did not answer)."""
    if not n.ok:
        return [DASH] * 8
    utils = [g["util"] for g in n.gpus if g.get("util") is not None]
    used = [g["mem_used"] for g in n.gpus if g.get("mem_used") is not None]
    total = [g["mem_total"] for g in n.gpus if g.get("mem_total") is not None]
    mem = f"{sum(used) / GiB:.1f}/{sum(total) / GiB:.0f} GiB" if used and total else DASH
    cpu = pct(n.cpu_busy) + (f" of {n.cpus:g}" if n.cpus is not None else "")
    verdict = DASH if not n.verdict else (
        f"{n.verdict}" + (f" ({pct(n.confidence)})" if n.confidence is not None else ""))
    return [n.hostname or DASH, str(len(n.gpus)), pct(sum(utils) / len(utils)) if utils else DASH,
            mem, cpu if n.cpu_busy is not None else DASH, num(n.load1, ".1f"), str(len(n.jobs)),
            verdict]


def ranks_text(j: FleetJob) -> str:
    ranks = [r["rank"] for r in getattr(j, "ranks", ()) if r.get("rank") is not None]
    if not ranks:
        return DASH
    ws = getattr(j, "world_size", None)
    return ",".join(map(str, ranks)) + (f" of {ws}" if ws else "")


def slowdown_shown(j: FleetJob) -> tuple[str, float | None]:
    """A node's job's slowdown as its row shows it, and the figure shown (for its tone;
    present/verdict_text.py `row_slowdown`): with its source, or the outside load's figure
    where that is larger ("3.70× out")."""
    return row_slowdown(j.slowdown, j.slowdown_source, None, j.slowdown_at_least,
                        j.outside_slowdown)


def job_cells(n: FleetNode, j: FleetJob) -> list[str]:
    return [n.label, j.name or DASH, DASH if j.pid is None else str(j.pid), j.status or DASH,
            num(j.cpu_cores, ".2f"), pct(j.stall_fraction), secs(j.step_time_s),
            slowdown_shown(j)[0], size(int(j.gpu_mem)) if j.gpu_mem is not None else DASH,
            ranks_text(j)]


def dist_cells(d: Mapping[str, Any]) -> list[str]:
    ws = d["world_size"]
    seen = f"{len(d['ranks_seen'])}/{ws if ws else '?'}"
    if d["missing_ranks"]:
        where = d.get("missing_last_seen") or {}
        missing = ", ".join(f"{r}" + (f" (was on {where[str(r)]})" if str(r) in where else "")
                            for r in d["missing_ranks"])
    else:
        missing = DASH if ws else "? (world size unknown)"
    nodes = "; ".join(f"{e['node']}: {','.join(map(str, e['ranks'])) or '?'}" for e in d["nodes"])
    slow = DASH if d["slowest_step_s"] is None else f"{secs(d['slowest_step_s'])} on {d['slowest_node']}"
    return [d["run_id"], d["job"], str(ws) if ws else "?", seen, missing, nodes, slow]


def _table(title: str, columns: Iterable[tuple[str, bool]]) -> Table:
    t = Table(title=title, title_justify="left")
    for col, right in columns:
        t.add_column(col, justify="right" if right else "left")
    return t


def nodes_table(nodes: Iterable[FleetNode]) -> Table:
    t = _table("Nodes", NODE_COLUMNS)
    for n in nodes:
        state, tone = node_state(n)
        host, *rest = node_cells(n)
        t.add_row(text(n.label), text(host), text(state), *map(text, rest),
                  style="red" if tone == "err" else None)
    return t


def fleet_jobs_table(nodes: Iterable[FleetNode]) -> Table:
    t = _table("Jobs (all nodes)", JOB_COLUMNS)
    for n in nodes:
        for j in n.jobs:
            t.add_row(*map(text, job_cells(n, j)))
    return t


def distributed_table(groups: Iterable[Mapping[str, Any]]) -> Table:
    t = _table("Distributed jobs (ranks across nodes)", DIST_COLUMNS)
    for d in groups:
        t.add_row(*map(text, dist_cells(d)), style=None if not d["missing_ranks"] else "yellow")
    return t
