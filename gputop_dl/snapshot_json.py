"""The `--once --json` shape of a tick's samples: tuples as arrays, a job's composite fields as objects.

`Snapshot.to_json` (snapshot.py) builds the document (contract: docs/contracts.md,
schemas/snapshot.json) from its samples as `dataclasses.asdict` gives them; these functions
shape each one: a GPU's throttle shares and PCIe figures as objects, a job's process tree,
unreadable figures, phase shares, CPU wait, waits, stuck call and memory events as objects or
arrays. They take and return plain dicts: no snapshot type is imported here.
"""

from __future__ import annotations

from typing import Any


def gpu_json(g: dict[str, Any]) -> dict[str, Any]:
    """An asdict'ed `GpuSample`'s object: every field, with `throttle` an object (null: no
    counter) and `pcie` one."""
    out = sample_json(g)
    out["throttle"] = dict(g["throttle"]) or None
    out["pcie"] = {"rx_bytes_per_s": g["pcie_rx_bytes_per_s"],
                   "tx_bytes_per_s": g["pcie_tx_bytes_per_s"],
                   "link_gen": g["pcie_link_gen"], "link_gen_max": g["pcie_link_gen_max"],
                   "link_width": g["pcie_link_width"], "link_width_max": g["pcie_link_width_max"]}
    return out


def sample_json(d: dict[str, Any]) -> dict[str, Any]:
    """An asdict'ed sample (a host's, a job's, a GPU's) as plain JSON: tuples become lists, and
    a job's composite fields objects."""
    out: dict[str, Any] = {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}
    if isinstance(out.get("distributed"), dict):  # a job's, asdict'ed: its ranks as a list
        out["distributed"] = dict(out["distributed"], ranks=list(out["distributed"]["ranks"]))
    if out.get("procs"):  # a job's process tree: objects, not arrays
        out["procs"] = [p._asdict() for p in d["procs"]]
    if "limited" in out:  # a job's unreadable figures (collect/jobs/privilege.py): objects
        out["limited"] = [{"what": w, "why": y} for w, y in d["limited"]]
    if "phase_shares" in out:  # sampled phase shares of a found job: an object, null when none
        out["phase_shares"] = {p: v for p, v in d["phase_shares"]} or None
    if "cpu_wait_fraction" in out:  # a job's CPU wait: also as one object
        out["cpu_wait"] = {"trainer": out.get("cpu_wait_trainer"),
                           "workers": out.get("cpu_wait_workers")}
        # what it waits on, each a share 0..1: the I/O wait split into the part
        # that re-reads evicted pages (memory) and the rest (io)
        io, mem = out.get("io_wait_fraction"), out.get("memory_wait_fraction")
        out["waits"] = {"cpu": out.get("cpu_wait_fraction"),
                        "io": io if io is None or mem is None else round(max(0.0, io - mem), 4),
                        "memory": mem, "gpu": out.get("gpu_wait_fraction")}
    if out.get("stuck"):  # a stuck job (analyse/live/stuck.py): its tuples as arrays
        out["stuck"] = stuck_json(d["stuck"])
    if out.get("memory_limited_refaults") is not None:  # a host's: group -> bytes/s, an object
        out["memory_limited_refaults"] = dict(d["memory_limited_refaults"])
    if "mem_events" in out:  # the cgroup's limit events this interval: an object, null: not read
        out["mem_events"] = dict(d["mem_events"]) or None
    return out


def stuck_json(st: dict[str, Any]) -> dict[str, Any]:
    """An asdict'ed `Stuck` (stuck.py) with arrays and objects for its tuples."""
    return dict(st, stack=list(st["stack"]),
                missing_ranks=[{"rank": r, "frame": f} for r, f in st["missing_ranks"]])
