"""Measured host<->device copy rates per GPU, by the torch worker `lab/link_worker.py` in a subprocess.

The monitor never imports torch: this module only checks that torch is installed
(`importlib.util.find_spec`) and runs the worker once per GPU and NUMA node (the GPU's own
node, and one other node where there are two or more), plus GPU -> next GPU where there are
several. A GPU with processes on it is refused (its copies would slow someone's job and read
low). Each run is bounded by a timeout; a failure is the GPU's note, never a raise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from gputop_dl.child import die_with_parent
from gputop_dl.collect.boxprofile.part import Part

__all__ = ["measure_links", "WORKER"]

WORKER = [sys.executable, "-m", "gputop_dl.lab.link_worker"]
TIMEOUT_S = 60.0


def _run(cmd: list[str], timeout: float) -> Part:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer in {timeout:g} s"}
    except OSError as exc:
        return {"error": f"cannot start the copy worker: {exc.strerror or exc}"}
    lines = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else {"error": (r.stderr.strip().splitlines() or
                                                              [f"exit {r.returncode}"])[-1]}
    except ValueError:
        return {"error": "the copy worker printed no JSON"}


def measure_links(gpus: list[Part], numa: list[Part], *, quick: bool,
                  worker: list[str] | None = None, timeout: float = TIMEOUT_S) -> list[str]:
    """Fill each GPU's `copies` (in place); return note lines (skipped, refused)."""
    if not gpus:
        return []
    if quick:
        return ["GPU copy rates not measured (--quick)"]
    if worker is None and importlib.util.find_spec("torch") is None:
        return ["GPU copy rates not measured: torch is not installed (pip install 'gputop-dl[train]')"]
    cmd = worker or WORKER
    notes = []
    free = [g["index"] for g in gpus if not g["busy_pids"]]
    for g in gpus:
        if g["busy_pids"]:
            pids = ", ".join(map(str, g["busy_pids"][:5]))
            notes.append(f"GPU {g['index']}: not measured: jobs are using it (PID {pids})")
            continue
        places: list[tuple[str, str | None]] = [("near", g.get("cpu_affinity"))]
        others = [n for n in numa if n["node"] != g.get("numa_node") and n.get("cpus")]
        if g.get("numa_node") is not None and others:
            places.append(("far", others[0]["cpus"]))
        peer = next((i for i in free if i != g["index"]), None)
        for k, (where, cpus) in enumerate(places):
            args = [*cmd, "--gpu", str(g["index"])]
            if cpus:
                args += ["--cpus", cpus]
            if k == 0 and peer is not None:
                args += ["--peer", str(peer)]
            res = _run(args, timeout)
            res["from"] = where
            g["copies"].append(res)
            if res.get("error"):
                notes.append(f"GPU {g['index']}: copy rates ({where} CPUs) failed: {res['error']}")
    return notes
