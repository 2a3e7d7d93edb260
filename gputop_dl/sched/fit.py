"""How many jobs of a workload file fit on this box at once, and which resource runs out first.

Pure logic for `gputop-dl plan`: each job's solo demand per resource (cores, memory, disk read
rate, PCIe host-to-device rate, GPU memory; None where unknown) against the machine profile's
capacity. Jobs fit while every resource's summed solo demand is at most its capacity: past it
the co-run shares that resource, and each job slows by at least demand / capacity. On the
2-core box a pair of MobileNet jobs needing 2.06 cores already slowed 1.14x and 1.29x
(docs/machine.md), more than the 10 % a "fit" allows, so there is no slack above the capacity.
Jobs are taken smallest first (by their largest share of any resource); a resource nobody's
demand is known for never binds and is listed as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from gputop_dl.workload import SessionSpec, Workload

__all__ = ["RESOURCES", "JobDemand", "ResourceFit", "FitPlan", "capacities", "job_demands", "plan_fit"]

# (key, label, unit) in the order the table lists them
RESOURCES: tuple[tuple[str, str, str], ...] = (
    ("cores", "cores", "cores"), ("memory", "memory", "bytes"),
    ("disk_read", "disk read rate", "bytes/s"), ("pcie", "PCIe host→device", "bytes/s"),
    ("gpu_memory", "GPU memory", "bytes"),
)


@dataclass(frozen=True)
class JobDemand:
    """One job's solo demand per resource key (absent or None: unknown) and where it came from."""

    name: str
    demand: dict[str, float | None]
    source: str  # "measured (cached solo baseline)" | "estimate from the file"


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


def plan_fit(jobs: list[JobDemand], capacity: dict[str, tuple[float | None, str]]) -> FitPlan:
    """`capacity`: resource key -> (capacity or None, where it came from)."""
    res = []
    for key, label, unit in RESOURCES:
        cap, src = capacity.get(key, (None, "unknown"))
        vals = [j.demand.get(key) for j in jobs]
        known = [v for v in vals if v is not None]
        total = sum(known) if len(known) == len(vals) and vals else None
        fit = _fit_one(known, cap) + (len(vals) - len(known)) if cap is not None and known else None
        res.append(ResourceFit(key, label, unit, cap, src, total, len(known), fit))

    def share(j: JobDemand) -> float:
        s = [v / c for k, _, _ in RESOURCES
             if (v := j.demand.get(k)) is not None and (c := capacity.get(k, (None, ""))[0])]
        return max(s, default=0.0)

    taken: list[JobDemand] = []
    used = {k: 0.0 for k, _, _ in RESOURCES}
    binding: str | None = None
    for j in sorted(jobs, key=share):
        over = [k for k, _, _ in RESOURCES
                if (v := j.demand.get(k)) is not None and (c := capacity.get(k, (None, ""))[0]) is not None
                and used[k] + v > c * (1 + 1e-9)]
        if over:
            binding = max(over, key=lambda k: (used[k] + (j.demand.get(k) or 0.0))
                          / (capacity[k][0] or 1.0))
            break
        for k, _, _ in RESOURCES:
            used[k] += j.demand.get(k) or 0.0
        taken.append(j)
    return FitPlan(tuple(jobs), tuple(res), len(taken), binding, tuple(j.name for j in taken))


def capacities(p: Mapping[str, Any]) -> dict[str, tuple[float | None, str]]:
    """The box's capacity per resource of sched/fit.py, and where each figure came from."""
    c, m = p.get("cpus") or {}, p.get("memory") or {}
    disks = [s for s in p.get("storage") or () if s.get("seq_bps")]
    gpus = p.get("gpus") or []
    h2d = [x["h2d_pinned_bps"] for g in gpus for x in g.get("copies") or ()
           if x.get("h2d_pinned_bps") and x.get("from") == "near"]
    peaks = [g["link_peak_bps"] for g in gpus if g.get("link_peak_bps")]
    mems = [g["mem_total"] for g in gpus if g.get("mem_total")]
    return {
        "cores": (c.get("usable_cpus"), "usable CPUs"),
        "memory": (m.get("available"), "available now"),
        "disk_read": (disks[0]["seq_bps"], f"measured, {', '.join(disks[0]['paths'])}")
        if disks else (None, "not measured"),
        "pcie": (sum(h2d), "measured pinned H2D, summed over GPUs") if h2d and len(h2d) == len(gpus)
        else (sum(peaks), "link peak, summed over GPUs") if peaks else (None, "no GPU"),
        "gpu_memory": (sum(mems), "summed over GPUs") if mems else (None, "no GPU"),
    }


def job_demands(spec: SessionSpec, solo_of: Callable[[Workload], Mapping[str, Any] | None]) -> list[JobDemand]:
    """Each workload's solo demand: its cached solo profile (`solo_of(w)`) where there is one,
    else an estimate from the file."""
    out = []
    for w in spec.workloads:
        solo = solo_of(w)
        if solo and solo.get("cpu_cores") is not None:
            out.append(JobDemand(w.name, {
                "cores": solo["cpu_cores"], "memory": solo.get("rss_peak"),
                "disk_read": solo.get("io_read"), "pcie": None,
                "gpu_memory": solo.get("gpu_mem_peak") if spec.cuda else None},
                "measured: cached solo baseline"))
        elif w.is_command:
            out.append(JobDemand(w.name, {"memory": w.memory_limit},
                                 "unknown: a command with no cached solo baseline (launch it "
                                 "once with baseline = \"measure\")"))
        else:
            threads = w.threads or 1
            out.append(JobDemand(w.name, {"cores": float(threads + w.num_workers),
                                          "memory": w.memory_limit},
                                 f"estimate from the file: {threads} thread(s) + {w.num_workers} "
                                 "loader worker(s), each a busy core (an upper bound; no cached "
                                 "solo baseline)"))
    return out
