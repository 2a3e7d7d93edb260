"""The quick loop's rule: which tests are `slow` (start a real process or wait on wall time).

`pytest -m quick` runs the rest. Two parts keep the line true:

- **The rule** (at collection): a test is `slow` when it is heavy or `shares_box`
  (tests/conftest.py: real-process tests either way), or
  when its code reaches a way of starting a process: `subprocess`, `multiprocessing`, `pty`,
  `os.fork`/`os.system`/`os.exec*`/`os.posix_spawn`, `sys.executable`, or one of the
  package's entry points in `STARTS_PROCESSES`. "Reaches" follows the names the test's
  function reads, its fixtures' and every function or class under tests/ and scripts/ they
  use, to any depth. Every other test is `quick`. Where the code cannot show it (the CLI's
  `main(["--once"])` run in-process reads the box's jobs with py-spy; an `Engine` given real
  commands starts them), the test carries `@pytest.mark.slow` with the reason.
- **The guard** (at run time, in every run, the full suite too): a `quick` test that starts a
  process anyway (any `subprocess.Popen`, any fork), or whose call takes longer than
  `QUICK_LIMIT_S`, fails, saying which and why. So a new helper that starts a process, or a
  package function that starts to, cannot slip into the quick loop unseen: the rule is
  extended (a name in `STARTS_PROCESSES`) or the test says why it is slow.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from time import monotonic  # bound now: a test may monkeypatch time.monotonic
from typing import Any

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
SCRIPTS_DIR = os.path.join(os.path.dirname(TESTS_DIR), "scripts")  # tools some tests run

# a quick test's call (set-up and tear-down apart) takes at most this long, in wall seconds:
# seconds at most on a quiet box, 19 s seen on one loaded by 7 (the ini option
# `quick_limit_s` overrides it: a test of the rule sets it low)
QUICK_LIMIT_S = 30.0

# modules whose use is starting a process
_SPAWNING_MODULES = {"subprocess", "multiprocessing", "pty", "asyncio.subprocess"}
# attributes of these modules whose use is starting (or naming) a process
_SPAWNING_ATTRS = {
    "os": {"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "execv",
           "execve", "execvp", "execvpe", "spawnv", "spawnve", "spawnl"},
    "sys": {"executable"},
}
# the package's functions and classes that start processes, by name (so that a module's
# move does not lose them; tests/test_quick_rule.py checks each still names one)
STARTS_PROCESSES = {"run_file", "queue_engine", "launch_engine", "start_job", "record_stall",
                    "StallSampler", "measure_copy", "profile_machine"}
PACKAGE = "gputop_dl"


def _code_names(code: types.CodeType) -> set[str]:
    """Every name a code object and the code nested in it reads (globals and attributes)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _defined_in(obj: Any, roots: set[str]) -> bool:
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return False
    return bool(path) and any(os.path.abspath(path).startswith(root + os.sep) for root in roots)


def _qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"


class _Reach:
    """Whether code reaches a way of starting a process; remembered per function. It follows
    the functions and classes defined under `roots` (tests/ and the test files' folders).

    Remembered by `id`, with the object kept beside its answer: a function of an earlier
    in-process run (a pytester test's) freed and its id given to a new one would otherwise
    hand the new one its answer (seen: a test that starts a process called quick)."""

    def __init__(self, roots: set[str]) -> None:
        self._seen: dict[int, tuple[Any, str | None]] = {}
        self.roots = roots

    def why(self, obj: Any) -> str | None:
        """The first spawning name `obj` (a function or a class under tests/) reaches, or None."""
        key = id(obj)
        if key in self._seen:
            return self._seen[key][1]
        self._seen[key] = (obj, None)  # a cycle reaches nothing new
        found = self._why(obj)
        self._seen[key] = (obj, found)
        return found

    def _module(self, module: types.ModuleType, names: set[str]) -> str | None:
        """What of `module` that the code names (`names`) starts a process."""
        if module.__name__ in _SPAWNING_MODULES:
            return module.__name__
        hit = _SPAWNING_ATTRS.get(module.__name__, set()) & names
        if module.__name__.split(".")[0] == PACKAGE:
            hit = {n for n in names & STARTS_PROCESSES if hasattr(module, n)}
        if hit:
            return f"{module.__name__}.{min(hit)}"
        for name in sorted(names):
            value = getattr(module, name, None)
            if ((inspect.isfunction(value) or isinstance(value, type))
                    and _defined_in(value, self.roots) and (found := self.why(value))):
                return found
        return None

    def _why(self, obj: Any) -> str | None:
        if isinstance(obj, type):
            for member in vars(obj).values():
                member = getattr(member, "__func__", member)
                if inspect.isfunction(member) and (found := self.why(member)):
                    return found
            return None
        # a Hypothesis test's own function is its `inner_test`
        func = inspect.unwrap(getattr(getattr(obj, "hypothesis", None), "inner_test", obj))
        code = getattr(func, "__code__", None)
        if code is None:
            return None
        names = _code_names(code)
        scope = getattr(func, "__globals__", {})
        for name in sorted(names):
            if name in _SPAWNING_MODULES:  # imported inside the function: `import subprocess`
                return name
            # a global, or a module imported inside the function (`from x.y import z`)
            value = scope.get(name, sys.modules.get(name))
            if value is None:
                continue
            if isinstance(value, types.ModuleType):
                if found := self._module(value, names):
                    return found
                continue
            if (getattr(value, "__module__", "") or "").split(".")[0] == PACKAGE and (
                    getattr(value, "__name__", None) in STARTS_PROCESSES):
                return _qualified(value)
            mod = getattr(value, "__module__", "") or ""
            if mod.split(".")[0] in _SPAWNING_MODULES or mod in _SPAWNING_MODULES:
                return _qualified(value)
            if ((inspect.isfunction(value) or isinstance(value, type))
                    and _defined_in(value, self.roots)):
                if found := self.why(value):
                    return found
        return None


