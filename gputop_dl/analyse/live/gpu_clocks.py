"""GPU clocks, PCIe links and NUMA placement in the live verdict.

Pure functions over one tick's `GpuSample`s (NVML's throttle shares, link state and the CPUs
near each GPU, collect/nvml/gpus.py), `GpuProcess`es (with each process's allowed CPUs,
collect/proc/affinity.py) and the jobs. Three findings, each an evidence line with its fix:

- **throttled clocks**: a GPU a job uses had its clocks held down by a reason (power cap,
  thermal, power brake, ...) for THROTTLE_FINDING or more of the last counter interval. Several
  jobs on it share its power and heat budget: the line names them all;
- **PCIe link below its maximum**: only while the GPU is busy (util >= LINK_BUSY): idle GPUs
  drop to Gen1 to save power, which is normal;
- **far NUMA node**: a job's GPU process may run on CPUs that are not near its GPU. Nothing is
  said where every allowed CPU is near it (single-node boxes: every CPU is).

None of them changes the verdict's kind or slowdown: they say why a GPU job can be slower than
its CPU and GPU waits explain. Shown by presenters through `throttle_text` and `pcie_text`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from gputop_dl.text.cpulist import format_cpulist, parse_cpulist

if TYPE_CHECKING:
    from gputop_dl.snapshot import GpuProcess, GpuSample, JobSample
    from gputop_dl.analyse.verdict_types import Verdict

THROTTLE_SHOWN = 0.005  # a reason's share shown at all (rounds to 1 %)
THROTTLE_FINDING = 0.05  # a reason holding a job's GPU down this share of the time: a finding
LINK_BUSY = 0.5  # GPU util from which a link below its maximum is a finding
# how each counter is named; "low_util" (clocks lowered because the GPU is nearly idle) is no
# slowdown of a job and is never shown; the SW/HW thermal counters fold into "thermal"
NAMES = {"power": "power", "thermal": "thermal", "hw_power_brake": "power brake",
         "sync_boost": "sync boost", "board_limit": "board limit", "reliability": "reliability"}
_THERMAL = ("thermal", "sw_thermal", "hw_thermal")
_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}  # per lane, per direction
_FIX = {
    "power": "{gpu} runs into its power limit: the jobs on it share that budget; spread them over "
             "GPUs, or see the limit with `nvidia-smi -q -d POWER`",
    "thermal": "{gpu} slows down for heat: check its cooling and airflow (`nvidia-smi -q -d "
               "TEMPERATURE`); jobs sharing it heat it together",
    "power brake": "{gpu} is held down by a hardware power brake (the PSU or an external signal): "
                   "a matter for the machine's admin (`nvidia-smi -q -d PERFORMANCE`)",
}
_FIX_OTHER = "{gpu}: `nvidia-smi -q -d PERFORMANCE` lists its clock event reasons"


def throttled(g: GpuSample, min_share: float = THROTTLE_SHOWN) -> list[tuple[str, float]]:
    """(name, share) of each reason that held the GPU's clocks down at least `min_share` of the
    last counter interval, largest first (thermal: the largest of its counters)."""
    shares = dict(g.throttle)
    if not shares:
        return []
    thermal = [v for k in _THERMAL if (v := shares.get(k)) is not None]
    merged = {k: v for k, v in shares.items() if k in NAMES and k != "thermal" and v is not None}
    if thermal:
        merged["thermal"] = max(thermal)
    out = [(NAMES[k], v) for k, v in merged.items() if v >= min_share]
    return sorted(out, key=lambda kv: -kv[1])


def throttle_text(g: GpuSample, limit: int = 2, short: bool = False) -> str:
    """"throttled: power 34%, thermal 5%" ("" when no reason held the clocks down); `short`:
    "power 34%" (under a heading that says what it is)."""
    t = throttled(g)
    if not t:
        return ""
    return ("" if short else "throttled: ") + ", ".join(f"{name} {share:.0%}"
                                                        for name, share in t[:limit])


def link_text(gen: int | None, width: int | None) -> str:
    if gen is None and width is None:
        return ""
    return (f"Gen{gen}" if gen is not None else "Gen?") + (f" x{width}" if width is not None else "")


def link_below_max(g: GpuSample) -> bool:
    """The link runs below its maximum while the GPU is busy (idle GPUs downtrain: not counted)."""
    if g.util is None or g.util < LINK_BUSY:
        return False
    return ((g.pcie_link_gen is not None and g.pcie_link_gen_max is not None
             and g.pcie_link_gen < g.pcie_link_gen_max)
            or (g.pcie_link_width is not None and g.pcie_link_width_max is not None
                and g.pcie_link_width < g.pcie_link_width_max))


def _gb(bps: int | None) -> str:
    return "–" if bps is None else f"{bps / 1e9:.1f}" if bps >= 1e8 else f"{bps / 1e9:.2f}"


def pcie_text(g: GpuSample, compact: bool = False) -> str:
    """"Gen5 x16 rx 1.2 tx 0.3 GB/s", with the maximum where the link runs below it while busy;
    compact: "G5x16 ↓1.2 ↑0.3"."""
    link = link_text(g.pcie_link_gen, g.pcie_link_width)
    rates = g.pcie_rx_bytes_per_s is not None or g.pcie_tx_bytes_per_s is not None
    if compact:
        out = link.replace("Gen", "G").replace(" ", "")
        if link_below_max(g):
            out += "<" + link_text(g.pcie_link_gen_max, g.pcie_link_width_max).replace("Gen", "G").replace(" ", "")
        if rates:
            out += f" ↓{_gb(g.pcie_rx_bytes_per_s)} ↑{_gb(g.pcie_tx_bytes_per_s)}"
        return out.strip()
    out = link
    if link_below_max(g):
        out += f" (max {link_text(g.pcie_link_gen_max, g.pcie_link_width_max)})"
    if rates:
        out += f" rx {_gb(g.pcie_rx_bytes_per_s)} tx {_gb(g.pcie_tx_bytes_per_s)} GB/s"
    return out.strip()


def _bandwidth(gen: int | None, width: int | None) -> float | None:
    if gen is None or width is None or gen not in _LANE_GBPS:
        return None
    return _LANE_GBPS[gen] * width


@dataclass
class GpuFindings:
    """Evidence lines, fixes and the figures behind them (the verdict's evidence `gpu_findings`)."""

    lines: list[str] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)  # the findings as JSON


