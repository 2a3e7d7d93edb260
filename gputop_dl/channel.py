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
  in this step across all ranks)
- ``{"ev": "epoch", "epoch", "time_s", "steps", "samples", "loss", "peak_mem"}`` (peak_mem bytes:
  CUDA max allocated on rank 0, or the trainer's peak RSS on CPU)
- ``{"ev": "finished"}``
- ``{"ev": "failed", "cause": "cuda-oom" | "host-oom" | "memory-limit" | "exception",
  "message"}`` (memory-limit: a MemoryError under an rlimit, `host_memory_cause`)
- ``{"ev": "note", "message"}`` (anything worth showing, e.g. "no CUDA: training on the CPU")

Nothing here imports torch: the monitor reads, the trainer (and user scripts, through the
start-up hook) write.
"""

from __future__ import annotations

import json
import os
import time

ENV_EVENTS = "GPUTOP_DL_EVENTS"
# what torchrun (torchelastic) tells each rank: RANK_ENV[name] = its key in `rank_info`
RANK_ENV = {"RANK": "rank", "LOCAL_RANK": "local_rank", "WORLD_SIZE": "world_size",
            "GROUP_RANK": "group_rank", "GROUP_WORLD_SIZE": "nnodes",
            "TORCHELASTIC_RUN_ID": "run_id"}


def reports_here(environ) -> bool:
    """Whether this process reports its job's events: the first rank of its node (LOCAL_RANK 0;
    RANK 0 where a launcher sets only RANK), or a process outside any distributed run. Each
    node of a job across nodes has one, and each node's gputop-dl reads its own; on one node
    it is rank 0, as before."""
    local = environ.get("LOCAL_RANK")
    return (local if local is not None else environ.get("RANK", "")) in ("", "0")


def rank_info(environ) -> dict:
    """A rank's place in its distributed run, from its environment (RANK_ENV): the numbers as
    int, `run_id` as text; a variable that is missing or not a number is left out."""
    out: dict = {}
    for var, key in RANK_ENV.items():
        v = environ.get(var)
        if v is None or v == "":
            continue
        if key == "run_id":
            out[key] = v
        elif v.strip().lstrip("-").isdigit():
            out[key] = int(v)
    return out


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
        self._f = open(path, "a", encoding="utf-8") if path else None
        self._buf: list[str] = []
        self._flush_s = flush_s
        self._last_flush = time.monotonic()

    @classmethod
    def from_env(cls) -> EventWriter:
        return cls(os.environ.get(ENV_EVENTS) or None)

    def emit(self, ev: str, *, flush: bool = False, **data) -> None:
        if self._f is None:
            return
        data["ev"] = ev
        data["t"] = time.time()
        self._buf.append(json.dumps(data, separators=(",", ":")))
        now = time.monotonic()
        if flush or now - self._last_flush >= self._flush_s:
            self.flush()

    def flush(self) -> None:
        if self._f is None or not self._buf:
            return
        self._f.write("\n".join(self._buf) + "\n")
        self._f.flush()
        self._buf.clear()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        if self._f is not None:
            self.flush()
            self._f.close()
            self._f = None


class EventReader:
    """Reads whole new lines from a channel file since the last call (tolerates a torn last line)."""

    def __init__(self, path: str):
        self.path = path
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[dict]:
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
