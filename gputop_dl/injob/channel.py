"""Trainer -> monitor event channel: JSON lines appended to one file per job.

Why a file and not a pipe: it survives `torchrun` (which closes inherited fds), it survives a
crash of either side (the monitor re-reads from its last offset), and the record it leaves is
useful on its own. The trainer buffers step events and flushes at most every `flush_s`
seconds and at every epoch end, so reporting costs microseconds per step.

Events (one JSON object per line, always with "ev" and "t" = time.time()):

- ``{"ev": "started", "pid", "device", "world_size", "torch", "model", "params", "batch_size",
  "epochs", "steps_per_epoch"}``, and under torchrun the reporter's place in the run:
  ``"rank", "local_rank", "group_rank", "nnodes", "run_id"`` (`rank_info`)
- ``{"ev": "step", "epoch", "step", "t_data", "t_step", "samples"}`` (seconds; samples = images
  in this step across all ranks), with the step's phases (docs/phases.md) when measured:
  ``"ph": {"h2d", "forward", "backward", "optimizer"}`` (seconds; a phase not seen is absent),
  ``"ph_clock": "cuda"`` when the GPU phases are CUDA-event times, ``"ph_dropped"`` (the count so
  far) when its CUDA events never resolved, and ``"rank"`` in a distributed run
- ``{"ev": "rank_step", ...}``: the same fields from every other rank of the job (each rank
  appends to the same file; only the node's first rank writes "step" and the other events)
- ``{"ev": "epoch", "epoch", "time_s", "steps", "samples", "loss", "peak_mem"}`` (peak_mem bytes:
  CUDA max allocated on rank 0, or the trainer's peak RSS on CPU)
- ``{"ev": "finished"}``
- ``{"ev": "failed", "cause": "cuda-oom" | "host-oom" | "memory-limit" | "exception",
  "message"}`` (memory-limit: a MemoryError under an rlimit, `host_memory_cause`)
- ``{"ev": "note", "message"}`` (anything worth showing, e.g. "no CUDA: training on the CPU")
- ``{"ev": "ready"}``: a launched script is at its main loader's first pass and waits at the
  co-run's start barrier (`wait_for_go`) until the launcher creates the file it was given
  (the built-in trainer says "started" instead, then waits)

Nothing here imports torch: the monitor reads, the trainer (and user scripts, through the
start-up hook) write.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol, TypedDict, cast

ENV_EVENTS = "GPUTOP_DL_EVENTS"
ENV_GO = "GPUTOP_DL_GO"  # co-run start barrier: a file the launcher creates when all are ready
GO_TIMEOUT_S = 600.0
# what torchrun (torchelastic) tells each rank: RANK_ENV[name] = its key in `rank_info`
RANK_ENV = {"RANK": "rank", "LOCAL_RANK": "local_rank", "WORLD_SIZE": "world_size",
            "GROUP_RANK": "group_rank", "GROUP_WORLD_SIZE": "nnodes",
            "TORCHELASTIC_RUN_ID": "run_id"}


def reports_here(environ: Mapping[str, str]) -> bool:
    """Whether this process reports its job's events: the first rank of its node (LOCAL_RANK 0;
    RANK 0 where a launcher sets only RANK), or a process outside any distributed run. Each
    node of a job across nodes has one, and each node's gputop-dl reads its own; on one node
    it is rank 0, as before."""
    local = environ.get("LOCAL_RANK")
    return (local if local is not None else environ.get("RANK", "")) in ("", "0")


class Emits(Protocol):
    def emit(self, ev: str, *, flush: bool = False, **data: Any) -> None: ...


def wait_for_go(path: str | None, events: Emits, timeout_s: float = GO_TIMEOUT_S) -> None:
    """Block until `path` exists (the launcher's go: every co-run job is ready), or give up
    after timeout_s and say so. No path: no barrier."""
    if not path:
        return
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            events.emit("note", flush=True, message=f"no co-run start signal after "
                        f"{timeout_s:.0f} s: starting anyway")
            return
        time.sleep(0.02)


class RankInfo(TypedDict, total=False):
    """A rank's place in its distributed run (`rank_info`); a variable it lacks is left out."""

    rank: int
    local_rank: int
    world_size: int
    group_rank: int
    nnodes: int
    run_id: str


def rank_info(environ: Mapping[str, str]) -> RankInfo:
    """A rank's place in its distributed run, from its environment (RANK_ENV): the numbers as
    int, `run_id` as text; a variable that is missing or not a number is left out."""
    out: dict[str, int | str] = {}
    for var, key in RANK_ENV.items():
        v = environ.get(var)
        if v is None or v == "":
            continue
        if key == "run_id":
            out[key] = v
        elif (n := v.strip().removeprefix("-")).isascii() and n.isdigit():  # not '²'
            out[key] = int(v)
    return cast(RankInfo, out)  # its keys are RANK_ENV's, run_id text and the others int


def failure_message(exc: BaseException) -> str:
    """A "failed" event's message: `Type: first line`. An exception without a message says
    what is known instead: for a MemoryError, the process's peak RSS."""
    lines = str(exc).strip().splitlines()
    name = type(exc).__name__
    if lines:
        return f"{name}: {lines[0]}"[:500]
    if isinstance(exc, MemoryError):
        try:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
            return (f"{name} (no message: an allocation failed; this process's peak RSS was "
                    f"{peak:.0f} MiB)")
        except (ImportError, OSError, ValueError):
            pass
    return f"{name} (no message)"


def host_memory_cause() -> str:
    """The cause of a host MemoryError in this process: "memory-limit" when an address-space
    or data rlimit (`ulimit -v`/`-d`) is set, which the allocation likely hit, else
    "host-oom" (the machine's memory ran out)."""
    try:
        import resource

        for lim in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            if resource.getrlimit(lim)[0] != resource.RLIM_INFINITY:
                return "memory-limit"
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    return "host-oom"


class EventWriter:
    """Appends events to the channel file; buffered, flushed on time, epoch ends and close."""

    def __init__(self, path: str | None, flush_s: float = 0.5):
        # one O_APPEND write(2) per flush: several ranks of a job append to the same file, and
        # a single append to a regular file is never interleaved with another's on Linux
        self._f = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None
        self._buf: list[str] = []
        self._lock = threading.Lock()  # a CUDA phase sampler thread emits steps too
        self._flush_s = flush_s
        self._last_flush = time.monotonic()

    @classmethod
    def from_env(cls) -> EventWriter:
        return cls(os.environ.get(ENV_EVENTS) or None)

    def emit(self, ev: str, *, flush: bool = False, **data: Any) -> None:
        if self._f is None:
            return
        data["ev"] = ev
        data["t"] = time.time()
        line = json.dumps(data, separators=(",", ":"))
        with self._lock:
            self._buf.append(line)
            now = time.monotonic()
            if flush or now - self._last_flush >= self._flush_s:
                self._flush()

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self._f is None or not self._buf:
            return
        data = ("\n".join(self._buf) + "\n").encode("utf-8")
        self._buf.clear()
        while data:
            data = data[os.write(self._f, data):]
        self._last_flush = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._flush()
                os.close(self._f)
                self._f = None


class StepsOnly:
    """The writer of a rank that is not its node's first: its steps only, as "rank_step"
    events in the job's file (the per-rank table, docs/phases.md); nothing else."""

    def __init__(self, writer: EventWriter):
        self.writer = writer

    def emit(self, ev: str, *, flush: bool = False, **data: Any) -> None:
        if ev == "step":
            self.writer.emit("rank_step", flush=flush, **data)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class EventReader:
    """Reads whole new lines from a channel file since the last call (tolerates a torn last line)."""

    def __init__(self, path: str):
        self.path = path
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # incomplete tail (empty when data ended with a newline)
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "ev" in obj:
                out.append(obj)
        return out
