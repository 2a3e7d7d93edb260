"""The training loop: measures t_data / t_step per step and reports them over the event channel.

One process per job (or one per rank under torchrun: the first rank of each node reports, with
its global rank, so each node's gputop-dl of a job across nodes sees the job's steps). Failures are reported
with a cause (CUDA OOM, host OOM, exception) before the process exits non-zero.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Iterable
from typing import Any, NoReturn

import torch
from torch import nn

from gputop_dl.injob.channel import (ENV_GO, EventWriter, StepsOnly, failure_message,
                               host_memory_cause, rank_info, reports_here, wait_for_go)
from gputop_dl.injob.hook.stepclock import CudaResolver, StepClock, cuda_event_factory, rounded
from gputop_dl.quick_exit import exit_now
from gputop_dl.injob.trainer.data import build_dataset
from gputop_dl.injob.trainer.synthetic import EmulatedDevice, SyntheticModel, SyntheticSGD
from gputop_dl.workload import Workload

ENV_EMU_DIR = "GPUTOP_DL_EMU_DIR"


def _peak_mem(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def build_model(w: Workload, device: torch.device) -> nn.Module:
    if w.model == "synthetic":
        gpu = w.gpus[0] if w.gpus else None
        emu = EmulatedDevice(device, gpu, os.environ.get(ENV_EMU_DIR))
        return SyntheticModel(w.input_size, w.num_classes, w.step_device_ms, w.step_cpu_ms, emu)
    import torchvision  # here: a synthetic job starts without it (about 2.5 s of imports)

    model: nn.Module = torchvision.models.get_model(w.model, weights=None,  # torchvision: untyped
                                                    num_classes=w.num_classes)
    return model


def forward_flops(w: Workload) -> float | None:
    """Forward FLOPs for one image (torch's FlopCounterMode on the meta device), for the
    achieved training compute the reports show; None for the synthetic model or on failure."""
    if w.model == "synthetic":
        return None
    from gputop_dl.lab.cost import model_cost

    return model_cost(w.model, w.input_size).flops


def build_optimizer(w: Workload,
                    params: Iterable[nn.Parameter]) -> torch.optim.Optimizer | SyntheticSGD:
    """torch.optim's, but a synthetic model's SGD is written out (`SyntheticSGD`: the same
    update, without the 1.2 s import of torch._dynamo that torch.optim's first use costs)."""
    if w.optimizer == "sgd" and w.model == "synthetic":
        return SyntheticSGD(params, lr=w.lr, momentum=0.9)
    if w.optimizer == "adam":
        return torch.optim.Adam(params, lr=w.lr)
    if w.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=w.lr)
    return torch.optim.SGD(params, lr=w.lr, momentum=0.9)


class Trainer:
    """Builds model, data and optimizer for one workload and runs its epochs."""

    def __init__(self, w: Workload, events: EventWriter | StepsOnly):
        self.w = w
        self.events = events
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            self.device = torch.device("cuda", local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        if w.threads:
            torch.set_num_threads(w.threads)
        torch.manual_seed(w.seed)
        if self.world_size > 1:
            import torch.distributed as dist

            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        dataset = build_dataset(w, self.world_size)
        sampler: torch.utils.data.distributed.DistributedSampler[Any] | None = None
        if self.world_size > 1:
            sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True,
                                                                      seed=w.seed)
        self.sampler = sampler
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=w.batch_size, shuffle=sampler is None, sampler=sampler,
            num_workers=w.num_workers, pin_memory=self.device.type == "cuda", drop_last=True,
            persistent_workers=w.num_workers > 0)
        model = build_model(w, self.device).to(self.device)
        self.params = sum(p.numel() for p in model.parameters())
        self.fwd_flops = forward_flops(w)
        if self.world_size > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        self.model = model
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = build_optimizer(w, model.parameters())
        self.steps = min(w.steps_per_epoch or len(self.loader), len(self.loader))

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self) -> None:
        w, ev = self.w, self.events
        ev.emit("started", flush=True, pid=os.getpid(), device=str(self.device),
                **dict(rank_info(os.environ), world_size=self.world_size), torch=torch.__version__,
                model=w.model,
                params=self.params, fwd_flops=self.fwd_flops, batch_size=w.batch_size,
                epochs=w.epochs,
                steps_per_epoch=self.steps)
        wait_for_go(os.environ.get(ENV_GO), ev)
        samples_per_step = w.batch_size * self.world_size
        # the step's phases (docs/phases.md): host time, or CUDA events that a sampler thread
        # resolves without ever waiting on the GPU
        sc = StepClock(event_factory=cuda_event_factory(torch) if self.device.type == "cuda"
                       else None)
        resolver = None
        if sc.event_factory is not None:
            resolver = CudaResolver(lambda rec: ev.emit("step", **rec), sc)
            resolver.start()
        rank = self.rank if self.world_size > 1 else None
        self.model.train()
        for epoch in range(1, w.epochs + 1):
            if self.sampler is not None:
                self.sampler.set_epoch(epoch)
            t_epoch = time.perf_counter()
            loss_sum, n, seen = 0.0, 0, 0
            correct = torch.zeros((), dtype=torch.long, device=self.device)  # read once an epoch
            it = iter(self.loader)
            t0 = time.perf_counter()
            for step in range(1, self.steps + 1):
                x, y = next(it)
                t_data = time.perf_counter() - t0
                sc.enter("h2d")
                x = x.to(self.device, non_blocking=True)
                y = y.to(self.device, non_blocking=True)
                sc.leave("h2d")
                self.optimizer.zero_grad(set_to_none=True)
                sc.enter("forward")
                out = self.model(x)
                loss = self.criterion(out, y)
                sc.leave("forward")
                sc.enter("backward")
                loss.backward()
                sc.leave("backward")
                sc.enter("optimizer")
                self.optimizer.step()
                sc.leave("optimizer")
                loss_sum += loss.item()  # also the device sync point, as in most training loops
                correct += (out.detach().argmax(1) == y).sum()  # on the device: no extra sync
                seen += y.numel()
                n += 1
                t1 = time.perf_counter()
                ph, pairs = sc.take()
                rec: dict[str, Any] = dict(epoch=epoch, step=step, t_data=round(t_data, 6),
                                           t_step=round(t1 - t0, 6), samples=samples_per_step,
                                           ph=rounded(ph))  # a "step" event (injob/channel.py)
                if rank is not None:
                    rec["rank"] = rank
                if resolver is not None:
                    resolver.put(rec, pairs)
                else:
                    ev.emit("step", **rec)
                t0 = t1
            self._sync()
            if resolver is not None:
                resolver.poll()  # after the epoch's sync every event has resolved
            ev.emit("epoch", flush=True, epoch=epoch, time_s=round(time.perf_counter() - t_epoch, 4),
                    steps=n, samples=n * samples_per_step, loss=round(loss_sum / max(n, 1), 5),
                    accuracy=round(int(correct) / seen, 5) if seen else None,
                    peak_mem=_peak_mem(self.device))
        if resolver is not None:
            resolver.stop()
        ev.emit("finished", flush=True)

    def close(self) -> None:
        """Tear down the DDP process group and the loader's workers after a finished run.
        Left to interpreter exit, gloo's threads are destroyed still running and the rank
        aborts ("terminate called without an active exception", SIGABRT) after its last step:
        a finished job then fails (a rank then leaves without that teardown: `leave_finished`).
        Not after a failure: a collective left pending on another rank could hang it."""
        if self.world_size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        # persistent loader workers end now, not when they notice their parent gone (leave_finished)
        shutdown = getattr(getattr(self.loader, "_iterator", None), "_shutdown_workers", None)
        if callable(shutdown):
            shutdown()


