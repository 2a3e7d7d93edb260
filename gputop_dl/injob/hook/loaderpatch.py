"""The DataLoader patch: times the main loader's `__next__` and hands it to the Tracker."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import Reporter
    from .tracker import Tracker

clock = time.perf_counter


def timed_next(tracker: Tracker, report: Reporter, it: Any, nxt: Callable[[], Any]) -> Any:
    """`nxt()`, the next batch of iterator `it`, timed as its data wait and told to the tracker
    (a batch, or the pass's end). A transform module run in `nxt` is data, not forward. Shared
    by the DataLoader patch and a framework's own loader (fw_accelerate)."""
    t0 = clock()
    # the phase clock, unless a phase is under way: a transform module run here is data
    sc = tracker.clock if tracker.clock is not None and tracker.clock.active is None else None
    if sc is not None:
        sc.active = "data"
    try:
        batch = nxt()
    except StopIteration:
        if sc is not None:
            sc.active = None
        try:
            tracker.on_stop(it, clock())
        except Exception as exc:
            report.error("end of epoch", exc)
        raise
    except BaseException:
        if sc is not None:
            sc.active = None
        raise
    t1 = clock()
    if sc is not None:
        sc.active = None
    try:
        tracker.on_batch(it, batch, t0, t1)
    except Exception as exc:
        report.error("step", exc)
    return batch


def gate(tracker: Tracker, report: Reporter, loader: Any) -> None:
    """The tracker's gate before a loader's pass starts (the co-run start barrier); a failure
    there is the hook's, never the script's."""
    try:
        tracker.before_iter(loader)
    except Exception as exc:
        report.error("the co-run start barrier", exc)


def patch_dataloader(mod: ModuleType, tracker: Tracker, report: Reporter) -> None:
    """Wrap DataLoader.__iter__ and _BaseDataLoaderIter.__next__ of the just-imported module."""
    loader_cls, iter_cls = mod.DataLoader, mod._BaseDataLoaderIter
    if getattr(iter_cls.__next__, "_gputop_dl", False):
        return
    orig_iter, orig_next = loader_cls.__iter__, iter_cls.__next__

    def __iter__(self: Any) -> Any:  # a DataLoader and its iterator: torch's, untyped here
        gate(tracker, report, self)
        it = orig_iter(self)
        try:
            tracker.on_iter(self, it, clock())
        except Exception as exc:
            report.error("DataLoader.__iter__", exc)
        return it

    def __next__(self: Any) -> Any:
        return timed_next(tracker, report, self, lambda: orig_next(self))

    mark_wrapper(__iter__, orig_iter)
    mark_wrapper(__next__, orig_next)
    loader_cls.__iter__ = __iter__
    iter_cls.__next__ = __next__


def mark_wrapper(new: Any, old: Any) -> None:  # functions given attributes: Any
    """`new` replaces `old`: it takes its name and doc, and is marked as ours."""
    new.__name__, new.__qualname__ = old.__name__, old.__qualname__
    new.__doc__, new.__wrapped__, new._gputop_dl = old.__doc__, old, True
