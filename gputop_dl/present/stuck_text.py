"""A stuck job in a person's words: where it hangs, the evidence, the fix, and the alert's line.

`analyse/live/stuck.py` gives figures and frames (`stuck.Stuck`); every presenter (console,
`--once`, the TUI's header and details, the alerts) words them through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from gputop_dl.text.fmt import DASH, duration

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import JobSample
    from gputop_dl.stuck import Stuck

PYSPY_DUMP = "py-spy dump --pid {pid}"  # every thread's stack, without pausing it: --nonblocking


def where_text(st: Stuck) -> str:
    """Where its main thread waits, and on whom."""
    at = f" at {st.frame}" if st.frame else ""
    if st.where == "dataloader":
        out = f"waiting for a batch from its DataLoader{at}"
        if st.worker_pid is not None:
            out += f" (worker {st.worker_pid} asleep in {st.worker_frame or DASH})"
        return out
    if st.where == "collective":
        out = f"waiting in a collective (all-reduce, barrier){at}"
        missing = [f"rank {r} is not in it" + (f" (its main thread is in {f})" if f else
                                               " (no stack read: gone?)")
                   for r, f in st.missing_ranks]
        return out + ("; " + "; ".join(missing) if missing else "")
    return {
        "lock": f"waiting on a lock{at}",
        "cuda-sync": f"in a CUDA synchronize{at}",
        "sleep": f"sleeping{at}",
        "io": f"waiting on a read{at}",
    }.get(st.where, f"its main thread stays{at or ' in one place'}")


def evidence_text(st: Stuck) -> str:
    """The readings behind the call."""
    progress = {"steps": "its steps", "loop": "its loop counter", "loader":
                "its loader's batches", "none": "its threads alone: no step counter"}.get(
                    st.progress, st.progress)
    cpu = DASH if st.cpu_cores_max is None else f"{st.cpu_cores_max:.2f}"
    if st.window_s is not None:  # --once: no history, its own window
        moved = f"no progress over --once's {st.window_s:g} s window (by {progress})"
    else:
        moved = (f"no progress for {duration(st.for_s)} (threshold {duration(st.threshold_s)}, "
                 f"by {progress})")
    return (f"{moved}; over the last {duration(st.quiet_s)} its processes slept "
            f"(states {st.states or DASH}, at most {cpu} CPU cores"
            + (", no reads" if not st.read_bytes_per_s_max else "")
            + (", no loader batches" if not st.loader_writes_per_s_max else "")
            + f"); its main stack the same in {st.dumps} py-spy dumps over "
            f"{duration(st.stack_same_s)}")


def fix_text(st: Stuck) -> str:
    """What to do, where something can be done, and how to see every thread."""
    see = PYSPY_DUMP.format(pid=st.pid) if st.pid is not None else "py-spy dump --pid PID"
    if st.where == "dataloader":
        worker = (f"; see the worker: {PYSPY_DUMP.format(pid=st.worker_pid)}"
                  if st.worker_pid is not None else "")
        return ("give the DataLoader a timeout (DataLoader(..., timeout=600)) so a hung worker "
                "raises instead of waiting forever" + worker)
    if st.where == "collective":
        return ("set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and dist.init_process_group(timeout="
                "timedelta(minutes=10)) so a rank that never comes fails the run; see each "
                f"rank: {see}")
    if st.where == "lock":
        return f"a lock never released (or taken across a fork): {see} --locals shows its holder"
    if st.where == "cuda-sync":
        return ("the GPU never finished its work: check the GPU (nvidia-smi) and run with "
                f"CUDA_LAUNCH_BLOCKING=1 to find the kernel; {see} --native")
    return f"see every thread: {see}"


def stuck_line(j: JobSample) -> str | None:
    """"train is stuck for 4 min: waiting for a batch ...", or None for a job not stuck."""
    st = j.stuck
    if st is None:
        return None
    return f"{j.name} is stuck for {duration(st.for_s)}: {where_text(st)}"


def stuck_lines(jobs: Iterable[JobSample]) -> list[str]:
    """The stuck jobs' lines, first in any header (nothing else about the box matters as much)."""
    return [line for line in (stuck_line(j) for j in jobs) if line]


def stuck_of(d: Mapping[str, Any]) -> Stuck | None:
    """A recorded `stuck` event's (or the JSON's `stuck` object's) `Stuck`; None if it is not one."""
    from gputop_dl.stuck import Stuck  # not on the first frame's path (statuses.py)

    names = {f.name for f in fields(Stuck)}
    try:
        kept = {k: v for k, v in d.items() if k in names}
        kept["stack"] = tuple(d.get("stack") or ())
        kept["missing_ranks"] = tuple((m["rank"], m.get("frame")) for m in d.get("missing_ranks") or ())
        return Stuck(**kept)
    except (TypeError, KeyError, AttributeError):
        return None


def event_text(d: Mapping[str, Any]) -> str:
    """A recorded `stuck` event in words (the report's events table)."""
    st = stuck_of(d)
    if st is None:
        return "stuck"
    return f"no progress for {duration(st.for_s)}: {where_text(st)}"


def stuck_details(st: Stuck) -> list[str]:
    """The details' lines: where, evidence, the main stack (innermost first), fix."""
    return ([f"stuck: {where_text(st)}", f"evidence: {evidence_text(st)}"]
            + [f"  {f}" for f in st.stack[:12]] + [f"fix: {fix_text(st)}"])
