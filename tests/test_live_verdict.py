"""The monitor's live verdict on real scripts started by hand (tests/external/calibrated.py):
three CPU-hungry jobs read cpu-bound, each with an estimated slowdown, and a light pair reads
parallel; nothing is paused. The monitor watches only this test's scripts (the box runs
others), and the test waits for the snapshot that says so, up to a deadline."""

from __future__ import annotations

import os
import threading

import pytest

from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.runner import monitor_engine

from tests.fakes.by_hand import HEAVY, LIGHT, ByHand, never_left_stopped, only_found

pytestmark = pytest.mark.heavy
DEADLINE_S = 60.0  # generous: a busy box is slow to start torch; the verdict itself takes ticks
BUSY_BOX = 3.0  # load per CPU above which the box is too busy with others' work for the trio


@pytest.fixture
def by_hand():
    scripts = ByHand()
    yield scripts.start
    scripts.stop()


def watch(pids: set[int], until) -> tuple[object, list]:
    """Run the monitor on these scripts until a snapshot satisfies `until` (or the deadline);
    the last snapshot and every verdict kind seen."""
    eng = monitor_engine(Nvml(), interval=0.5, record=False, found=only_found(pids, stall=False))
    hit, seen, last = threading.Event(), [], []

    def on(snap):
        if hit.is_set():
            return
        last[:] = [snap]
        if snap.verdict:
            seen.append(snap.verdict["kind"])
        if len(snap.jobs) == len(pids) and snap.verdict and until(snap):
            hit.set()  # `last` keeps this snapshot

    eng.subscribe(on)
    eng.start()
    try:
        hit.wait(DEADLINE_S)
    finally:
        eng.request_stop()
        eng.join(10)
    return (last[0] if last else None), seen


def test_real_heavy_trio_by_hand_reads_cpu_bound_with_an_estimate_for_each(by_hand):
    load, cpus = os.getloadavg()[0], len(os.sched_getaffinity(0))
    if load > BUSY_BOX * cpus:  # the trio's waits would be mostly other people's load
        pytest.skip(f"the box runs {load:.0f} runnable threads on {cpus} CPUs before the trio "
                    "starts: what the trio waits for is mostly load from outside it, and the "
                    "live verdict rightly puts it down to that")
    pids = by_hand(HEAVY, 3)

    def bound(snap):
        return (snap.verdict["kind"] == "cpu-bound"
                and all(j.slowdown_source == "estimated" and j.slowdown > 1 for j in snap.jobs))

    snap, seen = watch(pids, bound)
    assert snap is not None and bound(snap), (seen, snap and snap.verdict)
    assert {j.pid for j in snap.jobs} == pids
    assert all(j.cpu_wait_fraction is not None and j.slowdown_confidence for j in snap.jobs)
    data = snap.to_json()
    assert {j["slowdown_source"] for j in data["jobs"]} == {"estimated"}
    assert "nothing paused" in data["verdict"]["reason"]
    assert never_left_stopped(pids)


def test_real_light_pair_by_hand_reads_parallel(by_hand):
    pids = by_hand(LIGHT, 2)
    snap, seen = watch(pids, lambda s: s.verdict["kind"] == "parallel")
    assert snap is not None and snap.verdict["kind"] == "parallel", (seen, snap and snap.verdict)
    assert all(j.slowdown is not None and j.slowdown <= 1.10 for j in snap.jobs)
