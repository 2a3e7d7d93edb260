"""The ranks of each distributed job (one torchrun run id) gathered across the fleet's nodes.

Pure: it takes the nodes `collect/fleet/nodes.py` built from each node's metrics (duck-typed here, as
`NodeLike`: analyse never imports collect) and returns the rows the fleet view and
`--nodes --once --json` show under `distributed`. `collect.fleet.poll.FleetPoller` gets it handed in
by `runner/remote.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class JobLike(Protocol):
    """What the grouping reads of a node's job (`collect.fleet.nodes.NodeJob`)."""

    @property
    def name(self) -> str | None: ...  # None: the exporter's series had no job label
    @property
    def pid(self) -> int | None: ...
    @property
    def status(self) -> str | None: ...
    @property
    def step_time_s(self) -> float | None: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def world_size(self) -> int | None: ...
    @property
    def ranks(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def launched(self) -> bool | None: ...


class NodeLike(Protocol):
    """What the grouping reads of a node (`collect.fleet.nodes.Node`)."""

    @property
    def ok(self) -> bool: ...
    @property
    def address(self) -> str: ...
    @property
    def hostname(self) -> str | None: ...
    @property
    def label(self) -> str: ...
    @property
    def jobs(self) -> Sequence[JobLike]: ...


def group_distributed(nodes: Sequence[NodeLike], last_seen: dict[tuple[str, int], str] | None = None
                      ) -> list[dict[str, Any]]:
    """The ranks of each distributed job (one torchrun run id) gathered across the nodes.

    Per run: world size (the largest any node reports), the ranks seen and those missing
    (0..world_size-1 not seen on any node that answered), each node's ranks, the slowest step
    time across nodes. `last_seen` ((run_id, rank) -> node label, kept by the live poller)
    names where a missing rank was last seen; it is updated in place."""
    entries = [(n, j) for n in nodes if n.ok for j in n.jobs if j.run_id]
    # one rank process shown by two exporters of one host (two launches, or serve beside a
    # launch: the other lists it as a found job) counts once, the launch's own entry first
    claimed: dict[tuple[str | None, str | None, int], str] = {}  # (run, host, rank pid) -> the node entry that showed it
    dups: dict[int, dict[str, Any]] = {}  # index into entries -> its duplicate note
    for i, (n, j) in sorted(enumerate(entries), key=lambda e: e[1][1].launched is not True):
        keys = {(j.run_id, n.hostname, r["rank_pid"]) for r in j.ranks if r.get("rank_pid")}
        if keys and all(k in claimed for k in keys):
            dups[i] = {"node": n.label, "same_as": claimed[next(iter(keys))], "job": j.name}
        else:
            claimed.update(dict.fromkeys(keys, n.label))
    runs: dict[str, dict[str, Any]] = {}
    for i, (n, j) in enumerate(entries):
        g = runs.setdefault(j.run_id or "", {"run_id": j.run_id, "jobs": [], "world_size": None,
                                       "nodes": [], "duplicates": []})
        if i in dups:
            g["duplicates"].append(dups[i])
            continue
        if j.name not in g["jobs"]:
            g["jobs"].append(j.name)
        if j.world_size is not None:
            g["world_size"] = max(g["world_size"] or 0, j.world_size)
        ranks = sorted({r["rank"] for r in j.ranks if r.get("rank") is not None})
        g["nodes"].append({"node": n.label, "address": n.address, "hostname": n.hostname,
                           "job": j.name, "pid": j.pid, "ranks": ranks,
                           "step_time_s": j.step_time_s, "status": j.status})
    out = []
    for run_id in sorted(runs):
        g = runs[run_id]
        seen = sorted({r for e in g["nodes"] for r in e["ranks"]})
        ws = g["world_size"]
        missing = sorted(set(range(ws)) - set(seen)) if ws else []
        if last_seen is not None:
            for e in g["nodes"]:
                for r in e["ranks"]:
                    last_seen[(run_id, r)] = e["node"]
        steps = [(e["step_time_s"], e["node"]) for e in g["nodes"] if e["step_time_s"] is not None]
        slow = max(steps) if steps else (None, None)
        out.append({"run_id": run_id, "job": ", ".join(g["jobs"]), "world_size": ws,
                    "ranks_seen": seen, "missing_ranks": missing,
                    "missing_last_seen": {str(r): last_seen[(run_id, r)] for r in missing
                                          if last_seen and (run_id, r) in last_seen},
                    "complete": ws is not None and not missing,
                    "nodes": g["nodes"], "slowest_step_s": slow[0], "slowest_node": slow[1],
                    "duplicates": g["duplicates"]})
    return out
