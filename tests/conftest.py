"""Shared fixtures: every test gets its own session store (GPUTOP_DL_HOME in a tmp dir)."""

import contextlib
import fcntl
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Bytecode caches on, whatever the environment says (PYTHONDONTWRITEBYTECODE): the suite's
# interpreters (its workers, and the CLIs, jobs and scripts its tests start, several hundred)
# import the package's modules, and without caches each compiles them again, about 0.15 s of
# CPU per CLI started (docs/benchmarks.md); the workers' rewritten test modules are cached too
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

pytest.register_assert_rewrite("tests.quick_rule")  # a plugin too (below), imported first here
from tests import box_schedule  # noqa: E402 (needs ROOT on the path)
from tests.quick_rule import starts_processes  # noqa: E402

# the quick loop's rule and its guard (`pytest -m quick`); pytester tests that rule
pytest_plugins = ["pytester", "tests.quick_rule"]


@pytest.fixture(autouse=True)
def gdl_home(tmp_path, monkeypatch):
    home = tmp_path / "gdl-home"
    home.mkdir()
    monkeypatch.setenv("GPUTOP_DL_HOME", str(home))
    return home


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


HEAVY_MODULES = {"test_launch", "test_scenarios", "test_tmux", "test_command_verdict",
                 "test_probe", "test_diagnose"}


def is_heavy(item) -> bool:
    """A real launch or end-to-end test by name, one marked `heavy`, or, in a module that is
    heavy as a whole (`HEAVY_MODULES`, a module-wide `heavy` mark), one whose code starts a
    process (tests/quick_rule.py): that module's pure tests need not hold the box.

    But not one marked `shares_box("why")`: a real-process test whose assertions do not
    depend on the box's CPU being its own (exit codes, signals, files, hangs, contracts; no
    slowdown, contention or fine timing). It still never runs beside a heavy test (it holds
    the lock shared), but runs beside the other worker's tests: a heavy test used about one
    of the two cores it held (docs/benchmarks.md), so a test that waits on its jobs'
    sleeps and hangs holding the whole box idles the other core."""
    if item.get_closest_marker("shares_box") is not None:
        return False
    if ("real_launch" in item.name or "end_to_end" in item.name
            or any(m.name == "heavy" for m in item.own_markers)):
        return True
    mod = item.module.__name__.rsplit(".", 1)[-1]
    marks = getattr(item.module, "pytestmark", [])
    whole = mod in HEAVY_MODULES or any(
        m.name == "heavy" for m in (marks if isinstance(marks, list) else [marks]))
    return whole and starts_processes(item) is not None


def holds_the_box(item) -> bool:
    return any("heavy" in m.args for m in item.iter_markers("xdist_group"))


def runs_in_pairs(item) -> bool:
    """A heavy test marked `pairs("why")`: one that uses about one core and is timed against
    itself may run beside one other such test, never beside anything else (the scheduler
    hands them out last, to two workers, once every other test has ended)."""
    return holds_the_box(item) and item.get_closest_marker("pairs") is not None


