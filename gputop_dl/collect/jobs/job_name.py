"""A found job's name and shown command line, from its command line: `train.py`, `torchrun train.py`.

`job_name` makes the short name a found job is listed by (`python -m pkg.mod`, `python -c`, the
script under a torchrun, accelerate or deepspeed launcher, else the program); `shown_line` the
command line as shown, stored and served, its secret-looking arguments redacted
(workload.shown_command). collect/jobs/discover.py names each job it finds with them.
"""

from __future__ import annotations

import functools
import os

from gputop_dl.workload import shown_command


def job_name(cmdline: tuple[str, ...] | list[str], pid: int) -> str:
    """A short name from a command line: `train.py`, `python -m pkg.mod`, `torchrun train.py`."""
    args = list(cmdline)
    if not args:
        return f"pid {pid}"
    exe = os.path.basename(args[0])
    if exe.startswith("python") or exe in ("pypy", "pypy3"):
        rest = args[1:]
        i = 0
        while i < len(rest):
            a = rest[i]
            if a == "-m" and i + 1 < len(rest):
                return f"python -m {rest[i + 1]}"
            if a.startswith("-m") and len(a) > 2:
                return f"python -m {a[2:]}"
            if a == "-c":
                return "python -c"
            if a in ("-W", "-X", "--check-hash-based-pycs"):
                i += 2
                continue
            if a.startswith("-"):
                i += 1
                continue
            if any(m in os.path.basename(a) for m in ("torchrun", "accelerate", "deepspeed")):
                return job_name(rest[i:], pid)  # python .../bin/torchrun train.py
            return os.path.basename(a)
        return exe
    if any(m in exe for m in ("torchrun", "accelerate", "deepspeed")):
        script = next((os.path.basename(a) for a in args[1:] if a.endswith(".py")), None)
        return f"{exe} {script}" if script else exe
    script = next((os.path.basename(a) for a in args[1:] if a.endswith(".py")), None)
    return script or exe


@functools.lru_cache(maxsize=256)  # a job's command line is asked for every tick
def shown_line(cmdline: tuple[str, ...]) -> str:
    """The command line as shown, stored and served: secret-looking arguments redacted."""
    return shown_command(cmdline)
