"""The box's GPUs via NVML: model, memory, PCIe link now and at most, NUMA node, nearby CPUs, peak.

`read_gpus(nvml)` takes an open `collect.nvml.Nvml` (a fake one in tests). The link's
theoretical peak is per direction: lanes x the generation's rate after line encoding
(`LANE_GBPS`). GPUs with processes on them are marked `busy`: the copy measurements
(links.py) refuse them. No NVIDIA GPU: one line, `gpus` empty.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gputop_dl.collect.boxprofile.part import Part

if TYPE_CHECKING:
    from gputop_dl.collect.nvml.gpus import Nvml

__all__ = ["LANE_GBPS", "link_peak_bps", "read_gpus"]

# GB/s per lane and direction after encoding: 8b/10b for gen 1-2, 128b/130b for 3-5, FLIT for 6
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def link_peak_bps(gen: int | None, width: int | None) -> float | None:
    """The link's theoretical peak in bytes/s per direction; None when gen or width is unknown."""
    if gen not in LANE_GBPS or not width:
        return None
    return LANE_GBPS[gen] * width * 1e9


def read_gpus(nvml: Nvml | None) -> tuple[list[Part], str | None]:
    """(one dict per GPU, a note line or None)."""
    if nvml is None or nvml.status != "ok":
        detail = getattr(nvml, "status_detail", None) or "NVML is not available"
        detail = re.sub(r"[;,.]?\s*workloads train on the CPU\.?", "", detail).strip()
        return [], detail if detail.lower().startswith("no nvidia gpu") else f"no NVIDIA GPU: {detail}"
    samples = nvml.sample()
    if not samples:
        return [], "no NVIDIA GPU: NVML lists no device"
    users: dict[int, list[int]] = {}
    for p in nvml.processes():
        users.setdefault(p.gpu_index, []).append(p.pid)
    out = []
    for g in samples:
        out.append({
            "index": g.index, "name": g.name, "uuid": g.uuid, "mem_total": g.mem_total,
            "mem_used": g.mem_used, "link_gen": g.pcie_link_gen, "link_width": g.pcie_link_width,
            "link_gen_max": g.pcie_link_gen_max, "link_width_max": g.pcie_link_width_max,
            "link_peak_bps": link_peak_bps(g.pcie_link_gen, g.pcie_link_width),
            "link_peak_max_bps": link_peak_bps(g.pcie_link_gen_max, g.pcie_link_width_max),
            "numa_node": g.numa_node, "cpu_affinity": g.cpu_affinity,
            "busy_pids": sorted(users.get(g.index, [])), "copies": [], "note": g.error,
        })
    return out, None
