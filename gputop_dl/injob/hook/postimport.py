"""Run a function right after a module's code has run: how the hook patches torch lazily.

A `sys.meta_path` finder waits for one module name and wraps its loader; once the module has
executed, the wrapper puts the real loader back (no trace left) and calls `after(module)`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # (the job's Python may be older than gputop-dl's: no aliases at run time)
    After = Callable[[ModuleType], None]


class _Loader:
    """Wraps a module's loader: runs `after(module)` once the module's code has run."""

    def __init__(self, inner: Any, after: After):  # inner: the module's own loader, any kind
        self._inner, self._after = inner, after

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._inner.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        module.__loader__ = self._inner  # leave no trace of the wrapper
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self._inner
        self._after(module)


class PostImportFinder:
    """A sys.meta_path entry that waits for one module and calls `after(module)` once it ran."""

    def __init__(self, name: str, after: After):
        self.name, self.after = name, after
        self._busy = False

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != self.name or self._busy:
            return None
        self._busy = True
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec: ModuleSpec | None = find(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = cast(Loader, _Loader(spec.loader, self._done))  # a proxy
                    return spec
            return None
        finally:
            self._busy = False

    def _done(self, module: ModuleType) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        self.after(module)
