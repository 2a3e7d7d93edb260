"""Training jobs judged without their memory maps: another user's Python processes, from what every user may read.

`/proc/PID/maps` (and `exe`, `environ`, `io`, `fd`) of another user's process is readable only
by root, so discovery cannot see torch loaded in it. What is readable by all is enough to judge
a training job with few false calls:

- the process is a Python interpreter: its command's program (`python3.11`, `pypy3`) or its
  `comm` (`python3`; `torchrun` for a console script run through its shebang);
- it runs a training entry point: a script, a `-m` module, or a launcher (torchrun,
  torch.distributed.run, accelerate, deepspeed, lightning); not `python -c`, not a bare REPL,
  not a known server or tool (`-m http.server`, jupyter, gunicorn, uvicorn, celery, pip, ...);
- and it works like one: a child forked with the same command line (a DataLoader worker, a
  multiprocessing fork), or a launcher with a Python child (its ranks), or many threads
  (`MANY_THREADS`, at most the CPUs: an intra-op pool) burning at least `BUSY_CORES` of CPU
  between two looks (from `/proc/PID/stat`).

An idle notebook kernel (a few threads, no CPU) or a Python web server (no forked twin, a
server's name) stays out; a notebook kernel that trains (busy pool threads) is a job. The
verdict is re-judged with back-off while it is not yet a job (a job forks its workers at its
first batch, after its imports).
"""

from __future__ import annotations

import os
import re

__all__ = ["LAUNCHERS", "MANY_THREADS", "BUSY_CORES", "interpreter", "entry_point", "works",
           "parse_stat"]

LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate",
             "accelerate.commands.launch", "deepspeed", "deepspeed.launcher.runner", "lightning")
# servers, notebooks' front ends and tools: Python processes that are never a training job's root
NOT_TRAINING = frozenset((
    "http.server", "pip", "pip3", "venv", "ensurepip", "pydoc", "idlelib", "json.tool",
    "jupyter", "jupyter-lab", "jupyter-notebook", "jupyterhub", "jupyter-server", "jupyterlab",
    "notebook", "jupyter_server", "gunicorn", "uvicorn", "hypercorn", "celery", "flask",
    "django-admin", "supervisord", "tensorboard", "mlflow", "gputop-dl",
    "networkd-dispatcher", "unattended-upgrade", "unattended-upgrades", "ray", "dask"))
MANY_THREADS = min(4, os.cpu_count() or 4)  # a torch intra-op pool holds one per core
BUSY_CORES = 0.5
_PY = re.compile(r"^(python|pypy)[0-9.]*[dmu]?$")
_OPTS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def interpreter(cmdline: tuple[str, ...], comm: str) -> bool:
    """Whether the process is a Python interpreter, from its command line and `comm`."""
    if cmdline and _PY.match(os.path.basename(cmdline[0])):
        return True
    return comm.startswith("python") or comm.startswith("pypy") or comm in LAUNCHERS


def entry_point(cmdline: tuple[str, ...], comm: str = "") -> str | None:
    """What a Python command runs: "launcher", "module" or "script"; None for `-c`, a REPL, a
    server or a tool (`NOT_TRAINING`)."""
    if not cmdline:
        return None
    args = list(cmdline[1:]) if _PY.match(os.path.basename(cmdline[0])) else list(cmdline)
    if comm in LAUNCHERS or os.path.basename(cmdline[0]) in LAUNCHERS:
        return "launcher"
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-c" or (a.startswith("-c") and not a.startswith("--")):
            return None
        if a == "-m" or (a.startswith("-m") and len(a) > 2 and not a.startswith("--")):
            mod = args[i + 1] if a == "-m" and i + 1 < len(args) else a[2:]
            if not mod:
                return None
            top = mod.split(".")[0]
            if mod in LAUNCHERS or top in ("deepspeed", "lightning") or mod.startswith("accelerate"):
                return "launcher"
            if mod in NOT_TRAINING or top in NOT_TRAINING or mod == "gputop_dl":
                return None  # (gputop-dl's monitor; its trainer, gputop_dl.injob.trainer, trains)
            return "module"
        if a in _OPTS_WITH_VALUE:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        base = os.path.basename(a)
        if base in LAUNCHERS:
            return "launcher"
        stem = base[:-3] if base.endswith(".py") else base
        if base in NOT_TRAINING or stem in NOT_TRAINING or stem.startswith("jupyter"):
            return None
        return "script"
    return None


def parse_stat(data: bytes) -> tuple[str, int, int] | None:
    """(comm, CPU ticks user + system, threads) from `/proc/PID/stat`; None when torn."""
    lo, hi = data.find(b"("), data.rfind(b")")
    if lo < 0 or hi < lo:
        return None
    fields = data[hi + 2:].split()
    try:
        return (data[lo + 1:hi].decode("utf-8", "replace"), int(fields[11]) + int(fields[12]),
                int(fields[17]))
    except (IndexError, ValueError):
        return None


def works(entry: str, twins: int, python_children: int, threads: int,
          cores: float | None) -> bool:
    """Whether a Python process with a training entry point works like a training job:
    `twins`: its children with its own command line (forked workers); `python_children`: its
    children that are Python interpreters (a launcher's ranks); `cores`: its CPU since the last
    look (None: first look)."""
    if entry == "launcher":
        return python_children > 0
    if twins > 0:
        return True
    return threads >= MANY_THREADS and cores is not None and cores >= BUSY_CORES
