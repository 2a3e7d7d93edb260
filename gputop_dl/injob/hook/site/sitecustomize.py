"""gputop-dl start-up hook: runs the next sitecustomize, then (only under gputop-dl) loads dlhook.

gputop-dl prepends this folder to a command workload's PYTHONPATH. First the sitecustomize
that this file shadows (the user's or the distribution's, further along sys.path) still runs.
Then, only when GPUTOP_DL_EVENTS is set, the hook folder (`..`) is loaded by file path as the
private package `_gputop_dl_hook`, and its `dlhook.install()` sets a lazy DataLoader patch;
torch is never imported here. Nothing in this file may raise.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _same(entry: str) -> bool:  # plain annotations: any Python 3 runs this file
    try:
        return os.path.realpath(os.path.abspath(entry or os.curdir)) == os.path.realpath(_HERE)
    except Exception:
        return False


def _chain() -> None:
    """Import the next `sitecustomize` on sys.path (this folder leaves sys.path for good)."""
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if not _same(p)]
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401  (the next one, if any: ours is off sys.path now)
    except ImportError as exc:
        if exc.name != "sitecustomize":
            _warn(exc)
        sys.modules["sitecustomize"] = ours  # type: ignore[assignment]  # None: no sitecustomize, as before
    except Exception as exc:  # what site.py does with a broken sitecustomize
        _warn(exc)
        sys.modules["sitecustomize"] = ours  # type: ignore[assignment]  # None: as before
    if ours is not None:
        sys.modules["_gputop_dl_sitecustomize"] = ours


def _warn(exc: BaseException) -> None:
    sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                     f"{type(exc).__name__}: {exc}\n")


def _hook() -> None:
    if not os.environ.get("GPUTOP_DL_EVENTS") or os.environ.get("GPUTOP_DL_HOOK") == "0":
        return
    import importlib
    import importlib.util

    # the hook folder as a private package: its modules import each other relatively
    folder = os.path.dirname(_HERE)
    spec = importlib.util.spec_from_file_location(
        "_gputop_dl_hook", os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
    if spec is None or spec.loader is None:  # a folder with __init__.py: never
        return
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["_gputop_dl_hook"] = pkg
    spec.loader.exec_module(pkg)
    importlib.import_module("_gputop_dl_hook.dlhook").install()


for _step in (_chain, _hook):
    try:
        _step()
    except Exception:  # never break the user's interpreter
        pass
del _step