def _job_procs(jobs: Sequence[JobSample],
               gprocs: Sequence[GpuProcess]) -> dict[str, list[GpuProcess]]:
    out: dict[str, list[GpuProcess]] = {}
    for j in jobs:
        pids = set(j.pids) | ({j.pid} if j.pid is not None else set())
        out[j.name] = [p for p in gprocs if p.pid in pids]
    return out


def findings(jobs: Sequence[JobSample], gprocs: Sequence[GpuProcess],
             gpus: Sequence[GpuSample]) -> GpuFindings:
    """The throttle, PCIe-link and NUMA findings for the GPUs these jobs use."""
    out = GpuFindings()
    by_index = {g.index: g for g in gpus if not g.error}
    procs = _job_procs(jobs, gprocs)
    users: dict[int, list[str]] = {}
    for name, ps in procs.items():
        for i in sorted({p.gpu_index for p in ps}):
            users.setdefault(i, []).append(name)
    for i, names in sorted(users.items()):
        g = by_index.get(i)
        if g is None:
            continue
        who = ", ".join(names)
        hot = throttled(g, THROTTLE_FINDING)
        if hot:
            clock = (f"; SM clock {g.sm_clock_mhz} of {g.sm_clock_max_mhz} MHz"
                     if g.sm_clock_mhz is not None and g.sm_clock_max_mhz else "")
            shared = "; the jobs on it share its power and heat budget" if len(names) > 1 else ""
            out.lines.append(f"GPU {i} ({who}): clocks held down by "
                             + ", ".join(f"{n} {s:.0%}" for n, s in hot)
                             + f" of the last interval (NVML counters){clock}{shared}")
            for n, _ in hot[:1]:
                out.recommendations.append(_FIX.get(n, _FIX_OTHER).format(gpu=f"GPU {i}"))
            out.evidence.append({"kind": "throttle", "gpu": i, "jobs": names,
                                 "throttle": {n: round(s, 3) for n, s in hot}})
        if link_below_max(g):
            now = _bandwidth(g.pcie_link_gen, g.pcie_link_width)
            top = _bandwidth(g.pcie_link_gen_max, g.pcie_link_width_max)
            less = f" (about {top / now:.0f}× less host↔GPU bandwidth)" if now and top else ""
            out.lines.append(f"GPU {i} ({who}): PCIe link at "
                             f"{link_text(g.pcie_link_gen, g.pcie_link_width)} while "
                             f"{g.util:.0%} busy, below its "
                             f"{link_text(g.pcie_link_gen_max, g.pcie_link_width_max)}{less}")
            out.recommendations.append(
                f"GPU {i}'s link trained below its maximum: check the slot, riser and BIOS PCIe "
                "settings (`nvidia-smi -q -d PCI`, `lspci -vv`: LnkSta vs LnkCap)")
            out.evidence.append({"kind": "pcie-link", "gpu": i, "jobs": names,
                                 "link_gen": g.pcie_link_gen, "link_gen_max": g.pcie_link_gen_max,
                                 "link_width": g.pcie_link_width,
                                 "link_width_max": g.pcie_link_width_max})
    for name, ps in procs.items():
        for p in ps:
            _numa(out, name, p, by_index.get(p.gpu_index))
    return out


