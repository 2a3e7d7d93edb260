"""The start-up hook's logic: times a user script's DataLoader and reports steps and epochs.

Loaded by file path from `site/sitecustomize.py` under a private module name, because the
target interpreter may not be able to import gputop_dl; for the same reason the event writer
comes from `gputop_dl/channel.py`, also loaded by path (no duplicated writer code). It never
imports torch: a meta-path finder waits for the script to import
`torch.utils.data.dataloader` and patches `DataLoader.__iter__` and
`_BaseDataLoaderIter.__next__` right after that module has run. Every failure inside the hook
is swallowed and reported once as a `note` event: the user's script must never break.

Definitions (the same as the built-in trainer's, see gputop_dl/channel.py):
- main loader: the first DataLoader that is iterated. Other loaders (eval) are not training
  steps; while one runs in the middle of a training epoch, the main step clock pauses.
- t_data: time inside the main iterator's `__next__`; t_step: from the previous batch's return
  (or the epoch iterator's creation) to this batch's return, so it includes the compute.
- epoch: one full pass (StopIteration) of the main loader; an abandoned pass is no epoch.
- samples: the batch's first tensor's length (x WORLD_SIZE), None when not cheaply known.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import threading
import time

ENV_EVENTS = "GPUTOP_DL_EVENTS"  # = gputop_dl.channel.ENV_EVENTS (a test checks)
ENV_ROOT = "GPUTOP_DL_HOOK_ROOT"  # set by the job's first Python process; its children see it
TARGET = "torch.utils.data.dataloader"
CHANNEL_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "channel.py")
STEPCLOCK_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stepclock.py")


def _load(name: str, path: str):
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[name] = mod
    return mod


def load_channel():
    """gputop_dl/channel.py as a private module, whether or not gputop_dl is importable."""
    return _load("_gputop_dl_channel", CHANNEL_PY)


def load_stepclock():
    """gputop_dl/hook/stepclock.py (the phase clock) as a private module, likewise."""
    return _load("_gputop_dl_stepclock", STEPCLOCK_PY)


class Reporter:
    """Lazily opened event writer of this process; notes the first hook error, then stays quiet."""

    def __init__(self, path: str | None, root: bool, writer=None, steps_only: bool = False):
        self.path, self.root = path, root
        self.steps_only = steps_only  # a rank that is not its node's first: only "rank_step"
        self.pid = os.getpid()
        self._w = writer
        self.noted = False
        self._lock = threading.Lock()  # the CUDA phase sampler emits steps from its thread

    def emit(self, ev: str, flush: bool = False, **data) -> None:
        if os.getpid() != self.pid:  # a forked child (loader worker) must not write our events
            return
        if self.steps_only:
            if ev != "step":
                return
            ev = "rank_step"
        with self._lock:
            if self._w is None:
                self._w = load_channel().EventWriter(self.path)
            self._w.emit(ev, flush=flush, **data)

    def error(self, where: str, exc: BaseException) -> None:
        if self.noted:
            return
        self.noted = True
        try:
            self.emit("note", flush=True, message=f"gputop-dl hook: {where} failed "
                      f"({type(exc).__name__}: {exc}); this job's steps may be incomplete")
        except Exception:
            pass

    def close(self) -> None:
        if self._w is not None and os.getpid() == self.pid:
            self._w.close()


def batch_len(batch, depth: int = 0) -> int | None:
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


def _torch():
    return sys.modules.get("torch")  # already imported when any of this runs; never import it


def peak_mem() -> int | None:
    """CUDA max allocated if CUDA is initialised, else this process's peak RSS (bytes)."""
    torch = _torch()
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.max_memory_allocated())
    except Exception:
        pass
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    except Exception:
        return None


def device_name() -> str | None:
    torch = _torch()
    try:
        if torch is not None and torch.cuda.is_initialized():
            return f"cuda:{torch.cuda.current_device()}"
    except Exception:
        pass
    return None  # unknown: CUDA may still be initialised later, or the script trains on the CPU


