"""py-spy sampling of a process: short non-blocking bursts, stacks folded into frame shares.

Used to name what a CPU-bound data-loader worker spends its time on (e.g. torchvision's
`resize`). Always `--nonblocking` (blocking sampling cost 10-20 % of a trainer's throughput)
and `--idle` (or waiting threads vanish from the samples). Errors (no py-spy, no ptrace rights,
the process gone) come back as a message, never an exception.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Hashable

from gputop_dl.collect.pyspy_trace import parse_chrometrace, parse_raw, parse_speedscope
from gputop_dl.collect.step_cycles import ACCUMULATION, cycles_of, timed_cycles
from gputop_dl.threadname import name_native_thread

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


def pyspy_path() -> str | None:
    """The py-spy of this interpreter's environment (the one gputop-dl installed), else the
    first on PATH."""
    cand = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.path.isfile(cand) and os.access(cand, os.X_OK):
        return cand
    return shutil.which("py-spy")


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
    """Sample `pid` for `duration_s`; returns (folded stacks, error message or None)."""
    text, err, _cpu = _run_pyspy(pid, duration_s, rate, "raw", [], None)
    if err is not None:
        if is_permission_error(err):
            err += f" ({PTRACE_HINT})"
        return Counter(), err
    return parse_raw(text or ""), None


# --- data stall of a found job: classify the main thread's samples ----------------

_THREAD = re.compile(r"^thread \((?P<tid>0x[0-9a-fA-F]+|\d+)\)(?::\s*(?P<name>.*))?$")
_DATALOADER = "torch/utils/data/dataloader.py"
_FETCH = "torch/utils/data/_utils/fetch.py"
# DataLoader iterator methods the training loop blocks in while it waits for a batch
DATA_WAIT_FUNCS = ("__next__", "_next_data", "_get_data", "_try_get_data", "__iter__",
                   "_get_iterator")
PTRACE_HINT = ("grant ptrace rights: run gputop-dl as root, or as the job's user with "
               "kernel.yama.ptrace_scope=0 (sysctl), or add SYS_PTRACE to the container "
               "(docker run --cap-add SYS_PTRACE)")


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


# --- where the main thread's samples fall: the phases of a training step (issue 22 item 5) ----

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
    c = classify(stack, pid)
    if c != "compute":
        return c
    _, _, rest = split_thread(stack)
    outer = None
    for func, path in _frames(rest):
        if func.rsplit(".", 1)[-1] == "zero_grad" or path.startswith("<frozen importlib"):
            return outer or "other"  # (an import of torch.optim is no optimizer step)
        ph = _step_phase(func, path)
        if ph is None:
            continue
        if outer is None:
            outer = ph
            if ph != "optimizer":
                return ph
        elif ph != "optimizer":
            # the optimizer's closure (Lightning's automatic optimization, LBFGS): the forward
            # and backward it runs are theirs, not the optimizer's
            return ph
    return outer or "other"


class StallEstimate:
    """Main-thread samples of one burst: data-wait fraction, counts, step time where honest,
    and the samples per step phase (`PHASES`)."""

    __slots__ = ("data", "compute", "step_time_s", "cycles", "cpu_s", "cv", "phases", "anchor",
                 "why")

    def __init__(self, data: int, compute: int, step_time_s: float | None = None,
                 cycles: int = 0, cpu_s: float | None = None):
        self.data, self.compute = data, compute
        self.step_time_s, self.cycles = step_time_s, cycles
        self.cv: float | None = None  # spread of the cycle lengths (stdev / mean)
        self.cpu_s = cpu_s  # what the burst cost py-spy itself (None: not known)
        self.phases: dict[str, int] = {}  # phase -> main-thread samples (empty: not classified)
        self.anchor: str | None = None  # the phase whose recurrences gave the step time
        self.why: str | None = None  # why the step time is unknown (None: read, or not tried)

    @property
    def samples(self) -> int:
        return self.data + self.compute

    @property
    def fraction(self) -> float | None:
        return round(self.data / self.samples, 3) if self.samples else None

    def __repr__(self) -> str:
        return (f"StallEstimate(fraction={self.fraction}, samples={self.samples}, "
                f"step_time_s={self.step_time_s}, cycles={self.cycles}, anchor={self.anchor})")


def phase_shares(counts: dict[str, int]) -> tuple[tuple[str, float], ...]:
    """Samples per phase -> ((phase, share of the samples), ...) in `PHASES` order; () for none."""
    total = sum(counts.get(p, 0) for p in PHASES)
    if not total:
        return ()
    return tuple((p, round(counts.get(p, 0) / total, 3)) for p in PHASES)


def stall_from_stacks(stacks: Counter, pid: int | None = None) -> StallEstimate:
    """Folded stacks (raw format, order lost) -> stall fraction; step time stays unknown."""
    data = compute = 0
    for stack, n in stacks.items():
        c = classify(stack, pid)
        if c == "data":
            data += n
        elif c == "compute":
            compute += n
    return StallEstimate(data, compute)


# the phases whose recurrence marks a step, most telling first: one optimizer step per training
# step (also with gradient accumulation); backward, data wait and forward once per micro-step;
# backward and optimizer together, or forward and backward together, where each alone is too
# short to be seen in every step
ANCHORS: tuple[tuple[str, ...], ...] = (("optimizer",), ("backward",), ("data",),
                                         ("backward", "optimizer"), ("forward",),
                                         ("forward", "backward"))


def pooled_step_time(bursts) -> float | None:
    """One step time from several bursts' `StallEstimate`s (or (step s, cycles) pairs): their
    cycles' mean, each burst weighted by the cycles it read (None: no burst read one). One
    burst's 4-7 cycles of a 0.3 s step scatter by up to ±50 %, as py-spy's samples come unevenly;
    their pool keeps the time, as `cycles_of` keeps it within a burst."""
    pairs = [(b.step_time_s, b.cycles) if isinstance(b, StallEstimate) else b for b in bursts]
    pairs = [(s, c) for s, c in pairs if s is not None and c]
    cycles = sum(c for _, c in pairs)
    return round(sum(s * c for s, c in pairs) / cycles, 4) if cycles else None


def stall_from_sequence(seq: list[str], interval_s: float, pid: int | None = None) -> StallEstimate:
    """Time-ordered samples of one thread -> stall fraction, samples per step phase, and a step
    time only when it can be read off honestly: the cycle of the first phase in `ANCHORS`
    whose recurrences pass `cycles_of` (an optimizer step, else backward, else the data wait,
    else the forward); where optimizer steps were seen, another anchor counts only if it recurs
    no more often than they do."""
    labels = [c for c in (phase_of(s, pid) for s in seq) if c is not None]
    data = labels.count("data")
    est = StallEstimate(data, len(labels) - data)
    est.phases = {p: labels.count(p) for p in PHASES}
    # optimizer steps seen (runs of optimizer samples): another anchor must not recur more
    # often, or it marks micro-steps (gradient accumulation) rather than steps
    opt_runs = sum(1 for i, c in enumerate(labels)
                   if c == "optimizer" and (i == 0 or labels[i - 1] != "optimizer"))
    for anchor in ANCHORS:
        if not all(est.phases.get(p) for p in anchor):
            continue
        got = cycles_of([c in anchor for c in labels], interval_s)
        if got is not None and anchor != ("optimizer",) and opt_runs and got[1] > 1.25 * opt_runs:
            continue
        if got is not None:
            est.step_time_s, est.cycles, est.cv = got
            est.anchor = "+".join(anchor)
            break
    return est


def stall_from_timeline(timeline: list[tuple[float, str]], rate: int,
                        pid: int | None = None) -> StallEstimate:
    """One thread's timed stack changes (`parse_chrometrace`) -> stall fraction and phases by
    the time spent in each (as sample counts at `rate`), and the step time where one anchor
    (`ANCHORS` order) passes `timed_cycles`; else `why` says why it is unknown."""
    runs: list[list] = []  # [phase, start, end]
    for (t, stack), (t2, _) in zip(timeline, timeline[1:]):
        ph = phase_of(stack, pid) if stack else None
        if ph is None:
            continue
        if runs and runs[-1][0] == ph and abs(runs[-1][2] - t) < 1e-9:
            runs[-1][2] = t2
        else:
            runs.append([ph, t, t2])
    spent = {p: sum(r[2] - r[1] for r in runs if r[0] == p) for p in PHASES}
    phases = {p: int(round(v * rate)) for p, v in spent.items()}
    est = StallEstimate(phases["data"], sum(phases.values()) - phases["data"])
    est.phases = phases
    opt_runs = sum(1 for r in runs if r[0] == "optimizer")
    why = "no step phase (data wait, forward, backward, optimizer) was seen"
    est.why = None
    for anchor in ANCHORS:
        if not all(spent.get(p) for p in anchor):
            continue
        merged: list[tuple[bool, float, float]] = []
        for ph, t0, t1 in runs:
            m = ph in anchor
            if merged and merged[-1][0] == m:
                merged[-1] = (m, merged[-1][1], t1)
            else:
                merged.append((m, t0, t1))
        step, n, cv, note = timed_cycles(merged, 1.0 / rate)
        if note is None and anchor != ("optimizer",) and opt_runs and n > ACCUMULATION * opt_runs:
            note = "its data, forward or backward recur more often than its optimizer steps"
        if note is None:
            est.step_time_s, est.cycles, est.cv, est.anchor = step, n, cv, "+".join(anchor)
            est.why = None
            return est
        est.why = est.why or note  # the first anchor tried says it best
    est.why = est.why or why
    return est


def is_permission_error(err: str | None) -> bool:
    e = (err or "").lower()
    return "permission" in e or "ptrace" in e or "operation not permitted" in e


def _run_pyspy(pid: int, duration_s: float, rate: int, fmt: str, extra: list[str],
               exe: str | None, blocking: bool = False) -> tuple[str | None, str | None, float | None]:
    """Run one `py-spy record` burst; (output file text, error message, py-spy's CPU seconds).
    Non-blocking unless `blocking` (native stacks need the process paused)."""
    exe = exe or pyspy_path()
    if exe is None:
        return None, "py-spy is not installed", None
    with tempfile.TemporaryDirectory() as d:
        out, log = os.path.join(d, "out"), os.path.join(d, "log")
        cmd = [exe, "record", *([] if blocking else ["--nonblocking"]), "--idle", *extra, "--rate", str(rate),
               "--duration", str(max(1, int(round(duration_s)))), "--format", fmt, "-o", out,
               "--pid", str(pid)]
        try:
            with open(log, "w+", encoding="utf-8", errors="replace") as logf:
                proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                cpu = _reap(proc, duration_s + 20)
                logf.seek(0)
                text = logf.read()
        except FileNotFoundError:
            return None, f"py-spy is not installed ({exe} not found)", None
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"py-spy failed: {exc}", None
        if proc.returncode != 0 or not os.path.exists(out):
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            perm = next((ln for ln in lines if is_permission_error(ln)), None)
            msg = perm or (lines[-1] if lines else f"exit {proc.returncode}")
            return None, f"py-spy: {msg}", cpu
        with open(out, encoding="utf-8", errors="replace") as f:
            return f.read(), None, cpu


def _reap(proc: subprocess.Popen, timeout: float) -> float | None:
    """Wait for `proc` (killed after `timeout` s); its CPU seconds, from wait4 where there is one."""
    if not hasattr(os, "wait4"):
        proc.wait(timeout)
        return None
    deadline, delay = time.monotonic() + timeout, 0.01
    while True:
        done, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if done:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(delay)
        delay = min(2 * delay, 0.25)


def record_stall(pid: int, duration_s: float = 2.0, rate: int = 50,
                 exe: str | None = None) -> tuple[StallEstimate | None, str | None]:
    """One non-blocking burst on `pid` -> (StallEstimate of its main thread, error or None).

    py-spy writes a chrome trace: every change of stack with its sample's own time, so the step
    time is read in real seconds (`stall_from_timeline`); a speedscope file (an older py-spy)
    is read as samples `1 / rate` apart (`stall_from_sequence`)."""
    text, err, cpu = _run_pyspy(pid, duration_s, rate, "chrometrace", ["--threads"], exe)
    if err is not None:
        return None, err
    try:
        doc = json.loads(text or "")
        speedscope = isinstance(doc, dict) and "profiles" in doc
        timed = {} if speedscope else parse_chrometrace(text or "")
        profiles = parse_speedscope(text or "") if speedscope else {}
    except (ValueError, TypeError, AttributeError) as exc:
        return None, f"py-spy: unreadable output ({exc})"
    best = StallEstimate(0, 0)
    for seq in profiles.values():
        if not seq or not is_main_thread(seq[0], pid):
            continue  # one profile per thread: another thread's samples would all be dropped
        est = stall_from_sequence(seq, 1.0 / rate, pid)
        if est.samples > best.samples:
            best = est  # only the main thread's profile classifies any sample
    for line in timed.values():
        stacks = [st for _t, st in line if st]
        if not stacks or not is_main_thread(stacks[0], pid):
            continue
        est = stall_from_timeline(line, rate, pid)
        if est.samples > best.samples:
            best = est
    best.cpu_s = cpu
    return best, None


def spy_all(targets: dict[Hashable, int], seconds: float,
            rate: int = 50) -> tuple[dict[Hashable, StallEstimate], list[str]]:
    """One `record_stall` burst on every target at once, `seconds` long, and wait for them all
    (each at most `seconds` + 25 s). `targets`: key -> PID to sample. Returns (key -> estimate,
    for the bursts that worked; py-spy's error messages). Used by `FoundJobs.measure_stall` and
    `gputop-dl diagnose`."""
    out: dict[Hashable, StallEstimate] = {}
    errors: list[str] = []

    def burst(key: Hashable, pid: int) -> None:
        name_native_thread("gdl-spy")
        est, err = record_stall(pid, seconds, rate)
        if err is not None:
            errors.append(err)
        elif est is not None:
            out[key] = est

    threads = [threading.Thread(target=burst, args=(k, pid), daemon=True, name="gdl-spy")
               for k, pid in targets.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 25)
    return dict(out), list(errors)