def _numa(out: GpuFindings, job: str, p: GpuProcess, g: GpuSample | None) -> None:
    if g is None or not g.cpu_affinity or not p.cpus_allowed:
        return
    near, allowed = parse_cpulist(g.cpu_affinity), parse_cpulist(p.cpus_allowed)
    if not near or not allowed or allowed <= near:
        return  # every CPU it may use is near its GPU (single-node boxes: always)
    node = f"its NUMA node {g.numa_node}" if g.numa_node is not None else "its NUMA node"
    far = allowed - near
    if far == allowed:
        out.lines.append(f"{job} feeds GPU {g.index} from CPUs that are not near it: pid {p.pid} "
                         f"may run on CPUs {p.cpus_allowed} only ({node}: CPUs {g.cpu_affinity})")
    else:
        out.lines.append(f"{job} feeds GPU {g.index} partly from CPUs that are not near it: "
                         f"{len(far)} of the {len(allowed)} CPUs pid {p.pid} may run on "
                         f"({format_cpulist(far)}) are on another node ({node}: CPUs "
                         f"{g.cpu_affinity})")
    start = (f"`numactl --cpunodebind={g.numa_node} --membind={g.numa_node}`"
             if g.numa_node is not None else f"`numactl --physcpubind={g.cpu_affinity}`")
    out.recommendations.append(
        f"pin {job} near GPU {g.index}: `taskset -a -cp {g.cpu_affinity} {p.pid}` now (its "
        f"threads; memory already allocated stays put), or start it under {start}")
    out.evidence.append({"kind": "numa", "gpu": g.index, "jobs": [job], "pid": p.pid,
                         "cpus_allowed": p.cpus_allowed, "cpus_near": g.cpu_affinity,
                         "numa_node": g.numa_node})


def with_gpu_findings(v: Verdict, jobs: Sequence[JobSample], gprocs: Sequence[GpuProcess],
                      gpus: Sequence[GpuSample]) -> Verdict:
    """The verdict with the GPU clock, PCIe-link and NUMA findings added to its evidence."""
    f = findings(jobs, gprocs, gpus)
    if not f.lines:
        return v
    return v.replace(evidence_lines=v.evidence_lines + tuple(f.lines),
                     recommendations=v.recommendations + tuple(f.recommendations),
                     evidence={**v.evidence, "gpu_findings": f.evidence})
