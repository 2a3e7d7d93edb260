"""How many jobs of a workload file fit on this box at once, and which resource runs out first.

Pure logic for `gputop-dl plan`: each job's solo demand per resource (cores, memory, disk read
rate, PCIe host-to-device rate, GPU memory; None where unknown) against the machine profile's
capacity. Jobs fit while every resource's summed solo demand is at most its capacity: past it
the co-run shares that resource, and each job slows by at least demand / capacity. On the
2-core box a pair of MobileNet jobs needing 2.06 cores already slowed 1.14x and 1.29x
(docs/machine.md), more than the 10 % a "fit" allows, so there is no slack above the capacity.
Jobs are taken smallest first (by their largest share of any resource); a resource nobody's
demand is known for never binds and is listed as unknown. A GPU's memory and link belong to it
(GPU_KEYS): a job is checked against the GPUs it is placed on (`JobDemand.gpus`, its demand
split evenly over them), never against a pool summed over the box's GPUs; a job whose GPUs are
not known yet goes to the GPU with the most room.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from gputop_dl.workload import SessionSpec, Workload

__all__ = ["GPU_KEYS", "RESOURCES", "JobDemand", "ResourceFit", "FitPlan", "capacities",
           "gpu_pools", "job_demands", "plan_fit"]

# (key, label, unit) in the order the table lists them
RESOURCES: tuple[tuple[str, str, str], ...] = (
    ("cores", "cores", "cores"), ("memory", "memory", "bytes"),
    ("disk_read", "disk read rate", "bytes/s"), ("pcie", "PCIe host→device", "bytes/s"),
    ("gpu_memory", "GPU memory", "bytes"),
)
GPU_KEYS = ("pcie", "gpu_memory")  # per GPU: each job against its own GPUs' capacity


@dataclass(frozen=True)
class JobDemand:
    """One job's solo demand per resource key (absent or None: unknown) and where it came from."""

    name: str
    demand: dict[str, float | None]
    source: str  # "measured (cached solo baseline)" | "estimate from the file"
    gpus: tuple[int, ...] = ()  # the GPUs it runs on (empty: none, or not placed yet)


@dataclass(frozen=True)
class ResourceFit:
    key: str
    label: str
    unit: str
    capacity: float | None
    capacity_source: str
    total: float | None  # summed demand of every job (None: some demand unknown)
    known: int  # jobs whose demand is known
    fit: int | None  # jobs that fit on this resource alone, smallest first (None: unknown)


@dataclass(frozen=True)
class FitPlan:
    jobs: tuple[JobDemand, ...]
    resources: tuple[ResourceFit, ...]
    fit: int  # jobs that fit at once on every resource
    binding: str | None  # the resource key that runs out first (None: all jobs fit)
    order: tuple[str, ...] = field(default=())  # the jobs that fit, in the order taken

    @property
    def asked(self) -> int:
        return len(self.jobs)


def _fit_one(values: list[float], cap: float) -> int:
    acc, n = 0.0, 0
    for v in sorted(values):
        acc += v
        if acc > cap * (1 + 1e-9):
            break
        n += 1
    return n


class _Pools:
    """What is used of each GPU's own capacity (GPU_KEYS), as jobs are taken."""

    def __init__(self, pools: Mapping[str, Mapping[int, float]]):
        self.cap = {k: dict(v) for k, v in pools.items() if v}
        self.used: dict[tuple[str, int], float] = {}

    def spread(self, key: str, j: JobDemand) -> list[tuple[int, float]] | None:
        """(GPU, its part of the demand) for job `j`; None: `key` has no per-GPU capacity."""
        cap, v = self.cap.get(key), j.demand.get(key)
        if cap is None or v is None:
            return None
        gpus = [g for g in j.gpus if g in cap]
        if j.gpus and not gpus:  # on GPUs the profile does not know: unknown, never binds
            return None
        gpus = gpus or [max(cap, key=lambda g: (cap[g] - self.used.get((key, g), 0.0), -g))]
        return [(g, v / len(gpus)) for g in gpus]

    def over(self, key: str, j: JobDemand) -> float | None:
        """The largest share of a GPU's capacity `j` would bring it to, where above 1."""
        parts = self.spread(key, j)
        if parts is None:
            return None
        worst = max((self.used.get((key, g), 0.0) + v) / (self.cap[key][g] or 1e-300)
                    for g, v in parts)
        return worst if worst > 1 + 1e-9 else None

    def take(self, key: str, j: JobDemand) -> None:
        for g, v in self.spread(key, j) or ():
            self.used[(key, g)] = self.used.get((key, g), 0.0) + v


def _fit_pooled(key: str, jobs: list[JobDemand], pools: Mapping[str, Mapping[int, float]]) -> int:
    p = _Pools(pools)
    n = 0
    for j in sorted((j for j in jobs if j.demand.get(key) is not None),
                    key=lambda j: j.demand.get(key) or 0.0):
        if p.over(key, j) is not None:
            break
        p.take(key, j)
        n += 1
    return n


