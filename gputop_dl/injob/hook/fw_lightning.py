"""PyTorch Lightning with no code change: which loader trains, when an epoch ends, the plan.

Lightning drives the DataLoader itself, in ways a plain loop does not:
- it runs a sanity check of the validation loader before training, so the first loader
  iterated is not the training one. Its evaluation loops (sanity check, validation, test,
  predict) run with grad disabled (`no_grad` or `inference_mode`), its training loop with grad
  enabled: while `Trainer.fit` runs, only a loader iterated with grad enabled may become the
  main loader (`Tracker.may_be_main`); the others pause the step clock as any other loader;
- it never exhausts the training iterator (it stops at the loader's length, or at
  `limit_train_batches`), so no StopIteration ends an epoch: a callback added to the trainer
  ends it at `on_train_epoch_end` (`Tracker.end_epoch`);
- the plan: `max_epochs` (unknown when `max_steps` may stop the run first) and the batches
  per epoch after `limit_train_batches` (Lightning's own rule), in the "started" event.
Forward and backward inside the closure Lightning hands to `optimizer.step` are timed by the
generic phase clock (stepclock.closure_outside). Patched on import of Lightning's trainer
module (either package name); only `Trainer.fit` and the public `Callback` API are used.
Nothing here imports Lightning or torch.
"""

from __future__ import annotations

import sys
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

from . import report as rp
from .loaderpatch import mark_wrapper

if TYPE_CHECKING:
    from .tracker import RunPlan, Tracker

TARGETS = ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer")


def plan(trainer: Any, n: int | None) -> RunPlan:  # Lightning's Trainer, never imported here
    """{"epochs", "steps_per_epoch"} of a fit: `n` batches in the loader (None: no length)."""
    lim = getattr(trainer, "limit_train_batches", 1.0)
    spe = n
    if isinstance(lim, int) and not isinstance(lim, bool):
        spe = lim if n is None else min(n, lim)
    elif isinstance(lim, float) and n is not None:
        spe = int(n * lim)
    epochs = getattr(trainer, "max_epochs", None)
    if not isinstance(epochs, int) or epochs < 1 or getattr(trainer, "max_steps", -1) not in (None, -1):
        epochs = None
    return {"epochs": epochs, "steps_per_epoch": spe}


def patch(module: ModuleType, tracker: Tracker, report: rp.Reporter) -> None:
    """Wrap `Trainer.fit` of the just-imported trainer module: each fit gets the callback and
    the tracker the rules above."""
    trainer_cls = module.Trainer
    if getattr(trainer_cls.fit, "_gputop_dl", False):
        return
    root = module.__name__.rsplit(".trainer.trainer", 1)[0]
    base = sys.modules[root + ".callbacks"].Callback  # imported by the trainer module already

    class GputopDlEpochs(base):  # type: ignore[misc, valid-type]
        """Ends the hook's epoch where Lightning's training epoch ends."""

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            try:
                tracker.end_epoch(time.perf_counter())
            except Exception as exc:
                report.error("Lightning's epoch end", exc)

    orig_fit = trainer_cls.fit

    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            torch = rp.torch_module()
            tracker.may_be_main = lambda loader: torch is None or torch.is_grad_enabled()
            tracker.plan = lambda loader, n: plan(self, n)
            if not any(isinstance(c, GputopDlEpochs) for c in self.callbacks):
                self.callbacks.append(GputopDlEpochs())
        except Exception as exc:
            report.error("Lightning's Trainer.fit", exc)
        return orig_fit(self, *args, **kwargs)

    mark_wrapper(fit, orig_fit)
    trainer_cls.fit = fit
