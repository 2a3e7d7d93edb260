"""Where `gpus = N` lands in a launch: N GPUs per workload, spread so jobs share a GPU last.

A launch starts all its workloads at once, so a count is placed once, at the start, from one
NVML reading: each workload with `gpus = N` (and no explicit indexes) gets the N GPUs that
(1) hold the fewest jobs of this launch so far (explicit `gpus = [..]` count too), (2) run the
fewest processes of others, (3) have the most free memory, (4) the lowest index. A shared GPU
is what makes co-running jobs only concurrent, so sharing is the last resort, and the reason
for each choice is returned with it. Pure: the caller reads NVML and applies the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop_dl.text.fmt import gib


@dataclass(frozen=True)
class GpuState:
    """One GPU as the placement sees it at the start (None = NVML did not say)."""

    index: int
    mem_free: int | None = None
    others: int = 0  # processes on it that are not this launch's (other users, other jobs)
    lost: bool = False


def place_counts(wants: list[tuple[str, int | None, tuple[int, ...]]],
                 gpus: list[GpuState]) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """`wants`: (name, count or None, explicit indexes) per workload, in file order.
    Returns the indexes chosen for each counted workload and one line per choice. A lost GPU
    is never chosen while a healthy one is left."""
    load = {g.index: 0 for g in gpus}
    for _name, count, explicit in wants:
        if not count:
            for i in explicit:
                load[i] = load.get(i, 0) + 1
    chosen: dict[str, tuple[int, ...]] = {}
    lines: list[str] = []
    for name, count, explicit in wants:
        if not count or explicit:
            continue

        def rank(g: GpuState) -> tuple[bool, int, int, int, int]:
            return (g.lost, load[g.index], g.others,
                    -(g.mem_free if g.mem_free is not None else -1), g.index)

        picks = sorted(gpus, key=rank)[:count]
        idx = tuple(sorted(g.index for g in picks))
        shared = [g.index for g in picks if load[g.index]]
        for g in picks:
            load[g.index] += 1
        chosen[name] = idx
        why = ("shared with another job of this launch: GPU " + ", ".join(map(str, shared))
               + " (no free GPU left)") if shared else "each without another job of this launch"
        free = [g.mem_free for g in picks if g.mem_free is not None]
        mem = f", {gib(sum(free))} free" if free else ""
        busy = sum(g.others for g in picks)
        lines.append(f"{name}: gpus = {count} placed on GPU{'s' if count > 1 else ''} "
                     f"{', '.join(map(str, idx))} ({why}; {busy} other processes{mem})")
    return chosen, lines
