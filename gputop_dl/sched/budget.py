"""The pre-launch budget check: what the jobs' solo runs need together, resource by resource, against the box.

Pure logic for `launch` (engine/launch_plan.py warns before it starts the jobs), over the same
figures as `gputop-dl plan` (sched/fit.py: each job's measured solo demand from its cached
baseline, the box's capacity from the stored machine profile and the memory available now):

- cores: the cores the jobs used alone, summed, against the usable cores;
- memory: their solo peak RSS, summed, against the memory available now;
- disk: their mean solo read rates from storage, summed, against the measured sequential read
  rate of the profile's disk;
- per GPU: the GPU memory and host-to-device rate of the jobs on it against that GPU's own
  (a GPU's memory and link belong to it: no pool summed over GPUs).

Only measured demands count (an estimate from the file is an upper bound, not an expectation);
a resource whose capacity is unknown is not checked. One warning line per resource over.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from gputop_dl.sched.fit import GPU_KEYS, JobDemand
from gputop_dl.text.fmt import rate, size

__all__ = ["budget_lines"]

_SLACK = 1 + 1e-9


def _measured(jobs: Sequence[JobDemand]) -> list[JobDemand]:
    return [j for j in jobs if j.source.startswith("measured")]


def _sum(jobs: Sequence[JobDemand], key: str) -> tuple[float, int]:
    vals = [v for j in jobs if (v := j.demand.get(key)) is not None]
    return float(sum(vals)), len(vals)


def budget_lines(jobs: Sequence[JobDemand], capacity: Mapping[str, tuple[float | None, str]],
                 pools: Mapping[str, Mapping[int, float]] | None = None,
                 disk_when: str = "") -> list[str]:
    """One warning per resource the jobs' measured solo demands overflow together (empty: all
    fit, or fewer than two jobs). `disk_when`: "measured <date>" of the disk's figure."""
    if len(jobs) < 2:
        return []
    out: list[str] = []
    meas = _measured(jobs)
    cores, n = _sum(meas, "cores")
    cap = capacity.get("cores", (None, ""))[0]
    if cap is not None and n == len(jobs) and cores > cap * _SLACK:
        out.append(f"cached solo baselines say these jobs need ≈ {cores:.1f} cores at full speed; "
                   f"this machine allows {cap:g}: expect a CPU-bound co-run")
    mem, n = _sum(meas, "memory")
    cap = capacity.get("memory", (None, ""))[0]
    if cap is not None and n >= 2 and mem > cap * _SLACK:
        some = "" if n == len(jobs) else f" ({n} of the {len(jobs)} jobs measured; the rest add more)"
        out.append(f"cached solo baselines say these jobs peak at ≈ {size(mem)} resident memory "
                   f"together{some}; {size(cap)} is available now: expect swapping, a smaller "
                   "page cache or an OOM kill")
    disk, n = _sum(meas, "disk_read")
    cap, src = capacity.get("disk_read", (None, ""))
    if cap is not None and n >= 2 and disk > cap * _SLACK:
        when = f", {disk_when}" if disk_when else ""
        out.append(f"cached solo baselines say these jobs read ≈ {rate(disk)} from storage "
                   f"together; the disk reads {rate(cap)} at most ({src}{when}): expect an "
                   "I/O-bound co-run")
    for key in GPU_KEYS:
        out += _per_gpu(meas, key, (pools or {}).get(key) or {})
    return out


def _per_gpu(jobs: Sequence[JobDemand], key: str, cap: Mapping[int, float]) -> list[str]:
    on: dict[int, list[tuple[str, float]]] = {}
    for j in jobs:
        v = j.demand.get(key)
        if v is None or not j.gpus:
            continue
        for g in j.gpus:
            on.setdefault(g, []).append((j.name, v / len(j.gpus)))
    out = []
    for g, parts in sorted(on.items()):
        total, c = sum(v for _, v in parts), cap.get(g)
        if c is None or len(parts) < 2 or total <= c * _SLACK:
            continue
        names = " and ".join(n for n, _ in parts)
        if key == "gpu_memory":
            out.append(f"GPU {g}: {names} peaked at ≈ {size(total)} of GPU memory together when "
                       f"alone; it has {size(c)}: expect an out-of-memory error")
        else:
            out.append(f"GPU {g}: {names} copied ≈ {rate(total)} host→device together when alone; "
                       f"its link carries {rate(c)}: expect them to wait on PCIe")
    return out
