"""The DataLoader patch: times the main loader's `__next__` and hands it to the Tracker."""

from __future__ import annotations

import time


def patch_dataloader(mod, tracker, report) -> None:
    """Wrap DataLoader.__iter__ and _BaseDataLoaderIter.__next__ of the just-imported module."""
    loader_cls, iter_cls = mod.DataLoader, mod._BaseDataLoaderIter
    if getattr(iter_cls.__next__, "_gputop_dl", False):
        return
    orig_iter, orig_next = loader_cls.__iter__, iter_cls.__next__
    clock = time.perf_counter

    def __iter__(self):
        it = orig_iter(self)
        try:
            tracker.on_iter(self, it, clock())
        except Exception as exc:
            report.error("DataLoader.__iter__", exc)
        return it

    def __next__(self):
        t0 = clock()
        sc = tracker.clock  # the phase clock: a transform module run here is data, not forward
        mark = sc is not None and sc.active is None
        if mark:
            sc.active = "data"
        try:
            batch = orig_next(self)
        except StopIteration:
            if mark:
                sc.active = None
            try:
                tracker.on_stop(self, clock())
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
            tracker.on_batch(self, batch, t0, t1)
        except Exception as exc:
            report.error("step", exc)
        return batch

    for new, old in ((__iter__, orig_iter), (__next__, orig_next)):
        new.__name__, new.__qualname__ = old.__name__, old.__qualname__
        new.__doc__, new.__wrapped__, new._gputop_dl = old.__doc__, old, True
    loader_cls.__iter__ = __iter__
    iter_cls.__next__ = __next__