def leave_finished() -> NoReturn:
    """End a trainer that finished cleanly (its loader's workers and DDP process group torn
    down, its events closed) without the interpreter's teardown: nothing of ours is left to
    tear down, and output is flushed.

    Two reasons. The teardown of torch's modules takes about a second on a 2-core box (0.5 s
    for `import torch` alone, 0.95 s once an optimizer has imported `torch._dynamo`), a second
    in which the job is done but its process is not: a solo baseline, the co-run and the
    session wait on it (docs/benchmarks.md). And in a DDP rank, even after
    `destroy_process_group`, a gloo thread was sometimes still joinable when C++ destroyed it
    at exit ("terminate called without an active exception", SIGABRT, or a SIGSEGV;
    faulthandler showed no Python frame left): 4 of 25 runs of the two-rank test beside two
    busy loops; torchrun then SIGTERMs the other rank, and a finished job counts as failed."""
    exit_now(0)


def classify_failure(exc: BaseException) -> str:
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "CUDA out of memory" in str(exc):
        return "cuda-oom"
    if isinstance(exc, MemoryError) or "DefaultCPUAllocator: can't allocate" in str(exc):
        return host_memory_cause()
    return "exception"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gputop_dl.injob.trainer SPEC.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        w = Workload.from_dict(json.load(f))
    events = EventWriter.from_env() if reports_here(os.environ) else StepsOnly(EventWriter.from_env())
    try:
        trainer = Trainer(w, events)
        trainer.run()
        trainer.close()
        events.close()
        leave_finished()
    except KeyboardInterrupt:
        events.emit("note", flush=True, message="interrupted")
        return 130
    except BaseException as exc:  # report every failure with its cause, then exit non-zero
        traceback.print_exc()
        events.emit("failed", flush=True, cause=classify_failure(exc),
                    message=failure_message(exc))
        return 1
    finally:
        events.close()
