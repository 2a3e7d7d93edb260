"""The hook's output and what it reads of torch: the event writer, the failure's cause, memory.

The event writer is gputop_dl/injob/channel.py's, loaded by file path under a private name (the job's
interpreter may not be able to import gputop_dl): no second writer. Nothing here imports torch;
`torch_module()` is torch only once the script imported it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from types import ModuleType
from typing import Any

ENV_GO = "GPUTOP_DL_GO"  # = gputop_dl.injob.channel.ENV_GO (a test checks)
CHANNEL_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "channel.py")


def _load(name: str, path: str) -> ModuleType:
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path  # a .py file: always a spec
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[name] = mod
    return mod


def load_channel() -> ModuleType:
    """gputop_dl/injob/channel.py as a private module, whether or not gputop_dl is importable."""
    return _load("_gputop_dl_channel", CHANNEL_PY)


def torch_module() -> ModuleType | None:
    return sys.modules.get("torch")  # already imported when any of this runs; never import it


class Reporter:
    """Lazily opened event writer of this process; notes the first hook error, then stays quiet."""

    def __init__(self, path: str | None, root: bool, writer: Any = None, steps_only: bool = False):
        self.path, self.root = path, root
        self.steps_only = steps_only  # a rank that is not its node's first: only "rank_step"
        self.pid = os.getpid()
        self._w = writer  # channel.EventWriter (loaded by path: Any), or a test's stand-in
        self.noted = False
        self._lock = threading.Lock()  # the CUDA phase sampler emits steps from its thread

    def emit(self, ev: str, flush: bool = False, **data: object) -> None:
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


def peak_mem() -> int | None:
    """CUDA max allocated if CUDA is initialised, else this process's peak RSS (bytes)."""
    torch = torch_module()
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
    torch = torch_module()
    try:
        if torch is not None and torch.cuda.is_initialized():
            return f"cuda:{torch.cuda.current_device()}"
    except Exception:
        pass
    return None  # unknown: CUDA may still be initialised later, or the script trains on the CPU


def classify(exc: BaseException) -> str:
    torch = torch_module()
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if (isinstance(oom, type) and isinstance(exc, oom)) or "CUDA out of memory" in str(exc):
        return "cuda-oom"
    if isinstance(exc, MemoryError) or "DefaultCPUAllocator: can't allocate" in str(exc):
        return str(load_channel().host_memory_cause())
    return "exception"
