"""Run a function right after a module's code has run: how the hook patches torch lazily.

A `sys.meta_path` finder waits for one module name and wraps its loader; once the module has
executed, the wrapper puts the real loader back (no trace left) and calls `after(module)`.
"""

from __future__ import annotations

import sys


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