def plan_fit(jobs: list[JobDemand], capacity: dict[str, tuple[float | None, str]],
             pools: Mapping[str, Mapping[int, float]] | None = None) -> FitPlan:
    """`capacity`: resource key -> (capacity or None, where it came from); `pools`: for
    GPU_KEYS, GPU index -> that GPU's own capacity (gpu_pools), checked per GPU."""
    pools = {k: v for k, v in (pools or {}).items() if k in GPU_KEYS and v}
    res = []
    for key, label, unit in RESOURCES:
        cap, src = capacity.get(key, (None, "unknown"))
        vals = [j.demand.get(key) for j in jobs]
        known = [v for v in vals if v is not None]
        total = sum(known) if len(known) == len(vals) and vals else None
        unknown = len(vals) - len(known)
        if key in pools and known:
            fit: int | None = _fit_pooled(key, jobs, pools) + unknown
        else:
            fit = _fit_one(known, cap) + unknown if cap is not None and known else None
        res.append(ResourceFit(key, label, unit, cap, src, total, len(known), fit))

    def share(j: JobDemand) -> float:
        s = [v / c for k, _, _ in RESOURCES
             if (v := j.demand.get(k)) is not None and (c := capacity.get(k, (None, ""))[0])]
        return max(s, default=0.0)

    taken: list[JobDemand] = []
    used = {k: 0.0 for k, _, _ in RESOURCES}
    per_gpu = _Pools(pools)
    binding: str | None = None
    for j in sorted(jobs, key=share):
        over: dict[str, float] = {}
        for k, _, _ in RESOURCES:
            if k in pools:
                if (o := per_gpu.over(k, j)) is not None:
                    over[k] = o
            elif ((v := j.demand.get(k)) is not None and (c := capacity.get(k, (None, ""))[0])
                  is not None and used[k] + v > c * (1 + 1e-9)):
                over[k] = (used[k] + v) / (c or 1.0)
        if over:
            binding = max(over, key=lambda k: over[k])
            break
        for k, _, _ in RESOURCES:
            used[k] += j.demand.get(k) or 0.0
            per_gpu.take(k, j)
        taken.append(j)
    return FitPlan(tuple(jobs), tuple(res), len(taken), binding, tuple(j.name for j in taken))


def gpu_pools(p: Mapping[str, Any]) -> dict[str, dict[int, float]]:
    """Each GPU's own capacity per GPU_KEYS key: its measured pinned H2D rate from its own
    CPUs (else its link's peak) and its memory; GPUs without the figure are left out."""
    pcie: dict[int, float] = {}
    mem: dict[int, float] = {}
    for g in p.get("gpus") or ():
        i = int(g.get("index") or 0)
        near = [x["h2d_pinned_bps"] for x in g.get("copies") or ()
                if x.get("h2d_pinned_bps") and x.get("from") == "near"]
        if near or g.get("link_peak_bps"):
            pcie[i] = float(near[0] if near else g["link_peak_bps"])
        if g.get("mem_total"):
            mem[i] = float(g["mem_total"])
    return {"pcie": pcie, "gpu_memory": mem}


def capacities(p: Mapping[str, Any], available_now: float | None = None) -> dict[str, tuple[float | None, str]]:
    """The box's capacity per resource of sched/fit.py, and where each figure came from. The
    GPU resources are per GPU (the smallest GPU's figure here; `gpu_pools` has each one's).
    `available_now`: memory available now (else the profile's, when it was made)."""
    c, m = p.get("cpus") or {}, p.get("memory") or {}
    disks = [s for s in p.get("storage") or () if s.get("seq_bps") and s.get("page_cache_bypassed") is not False]
    gpus = p.get("gpus") or []
    h2d = [x["h2d_pinned_bps"] for g in gpus for x in g.get("copies") or ()
           if x.get("h2d_pinned_bps") and x.get("from") == "near"]
    peaks = [g["link_peak_bps"] for g in gpus if g.get("link_peak_bps")]
    mems = [g["mem_total"] for g in gpus if g.get("mem_total")]
    return {
        "cores": (c.get("usable_cpus"), "usable CPUs"),
        "memory": (available_now, "available now") if available_now is not None
        else (m.get("available"), "available when profiled"),
        "disk_read": (disks[0]["seq_bps"], f"measured, {', '.join(disks[0]['paths'])}")
        if disks else (None, "not measured"),
        "pcie": (min(h2d), "measured pinned H2D, per GPU") if h2d and len(h2d) == len(gpus)
        else (min(peaks), "link peak, per GPU") if peaks else (None, "no GPU"),
        "gpu_memory": (min(mems), "per GPU") if mems else (None, "no GPU"),
    }


def job_demands(spec: SessionSpec, solo_of: Callable[[Workload], Mapping[str, Any] | None]) -> list[JobDemand]:
    """Each workload's solo demand: its cached solo profile (`solo_of(w)`) where there is one,
    else an estimate from the file."""
    out = []
    for w in spec.workloads:
        solo = solo_of(w)
        gpus = tuple(w.gpus) if spec.cuda else ()
        if solo and solo.get("cpu_cores") is not None:
            out.append(JobDemand(w.name, {
                "cores": solo["cpu_cores"], "memory": solo.get("rss_peak"),
                "disk_read": solo.get("io_read"), "pcie": None,
                "gpu_memory": solo.get("gpu_mem_peak") if spec.cuda else None},
                "measured: cached solo baseline", gpus))
        elif w.is_command:
            out.append(JobDemand(w.name, {"memory": w.memory_limit},
                                 "unknown: a command with no cached solo baseline (launch it "
                                 "once with baseline = \"measure\")", gpus))
        else:
            threads = w.threads or 1
            out.append(JobDemand(w.name, {"cores": float(threads + w.num_workers),
                                          "memory": w.memory_limit},
                                 f"estimate from the file: {threads} thread(s) + {w.num_workers} "
                                 "loader worker(s), each a busy core (an upper bound; no cached "
                                 "solo baseline)", gpus))
    return out
