"""Where the test suite's time goes: each test's wall time and CPU time, its children's too.

A pytest plugin and its report. Run the suite with it loaded, then read the report:

    .venv/bin/python -m pytest -q -n 3 -p benchmarks.suite_time
    .venv/bin/python benchmarks/suite_time.py [suite-time.jsonl]

Each test's set-up, call and tear-down is timed in the worker that runs it: wall time, the
worker's own CPU (`RUSAGE_SELF`), its reaped children's (`RUSAGE_CHILDREN`: the jobs a test
starts and waits for; not those a shell started for it) and the whole box's (/proc/stat: while a
heavy test holds the box, that is the test's own, jobs started by hand included, plus whatever
else runs there). A line per phase goes to `suite-time.jsonl` (or `GPUTOP_DL_SUITE_TIME`),
appended under a lock by every worker, with its start time. The report sums them per file and
per kind (heavy: holds the box alone; slow: starts a process; quick), says when the other tests
ended and when the heavy ones ran (they run last: tests/conftest.py), and lists the tests that
hold the box longest with their CPU over wall: a heavy test that uses a small part of the 2
cores it holds waits on time, not on the CPU.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import sys
from time import monotonic, time  # bound now: a test may monkeypatch them
from collections import defaultdict
from typing import Any

OUT = os.environ.get("GPUTOP_DL_SUITE_TIME", "suite-time.jsonl")


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _box_busy() -> float:
    """The box's busy CPU seconds so far, all processes (/proc/stat: not idle, not iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _kind(item: Any) -> str:
    if any("heavy" in m.args for m in item.iter_markers("xdist_group")):
        return "heavy"
    return "quick" if item.get_closest_marker("quick") else "slow"


def _write(row: dict[str, Any]) -> None:
    with open(OUT, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(row) + "\n")


def _timed(item: Any, phase: str) -> Any:
    at = time()
    t0, (s0, c0), b0 = monotonic(), _cpu(), _box_busy()
    yield
    s1, c1 = _cpu()
    _write({"test": item.nodeid, "phase": phase, "kind": _kind(item),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "at": round(at, 3),
            "wall": round(monotonic() - t0, 3), "cpu": round(s1 - s0, 3),
            "children_cpu": round(c1 - c0, 3), "box_cpu": round(_box_busy() - b0, 3)})


try:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(item: Any) -> Any:
        yield from _timed(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item: Any) -> Any:
        yield from _timed(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(item: Any) -> Any:
        yield from _timed(item, "teardown")
except ImportError:  # the report alone needs no pytest
    pass


def report(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    calls = [r for r in rows if r["phase"] == "call"]
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for r in calls:
        k = by_kind[r["kind"]]
        k[0] += 1
        k[1] += r["wall"]
        k[2] += r["cpu"] + r["children_cpu"]
    print("kind    tests   call wall s   call CPU s")
    for kind, (n, wall, cpu) in sorted(by_kind.items()):
        print(f"{kind:7} {n:6d} {wall:12.1f} {cpu:12.1f}")
    setup = sum(r["wall"] for r in rows if r["phase"] == "setup")
    print(f"set-up wall (lock waits included): {setup:.1f} s")
    timed = [r for r in rows if "at" in r]  # the start of each phase (older files: none)
    if timed:
        t0 = min(r["at"] for r in timed)
        ends = {k: max((r["at"] + r["wall"] - t0 for r in timed if (r["kind"] == "heavy") == k),
                       default=0.0) for k in (False, True)}
        first_heavy = min((r["at"] - t0 for r in timed if r["kind"] == "heavy"), default=0.0)
        print(f"from the first test's start: the others end at {ends[False]:.1f} s, the heavy "
              f"ones run from {first_heavy:.1f} s to {ends[True]:.1f} s")
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in calls:
        if r["kind"] == "heavy":
            f = files[r["test"].split("::")[0]]
            f[0] += r["wall"]
            f[1] += r.get("box_cpu", r["cpu"] + r["children_cpu"])
    print("\nheavy calls by file: wall s, the box's CPU s, cores used of those it holds")
    for name, (wall, cpu) in sorted(files.items(), key=lambda kv: -kv[1][0]):
        print(f"{wall:7.1f} {cpu:7.1f} {cpu / wall if wall else 0:5.2f}  {name}")
    print("\nthe 40 longest heavy calls: wall s, the box's CPU s, cores used")
    heavy = sorted((r for r in calls if r["kind"] == "heavy"), key=lambda r: -r["wall"])
    for r in heavy[:40]:
        cpu = r.get("box_cpu", r["cpu"] + r["children_cpu"])
        print(f"{r['wall']:7.1f} {cpu:7.1f} {cpu / r['wall'] if r['wall'] else 0:5.2f}  {r['test']}")


if __name__ == "__main__":
    report(sys.argv[1] if len(sys.argv) > 1 else OUT)
