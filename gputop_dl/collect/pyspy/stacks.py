"""What one py-spy stack says: the frame its time is charged to, data wait or compute, its step phase.

Pure functions over folded stacks ('f1 (file:line);f2 (file:line)', with py-spy's `--threads`
a leading 'thread (TID): NAME'); `collect/pyspy/run.py` runs py-spy and re-exports these names.
"""

from __future__ import annotations

import os
import re
from collections import Counter

_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^()]+?)(?::\d+)?\)$")
# plumbing every loader stack has: it says nothing about where the time goes
PLUMBING_FILES = ("torch/utils/data", "multiprocessing/", "threading.py", "<frozen",
                  "torch/nn/modules/module.py", "queue.py", "selectors.py", "socket.py")
IDLE = "idle (waiting for work)"
# the standard library's helpers a sample may end in: their caller says what the time is for
# (e.g. torch.manual_seed without CUDA queues its CUDA seeding with traceback.format_stack())
HELPER_FILES = ("traceback.py", "linecache.py", "tokenize.py")


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
                return f"{below[0][0]} ({_short_file(below[0][1])})"
    useful = [fr for fr in frames if not _plumbing(fr)]
    if not useful:
        return IDLE
    callers = [fr for fr in useful if not fr[1].endswith(HELPER_FILES)]
    f, path = (callers or useful)[-1]
    return f"{f} ({_short_file(path)})"


def _short_file(path: str) -> str:
    """The file's name, with its package for an `__init__.py` (`cuda/__init__.py`)."""
    name = os.path.basename(path)
    if name == "__init__.py":
        return f"{os.path.basename(os.path.dirname(path))}/{name}"
    return name


def hot_frames(stacks: Counter[str], top: int = 5) -> list[tuple[str, float]]:
    """Share of samples charged to each frame (see `attribute`), largest first.

    Forked data-loader workers inherit the trainer's stack, so only stacks that pass through
    `_worker_loop` count when there are any (other threads of the worker are left out)."""
    worker = {k: n for k, n in stacks.items() if "_worker_loop" in k}
    use = worker or dict(stacks)
    total = sum(use.values())
    if not total:
        return []
    charged: Counter[str] = Counter()
    for stack, n in use.items():
        name = attribute(stack)
        if name:
            charged[name] += n
    return [(name, round(n / total, 3)) for name, n in charged.most_common(top)]


# --- data stall of a found job: classify the main thread's samples ----------------

_THREAD = re.compile(r"^thread \((?P<tid>0x[0-9a-fA-F]+|\d+)\)(?::\s*(?P<name>.*))?$")
_DATALOADER = "torch/utils/data/dataloader.py"
_FETCH = "torch/utils/data/_utils/fetch.py"
# DataLoader iterator methods the training loop blocks in while it waits for a batch
DATA_WAIT_FUNCS = ("__next__", "_next_data", "_get_data", "_try_get_data", "__iter__",
                   "_get_iterator")


def split_thread(stack: str) -> tuple[str | None, str | None, str]:
    """'thread (TID): NAME;f1;f2' -> (TID, NAME, 'f1;f2'); (None, None, stack) without one."""
    head, sep, rest = stack.partition(";")
    m = _THREAD.match(head.strip())
    if not m:
        return None, None, stack
    return m.group("tid"), (m.group("name") or "").strip() or None, rest if sep else ""


def is_main_thread(stack: str, pid: int | None = None) -> bool:
    """True for a sample of the process's main thread.

    With py-spy's `--threads` a stack starts with 'thread (TID): NAME': the main thread is
    the one whose native TID is the PID, or that Python calls 'MainThread'. Without it, a
    thread started by `threading` has `_bootstrap (threading.py)` at its root; the main
    thread's root is the script's `<module>` or runpy."""
    tid, name, rest = split_thread(stack)
    if tid is not None:
        if pid is not None and tid.isdigit():
            return int(tid) == pid or name == "MainThread"
        if name:
            return name == "MainThread"
    first = rest.split(";", 1)[0]
    return not ("_bootstrap" in first and "threading.py" in first)


