"""py-spy sampling of a process: short non-blocking bursts, stacks folded into frame shares.

Used to name what a CPU-bound data-loader worker spends its time on (e.g. torchvision's
`resize`). Always `--nonblocking` (blocking sampling cost 10-20 % of a trainer's throughput)
and `--idle` (or waiting threads vanish from the samples). Errors (no py-spy, no ptrace rights,
the process gone) come back as a message, never an exception.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^()]+?)(?::\d+)?\)$")
# plumbing every loader stack has: it says nothing about where the time goes
PLUMBING_FILES = ("torch/utils/data", "multiprocessing/", "threading.py", "<frozen",
                  "torch/nn/modules/module.py", "queue.py", "selectors.py", "socket.py")
IDLE = "idle (waiting for work)"


def _frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for frame in stack.split(";"):
        m = _FRAME.match(frame.strip())
        out.append((m.group("func"), m.group("file")) if m else (frame.strip(), ""))
    return out


def _plumbing(frame: tuple[str, str]) -> bool:
    return any(p in frame[1] for p in PLUMBING_FILES)


def attribute(stack: str) -> str | None:
    """The frame a sample is charged to: the transform under `Compose.__call__`, else the
    deepest non-plumbing frame below the worker loop; None for a stack of another thread."""
    frames = _frames(stack)
    loop = [i for i, (f, _) in enumerate(frames) if f.endswith("_worker_loop")]
    if loop:
        frames = frames[loop[-1] + 1:]
    for i, (f, _) in enumerate(frames):
        if f.endswith("Compose.__call__"):
            below = [fr for fr in frames[i + 1:] if not _plumbing(fr)]
            if below:
                return f"{below[0][0]} ({os.path.basename(below[0][1])})"
    useful = [fr for fr in frames if not _plumbing(fr)]
    if not useful:
        return IDLE
    f, path = useful[-1]
    return f"{f} ({os.path.basename(path)})"


def pyspy_path() -> str | None:
    exe = shutil.which("py-spy")
    if exe:
        return exe
    cand = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return cand if os.path.exists(cand) else None


def parse_raw(text: str) -> Counter:
    """py-spy `--format raw` (folded stacks: 'f1;f2;f3 COUNT') -> Counter of stacks."""
    stacks: Counter = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


def hot_frames(stacks: Counter, top: int = 5) -> list[tuple[str, float]]:
    """Share of samples charged to each frame (see `attribute`), largest first.

    Forked data-loader workers inherit the trainer's stack, so only stacks that pass through
    `_worker_loop` count when there are any (other threads of the worker are left out)."""
    worker = {k: n for k, n in stacks.items() if "_worker_loop" in k}
    use = worker or dict(stacks)
    total = sum(use.values())
    if not total:
        return []
    charged: Counter = Counter()
    for stack, n in use.items():
        name = attribute(stack)
        if name:
            charged[name] += n
    return [(name, round(n / total, 3)) for name, n in charged.most_common(top)]


def record(pid: int, duration_s: float = 2.0, rate: int = 25) -> tuple[Counter, str | None]:
    """Sample `pid` for `duration_s`; returns (stacks, error message or None)."""
    exe = pyspy_path()
    if exe is None:
        return Counter(), "py-spy is not installed"
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "raw.txt")
        cmd = [exe, "record", "--nonblocking", "--idle", "--rate", str(rate), "--duration",
               str(max(1, int(round(duration_s)))), "--format", "raw", "-o", out,
               "--pid", str(pid)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Counter(), f"py-spy failed: {exc}"
        if proc.returncode != 0 or not os.path.exists(out):
            err = (proc.stderr or proc.stdout).strip().splitlines()
            msg = err[-1] if err else f"exit {proc.returncode}"
            if "ermission" in msg or "ptrace" in msg.lower():
                msg += " (needs ptrace rights: run as the same user with " \
                       "kernel.yama.ptrace_scope=0, as root, or add SYS_PTRACE to the container)"
            return Counter(), f"py-spy: {msg}"
        with open(out, encoding="utf-8", errors="replace") as f:
            return parse_raw(f.read()), None
