"""Cache keys: fingerprints of everything a job's solo baseline, or its pace alone, depends on.

`launch`'s `baseline = "cache"` and the queue's CPU-aware admission reuse a recorded solo
baseline only when this fingerprint matches exactly: the workload's settings, the files a
command names (size and mtime), the interpreter it resolves to, and the machine (device kind,
host, CPUs, GPUs, torch). A found job's stored pace alone (engine/pace_refs.py) likewise, by
`found_fingerprint`. They read the machine and the files, so they sit on the collect floor.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
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
    return _digest(d)


def found_fingerprint(pid: int, key: Sequence[str], argv: Sequence[str],
                      ident: Mapping[str, object]) -> str | None:
    """What a found job's pace alone depends on (engine/pace_refs.py): `key`, its command line
    but for the options that do not change its work (analyse/slowdown/twins.py); `ident`, its user and
    container and the machine; the interpreter it runs, its directory, and the size and mtime
    of every argument that names a file, seen from the job's own directory and root (a job in
    a container sees its own files). None: its directory or interpreter cannot be read (gone,
    or another user's), so an edited script could not be told from the one that was read."""
    proc = f"/proc/{pid}"
    try:
        exe, cwd = os.readlink(f"{proc}/exe"), os.readlink(f"{proc}/cwd")
    except OSError:
        return None
    stamps = _file_stamps(argv, f"{proc}/cwd", root=f"{proc}/root")
    d = {"key": list(key), "cwd": cwd, "exe": exe, "files": stamps, **ident}
    return _digest(d)


def _digest(d: Mapping[str, Any]) -> str:
    """A fingerprint's key: the hash of what it depends on (only the hash is kept)."""
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _resolve(prog: str, cwd: str | None) -> str | None:
    found = shutil.which(prog) if prog and os.sep not in prog else (
        os.path.join(cwd or os.getcwd(), prog) if prog else None)
    return os.path.realpath(found) if found else None


def _file_stamps(argv: Iterable[str], cwd: str | None, root: str = ""
                 ) -> dict[str, tuple[int, int]]:
    """(size, mtime) of each argument that names a file, relative to `cwd`; an absolute one
    under `root` (a process's /proc/PID/root, or "" for this one's)."""
    out = {}
    for a in argv:
        p = root + a if root and a.startswith("/") else os.path.join(cwd or os.getcwd(), a)
        try:
            if os.path.isfile(p):
                st = os.stat(p)
                out[a] = (st.st_size, st.st_mtime_ns)
        except (OSError, ValueError):
            continue
    return out
