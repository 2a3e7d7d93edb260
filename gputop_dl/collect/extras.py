"""Optional parts of the install: is torch there for the built-in trainer and the lab commands (`gputop-dl[train]`)?

The light install (`pip install gputop-dl`) has the monitor, `serve`, `diagnose`, `export` and
`sessions`, none of which imports torch. What needs it calls `require_train` first, so a
missing torch is one line that says what to install (exit 2), not a traceback in a child.
"""

from __future__ import annotations

import importlib.util
import sys

from gputop_dl.errors import UsageError

TRAIN_MODULES = ("torch", "torchvision")
TRAIN_INSTALL = "pip install 'gputop-dl[train]'"


def missing(modules: tuple[str, ...] = TRAIN_MODULES) -> list[str]:
    """The modules of `modules` that this interpreter cannot import (none is imported)."""
    out = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def require_train(what: str) -> None:
    """Raise UsageError (one line: what to install) if torch or torchvision is missing."""
    gone = missing()
    if gone:
        raise UsageError(f"{what} needs {' and '.join(TRAIN_MODULES)}, and this Python "
                         f"({sys.executable}) has no {' or '.join(gone)}: {TRAIN_INSTALL}")
