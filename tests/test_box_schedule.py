"""The suite's scheduler (tests/box_schedule.py) in a real `pytest -n 3` run of a tiny suite:
every heavy test on one worker, in its order, none before the last other test was handed out,
and a module-scoped fixture of the heavy tests made once; the pairs last, two at a time."""

from __future__ import annotations

import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFTEST = '''
import os, pytest
from tests import box_schedule

@pytest.fixture(autouse=True)
def pairs_wait(request):
    path = getattr(request.config, "workerinput", {}).get(box_schedule.INPUT_KEY)
    if path and request.node.get_closest_marker("pairs") is not None:
        box_schedule.wait_for_pairs(path)

def pytest_collection_modifyitems(config, items):
    items[:] = sorted(items, key=lambda i: (i.get_closest_marker("heavy") is not None,
                                            i.get_closest_marker("pairs") is not None))
    path = getattr(config, "workerinput", {}).get(box_schedule.INPUT_KEY)
    if path:
        box_schedule.write_heavy_ids(
            path, [i.nodeid for i in items if i.get_closest_marker("heavy") is not None],
            [i.nodeid for i in items if i.get_closest_marker("pairs") is not None])

def pytest_xdist_make_scheduler(config, log):
    return box_schedule.BoxScheduling(config, log, str(config.rootpath / "ids.json"))

def pytest_configure_node(node):
    node.workerinput[box_schedule.INPUT_KEY] = str(node.config.rootpath / "ids.json")
'''

TESTS = '''
import json, os, time, pytest
LOG = os.environ["RUN_LOG"]

def note(kind):
    with open(LOG, "a") as f:
        f.write(json.dumps([kind, os.environ.get("PYTEST_XDIST_WORKER"), time.time()]) + "\\n")

@pytest.fixture(scope="module")
def made_once():
    note("fixture")

@pytest.mark.parametrize("i", range(12))
def test_other(i):
    time.sleep(0.5 if i == 11 else 0.01)  # the last one still runs while the heavy ones end
    note("other")

@pytest.mark.heavy
@pytest.mark.parametrize("i", range(4))
def test_heavy(i, made_once):
    note(f"heavy{i}")

@pytest.mark.heavy
@pytest.mark.pairs
@pytest.mark.parametrize("i", range(4))
def test_pair(i):
    """Waits (bounded) for the pair that runs beside it: run one at a time, it times out."""
    note("pair")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(LOG) as f:
            if sum('"pair"' in line for line in f) >= 2 * (i // 2) + 2:
                return
        time.sleep(0.05)
    raise AssertionError("no pair beside it")
'''


@pytest.mark.shares_box("which worker ran what, and in which order; no timing")
def test_heavy_tests_run_on_one_worker_after_the_others(pytester, tmp_path):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_mix=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    heavy: holds the box\n    pairs: two at a time\n")
    log = tmp_path / "run.log"
    os.environ["RUN_LOG"] = str(log)  # the workers' environment comes from this process
    try:
        result = pytester.runpytest_subprocess("-n", "3", "-p", "xdist", "-p", "no:cacheprovider",
                                               "--rootdir", str(pytester.path),
                                               "-o", f"pythonpath={ROOT}")
    finally:
        del os.environ["RUN_LOG"]
    result.assert_outcomes(passed=20)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    heavy = [r for r in rows if r[0].startswith("heavy")]
    others = [r for r in rows if r[0] == "other"]
    pairs = [r for r in rows if r[0] == "pair"]
    # the pairs last, after every other test, on two workers (each met the one beside it)
    assert min(r[2] for r in pairs) >= max(r[2] for r in heavy + others), rows
    assert len({r[1] for r in pairs}) == 2, pairs
    assert len({r[1] for r in heavy}) == 1, heavy  # one worker
    assert [r[0] for r in heavy] == [f"heavy{i}" for i in range(4)]  # in their order
    assert len({r[1] for r in others}) > 1, others  # the others shared out
    assert [r[0] for r in rows].count("fixture") == 1
