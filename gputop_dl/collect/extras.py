"""Optional parts of the install: is torch there for the built-in trainer and the lab commands (`gputop-dl[train]`)?

The light install (`pip install gputop-dl`) has the monitor, `serve`, `diagnose`, `export` and
`sessions`, none of which imports torch. What needs it calls `require_train` first, so a
missing torch is one line that says what to install (exit 2), not a traceback in a child.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
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


def torchrun_for(argv0: str | None, cwd: str | None, path: str | None) -> list[str] | None:
    """The torchrun that starts a command job's ranks across nodes (`--no-python`: it runs the
    job's own command once per rank), or None when there is none.

    torchrun only needs torch in its own interpreter; the ranks run the job's command as given.
    Looked for, in order: `torchrun` beside the job's Python interpreter (`argv0`, when it is
    one, found on the job's PATH), `torchrun` on the job's PATH, then this interpreter's
    `torch.distributed.run` when it has torch (a light install has not)."""
    found = []
    if argv0 and os.path.basename(argv0).startswith("python"):
        exe = argv0 if os.sep in argv0 else shutil.which(argv0, path=path)
        if exe:
            found.append(os.path.join(os.path.dirname(os.path.join(cwd or "", exe)), "torchrun"))
    found.append(shutil.which("torchrun", path=path) or "")
    for cand in found:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return [os.path.abspath(cand)]
    if not missing(("torch",)):
        return [sys.executable, "-m", "torch.distributed.run"]
    return None
