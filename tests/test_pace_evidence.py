"""A job's pace laid out flat for the verdict's `evidence.own_pace` (analyse/slowdown/
pace_evidence.py): each meter's `Pace` against the entry written out by hand, key for key and
in the order recorded verdicts have them; the meters a pace was not read by read nothing."""

from __future__ import annotations

from typing import Any

from gputop_dl.analyse.slowdown import pace as O
from gputop_dl.analyse.slowdown import pace_tracks as T
from gputop_dl.analyse.slowdown.pace import (CounterReadings, Lender, LoaderReadings, Pace,
                                             StepReadings, pace_figure)
from gputop_dl.analyse.slowdown.pace_evidence import evidence
from gputop_dl.snapshot import JobSample

# the entry of a pace that no meter read: every figure unknown, every count 0
NOTHING: dict[str, Any] = {
    "slowdown": None, "used": False, "loader_cores_alone": None, "loader_cores_now": None,
    "alone_readings": 0, "now_readings": 0, "why": None, "earlier_slowdown": None,
    "earlier_ago_s": None, "source": "loader", "step_alone_s": None, "step_now_s": None,
    "step_now_age_s": None, "step_alone_readings": 0, "at_least": None, "twin_pid": None,
    "twin_args": [], "loader_writes_alone": None, "loader_writes_now": None,
    "stored_age_s": None, "loop_counter": None, "loop_rate_alone": None, "loop_rate_now": None,
    "loop_alone_s": 0.0, "loop_now_s": 0.0}


def same(got: dict[str, Any], **want: Any) -> None:
    """`got` is NOTHING but for `want`, with NOTHING's keys in NOTHING's order."""
    assert list(got.items()) == list((NOTHING | want).items())


def test_a_pace_by_its_loaders_batches():
    p = Pace(2.868, "batches", alone_until=19.0, loader=LoaderReadings(
        0.0417, 0.0205, 3.4400001, 1.19949, alone_ticks=10, now_ticks=20))
    same(evidence(p, True), slowdown=2.868, used=True, loader_cores_alone=0.0417,
         loader_cores_now=0.0205, alone_readings=10, now_readings=20, source="batches",
         loader_writes_alone=3.44, loader_writes_now=1.199)


def test_a_pace_by_its_loaders_cores_alone_again_says_how_it_ran_beside_the_others():
    p = Pace(None, "loader", "it runs alone", earlier=3.0, earlier_ago=109.0,
             loader=LoaderReadings(0.4, None, None, None, alone_ticks=12))
    same(evidence(p, False), loader_cores_alone=0.4, alone_readings=12, why="it runs alone",
         earlier_slowdown=3.0, earlier_ago_s=109.0)


def test_a_pace_by_its_loop_counter_and_its_bound():
    ct = CounterReadings("main.py:train:batch_idx", 10.0, 2.5004, 20.04, 19.96)
    same(evidence(Pace(4.0, "counter", counter=ct), True), slowdown=4.0, used=True,
         source="counter", loop_counter="main.py:train:batch_idx", loop_rate_alone=10.0,
         loop_rate_now=2.5, loop_alone_s=20.0, loop_now_s=20.0)
    still = Pace(None, "counter", "did not move", 1200.0,
                 counter=CounterReadings("main.py:train:batch_idx", 10.0, 0.0, 20.0, 120.0))
    same(evidence(still, False), why="did not move", source="counter", at_least=1200.0,
         loop_counter="main.py:train:batch_idx", loop_rate_alone=10.0, loop_rate_now=0.0,
         loop_alone_s=20.0, loop_now_s=120.0)


def test_a_pace_by_py_spy_steps_and_its_bound():
    same(evidence(Pace(10.0, "steps", steps=StepReadings(0.05, 0.5, 100.0, 2)), True),
         slowdown=10.0, used=True, source="steps", step_alone_s=0.05, step_now_s=0.5,
         step_now_age_s=100.0, step_alone_readings=2)
    bound = Pace(None, "steps", "too long", 35.6, steps=StepReadings(0.045, None, None, 2))
    same(evidence(bound, False), why="too long", source="steps", step_alone_s=0.045,
         step_alone_readings=2, at_least=35.6)


def test_a_pace_divided_by_a_twins_or_a_stored_runs_readings_alone():
    ld = LoaderReadings(0.4, 0.1, None, None, alone_ticks=10, now_ticks=10)
    twin = Pace(4.0, "loader", lender=Lender(100, ("--outf",)), loader=ld)
    same(evidence(twin, True), slowdown=4.0, used=True, loader_cores_alone=0.4,
         loader_cores_now=0.1, alone_readings=10, now_readings=10, twin_pid=100,
         twin_args=["--outf"])
    stored = Pace(4.0, "loader", lender=Lender(None, (), 909.0), loader=ld)
    same(evidence(stored, True), slowdown=4.0, used=True, loader_cores_alone=0.4,
         loader_cores_now=0.1, alone_readings=10, now_readings=10, stored_age_s=909.0)
    assert [pace_figure(p).reference for p in (twin, stored, Pace(4.0, loader=ld))] == [
        "twin", "stored run", "own readings"]


def test_the_meters_pace_sets_the_readings_of_the_meter_that_paced_it_only():
    """From the tracks: a job with loader workers is paced by them, and its Pace holds their
    readings and no other meter's."""
    pace = T.OwnPace()
    for t in range(T.SETTLE + O.REF_MIN):
        pace.update([JobSample(name="a", pid=1, launched=False, cpu_cores_workers=0.4)], float(t))
    for t in range(T.SETTLE + O.NOW_MIN):
        got = pace.update([JobSample(name="a", pid=1, launched=False, cpu_cores_workers=0.1),
                           JobSample(name="b", pid=2, launched=False, cpu_cores_workers=0.1)],
                          100.0 + t)
    a = got["a"]
    assert a.source == "loader" and a.steps is None and a.counter is None and a.lender is None
    assert a.loader is not None and a.loader.cores_alone == 0.4 and a.slowdown == 4.0
