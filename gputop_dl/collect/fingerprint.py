"""The solo-baseline cache key: a fingerprint of everything a job's solo baseline depends on.

`launch`'s `baseline = "cache"` and the queue's CPU-aware admission reuse a recorded solo
baseline only when this fingerprint matches exactly: the workload's settings, the files a
command names (size and mtime), the interpreter it resolves to, and the machine (device kind,
host, CPUs, GPUs, torch). It reads the machine and the files, so it sits on the collect floor.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from typing import Any

from gputop_dl.workload import Workload


def fingerprint(w: Workload, cuda: bool, env: Mapping[str, object]) -> str:
    """What a solo baseline depends on; a cached baseline is reused only on an exact match.

    A built-in job: its model, data and loader settings. A command: its argv, cwd, env and
    shell flag, the interpreter it resolves to, and the size and mtime of every argument that
    names a file (an edited script is a new job). Both: device kind, host, CPUs, GPUs, torch."""
    d: dict[str, Any]  # a JSON object: only its hash is kept
    if w.is_command:
        d = {"command": list(w.command or ()), "cwd": w.cwd, "env": dict(sorted(w.env.items())),
             "shell": w.shell, "warmup_steps": w.warmup_steps,
             "interpreter": _resolve(w.command[0] if w.command else "", w.cwd),
             "files": _file_stamps(w.command or (), w.cwd)}
    else:
        keys = ("model", "dataset", "root", "input_size", "source_size", "num_classes",
                "batch_size", "num_workers", "transforms", "threads", "nproc", "gpus",
                "optimizer", "sample_io_ms", "sample_cpu_ms", "step_device_ms", "step_cpu_ms")
        d = {k: getattr(w, k) for k in keys}
    d.update(cuda=cuda, cpus=env.get("cpus"), cpu_model=env.get("cpu_model"),
             gpus_hw=env.get("gpus"), torch=env.get("torch"), host=os.uname().nodename)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _resolve(prog: str, cwd: str | None) -> str | None:
    found = shutil.which(prog) if prog and os.sep not in prog else (
        os.path.join(cwd or os.getcwd(), prog) if prog else None)
    return os.path.realpath(found) if found else None


def _file_stamps(argv: Iterable[str], cwd: str | None) -> dict[str, tuple[int, int]]:
    out = {}
    for a in argv:
        p = os.path.join(cwd or os.getcwd(), a)
        try:
            if os.path.isfile(p):
                st = os.stat(p)
                out[a] = (st.st_size, st.st_mtime_ns)
        except (OSError, ValueError):
            continue
    return out
