"""Workload and session specs: the validated, resolved content of a workload file.

`gputop_dl.config` builds these from TOML; the launcher and the trainer consume them. They are
plain data (JSON round-trip via `to_dict`/`from_dict`) so a spec can be handed to the trainer
child process as a file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, overload

TRANSFORM_PRESETS = ("light", "heavy")
DATASETS = ("fake", "imagefolder", "synthetic")
OPTIMIZERS = ("sgd", "adam", "adamw")
BASELINES = ("measure", "cache", "probe", "none")
REDACTED = "<redacted>"  # an env value, wherever gputop-dl records or shows it


@overload
def redact_env(config: dict) -> dict: ...
@overload
def redact_env(config: None) -> None: ...
def redact_env(config: dict | None) -> dict | None:
    """A workload's plain data with its `env` values replaced by REDACTED, keys kept (a copy
    when there is something to hide)."""
    env = config.get("env") if isinstance(config, dict) else None
    if config is None or not isinstance(env, dict) or all(v == REDACTED for v in env.values()):
        return config
    return dict(config, env=dict.fromkeys(env, REDACTED))


@dataclass(frozen=True)
class Workload:
    """One [[workload]] after [defaults] were merged in (and, on CPU fallback, its cpu_fallback)."""

    name: str
    model: str = "mobilenet_v2"  # torchvision classification model name, or "synthetic"
    dataset: str = "fake"  # fake | imagefolder | synthetic
    root: str | None = None  # imagefolder root (absolute after validation)
    dataset_size: int | None = None  # fake/synthetic: images per epoch (default: steps*batch)
    source_size: int | None = None  # fake: side of the generated images (default 1.5 x input)
    input_size: int = 224
    num_classes: int = 1000
    batch_size: int = 32
    num_workers: int = 4
    transforms: str | tuple[str, ...] = "heavy"  # preset or explicit list of transform specs
    epochs: int = 3
    steps_per_epoch: int | None = None
    warmup_steps: int = 3
    optimizer: str = "sgd"
    lr: float = 0.01
    gpus: tuple[int, ...] = ()
    nproc: int | None = None  # DDP processes per node (default: len(gpus) on CUDA, 1 on CPU)
    # a job across nodes (docs/architecture.md): one `gputop-dl launch` per node, torchrun's c10d
    nnodes: int = 1  # nodes of the job; > 1 needs rdzv_endpoint
    rdzv_endpoint: str | None = None  # "HOST:PORT" of the rendezvous (the same on every node)
    rdzv_id: str | None = None  # the run's id (default: derived from the name and file)
    threads: int | None = None  # torch intra-op threads (OMP/MKL) in the trainer
    seed: int = 0
    # calibrated synthetic workload (dataset = "synthetic" / model = "synthetic")
    sample_cpu_ms: float = 0.0  # CPU work per sample in the dataset (in the loader)
    sample_io_ms: float = 0.0  # waiting per sample in the dataset (I/O-like, uses no CPU)
    step_device_ms: float = 0.0  # device work per step (waited on CPU, matrix products that fill the GPU on CUDA)
    step_cpu_ms: float = 0.0  # CPU work per step in the trainer's main thread
    # any program, measured from outside
    command: tuple[str, ...] | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    shell: bool = False
    # as a job of `gputop-dl queue` (docs/scheduling.md)
    arrival: float = 0.0  # seconds after the queue's start
    priority: int = 0  # larger first (the priority policy)
    duration_s: float | None = None  # expected solo run time (else: a cached solo baseline)
    gpu_count: int | None = None  # `gpus = N`: GPUs (slots) as a count, placed by the queue
    # set when the file's cpu_fallback overrides were applied
    cpu_fallback_applied: tuple[str, ...] = ()
    # memory cap (issue 27): bytes of RSS the job's processes may use together; None: the
    # default share of the host's memory (launch.memory_cap)
    memory_limit: int | None = None

    def to_dict(self, redact: bool = False) -> dict:
        """As plain data; `redact`: `env` values replaced by REDACTED, keys kept (what is
        stored, exported, written to the job's spec file or shown: the values may be secrets,
        and only the job's own environment needs them)."""
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return redact_env(d) if redact else d

    @classmethod
    def from_dict(cls, d: dict) -> Workload:
        names = {f.name for f in fields(cls)}
        kw = {}
        for k, v in d.items():
            if k not in names:
                continue
            if isinstance(v, list):
                v = tuple(v)
            kw[k] = v
        return cls(**kw)

    def with_(self, **changes: Any) -> Workload:
        return replace(self, **changes)

    @property
    def is_command(self) -> bool:
        return self.command is not None

    @property
    def multinode(self) -> bool:
        """The job spans nodes: this launch runs one node's share of it."""
        return self.nnodes > 1


@dataclass(frozen=True)
class SessionSpec:
    """The [session] table plus the workloads, ready to launch."""

    name: str
    path: str  # the workload file, as given
    interval: float = 1.0
    baseline: str = "measure"  # measure | cache | probe | none
    baseline_steps: int = 8  # measured steps per solo baseline (after warm-up)
    probe_s: float = 5.0  # probe: the longest one job runs alone, the others paused
    baseline_timeout_s: float = 300.0  # a command's solo run without its steps is stopped then
    workloads: tuple[Workload, ...] = ()
    cuda: bool = True  # False: no CUDA here, every workload fell back to the CPU
    cpu_fallback_reason: str | None = None
    # `gputop-dl queue`: the scheduling policy, its slots (no CUDA) and CPU-aware admission
    policy: str = "fifo"
    slots: int | None = None  # None: the usable cores (no CUDA) or the GPUs
    cpu_aware: bool | None = None  # None: on when solo profiles exist
    ageing_s: float = 600.0  # priority: seconds of waiting worth one priority level
    v: float = 1.0  # lyapunov: weight of the CPU-overcommit penalty
