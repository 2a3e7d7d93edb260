"""One batch size of a sweep, in its own process: warm up, time N steps, print one JSON line.

Run by `gputop-dl sweep` as `python -m gputop_dl.lab.sweep_worker --model M --batch B ...`, so an
out-of-memory error or a crash costs only this batch, never the sweep. The last stdout line is
the result: {"gputop_dl_sweep": 1, "status": "ok" | "oom" | "error", ...}. Data are random tensors
made once on the device: the sweep measures the model's step, not an input pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
import warnings
from typing import Any

import psutil
import torch
import torchvision
from torch import nn

from gputop_dl.lab.sweep_worker_protocol import ENV_FAKE_OOM, RESULT_KEY



def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gputop_dl.lab.sweep_worker")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--input-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    return p.parse_args(argv)


def is_oom(exc: BaseException) -> bool:
    """CUDA or host out-of-memory, by type or by the allocators' messages."""
    text = str(exc)
    return (isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError))
            or "out of memory" in text.lower() or "DefaultCPUAllocator: can't allocate" in text)


def _nvml_used(gpu: int) -> int | None:
    """GPU memory NVML reports for this process (includes the CUDA context), or None."""
    try:
        from gputop_dl.collect.nvml.gpus import Nvml

        with Nvml() as nvml:
            used = [p.mem_used for p in nvml.processes()
                    if p.pid == os.getpid() and p.gpu_index == gpu and p.mem_used is not None]
        return sum(used) if used else None
    except Exception:  # noqa: BLE001 - optional figure
        return None


class Sweeper:
    """Model, optimizer and one random batch on the chosen device."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.rss0 = psutil.Process().memory_info().rss  # torch imported, nothing built yet
        if a.device == "cuda" and torch.cuda.is_available():
            self.device = torch.device("cuda", a.gpu)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        if getattr(a, "threads", 0):
            torch.set_num_threads(a.threads)
        torch.manual_seed(0)
        with warnings.catch_warnings():  # googlenet/inception: a FutureWarning about init
            warnings.simplefilter("ignore", FutureWarning)
            model = torchvision.models.get_model(a.model, weights=None, num_classes=a.num_classes)
        self.model = model.to(self.device)
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss = nn.CrossEntropyLoss()
        s = a.input_size
        self.x = torch.randn(a.batch, 3, s, s, device=self.device)
        self.y = torch.randint(0, a.num_classes, (a.batch,), device=self.device)
        self.fake_oom = int(os.environ.get(ENV_FAKE_OOM, "0") or 0)

    def step(self) -> float:
        """One training step; returns its wall time (s) and keeps its process CPU time in
        `last_cpu_s` (on a shared CPU the wall time includes waiting for a core)."""
        c0, t0 = time.process_time(), time.perf_counter()
        if self.fake_oom and self.a.batch >= self.fake_oom:
            raise torch.cuda.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate 2.00 GiB (injected by {ENV_FAKE_OOM})")
        self.opt.zero_grad(set_to_none=True)
        out = self.model(self.x)
        if isinstance(out, tuple):  # inception/googlenet aux outputs in train mode
            out = out[0]
        loss = self.loss(out, self.y)
        loss.backward()
        self.opt.step()
        loss.item()  # sync point
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t1 = time.perf_counter()
        self.last_cpu_s = time.process_time() - c0
        return t1 - t0

    def memory(self) -> dict[str, Any]:
        if self.device.type == "cuda":
            return {"peak_mem": int(torch.cuda.max_memory_allocated(self.device)),
                    "mem_kind": "cuda-allocated",
                    "reserved_mem": int(torch.cuda.max_memory_reserved(self.device)),
                    "nvml_mem": _nvml_used(self.a.gpu)}
        # Like the allocator's peak on a GPU, the CPU figure leaves out the process's start-up
        # memory (Python + torch libraries): peak RSS minus the RSS before anything was built.
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {"peak_mem": max(0, peak - self.rss0), "mem_kind": "host-rss-delta",
                "peak_rss": peak, "start_rss": self.rss0}


def run(a: argparse.Namespace) -> dict[str, Any]:
    """The result line's JSON object (a `SweepRow` with the `RESULT_KEY` marker)."""
    res: dict[str, Any] = {RESULT_KEY: 1, "batch": a.batch, "model": a.model, "torch": torch.__version__}
    sw = None
    try:
        sw = Sweeper(a)
        res.update(device=str(sw.device), threads=torch.get_num_threads())
        for _ in range(a.warmup):
            sw.step()
        times, cpu = [], []
        for _ in range(a.steps):
            times.append(sw.step())
            cpu.append(sw.last_cpu_s)
        res.update(status="ok", step_s=statistics.median(times),
                   step_mean_s=statistics.fmean(times), step_min_s=min(times), step_max_s=max(times),
                   step_cpu_s=statistics.median(cpu), steps=len(times), warmup=a.warmup)
    except BaseException as exc:  # noqa: BLE001 - any failure becomes this batch's result
        if isinstance(exc, KeyboardInterrupt):
            raise
        last = str(exc).strip().splitlines()
        res.update(status="oom" if is_oom(exc) else "error",
                   message=f"{type(exc).__name__}: {last[0] if last else ''}"[:300])
    if sw is not None:
        res.update(sw.memory())
    return res


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    res = run(a)
    sys.stdout.write("\n" + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0 if res["status"] == "ok" else 3 if res["status"] == "oom" else 1


if __name__ == "__main__":
    sys.exit(main())
