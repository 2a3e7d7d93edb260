"""transformers' Trainer with no code change: where its training epoch ends.

The Trainer draws each epoch's batches from accelerate's loader (fw_accelerate.py counts them)
but stops at the epoch's known number of batches, never asking for a further one: no
StopIteration ends the pass. A callback added to the trainer ends the hook's epoch at the
Trainer's `on_epoch_end`, but only for a pass that handed over its last batch: the Trainer also
calls `on_epoch_end` where `max_steps` stopped it mid-epoch, which is no epoch. Patched on
import of `transformers.trainer`; only `Trainer.train` and the public `TrainerCallback` API
are used. Nothing here imports transformers or torch.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .loaderpatch import clock, mark_wrapper

if TYPE_CHECKING:
    from .report import Reporter
    from .tracker import Tracker

TARGETS = ("transformers.trainer",)


def patch(module: ModuleType, tracker: Tracker, report: Reporter) -> None:
    """Wrap `Trainer.train` of the just-imported module: each run gets the callback."""
    trainer_cls = module.Trainer
    if getattr(trainer_cls.train, "_gputop_dl", False):
        return
    base = sys.modules["transformers.trainer_callback"].TrainerCallback  # imported by the trainer

    class GputopDlEpochs(base):  # type: ignore[misc, valid-type]
        """Ends the hook's epoch where the Trainer's epoch ends, if its pass was complete."""

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            try:
                tracker.end_epoch(clock(), drained_only=True)
            except Exception as exc:
                report.error("the Trainer's epoch end", exc)

    orig_train = trainer_cls.train

    def train(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            handler = self.callback_handler
            if not any(isinstance(c, GputopDlEpochs) for c in handler.callbacks):
                handler.add_callback(GputopDlEpochs())
        except Exception as exc:
            report.error("the Trainer's train", exc)
        return orig_train(self, *args, **kwargs)

    mark_wrapper(train, orig_train)
    trainer_cls.train = train
