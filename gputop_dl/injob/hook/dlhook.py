"""The start-up hook's entry: installs the hook in a job's process (`install`) and ties its parts.

Loaded by `site/sitecustomize.py` as part of a private package (`_gputop_dl_hook`, this folder
loaded by path: the target interpreter may not be able to import gputop_dl), so its siblings
come by relative import and gputop_dl/injob/channel.py by file path (`report.load_channel`). It
never imports torch: a meta-path finder (`postimport`) waits for the script to import
`torch.utils.data.dataloader` and patches it (`loaderpatch`) right after that module has run;
the main loader's iterations become steps and epochs (`tracker`), timed per phase
(`stepclock`); a framework that drives the loader its own way gets one small module beside
them (`fw_lightning`, `fw_accelerate`, `fw_transformers`). Every failure inside the hook is swallowed and reported once as a `note` event
(`report.Reporter.error`): the user's script must never break.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Callable, MutableMapping
from types import ModuleType, TracebackType

from . import fw_accelerate, fw_lightning, fw_transformers
from . import report as rp
from .loaderpatch import patch_dataloader
from .postimport import PostImportFinder
from .report import Reporter, classify, load_channel
from .tracker import Tracker, batch_len

__all__ = ["ENV_EVENTS", "ENV_ROOT", "Hook", "PostImportFinder", "Reporter", "Tracker",
           "batch_len", "classify", "install", "load_channel", "patch_dataloader"]

ENV_EVENTS = "GPUTOP_DL_EVENTS"  # = gputop_dl.injob.channel.ENV_EVENTS (a test checks)
ENV_ROOT = "GPUTOP_DL_HOOK_ROOT"  # set by the job's first Python process; its children see it
TARGET = "torch.utils.data.dataloader"
FRAMEWORKS = (fw_lightning, fw_accelerate, fw_transformers)  # each: TARGETS (module names) and patch(module, tracker, report)


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
        torch = rp.torch_module()
        if torch is None:
            return
        try:
            from . import stepclock as sc_mod

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

    def wait_for_go(self, path: str) -> None:
        """The co-run start barrier, at the main loader's first pass: say "ready", then wait
        for the launcher's go (every job of the co-run is ready, or it stopped waiting)."""
        self.report.emit("ready", flush=True)
        load_channel().wait_for_go(path, self.report)

    def on_import(self, module: ModuleType) -> None:
        try:
            patch_dataloader(module, self.tracker, self.report)
        except Exception as exc:
            self.report.error("patching the DataLoader", exc)

    def on_framework(self, fw: ModuleType, module: ModuleType) -> None:
        try:
            fw.patch(module, self.tracker, self.report)
        except Exception as exc:
            self.report.error(f"adapting to {module.__name__}", exc)

    def excepthook(self, etype: type[BaseException], value: BaseException,
                   tb: TracebackType | None) -> None:
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
                         message=rp.load_channel().failure_message(exc))

    def at_exit(self) -> None:
        try:
            if self.tracker.resolver is not None:
                self.tracker.resolver.stop()
            self.tracker.finish(time.perf_counter())
            if self.tracker.started and not self.ended and not self.report.steps_only:
                self.ended = True
                self.report.emit("finished", flush=True)
            self.report.close()
        except Exception:
            pass


def _on_framework(hook: Hook, fw: ModuleType) -> Callable[[ModuleType], None]:
    """What the finder calls once `fw`'s trainer module ran (one per framework)."""
    return lambda module: hook.on_framework(fw, module)


def install(environ: MutableMapping[str, str] | None = None) -> Hook | None:
    """Set the hook up in this process if gputop-dl launched it; else do nothing. The node's
    first rank (`channel.reports_here`) reports everything; every other rank only its steps
    ("rank_step" events, for the per-rank table and the straggler)."""
    environ = os.environ if environ is None else environ
    path = environ.get(ENV_EVENTS)
    if not path:
        return None
    distributed = "LOCAL_RANK" in environ or "RANK" in environ
    steps_only = distributed and not rp.load_channel().reports_here(environ)
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
    go = environ.get(rp.ENV_GO)
    if go:  # launched for a co-run: its first steps wait until every job is ready
        hook.tracker.gate = lambda: hook.wait_for_go(go)
    try:
        mod = sys.modules.get(TARGET)
        if mod is not None:
            hook.on_import(mod)
        else:
            sys.meta_path.insert(0, PostImportFinder(TARGET, hook.on_import))
        for fw in FRAMEWORKS:  # a framework's trainer: patched once the script imports it
            for name in fw.TARGETS:
                mod = sys.modules.get(name)
                if mod is not None:
                    hook.on_framework(fw, mod)
                else:
                    sys.meta_path.insert(0, PostImportFinder(name, _on_framework(hook, fw)))
        sys.excepthook = hook.excepthook
        atexit.register(hook.at_exit)
    except Exception as exc:
        hook.report.error("install", exc)
    return hook