def classify(stack: str, pid: int | None = None) -> str | None:
    """One folded sample -> "data" (the training loop waits for a batch), "compute", or None
    (a sample of another thread: data-loader threads, pin-memory thread, ...).

    Data wait = the main thread is inside the DataLoader iterator (`__next__` / `_next_data` /
    `_get_data` / `_try_get_data` of torch/utils/data/dataloader.py), or, with num_workers=0,
    inside the dataset fetch (torch/utils/data/_utils/fetch.py). Everything else is compute
    (forward, backward, optimizer, logging, ...)."""
    if not is_main_thread(stack, pid):
        return None
    _, _, rest = split_thread(stack)
    for func, path in _frames(rest):
        if _FETCH in path:
            return "data"
        if _DATALOADER in path and func.rsplit(".", 1)[-1] in DATA_WAIT_FUNCS:
            return "data"
    return "compute"


# --- where the main thread's samples fall: the phases of a training step ----

PHASES = ("data", "forward", "backward", "optimizer", "other")
_MODULE = "torch/nn/modules/module.py"
_CALL_FUNCS = ("_wrapped_call_impl", "_call_impl", "__call__")
_BACKWARD_FILES = ("torch/_tensor.py", "torch/autograd/__init__.py")
_BACKWARD_FUNCS = ("backward", "grad")
_OPTIM = "torch/optim/"
# frames of `Optimizer.step` in torch/optim/: the step itself and the wrappers around every
# optimizer's step (hooks, no-grad); not its __init__, zero_grad or an LR scheduler
_OPTIM_STEP_FUNCS = ("step", "wrapper", "_use_grad")


def _step_phase(func: str, path: str) -> str | None:
    """The step phase one frame opens: forward (`nn.Module.__call__`), backward
    (`Tensor.backward`, `torch.autograd.backward` / `grad`), optimizer (an `Optimizer.step`,
    its hooks wrapper included; not its __init__, `zero_grad` or an LR scheduler), or None."""
    name = func.rsplit(".", 1)[-1]
    if _MODULE in path and name in _CALL_FUNCS:
        return "forward"
    if name in _BACKWARD_FUNCS and any(f in path for f in _BACKWARD_FILES):
        return "backward"
    if _OPTIM in path and "lr_scheduler" not in path and name in _OPTIM_STEP_FUNCS:
        return "optimizer"
    return None


def phase_of(stack: str, pid: int | None = None) -> str | None:
    """One folded sample -> its step phase: "data" (as `classify`), else the OUTERMOST of
    forward / backward / optimizer on the stack, else "other"; None for another thread. A
    forward or backward inside an optimizer step (its closure: Lightning calls
    `optimizer.step(closure)`, which runs them) is forward or backward. A `zero_grad` on the
    stack, or an import above the phase's frame, is "other"."""
    return phase_site(stack, pid)[0]


def phase_site(stack: str, pid: int | None = None) -> tuple[str | None, str | None]:
    """One folded sample -> (its step phase as `phase_of`, where the loop calls it): the frame,
    line included, that called the phase's own frame (`netD(real)` at main.py:232; the
    DataLoader's iterator for "data"), None for "other". A training step calls each of its
    call sites once (a GAN's two `optimizer.step()` lines, its three `backward()`s), so one
    site's recurrences mark steps where a phase recurs more than once a step."""
    c = classify(stack, pid)
    if c is None:
        return None, None
    _, _, rest = split_thread(stack)
    raw = [f.strip() for f in rest.split(";")]
    frames = _frames(rest)

    def site(i: int) -> str | None:
        return raw[i - 1] if 0 < i <= len(raw) else None

    if c == "data":
        i = next((i for i, (_, path) in enumerate(frames) if "torch/utils/data" in path), 0)
        return "data", site(i)
    outer: tuple[str, int] | None = None
    for i, (func, path) in enumerate(frames):
        if func.rsplit(".", 1)[-1] == "zero_grad" or path.startswith("<frozen importlib"):
            # (an import of torch.optim is no optimizer step)
            return (outer[0], site(outer[1])) if outer else ("other", None)
        ph = _step_phase(func, path)
        if ph is None:
            continue
        if outer is None:
            outer = (ph, i)
            if ph != "optimizer":
                return ph, site(i)
        elif ph != "optimizer":
            # the optimizer's closure (Lightning's automatic optimization, LBFGS): the forward
            # and backward it runs are theirs, not the optimizer's
            return ph, site(i)
    return (outer[0], site(outer[1])) if outer else ("other", None)