def pytest_itemcollected(item):
    """Real-process tests run one at a time: they measure CPU contention and slowdowns, which
    a second heavy test beside them would skew.

    Two layers: the suite's scheduler (tests/box_schedule.py) sends them all to one worker,
    after every other test, and the `heavy_lock` fixture keeps the other workers' last tests
    from running beside them. The `xdist_group("heavy")` marker names them (xdist's own
    `loadgroup` ignores it with pytest 9.2: it renames `item._nodeid`, which pytest no longer
    reads; CI once failed on that, two calibrated scenarios side by side on 2 cores)."""
    if is_heavy(item):
        item.add_marker(pytest.mark.xdist_group("heavy"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The tests that hold the box run last, in their order among themselves; under xdist each
    worker tells the scheduler which they are (tests/box_schedule.py).

    Last, the others run on every worker first (their share of the wall is theirs divided by
    the workers), then the heavy ones one after another on a box that nothing else of the
    suite runs on (docs/benchmarks.md: the suite's time). Tried and not kept, twice: the
    process tests first, the quick ones after them. The quick ones fill the cores that the
    process tests' waits leave idle; apart, they ended the others 50 s later."""
    items[:] = sorted(items, key=lambda i: (holds_the_box(i), runs_in_pairs(i)))
    path = getattr(config, "workerinput", {}).get(box_schedule.INPUT_KEY)
    if path:
        box_schedule.write_heavy_ids(path, [i.nodeid for i in items if holds_the_box(i)],
                                     [i.nodeid for i in items if runs_in_pairs(i)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N`: the suite's scheduler (tests/box_schedule.py), heavy tests on one worker, last."""
    if _ours(config):
        return box_schedule.BoxScheduling(config, log, _heavy_ids_path(config))
    return None


def _ours(config) -> bool:
    return config.getvalue("dist") in ("load", "loadgroup", "worksteal")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    if _ours(node.config):  # the workers of another scheduler run pairs alone too (heavy_lock)
        node.workerinput[box_schedule.INPUT_KEY] = _heavy_ids_path(node.config)


def _heavy_ids_path(config) -> str:
    """Where the workers write the heavy tests' IDs: a file of this run's controller."""
    if not hasattr(config, "_gputop_dl_heavy_ids"):
        import tempfile

        d = tempfile.mkdtemp(prefix="gputop-dl-suite-")
        config._gputop_dl_heavy_ids = os.path.join(d, "heavy-ids.json")
        config.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))
    return config._gputop_dl_heavy_ids


@contextlib.contextmanager
def run_lock(tmp_path_factory, name: str, exclusive: bool):
    """A file lock shared by every xdist worker of this run, held for the block."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-N/popen-gwK -> pytest-N, shared by the workers of this run
    with open(root / name, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def heavy_lock(request, tmp_path_factory):
    """A lock shared by all xdist workers: a heavy test holds it exclusively, every other
    test shared. So a heavy test runs alone on the box, not beside the other worker's tests
    (a light pair judged beside busy loops read 'parallel' in CI while the other
    worker's tests ran beside it, and passed alone)."""
    paired = (runs_in_pairs(request.node)  # only where the suite's scheduler keeps them apart
              and box_schedule.INPUT_KEY in getattr(request.config, "workerinput", {}))
    alone = holds_the_box(request.node) and not paired
    if paired:  # after every test that runs alone (the scheduler's flag)
        box_schedule.wait_for_pairs(request.config.workerinput[box_schedule.INPUT_KEY])
    with run_lock(tmp_path_factory, "heavy-tests.lock", exclusive=alone):
        yield


def _check_wherever_imported(module: str, name: str, document=lambda out: out) -> None:
    """Replace function `name` of `module`, and every binding of it in gputop_dl's modules
    imported so far, by one that checks its output against its schema. Done here, before the
    test modules import it, so that their own `from ... import name` gets the checking one."""
    import functools
    import importlib

    from tests.schema_check import check

    orig = getattr(importlib.import_module(module), name)

    @functools.wraps(orig)
    def checked(*args, **kwargs):
        out = orig(*args, **kwargs)
        check(document(out))
        return out

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("gputop_dl") and getattr(mod, name, None) is orig:
            setattr(mod, name, checked)


def _as_exported(doc):
    """The session document as `export OUT.json` writes it (NaN and infinities: null)."""
    from gputop_dl.present.report.export import _finite

    return _finite(doc)


# every export, comparison, session list, simulation and fleet document any test builds
_check_wherever_imported("gputop_dl.present.report.document", "session_json", _as_exported)
_check_wherever_imported("gputop_dl.present.report.compare", "compare_sessions")
_check_wherever_imported("gputop_dl.present.report.sessions", "list_sessions",
                         lambda rows: {"schema": "gputop-dl.sessions/1", "sessions": rows})
_check_wherever_imported("gputop_dl.present.report.simulation", "simulation_json")
_check_wherever_imported("gputop_dl.runner.remote", "fleet_json")
# every machine profile (`machine --json`) and plan (`plan FILE --json`) any test builds
_check_wherever_imported("gputop_dl.collect.boxprofile", "profile_machine")
_check_wherever_imported("gputop_dl.present.machine", "plan_json")


@pytest.fixture(autouse=True)
def schema_checked(monkeypatch):
    """Every snapshot, verdict and diagnosis a test builds is checked against its shipped
    schema as it is made (tests/schema_check.py): an output field added without its schema
    fails the test that first builds it. (The functions above are replaced once, for the
    whole run; these methods per test.)"""
    from gputop_dl.analyse.verdict_types import Verdict
    from gputop_dl.engine.diagnose_plan import DiagnosePlan
    from gputop_dl.snapshot import Snapshot
    from tests.schema_check import check

    def checked(method, name=None):
        def wrapper(self, *args, **kwargs):
            return check(method(self, *args, **kwargs), name)
        return wrapper

    monkeypatch.setattr(Snapshot, "to_json", checked(Snapshot.to_json))
    monkeypatch.setattr(Verdict, "to_json", checked(Verdict.to_json, "verdict"))
    monkeypatch.setattr(DiagnosePlan, "result", checked(DiagnosePlan.result))
