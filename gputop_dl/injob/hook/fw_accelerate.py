"""Hugging Face accelerate with no code change: a step is a batch its loader hands over.

`Accelerator.prepare(loader)` wraps the script's DataLoader in accelerate's own loader
(`DataLoaderShard`, `DataLoaderDispatcher`, `SkipDataLoader`: not DataLoader subclasses; they
only pretend to be). The shard iterates the DataLoader one batch ahead, to know which batch is
the last: counted at the DataLoader, a run stopped after n batches (transformers' `max_steps`)
showed n + 1 steps, and the pass ended (StopIteration) one batch before its last compute. So
here the batches the wrapper hands to the script are the steps, and the DataLoader it fetches
from is not seen (`Tracker.inner`). The shard says when it handed over its last batch
(`end_of_dataloader`): the pass is then `drained`, and it is an epoch even when the script
(transformers' Trainer) never asks for a further batch (see tracker.py: what an epoch is).
Patched on import of `accelerate.data_loader`; nothing here imports accelerate or torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .loaderpatch import clock, gate, mark_wrapper, timed_next

if TYPE_CHECKING:
    from .report import Reporter
    from .tracker import Tracker

TARGETS = ("accelerate.data_loader",)
CLASSES = ("DataLoaderShard", "DataLoaderDispatcher", "SkipDataLoader")


class TimedIter:
    """The iterator of one pass of an accelerate loader: each batch timed and told to the
    tracker; the wrapped DataLoader's own iteration hidden from it."""

    def __init__(self, loader: Any, inner: Iterator[Any], tracker: Tracker, report: Reporter):
        self.loader, self.inner = loader, inner
        self.tracker, self.report = tracker, report

    def __iter__(self) -> TimedIter:
        return self

    def __next__(self) -> Any:
        return timed_next(self.tracker, self.report, self, self._fetch)

    def _fetch(self) -> Any:
        self.tracker.inner += 1
        try:
            batch = next(self.inner)
        finally:
            self.tracker.inner -= 1
        if self.tracker.it is self and getattr(self.loader, "end_of_dataloader", False):
            self.tracker.drained = True  # (the main pass only: an evaluation's end is not ours)
        return batch

    def __getattr__(self, name: str) -> Any:  # anything else a caller asks of the generator
        return getattr(self.inner, name)


def patch(module: ModuleType, tracker: Tracker, report: Reporter) -> None:
    """Wrap `__iter__` of accelerate's loader classes in the just-imported module."""
    for name in CLASSES:
        cls = getattr(module, name, None)
        orig: Any = getattr(cls, "__iter__", None)
        if cls is None or orig is None or getattr(orig, "_gputop_dl", False):
            continue

        def __iter__(self: Any, orig: Any = orig) -> TimedIter:
            gate(tracker, report, self)
            it = TimedIter(self, orig(self), tracker, report)
            try:
                tracker.on_iter(self, it, clock())
            except Exception as exc:
                report.error("accelerate's loader", exc)
            return it

        mark_wrapper(__iter__, orig)
        cls.__iter__ = __iter__
