"""A calibrated synthetic workload whose data stall and slowdown have a known truth.

- `SyntheticDataset`: each sample costs `sample_cpu_ms` of CPU time (a spin measured on the
  thread's own CPU clock, so on a saturated CPU it takes longer in wall time, as real
  augmentation would) plus `sample_io_ms` of waiting (I/O-like: a known stall at any load).
- `SyntheticModel`: a tiny linear model; each step adds `step_device_ms` of device work
  (on CUDA matrix products that fill every SM, counted out to take that long alone; on the
  CPU an emulated device: a wait that holds a per-GPU lock, taken in turns, so two jobs
  placed on the same GPU index queue for it just as they would on a real shared GPU)
  and `step_cpu_ms` of CPU work in the trainer's main thread.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable
from typing import IO

import torch
from torch import nn


def spin_cpu(ms: float) -> None:
    """Burn `ms` milliseconds of this thread's CPU time."""
    if ms <= 0:
        return
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x += 1


class SyntheticDataset(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """Samples of shape (3, size, size) that each cost `sample_cpu_ms` of CPU time."""

    def __init__(self, length: int, input_size: int, num_classes: int, sample_cpu_ms: float,
                 sample_io_ms: float = 0.0):
        self.sample_io_ms = sample_io_ms
        self.length = length
        self.input_size = input_size
        self.num_classes = num_classes
        self.sample_cpu_ms = sample_cpu_ms

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        spin_cpu(self.sample_cpu_ms)
        if self.sample_io_ms > 0:
            time.sleep(self.sample_io_ms / 1000.0)
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, self.input_size, self.input_size, generator=g)
        return x, i % self.num_classes


class EmulatedDevice:
    """Device work of a set duration: counted matrix products on CUDA, or on the CPU a wait holding a GPU lock."""

    def __init__(self, device: torch.device, gpu_index: int | None, lock_dir: str | None):
        self.device = device
        self._lock_path = None
        if device.type == "cpu" and gpu_index is not None and lock_dir:
            self._lock_path = os.path.join(lock_dir, f"emulated-gpu-{gpu_index}.lock")
        self._cache_dir = lock_dir
        self._ms_per_mm: float | None = None
        self._mm: tuple[torch.Tensor, ...] | None = None

    def _calibrate_cuda(self) -> float:
        """Milliseconds of one busy matrix product on this GPU when it runs alone.

        Not torch.cuda._sleep: that spin counts clock cycles, which go on while another
        process's kernels hold the GPU, so two jobs' spins overlap (seen on an H100: the
        shared-GPU pair ran at 1.08x, not 2x). A product of two 4096x4096 fp16 matrices fills
        every SM, so jobs that share a GPU queue for it. The fastest of several short bursts
        is taken: a job that starts beside another still finds a moment alone. A calibration
        file per GPU (in the session's work dir) lets the co-run reuse the solo run's figure."""
        cache = None
        if self._cache_dir:
            uuid = str(getattr(torch.cuda.get_device_properties(self.device), "uuid", "gpu"))
            cache = os.path.join(self._cache_dir, f"matmul-ms-{uuid}.txt")
            try:
                with open(cache, encoding="ascii") as f:
                    return float(f.read())
            except (OSError, ValueError):
                pass
        n = 4096
        a = torch.randn(n, n, device=self.device, dtype=torch.float16)
        b = torch.randn(n, n, device=self.device, dtype=torch.float16)
        out = torch.empty(n, n, device=self.device, dtype=torch.float16)
        self._mm = (a, b, out)
        # torch.cuda.Event's constructor has no annotations in torch's own types
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        for _ in range(5):  # warm-up: cuBLAS picks its kernel
            torch.mm(a, b, out=out)
        best = float("inf")
        for _ in range(20):
            start.record()
            for _ in range(4):
                torch.mm(a, b, out=out)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 4)
        best = max(best, 1e-3)
        if cache:
            try:
                with open(cache, "w", encoding="ascii") as f:
                    f.write(repr(best))
            except OSError:
                pass
        return best

    def work(self, ms: float) -> None:
        if ms <= 0:
            return
        if self.device.type == "cuda":
            if self._ms_per_mm is None:
                self._ms_per_mm = self._calibrate_cuda()
            if self._mm is None:
                n = 4096
                self._mm = tuple(torch.randn(n, n, device=self.device, dtype=torch.float16)
                                 for _ in range(3))
            a, b, out = self._mm
            for _ in range(max(1, round(ms / self._ms_per_mm))):
                torch.mm(a, b, out=out)
            return
        if self._lock_path is None:
            time.sleep(ms / 1000.0)
            return
        # Two locks, so that jobs take turns as on a GPU that time-slices: a job queues at the
        # gate, then waits for the device holding the gate. A flock alone is unfair: its
        # holder, back from a few ms of CPU work, takes the lock again before a waiter that a
        # loaded CPU has not yet woken does, and one job of a pair starves.
        with _open_lock(self._lock_path + ".gate") as gate, _open_lock(self._lock_path) as dev:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(dev, fcntl.LOCK_EX)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                time.sleep(ms / 1000.0)
            finally:
                fcntl.flock(dev, fcntl.LOCK_UN)


def _open_lock(path: str) -> IO[str]:
    """A lock file in the session's data dir (0600 like every file there)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a")


class SyntheticModel(nn.Module):
    """A tiny classifier whose forward adds calibrated device and CPU work."""

    def __init__(self, input_size: int, num_classes: int, step_device_ms: float,
                 step_cpu_ms: float, device_work: EmulatedDevice):
        super().__init__()
        self.fc = nn.Linear(3 * input_size * input_size, num_classes)
        self.step_device_ms = step_device_ms
        self.step_cpu_ms = step_cpu_ms
        self.device_work = device_work

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spin_cpu(self.step_cpu_ms)
        self.device_work.work(self.step_device_ms)
        out: torch.Tensor = self.fc(x.flatten(1))  # nn.Module's __call__ returns Any
        return out


class SyntheticSGD:
    """SGD with momentum written out (the update of `torch.optim.SGD(momentum=m)`, dampening
    0, no weight decay) for the synthetic model's one layer.

    Not torch.optim: an optimizer's first parameter group imports torch._dynamo (torch's
    `_disable_dynamo` wrapper), about 1.2 s of CPU at each synthetic job's start, a third of
    the start of a job that emulates its device in a few ms. A real model's job pays it
    anyway: torchvision imports torch._dynamo."""

    def __init__(self, params: Iterable[nn.Parameter], lr: float, momentum: float):
        self.params = list(params)
        self.lr, self.momentum = lr, momentum
        self._buf: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            buf = self._buf[i]
            if buf is None:
                buf = self._buf[i] = p.grad.detach().clone()
            else:
                buf.mul_(self.momentum).add_(p.grad)
            p.add_(buf, alpha=-self.lr)