class Tracker:
    """Turns main-loader iteration into step/epoch events; pure (times come from the caller)."""

    def __init__(self, report, world_size: int = 1, rank: int | None = None):
        self.report = report
        self.world = world_size
        self.rank = rank  # in a distributed run: every step record names its rank
        self.clock = None  # the phase clock (stepclock.StepClock), once torch is patched
        self.resolver = None  # CUDA steps wait here for their events (stepclock.CudaResolver)
        self.held = None  # the phases before another loader paused this step
        self.on_main = None  # called once with the main loader (patches torch for the phases)
        self.main = None  # the main training loader
        self.it = None  # its current epoch iterator
        self.open = False  # a pass of the main loader is under way
        self.done = 0  # completed passes
        self.step = 0
        self.samples: int | None = 0
        self.t_epoch = self.t_prev = 0.0
        self.pause: float | None = None  # when another loader started during this epoch
        self.started = False

    def on_iter(self, loader, it, now: float) -> None:
        if self.main is None:
            self.main = loader
            self._started(loader)
            if self.on_main is not None:
                self.on_main()
        if loader is not self.main:
            if self.open and self.pause is None:
                self.pause = now
                self.held = self._take_phases()[0:2]
            return
        self.it, self.open = it, True
        self.step, self.samples = 0, 0
        self.t_epoch = self.t_prev = now  # a new epoch: the gap before it is nobody's step
        self.pause, self.held = None, None
        self._take_phases()

    def _take_phases(self):
        if self.clock is None:
            return {}, []
        return self.clock.take()

    def on_batch(self, it, batch, t0: float, t1: float) -> None:
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
        rec = dict(epoch=self.done + 1, step=self.step, t_data=round(t_data, 6),
                   t_step=round(t_step, 6), samples=n)
        if self.clock is not None:
            rec["ph"] = {k: round(v, 6) for k, v in ph.items()}
        if self.rank is not None:
            rec["rank"] = self.rank
        if self.resolver is not None:  # (every step, so that they go out in order)
            self.resolver.put(rec, pairs)  # emitted by the sampler once its CUDA events resolved
        else:
            self.report.emit("step", **rec)

    def on_stop(self, it, now: float) -> None:
        if it is not self.it or not self.open:
            return
        self.open = False
        self.done += 1
        if self.step and not self.report.steps_only:
            self.report.emit("epoch", flush=True, epoch=self.done,
                             time_s=round(now - self.t_epoch, 4), steps=self.step,
                             samples=self.samples, loss=None, peak_mem=peak_mem())

    def _started(self, loader) -> None:
        if self.report.steps_only:
            self.started = True
            return
        try:
            spe = len(loader)
        except Exception:  # an IterableDataset without __len__
            spe = None
        torch = _torch()
        self.started = True
        self.report.emit("started", flush=True, pid=os.getpid(), device=device_name(),
                         **dict(load_channel().rank_info(os.environ), world_size=self.world),
                         torch=getattr(torch, "__version__", None),
                         model=None, params=None, batch_size=getattr(loader, "batch_size", None),
                         num_workers=getattr(loader, "num_workers", None),
                         epochs=None, steps_per_epoch=spe)


def patch_dataloader(mod, tracker: Tracker, report: Reporter) -> None:
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


class _Loader:
    """Wraps a module's loader: runs `after(module)` once the module's code has run."""

    def __init__(self, inner, after):
        self._inner, self._after = inner, after

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        module.__loader__ = self._inner  # leave no trace of the wrapper
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._inner
        self._after(module)


class PostImportFinder:
    """A sys.meta_path entry that waits for one module and calls `after(module)` once it ran."""

    def __init__(self, name: str, after):
        self.name, self.after = name, after
        self._busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self._busy:
            return None
        self._busy = True
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _Loader(spec.loader, self._done)
                    return spec
            return None
        finally:
            self._busy = False

    def _done(self, module) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        self.after(module)


