"""The DataLoader patch: times the main loader's `__next__` and hands it to the Tracker."""

from __future__ import annotations

import time

clock = time.perf_counter


def timed_next(tracker, report, it, nxt):
    """`nxt()`, the next batch of iterator `it`, timed as its data wait and told to the tracker
    (a batch, or the pass's end). A transform module run in `nxt` is data, not forward. Shared
    by the DataLoader patch and a framework's own loader (fw_accelerate)."""
    t0 = clock()
    sc = tracker.clock  # the phase clock
    mark = sc is not None and sc.active is None
    if mark:
        sc.active = "data"
    try:
        batch = nxt()
    except StopIteration:
        if mark:
            sc.active = None
        try:
            tracker.on_stop(it, clock())
        except Exception as exc:
            report.error("end of epoch", exc)
        raise
    except BaseException:
        if mark:
            sc.active = None
        raise
    t1 = clock()
    if mark:
        sc.active = None
    try:
        tracker.on_batch(it, batch, t0, t1)
    except Exception as exc:
        report.error("step", exc)
    return batch


def patch_dataloader(mod, tracker, report) -> None:
    """Wrap DataLoader.__iter__ and _BaseDataLoaderIter.__next__ of the just-imported module."""
    loader_cls, iter_cls = mod.DataLoader, mod._BaseDataLoaderIter
    if getattr(iter_cls.__next__, "_gputop_dl", False):
        return
    orig_iter, orig_next = loader_cls.__iter__, iter_cls.__next__

    def __iter__(self):
        it = orig_iter(self)
        try:
            tracker.on_iter(self, it, clock())
        except Exception as exc:
            report.error("DataLoader.__iter__", exc)
        return it

    def __next__(self):
        return timed_next(tracker, report, self, lambda: orig_next(self))

    for new, old in ((__iter__, orig_iter), (__next__, orig_next)):
        mark_wrapper(new, old)
    loader_cls.__iter__ = __iter__
    iter_cls.__next__ = __next__


def mark_wrapper(new, old) -> None:
    """`new` replaces `old`: it takes its name and doc, and is marked as ours."""
    new.__name__, new.__qualname__ = old.__name__, old.__qualname__
    new.__doc__, new.__wrapped__, new._gputop_dl = old.__doc__, old, True
