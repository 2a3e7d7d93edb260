"""Per-step phase clock: where one training step's time goes (h2d, forward, backward, optimizer).

Used by the start-up hook (patches, no code change in the user's script) and by the built-in
trainer (explicit `enter`/`leave` around its own calls). It never imports torch: the torch module
is handed in. Loadable by file path under a private name (the hook's interpreter may not have
gputop_dl), so it imports nothing of ours.

What a step is (docs/phases.md): one batch of the main DataLoader, from the previous batch's
return to this batch's return (the hook's and the trainer's `t_step`). Everything the process does
in that interval is billed to that step:
- data: the wait in the loader's `__next__` (the caller measures it: `t_data`);
- h2d: `Tensor.to` / `Tensor.cuda` called outside any other phase (the batch's copy);
- forward: each outermost `nn.Module.__call__` (a GAN's G(z) and D(x) add up; a loss module
  called at top level counts as forward);
- backward: `Tensor.backward` / `torch.autograd.backward`;
- optimizer: between the global optimizer-step pre- and post-hooks (every optimizer: a GAN's
  two steps add up; with gradient accumulation only every k-th step has one), less the time in
  a closure handed to `step`: the closure runs outside any phase, so its forward and backward
  are forward and backward (LBFGS, Lightning's automatic optimization);
- other: the rest (the caller: t_step minus the parts).
Phases do not nest: the outermost one wins (a forward recomputed inside backward by activation
checkpointing is backward), except an optimizer closure (above). A phase never entered in a step is
absent from its record, so an inference loop has no backward and no optimizer (null, not 0).

On the CPU the times are host time. On CUDA (once CUDA is initialised) each phase also records a
pair of CUDA events on the current stream; a sampler thread queries them (`Event.query`, which
never waits) and only then reads `elapsed_time`; the step's record is held back until all its
events resolved, and one still unresolved after `max_age_s` is emitted without its GPU phases and
counted in `dropped`. Nothing here ever calls `torch.cuda.synchronize`.
"""

from __future__ import annotations

import collections
import importlib
import threading
import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

# torch's objects (the module, its CUDA events, the user's closures) are handed in, never
# imported here: they are Any
PHASES = ("h2d", "forward", "backward", "optimizer")


