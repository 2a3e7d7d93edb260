"""Main-loader iteration -> step and epoch events (pure: the times come from the caller).

Definitions (the same as the built-in trainer's, see gputop_dl/injob/channel.py):
- main loader: the first DataLoader that is iterated. Other loaders (eval) are not training
  steps; while one runs in the middle of a training epoch, the main step clock pauses.
- t_data: time inside the main iterator's `__next__`; t_step: from the previous batch's return
  (or the epoch iterator's creation) to this batch's return, so it includes the compute.
- epoch: one full pass (StopIteration) of the main loader; an abandoned pass is no epoch. A
  framework whose loader looks one batch ahead (accelerate) says when it handed over its last
  batch (`drained`); such a pass ends at the framework's epoch end (`end_epoch`), at the next
  pass, or at exit (`finish`), whichever comes first, even if nobody asked for a further batch.
- samples: the batch's first tensor's length (x WORLD_SIZE), None when not cheaply known.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import report as rp

if TYPE_CHECKING:  # (the job's Python may be older than gputop-dl's: no aliases at run time)
    from typing import TypedDict

    from .stepclock import CudaResolver, StepClock

    Phases = tuple[dict[str, float], list[tuple[str, Any, Any]]]  # StepClock.take(): seconds per
    # phase, CUDA event pairs

    class RunPlan(TypedDict, total=False):
        """A run's plan as a framework knows it (None: unknown)."""

        epochs: int | None
        steps_per_epoch: int | None


def batch_len(batch: object, depth: int = 0) -> int | None:
    """Length of the batch's first tensor (tensor, list/tuple or dict of them), else None."""
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    if depth < 3:
        if isinstance(batch, (list, tuple)) and batch:
            return batch_len(batch[0], depth + 1)
        if isinstance(batch, dict) and batch:
            return batch_len(next(iter(batch.values())), depth + 1)
    return None


