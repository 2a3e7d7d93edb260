"""Values a scheduling policy reasons about: jobs, running jobs, the machine, the waiting queue."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# a policy's static sort key for a waiting job (policies.Policy.key): numbers, compared in order
SortKey = tuple[float, ...]

GIB = 1024**3


@dataclass(frozen=True)
class Job:
    """One job as the queue knows it before it runs: when it came, what it asks for, how long
    it is expected to take alone (steps x solo step time, or a given duration)."""

    name: str  # unique within a queue or a simulation
    arrival_s: float = 0.0  # seconds after the start of the queue
    duration_s: float = 60.0  # expected solo run time
    gpus: int = 1  # GPUs (slots) it needs at once; 0 = a CPU-only job, takes no slot
    cpu_cores: float = 0.0  # solo CPU need (cores at full speed); 0 = unknown / negligible
    gpu_mem: int = 0  # bytes per GPU it uses; 0 = unknown
    gpu_util: float = 1.0  # fraction of its GPUs' time it keeps them busy alone (0..1)
    priority: int = 0  # larger runs first (the priority policy)
    klass: str = ""  # job class (the lyapunov policy keeps one virtual queue per class)
    pin: tuple[int, ...] = ()  # these GPU indexes and no others (len(pin) == gpus); () = any


@dataclass(frozen=True)
class Running:
    """A job that was started at `start_s` on the GPU indexes `gpus` (empty for a CPU-only job)."""

    job: Job
    start_s: float
    gpus: tuple[int, ...] = ()

    @property
    def expected_end_s(self) -> float:
        return self.start_s + self.job.duration_s


@dataclass(frozen=True)
class Machine:
    """What the queue may hand out: `gpus` GPUs (or slots on a box without GPUs), each taking
    up to `jobs_per_gpu` jobs (they time-slice it) within `gpu_mem` bytes (0 = unchecked), and
    `cpus` usable cores."""

    gpus: int
    cpus: float
    jobs_per_gpu: int = 1
    gpu_mem: int = 0
    unit: str = "GPU"  # what a slot is called in the reasons ("slot" on a box without GPUs)


@dataclass(frozen=True)
class Start:
    """A policy's decision to start `job` on the GPU indexes `gpus`."""

    job: Job
    gpus: tuple[int, ...]


@dataclass
class Decision:
    """What to start now and, with `explain`, why each waiting job still waits (name -> reason)."""

    starts: list[Start] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


QueueEntry = tuple[SortKey, int, "Job"]  # (key, arrival sequence, job): a waiting job, sorted


class JobQueue:
    """The waiting jobs, kept sorted by a policy's static key (ties: arrival order), overall and
    per job class, with the count of CPU-only jobs. Adding and removing cost O(log n) compares
    (plus a C-level list shift), so a simulation with thousands waiting stays fast."""

    def __init__(self, key: Callable[[Job], SortKey]):
        self._key = key
        self._seq = 0
        self._all: list[QueueEntry] = []  # (key, seq, job), sorted
        self._by_class: dict[str, list[QueueEntry]] = {}
        self._entry: dict[str, QueueEntry] = {}
        self.cpu_only = 0  # waiting jobs with gpus == 0

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[Job]:
        return (e[2] for e in self._all)

    def add(self, job: Job) -> None:
        if job.name in self._entry:
            raise ValueError(f"job {job.name!r} is already waiting")
        e = (self._key(job), self._seq, job)
        self._seq += 1
        self._entry[job.name] = e
        bisect.insort(self._all, e)
        bisect.insort(self._by_class.setdefault(job.klass, []), e)
        self.cpu_only += job.gpus == 0

    def remove(self, job: Job) -> None:
        e = self._entry.pop(job.name)
        for lst in (self._all, self._by_class[job.klass]):
            del lst[bisect.bisect_left(lst, e)]
        if not self._by_class[job.klass]:
            del self._by_class[job.klass]
        self.cpu_only -= job.gpus == 0

    def classes(self) -> dict[str, list[Job]]:
        """Per job class, its waiting jobs in key order (a copy)."""
        return {c: [e[2] for e in lst] for c, lst in self._by_class.items()}

    def class_entries(self) -> dict[str, list[QueueEntry]]:
        """Per job class, its (key, seq, job) entries in key order: read them, never change them."""
        return self._by_class
