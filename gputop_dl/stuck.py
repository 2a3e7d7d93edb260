"""Why a live job is called stuck, and the Python stacks that tell: `Stuck`, `ThreadStack`, `StackFrame`.

Values carried by a job's row (`JobSample.stuck`, snapshot.py): the stacks as py-spy dumps
them (collect/pyspy/dump.py), and the stuck call the live judge makes from them and from the
job's progress (analyse/live/stuck.py); its words are present/stuck_text.py's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from gputop_dl.snapshot_json import stuck_json


class StackFrame(NamedTuple):
    """One frame of a Python thread's stack as py-spy dumped it (collect/pyspy/dump.py)."""

    func: str
    file: str  # the file's path as the job named it
    line: int
    code: str | None = None  # the source line, where its file could be read

    def short(self) -> str:
        """"train.py:42 step"."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line} {self.func}"


class ThreadStack(NamedTuple):
    """One thread of a process at one dump: its frames, innermost first."""

    pid: int
    tid: int  # the OS thread id
    name: str | None
    main: bool  # the process's main thread
    active: bool | None  # py-spy's guess that it was running, not waiting (None: unknown)
    frames: tuple[StackFrame, ...]


@dataclass(frozen=True)
class Stuck:
    """Why a live job is called stuck (analyse/live/stuck.py): no progress for `for_s` seconds (past
    `threshold_s`) while its threads slept and its main thread stayed in one place."""

    since: float  # wall time of its last progress (or of its first look, if none was seen)
    for_s: float  # seconds without progress
    threshold_s: float
    where: str  # dataloader | collective | lock | cuda-sync | sleep | io | unknown
    frame: str | None  # the main thread's frame that matters, "train.py:42 step"
    stack: tuple[str, ...] = ()  # the main thread's frames, innermost first
    pid: int | None = None  # the process whose main thread was read
    # who it waits on: a loader worker's (pid, its frame), or a DDP run's ranks not in the
    # collective ((rank, its frame), ...)
    worker_pid: int | None = None
    worker_frame: str | None = None
    missing_ranks: tuple[tuple[int, str | None], ...] = ()
    # the evidence: the most CPU cores its processes used, the most bytes/s they read, the most
    # loader write calls/s, over `quiet_s` seconds; its processes' states; dumps read with the
    # main stack unchanged, and over how many seconds
    quiet_s: float = 0.0
    cpu_cores_max: float | None = None
    read_bytes_per_s_max: float | None = None
    loader_writes_per_s_max: float | None = None
    states: str = ""  # "S S S": its processes' states at the last look
    dumps: int = 0
    stack_same_s: float = 0.0
    progress: str = "none"  # what it counted its progress by: steps | loop | loader | none
    window_s: float | None = None  # `--once`: the sampling window it was judged over

    def to_json(self) -> dict[str, Any]:
        """The job's `stuck` object in the JSON (schemas/snapshot.json)."""
        return stuck_json(asdict(self))