class Tracker:
    """Turns main-loader iteration into step/epoch events; pure (times come from the caller)."""

    def __init__(self, report: rp.Reporter, world_size: int = 1, rank: int | None = None):
        self.report = report
        self.world = world_size
        self.rank = rank  # in a distributed run: every step record names its rank
        self.clock: StepClock | None = None  # the phase clock, once torch is patched
        self.resolver: CudaResolver | None = None  # CUDA steps wait here for their events
        self.held: Phases | None = None  # the phases before another loader paused this step
        # called once with the main loader (patches torch for the phases)
        self.on_main: Callable[[], None] | None = None
        self.main: Any = None  # the main training loader (torch's DataLoader: Any here)
        self.it: Any = None  # its current epoch iterator
        self.open = False  # a pass of the main loader is under way
        self.done = 0  # completed passes
        self.step = 0
        self.samples: int | None = 0
        self.t_epoch = self.t_prev = 0.0
        self.pause: float | None = None  # when another loader started during this epoch
        self.started = False
        # set by a framework's module (fw_*.py): whether a loader iterated now may be the main
        # loader (Lightning: not one iterated without grad, i.e. in an evaluation loop), and
        # the run's plan, {"epochs", "steps_per_epoch"}, from the loader and its length
        self.may_be_main: Callable[[Any], bool] | None = None
        self.plan: Callable[[Any, int | None], RunPlan] | None = None
        self.inner = 0  # > 0: a framework's loader is fetching from a DataLoader it wraps
        self.drained = False  # the main pass handed over its last batch (fw_accelerate)
        # called once, before the main loader's first pass starts (no worker started yet): the
        # co-run's start barrier (dlhook), which may block until every launched job is ready
        self.gate: Callable[[], None] | None = None

    def before_iter(self, loader: Any) -> None:
        """A loader is about to start a pass: if it will be the main loader's first, pass the
        gate first (once). Called before the loader's own `__iter__` (its workers start there)."""
        if self.gate is None or self.main is not None or self.inner:
            return
        if self.may_be_main is not None and not self.may_be_main(loader):
            return
        gate, self.gate = self.gate, None
        gate()

    def on_iter(self, loader: Any, it: Any, now: float) -> None:
        if self.inner:
            return
        if self.main is None:
            if self.may_be_main is not None and not self.may_be_main(loader):
                return
            self.main = loader
            self._started(loader)
            if self.on_main is not None:
                self.on_main()
        if loader is not self.main:
            if self.open and self.pause is None:
                self.pause = now
                self.held = self._take_phases()[0:2]
            return
        if self.drained:  # the last pass is over although nobody asked past its last batch
            self.end_epoch(now)
        self.it, self.open, self.drained = it, True, False
        self.step, self.samples = 0, 0
        self.t_epoch = self.t_prev = now  # a new epoch: the gap before it is nobody's step
        self.pause, self.held = None, None
        self._take_phases()

    def _take_phases(self) -> Phases:
        if self.clock is None:
            return {}, []
        return self.clock.take()

    def on_batch(self, it: Any, batch: object, t0: float, t1: float) -> None:
        if self.inner:
            return
        if it is not self.it or not self.open:
            if self.open and self.pause is None:
                self.pause = t0
            return
        t_data = t1 - t0
        ph, pairs = self._take_phases()
        if self.pause is not None:  # bill only the compute before the other loader started
            t_step = max(0.0, self.pause - self.t_prev) + t_data
            self.pause = None
            if self.held is not None:  # and only its phases (the other loader's are nobody's)
                (ph, pairs), self.held = self.held, None
        else:
            t_step = t1 - self.t_prev
        self.t_prev = t1
        self.step += 1
        n = batch_len(batch)
        if n is not None:
            n *= self.world
        self.samples = None if n is None or self.samples is None else self.samples + n
        rec: dict[str, Any] = dict(epoch=self.done + 1, step=self.step, t_data=round(t_data, 6),
                   t_step=round(t_step, 6), samples=n)
        if self.clock is not None:
            rec["ph"] = {k: round(v, 6) for k, v in ph.items()}
        if self.rank is not None:
            rec["rank"] = self.rank
        if self.resolver is not None:  # (every step, so that they go out in order)
            self.resolver.put(rec, pairs)  # emitted by the sampler once its CUDA events resolved
        else:
            self.report.emit("step", **rec)

    def on_stop(self, it: Any, now: float) -> None:
        if self.inner or it is not self.it or not self.open:
            return
        self.open = self.drained = False
        self.done += 1
        if self.step and not self.report.steps_only:
            self.report.emit("epoch", flush=True, epoch=self.done,
                             time_s=round(now - self.t_epoch, 4), steps=self.step,
                             samples=self.samples, loss=None, peak_mem=rp.peak_mem())

    def end_epoch(self, now: float, drained_only: bool = False) -> None:
        """A framework says that its training epoch ended, although it may not have exhausted
        the main iterator (Lightning stops at the loader's known length, or at
        `limit_train_batches`). The epoch ends at `now`, or where another loader (its
        validation) started after the last batch. `drained_only`: only if the pass handed
        over its last batch (transformers' Trainer ends an epoch also where `max_steps`
        stopped it)."""
        if self.open and (self.drained or not drained_only):
            self.on_stop(self.it, self.pause if self.pause is not None else now)

    def finish(self, now: float) -> None:
        """The process exits: a pass that handed over its last batch is an epoch."""
        self.end_epoch(now, drained_only=True)

    def _started(self, loader: Any) -> None:
        if self.report.steps_only:
            self.started = True
            return
        try:
            spe = len(loader)
        except Exception:  # an IterableDataset without __len__
            spe = None
        plan = self.plan(loader, spe) if self.plan is not None else {}
        torch = rp.torch_module()
        self.started = True
        self.report.emit("started", flush=True, pid=os.getpid(), device=rp.device_name(),
                         **dict(rp.load_channel().rank_info(os.environ), world_size=self.world),
                         torch=getattr(torch, "__version__", None),
                         model=None, params=None, batch_size=getattr(loader, "batch_size", None),
                         num_workers=getattr(loader, "num_workers", None),
                         epochs=plan.get("epochs"), steps_per_epoch=plan.get("steps_per_epoch", spe))