class StepClock:
    """Accumulates the current step's phase times (host seconds, plus CUDA event pairs)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 event_factory: Callable[[], Any] | None = None):
        self.clock = clock
        self.active: str | None = None
        self.t0 = 0.0
        self.acc: dict[str, float] = {}
        self.event_factory = event_factory  # set: CUDA mode (torch.cuda.Event-like objects)
        self.pairs: list[tuple[str, Any, Any]] = []  # this step's (phase, start event, end event)
        self._start: Any = None  # the open phase's start event
        self._pool: list[Any] = []  # torch.cuda.Event-like objects to record again

    def enter(self, phase: str) -> bool:
        """Start `phase` unless another is running (the outermost wins); True if started."""
        if self.active is not None:
            return False
        self.active = phase
        if self.event_factory is not None:
            ev = self._pool.pop() if self._pool else self.event_factory()
            ev.record()
            self._start = ev
        self.t0 = self.clock()
        return True

    def leave(self, phase: str) -> None:
        if self.active != phase:
            return
        dt = self.clock() - self.t0
        self.active = None
        self.acc[phase] = self.acc.get(phase, 0.0) + dt
        if self._start is not None and self.event_factory is not None:
            ev = self._pool.pop() if self._pool else self.event_factory()
            ev.record()
            self.pairs.append((phase, self._start, ev))
            self._start = None

    def take(self) -> tuple[dict[str, float], list[tuple[str, Any, Any]]]:
        """This step's host times and CUDA event pairs; starts the next step. A phase still
        open (its leave never came, e.g. an exception) is dropped."""
        acc, pairs = self.acc, self.pairs
        self.acc, self.pairs = {}, []
        if self.active is not None:
            self.active, self._start = None, None
        return acc, pairs

    def recycle(self, events: Iterable[Any]) -> None:
        if len(self._pool) < 64:
            self._pool.extend(events)


def rounded(ph: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in ph.items()}


class CudaResolver:
    """Holds CUDA steps until their events resolved, then hands them on in order (`sink`).

    `poll()` runs in the sampler thread (or a test): it never waits on the GPU."""

    def __init__(self, sink: Callable[[dict[str, Any]], None], clock_: StepClock, max_age_s: float = 10.0,
                 now: Callable[[], float] = time.monotonic):
        self.sink, self.clock_ = sink, clock_
        self.max_age_s, self.now = max_age_s, now
        # (when put, the step event, its CUDA event pairs)
        self.pending: collections.deque[tuple[float, dict[str, Any], list[tuple[str, Any, Any]]]] = (
            collections.deque())
        self.dropped = 0
        self.lock = threading.Lock()
        self._polling = threading.Lock()  # one poll at a time (the sampler, or the caller)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def put(self, record: dict[str, Any], pairs: list[tuple[str, Any, Any]]) -> None:
        with self.lock:
            self.pending.append((self.now(), record, pairs))

    def poll(self, final: bool = False) -> int:
        """Emit the steps whose events all resolved, oldest first; a step older than max_age_s
        (or any, when `final`) goes without its GPU phases and counts as dropped."""
        with self._polling:
            return self._poll(final)

    def _poll(self, final: bool) -> int:
        n = 0
        while True:
            with self.lock:
                if not self.pending:
                    return n
                t, record, pairs = self.pending[0]
            done = all(a.query() and b.query() for _, a, b in pairs)
            if not done and not final and self.now() - t < self.max_age_s:
                return n
            if done:
                gpu: dict[str, float] = {}
                for phase, a, b in pairs:
                    gpu[phase] = gpu.get(phase, 0.0) + a.elapsed_time(b) / 1000.0
                record["ph"] = rounded({**record.get("ph", {}), **gpu})
                if pairs:
                    record["ph_clock"] = "cuda"
            else:
                self.dropped += 1
                record["ph_dropped"] = self.dropped  # the host times stay, marked
            with self.lock:
                self.pending.popleft()
            self.clock_.recycle([e for _, a, b in pairs for e in (a, b)] if done else [])
            self.sink(record)
            n += 1

    def start(self, every_s: float = 0.1) -> None:
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.poll()
                except Exception:
                    pass

        self._thread = thread = threading.Thread(target=loop, name="gputop-dl-phases", daemon=True)
        thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        try:
            self.poll(final=True)
        except Exception:
            pass


def cuda_event_factory(torch: ModuleType) -> Callable[[], Any] | None:
    """torch.cuda.Event with timing, or None when CUDA is not initialised (host time then)."""
    try:
        if torch.cuda.is_initialized():
            return lambda: torch.cuda.Event(enable_timing=True)
    except Exception:
        pass
    return None


def _is_compiling(torch: ModuleType) -> Callable[[], bool]:
    f: Callable[[], bool] | None = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return f if f is not None else (lambda: False)


def closure_outside(sc: StepClock, closure: Callable[..., Any]) -> Callable[..., Any]:
    """`closure` run outside the optimizer phase: an optimizer's step that calls the closure
    (LBFGS, Lightning's automatic optimization) bills the forward and backward inside it to
    forward and backward, and only the rest of `step` to optimizer."""

    def run_closure(*args: Any, **kwargs: Any) -> Any:
        inside = sc.active == "optimizer"
        if inside:
            sc.leave("optimizer")
        try:
            return closure(*args, **kwargs)
        finally:
            if inside:
                sc.enter("optimizer")

    run_closure._gputop_dl = True  # type: ignore[attr-defined]
    return run_closure


def optimizer_pre_hook(sc: StepClock, args: tuple[Any, ...], kwargs: dict[str, Any]
                       ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The global optimizer-step pre-hook: the optimizer phase starts (unless another phase is
    running); a closure handed to `step` (the hook's `args` start with the optimizer) is
    replaced by one that runs outside the optimizer phase (`closure_outside`)."""
    if not sc.enter("optimizer"):
        return None
    closure = kwargs.get("closure")
    if callable(closure) and not getattr(closure, "_gputop_dl", False):
        return args, {**kwargs, "closure": closure_outside(sc, closure)}
    if len(args) > 1 and callable(args[1]) and not getattr(args[1], "_gputop_dl", False):
        return (args[0], closure_outside(sc, args[1]), *args[2:]), kwargs
    return None


def patch_torch(torch: ModuleType, sc: StepClock) -> list[Callable[[], None]]:
    """Patch Module.__call__, Tensor.to/.cuda, Tensor.backward, autograd.backward and add the
    global optimizer-step hooks, all billing to `sc`. Returns undo callables. The user's own
    module and optimizer hooks still run (inside our timing)."""
    undo: list[Callable[[], None]] = []
    compiling = _is_compiling(torch)

    def wrap(owner: Any, attr: str, phase: str) -> None:
        orig = getattr(owner, attr)
        if getattr(orig, "_gputop_dl", False):
            return

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if sc.active is not None or compiling():  # nested (most calls), or traced
                return orig(*args, **kwargs)
            sc.enter(phase)
            try:
                return orig(*args, **kwargs)
            finally:
                sc.leave(phase)

        wrapper.__name__ = getattr(orig, "__name__", attr)
        wrapper.__qualname__ = getattr(orig, "__qualname__", attr)
        marked: Any = wrapper  # a function given attributes
        marked.__doc__, marked.__wrapped__, marked._gputop_dl = orig.__doc__, orig, True
        setattr(owner, attr, wrapper)
        undo.append(lambda: setattr(owner, attr, orig))

    try:
        wrap(torch.nn.Module, "__call__", "forward")
        wrap(torch.Tensor, "to", "h2d")
        wrap(torch.Tensor, "cuda", "h2d")
        wrap(torch.Tensor, "backward", "backward")
        wrap(torch.autograd, "backward", "backward")
        opt = importlib.import_module("torch.optim.optimizer")  # torch is imported already
        pre = opt.register_optimizer_step_pre_hook(lambda o, a, k: optimizer_pre_hook(sc, a, k))
        undo.append(pre.remove)
        post = opt.register_optimizer_step_post_hook(lambda o, a, k: sc.leave("optimizer"))
        undo.append(post.remove)
    except Exception:  # an old torch (no global optimizer hooks before 2.0): no phases at all
        for u in reversed(undo):
            u()
        raise
    return undo