_REACH = _Reach({TESTS_DIR, SCRIPTS_DIR})


def starts_processes(item: pytest.Item, reach: _Reach = _REACH) -> str | None:
    """The way of starting a process `item`'s code reaches, or None."""
    func = getattr(item, "function", None)
    if func is not None and (found := reach.why(func)):
        return found
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    for name, defs in (fixtureinfo.name2fixturedefs.items() if fixtureinfo else ()):
        for fixturedef in defs:
            if _defined_in(fixturedef.func, reach.roots) and (found := reach.why(fixturedef.func)):
                return f"fixture {name}: {found}"
    return None


def slow_reason(item: pytest.Item, reach: _Reach = _REACH) -> str | None:
    """Why the rule makes `item` slow, or None for a quick test."""
    if (mark := item.get_closest_marker("slow")) is not None:
        return str(mark.args[0]) if mark.args else "marked slow"
    group = item.get_closest_marker("xdist_group")
    if item.get_closest_marker("heavy") or (group and "heavy" in group.args):
        return "heavy"  # marked so by tests/conftest.py as each item is collected
    if (mark := item.get_closest_marker("shares_box")) is not None:  # a real-process test
        return f"real processes, sharing the box: {mark.args[0] if mark.args else ''}"
    return starts_processes(item, reach)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("quick_limit_s", "the longest call of a quick test, in wall seconds",
                  default=str(QUICK_LIMIT_S))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: starts a real process or waits on wall time "
                                       "(by rule: tests/quick_rule.py)")
    config.addinivalue_line("markers", "quick: neither: the quick loop, `pytest -m quick`")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _REACH.roots |= {os.path.dirname(str(item.path)) for item in items}
    for item in items:
        reason = slow_reason(item)
        item.add_marker(pytest.mark.slow(reason) if reason else pytest.mark.quick)


@dataclass
class _Watch:
    spawned: list[str]


# the tests running now, innermost last (a test that runs pytest inside itself nests one):
# a process started belongs to the innermost
_running: list[_Watch] = []

_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def _finding_a_library() -> bool:
    """Whether ctypes.util is the caller: `find_library` runs ldconfig (or gcc, ld), as the
    first import of torch in a process does; a library lookup, not a process the test runs."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == "ctypes.util":
            return True
        frame = frame.f_back
    return False


def _counting_execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> Any:
    if _running and not _finding_a_library():
        _running[-1].spawned.append(f"process {args!r:.120}")
    return _execute_child(self, args, *rest, **kw)


subprocess.Popen._execute_child = _counting_execute_child  # type: ignore[attr-defined]
os.register_at_fork(before=lambda: _running and _running[-1].spawned.append("fork"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):  # type: ignore[no-untyped-def]
    watch = _Watch(spawned=[])
    _running.append(watch)
    start = monotonic()
    try:
        outcome = yield
    finally:
        _running.remove(watch)
    took = monotonic() - start
    if item.get_closest_marker("quick") is None or outcome.excinfo is not None:
        return
    if watch.spawned:
        outcome.force_exception(pytest.fail.Exception(
            f"a quick test started a process ({watch.spawned[0]}): extend the rule in "
            "tests/quick_rule.py (STARTS_PROCESSES) so that it is `slow`", pytrace=False))
    elif took > (limit := float(item.config.getini("quick_limit_s"))):
        outcome.force_exception(pytest.fail.Exception(
            f"a quick test took {took:.1f} s (over {limit:g} s): it waits on wall "
            "time; make it wait on the event, or extend the rule in tests/quick_rule.py",
            pytrace=False))
