"""A calibrated synthetic workload whose data stall and slowdown have a known truth.

- `SyntheticDataset`: each sample costs `sample_cpu_ms` of CPU time (a spin measured on the
  thread's own CPU clock, so on a saturated CPU it takes longer in wall time, as real
  augmentation would) plus `sample_io_ms` of waiting (I/O-like: a known stall at any load).
- `SyntheticModel`: a tiny linear model; each step adds `step_device_ms` of device work
  (on CUDA a busy kernel; on the CPU an emulated device: a wait that holds a per-GPU lock, so
  two jobs placed on the same GPU index queue for it just as they would on a real shared GPU)
  and `step_cpu_ms` of CPU work in the trainer's main thread.
"""

from __future__ import annotations

import fcntl
import os
import time

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


class SyntheticDataset(torch.utils.data.Dataset):
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

    def __getitem__(self, i: int):
        spin_cpu(self.sample_cpu_ms)
        if self.sample_io_ms > 0:
            time.sleep(self.sample_io_ms / 1000.0)
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, self.input_size, self.input_size, generator=g)
        return x, i % self.num_classes


class EmulatedDevice:
    """Device work of a set duration: a CUDA busy kernel, or on the CPU a wait holding a GPU lock."""

    def __init__(self, device: torch.device, gpu_index: int | None, lock_dir: str | None):
        self.device = device
        self._lock_path = None
        if device.type == "cpu" and gpu_index is not None and lock_dir:
            self._lock_path = os.path.join(lock_dir, f"emulated-gpu-{gpu_index}.lock")
        self._cycles_per_ms = None

    def _calibrate_cuda(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 1_000_000
        torch.cuda._sleep(cycles)  # warm-up
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        return cycles / max(start.elapsed_time(end), 1e-3)

    def work(self, ms: float) -> None:
        if ms <= 0:
            return
        if self.device.type == "cuda":
            if self._cycles_per_ms is None:
                self._cycles_per_ms = self._calibrate_cuda()
            torch.cuda._sleep(int(ms * self._cycles_per_ms))
            return
        if self._lock_path is None:
            time.sleep(ms / 1000.0)
            return
        fd = os.open(self._lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as f:  # in the data dir: 0600 like every file there
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                time.sleep(ms / 1000.0)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


class SyntheticModel(nn.Module):
    """A tiny classifier whose forward adds calibrated device and CPU work."""

    def __init__(self, input_size: int, num_classes: int, step_device_ms: float,
                 step_cpu_ms: float, device_work: EmulatedDevice):
        super().__init__()
        self.fc = nn.Linear(3 * input_size * input_size, num_classes)
        self.step_device_ms = step_device_ms
        self.step_cpu_ms = step_cpu_ms
        self.device_work = device_work

    def forward(self, x):
        spin_cpu(self.step_cpu_ms)
        self.device_work.work(self.step_device_ms)
        return self.fc(x.flatten(1))
