"""One GPU's host<->device copy rates, in its own process: pinned and pageable, H2D and D2H.

Run by `gputop-dl machine` (collect/boxprofile/links.py) as
`python -m gputop_dl.lab.link_worker --gpu I [--cpus 0-15] [--peer J]`, since only the
trainer and lab workers import torch. Each figure is the median of `--repeats` copies of a
`--mib` MiB buffer timed with CUDA events; `--cpus` pins the process (and so the pageable
buffer's memory and the pinned buffer's allocation) to those CPUs first, for the near and far
NUMA node. `--peer J`: also GPU I -> GPU J. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch


def _timed(copy: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `copy()` over `repeats` runs, after one untimed run."""
    copy()
    torch.cuda.synchronize()
    times: list[float] = []
    for _ in range(repeats):
        a = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # torch leaves Event's __init__ untyped
        b = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        a.record()
        copy()
        b.record()
        b.synchronize()
        times.append(float(a.elapsed_time(b)) / 1e3)
    return float(statistics.median(times))


def measure(gpu: int, mib: int, repeats: int, peer: int | None) -> dict[str, Any]:
    n = mib << 20
    dev = torch.device("cuda", gpu)
    torch.cuda.set_device(dev)
    d = torch.empty(n, dtype=torch.uint8, device=dev)
    out: dict[str, Any] = {"gpu": gpu, "bytes": n, "repeats": repeats}
    for kind, pin in (("pinned", True), ("pageable", False)):
        h = torch.empty(n, dtype=torch.uint8, pin_memory=pin)
        h.fill_(1)
        out[f"h2d_{kind}_bps"] = n / _timed(functools.partial(d.copy_, h, non_blocking=pin), repeats)
        out[f"d2h_{kind}_bps"] = n / _timed(functools.partial(h.copy_, d, non_blocking=pin), repeats)
        del h
    if peer is not None:
        p = torch.empty(n, dtype=torch.uint8, device=torch.device("cuda", peer))
        out["peer"] = peer
        out["d2d_peer_bps"] = n / _timed(lambda: p.copy_(d), repeats)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m gputop_dl.lab.link_worker")
    ap.add_argument("--gpu", type=int, required=True)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--cpus", default=None, help="cpulist to pin this process to first")
    ap.add_argument("--peer", type=int, default=None)
    a = ap.parse_args(argv)
    if a.cpus:
        from gputop_dl.text.cpulist import parse_cpulist

        os.sched_setaffinity(0, parse_cpulist(a.cpus))
    try:
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        res = measure(a.gpu, a.mib, a.repeats, a.peer)
        res["cpus"] = a.cpus
    except Exception as exc:  # noqa: BLE001 - one line back to the profile
        res = {"gpu": a.gpu, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
