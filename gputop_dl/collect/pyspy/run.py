"""py-spy sampling of a process: short non-blocking bursts, stacks folded into frame shares.

Used to name what a CPU-bound data-loader worker spends its time on (e.g. torchvision's
`resize`), and a found job's data stall, step phases and step time. Always `--nonblocking`
(blocking sampling cost 10-20 % of a trainer's throughput) and `--idle` (or waiting threads
vanish from the samples). Errors (no py-spy, no ptrace rights, the process gone) come back as a
message, never an exception. What one stack says is `collect/pyspy/stacks.py`, the estimates
from a burst's samples `collect/pyspy/stall.py`, reading py-spy's files
`collect/pyspy/trace.py`; their public names are re-exported here, where the rest of gputop-dl
reads them as `pyspy.NAME`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Hashable, TypeVar

from gputop_dl.child import die_with_parent
from gputop_dl.collect.pyspy.stacks import (
    DATA_WAIT_FUNCS, HELPER_FILES, IDLE, PHASES, PLUMBING_FILES, attribute, classify, hot_frames,
    is_main_thread, phase_of, split_thread)
from gputop_dl.collect.pyspy.stall import (
    ANCHORS, StallEstimate, check_rate, check_seconds, checked, phase_shares, pooled_step_time,
    stall_from_sequence, stall_from_stacks, stall_from_timeline)
from gputop_dl.collect.pyspy.trace import parse_chrometrace, parse_raw, parse_speedscope
from gputop_dl.collect.pyspy.step_cycles import timed_cycles
from gputop_dl.threadname import name_native_thread

__all__ = ["ANCHORS", "DATA_WAIT_FUNCS", "HELPER_FILES", "IDLE", "PHASES", "PLUMBING_FILES",
           "PTRACE_HINT", "StallEstimate", "attribute", "classify", "hot_frames",
           "is_main_thread", "is_permission_error", "parse_chrometrace", "parse_raw",
           "parse_speedscope", "phase_of", "phase_shares", "pooled_step_time", "pyspy_path",
           "record", "record_stall", "spy_all", "split_thread", "stall_from_sequence",
           "stall_from_stacks", "stall_from_timeline", "timed_cycles"]

PTRACE_HINT = ("grant ptrace rights: run gputop-dl as root, or as the job's user with "
               "kernel.yama.ptrace_scope=0 (sysctl), or add SYS_PTRACE to the container "
               "(docker run --cap-add SYS_PTRACE)")


def pyspy_path() -> str | None:
    """The py-spy of this interpreter's environment (the one gputop-dl installed), else the
    first on PATH."""
    cand = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.path.isfile(cand) and os.access(cand, os.X_OK):
        return cand
    return shutil.which("py-spy")


def record(pid: int, duration_s: float = 2.0, rate: int = 25) -> tuple[Counter[str], str | None]:
    """Sample `pid` for `duration_s`; returns (folded stacks, error message or None)."""
    text, err, _cpu = _run_pyspy(pid, duration_s, rate, "raw", [], None)
    if err is not None:
        if is_permission_error(err):
            err += f" ({PTRACE_HINT})"
        return Counter(), err
    return parse_raw(text or ""), None


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
                # it ends with gputop-dl (a burst runs up to 32 s, beside its check)
                proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
                cpu = reap(proc, duration_s + 20)
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


def reap(proc: subprocess.Popen[bytes], timeout: float) -> float | None:
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


def dump(pid: int, extra: list[str], exe: str | None = None, timeout: float = 10.0
         ) -> tuple[str | None, str | None, float | None]:
    """One `py-spy dump --nonblocking --json` of `pid` with `extra` options: (its output, error
    message, py-spy's CPU seconds from wait4)."""
    exe = exe or pyspy_path()
    if exe is None:
        return None, "py-spy is not installed", None
    cmd = [exe, "dump", "--pid", str(pid), *extra, "--nonblocking", "--json"]
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    preexec_fn=die_with_parent)
            cpu = reap(proc, timeout)
            out.seek(0)
            err.seek(0)
            text, msg = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"py-spy failed: {exc}", None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
        said = next((ln for ln in lines if ln.startswith("Error:")), lines[0] if lines else None)
        return None, f"py-spy: {said or f'exit {proc.returncode}'}", cpu
    return text, None, cpu


def record_stall(pid: int, duration_s: float = 2.0, rate: int = 50, exe: str | None = None,
                 check: bool = True) -> tuple[StallEstimate | None, str | None]:
    """One non-blocking burst on `pid` -> (StallEstimate of its main thread, error or None).

    py-spy writes a chrome trace: every change of stack with its sample's own time, so the step
    time is read in real seconds (`stall_from_timeline`); a speedscope file (an older py-spy)
    is read as samples `1 / rate` apart (`stall_from_sequence`). A second py-spy samples the
    same thread at the same time, `check_rate(rate)` Hz for `check_seconds` (at least
    CHECK_S): the step time stands only
    where it agrees or where the main rate cannot alias (`checked`). `check=False`: the main
    burst alone, its step time unchecked (the live sampler's, for a job whose step a check
    confirmed before: collect/pyspy/stall_sampler.py)."""
    if not check:
        return _stall_burst(pid, duration_s, rate, exe)
    hz, check_s = check_rate(rate), check_seconds(duration_s, rate)
    got_check: list[tuple[StallEstimate | None, str | None]] = []
    t = threading.Thread(target=lambda: got_check.append(_stall_burst(pid, check_s, hz, exe)),
                         daemon=True, name="gdl-spy-check")
    t.start()
    main, err = _stall_burst(pid, duration_s, rate, exe)
    t.join(check_s + 25)
    if main is None:
        return None, err
    got, check_err = got_check[0] if got_check else (None, "the check burst did not end")
    return checked(main, got, rate, hz, check_err, check_s), None


def _stall_burst(pid: int, duration_s: float, rate: int,
                 exe: str | None) -> tuple[StallEstimate | None, str | None]:
    """One py-spy burst's estimate, its step time not yet checked for aliasing."""
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


_K = TypeVar("_K", bound=Hashable)


def spy_all(targets: dict[_K, int], seconds: float,
            rate: int = 50) -> tuple[dict[_K, StallEstimate], list[str]]:
    """One `record_stall` burst on every target at once, `seconds` long, and wait for them all
    (each at most `seconds` + 25 s). `targets`: key -> PID to sample. Returns (key -> estimate,
    for the bursts that worked; py-spy's error messages). Used by `FoundJobs.measure_stall` and
    `gputop-dl diagnose`."""
    out: dict[_K, StallEstimate] = {}
    errors: list[str] = []

    def burst(key: _K, pid: int) -> None:
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