def classify(exc: BaseException) -> str:
    torch = _torch()
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if (isinstance(oom, type) and isinstance(exc, oom)) or "CUDA out of memory" in str(exc):
        return "cuda-oom"
    if isinstance(exc, MemoryError) or "DefaultCPUAllocator: can't allocate" in str(exc):
        return load_channel().host_memory_cause()
    return "exception"


class Hook:
    """This process's hook: tracker, reporter, the chained excepthook and the atexit report."""

    def __init__(self, report: Reporter, world_size: int, rank: int | None = None):
        self.report = report
        self.tracker = Tracker(report, world_size, rank)
        self.tracker.on_main = self.start_phases
        self.ended = False
        self._prev_excepthook = sys.excepthook

    def start_phases(self) -> None:
        """Patch torch for the per-step phases (stepclock.patch_torch), at the main loader's
        first iteration: torch is fully imported by then. On CUDA the GPU phases come from
        CUDA events, resolved by a sampler thread that never waits on the GPU."""
        torch = _torch()
        if torch is None:
            return
        try:
            sc_mod = load_stepclock()
            clock = sc_mod.StepClock()
            sc_mod.patch_torch(torch, clock)
            factory = sc_mod.cuda_event_factory(torch)
            if factory is not None:
                clock.event_factory = factory
                self.tracker.resolver = sc_mod.CudaResolver(
                    lambda rec: self.report.emit("step", **rec), clock)
                self.tracker.resolver.start()
            self.tracker.clock = clock
        except Exception as exc:
            self.report.error("timing the step phases", exc)

    def on_import(self, module) -> None:
        try:
            patch_dataloader(module, self.tracker, self.report)
        except Exception as exc:
            self.report.error("patching the DataLoader", exc)

    def excepthook(self, etype, value, tb):
        try:
            self._on_exception(value)
        except Exception:
            pass
        self._prev_excepthook(etype, value, tb)

    def _on_exception(self, exc: BaseException) -> None:
        if self.ended or self.report.steps_only or not (self.report.root or self.tracker.started):
            return  # a helper process of the job: its failure is not the job's
        self.ended = True
        if isinstance(exc, KeyboardInterrupt):
            self.report.emit("note", flush=True, message="interrupted")
            return
        self.report.emit("failed", flush=True, cause=classify(exc),
                         message=load_channel().failure_message(exc))

    def at_exit(self) -> None:
        try:
            if self.tracker.resolver is not None:
                self.tracker.resolver.stop()
            if self.tracker.started and not self.ended and not self.report.steps_only:
                self.ended = True
                self.report.emit("finished", flush=True)
            self.report.close()
        except Exception:
            pass


def install(environ=None) -> Hook | None:
    """Set the hook up in this process if gputop-dl launched it; else do nothing. The node's
    first rank (`channel.reports_here`) reports everything; every other rank only its steps
    ("rank_step" events, for the per-rank table and the straggler)."""
    environ = os.environ if environ is None else environ
    path = environ.get(ENV_EVENTS)
    if not path:
        return None
    distributed = "LOCAL_RANK" in environ or "RANK" in environ
    steps_only = distributed and not load_channel().reports_here(environ)
    # (a process outside a distributed run does not load the channel yet)
    rank = None
    if distributed:
        try:
            rank = int(environ.get("RANK") or environ.get("LOCAL_RANK") or 0)
        except ValueError:
            rank = None
    root = not environ.get(ENV_ROOT)
    if root:
        environ[ENV_ROOT] = str(os.getpid())
    try:
        world = int(environ.get("WORLD_SIZE") or 1)
    except ValueError:
        world = 1
    hook = Hook(Reporter(path, root, steps_only=steps_only), world, rank)
    try:
        mod = sys.modules.get(TARGET)
        if mod is not None:
            hook.on_import(mod)
        else:
            sys.meta_path.insert(0, PostImportFinder(TARGET, hook.on_import))
        sys.excepthook = hook.excepthook
        atexit.register(hook.at_exit)
    except Exception as exc:
        hook.report.error("install", exc)
    return hook
