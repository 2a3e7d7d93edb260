"""A found job's step time where py-spy's rate beats with the steps: the concurrent check burst
at four times the rate (collect/pyspy/stall.py `checked`) and the pool that follows the newest
burst (`current_step_time`)."""

from __future__ import annotations

import random

import pytest

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.pyspy.stall_sampler import StallSampler
from gputop_dl.collect.pyspy.stall import (
    CHECK_S, MICRO_WHY, MIN_CYCLES, StallEstimate, check_rate, checked, current_step_time)
from tests.test_pyspy_timed import MAIN, PID, trace

# wlm-like: pytorch/examples' word_language_model on this box steps every ~44 ms
PARTS = (("data", 0.004), ("forward", 0.015), ("backward", 0.017), ("optimizer", 0.008))

FEW = f"fewer than {MIN_CYCLES} steps seen (a step longer than a quarter of the burst)"


def sampled(parts, seconds: float, rate: int, seed: int = 0):
    """The phase changes py-spy sees sampling a job whose steps repeat `parts` (phase, s) every
    sum(parts) seconds, at `rate` Hz from a random offset, each sample ±1 ms late or early."""
    rnd = random.Random(seed)
    period = sum(d for _, d in parts)
    t0, out, last = rnd.uniform(0, period), [], None
    for k in range(int(seconds * rate)):
        t = k / rate + rnd.uniform(-0.001, 0.001)
        ph = phase_at((t + t0) % period, parts)
        if ph != last:
            out.append((round(max(0.0, t), 6), ph))
            last = ph
    return out, seconds


def phase_at(x: float, parts) -> str:
    """The phase `x` seconds into a step."""
    for ph, d in parts:
        if x < d:
            return ph
        x -= d
    return parts[-1][0]


def burst(parts, seconds: float, rate: int, seed: int = 0) -> StallEstimate:
    seq, end = sampled(parts, seconds, rate, seed)
    return pyspy.stall_from_timeline(pyspy.parse_chrometrace(trace(seq, end))[MAIN], rate, PID)


def scaled(k: float):
    return tuple((ph, d * k) for ph, d in PARTS)


def test_one_rate_beats_with_a_step_near_its_interval_and_the_check_finds_the_step():
    wrong = 0
    for seed in range(8):
        main = burst(PARTS, 2.0, 25, seed)
        if main.step_time_s is not None and abs(main.step_time_s / 0.044 - 1) > 0.25:
            wrong += 1  # a beat of 25 Hz and the 44 ms step, read as a step
        got = checked(main, burst(PARTS, CHECK_S, check_rate(25), seed + 100), 25, check_rate(25))
        assert got.step_time_s == pytest.approx(0.044, rel=0.1), (seed, got.why)
    assert wrong, "the unchecked 25 Hz burst never read a beat: this test shows nothing"


@pytest.mark.parametrize("k", [3.5, 6.0])  # steps of 154 and 264 ms: both rates time them
def test_steps_both_rates_resolve_keep_the_main_reading(k):
    step = 0.044 * k
    main = burst(scaled(k), 2.0, 25, 1)
    assert main.step_time_s == pytest.approx(step, rel=0.1)
    got = checked(main, burst(scaled(k), CHECK_S, 100, 2), 25, 100)
    assert got.step_time_s == pytest.approx(step, rel=0.1) and got.why is None


def test_steps_shorter_than_the_check_can_time_are_refused_with_the_reason():
    main = StallEstimate(4, 46, step_time_s=0.31, cycles=6)  # a beat, read as a step
    check = StallEstimate(8, 92)
    check.why = "its step phases are too short for py-spy's sampling interval"
    got = checked(main, check, 25, 100)
    assert got.step_time_s is None and "shorter than py-spy can time at 100 Hz" in got.why
    assert got.fraction == 0.08  # the data wait is still the main burst's


def test_long_steps_the_short_check_cannot_count_keep_the_main_reading():
    check = StallEstimate(8, 92)
    check.why = FEW
    got = checked(StallEstimate(4, 46, step_time_s=0.3, cycles=6), check, 25, 100)
    assert got.step_time_s == 0.3 and got.why is None
    # ... but a main reading the check would have counted is not confirmed
    got = checked(StallEstimate(4, 46, step_time_s=0.1, cycles=19), check, 25, 100)
    assert got.step_time_s is None and "not confirmed" in got.why


def test_two_rates_that_both_resolve_the_step_and_disagree_give_none():
    got = checked(StallEstimate(4, 46, step_time_s=0.3, cycles=6),
                  StallEstimate(8, 92, step_time_s=0.18, cycles=5), 25, 100)
    assert got.step_time_s is None and "disagree" in got.why


def test_a_failed_check_leaves_no_unchecked_step_time():
    main = StallEstimate(5, 45, step_time_s=0.2, cycles=9)
    got = checked(main, None, 25, 100, "py-spy: process gone")
    assert got.step_time_s is None and "aliasing" in got.why and "process gone" in got.why


def test_the_two_bursts_cpu_add_up():
    main, check = StallEstimate(5, 45, cpu_s=0.04), StallEstimate(10, 90, cpu_s=0.07)
    assert checked(main, check, 25, 100).cpu_s == pytest.approx(0.11)


def test_the_pool_follows_the_newest_burst():
    alone = [(0.057, 35, None, 2.0)] * 3
    # slowed 5x beside another job: the newest burst's step, not a mean with the old ones
    step, why = current_step_time([*alone, (0.29, 7, None, 2.0)])
    assert step == pytest.approx(0.29) and why is None
    # slowed so far that a burst counts fewer than MIN_CYCLES steps: the old steps are stale
    few = f"fewer than {MIN_CYCLES} steps seen"
    step, why = current_step_time([*alone, (None, 0, few, 2.0)])
    assert step is None and why == few
    # ... but readings as long as the burst could not count still hold
    assert current_step_time([(0.45, 4, None, 2.0), (None, 0, few, 2.0)]) == (0.45, None)
    assert current_step_time([(0.45, 4, None, 2.0), (None, 0, few, 8.0)]) == (None, few)
    # a newest burst with no step for another reason: unknown, not the older readings
    assert current_step_time([(0.1, 10, None, 2.0), (0.12, 10, None, 2.0),
                              (None, 0, "too short", 2.0)]) == (None, "too short")
    assert current_step_time([(0.1, 10, None, 2.0), (0.12, 10, None, 2.0)]) == (
        pytest.approx(0.11), None)
    assert current_step_time([]) == (None, None)


def each_burst(record, n, every_s=100.0, **kw):
    """A sampler of 2 s bursts at 25 Hz with `record` for py-spy: `n` bursts of job "a",
    `every_s` apart on its clock, yielding the sampler after each."""
    now = [0.0]
    sampler = StallSampler(duration_s=2.0, rate=25, every_s=0.0, record=record, cpu_budget=None,
                           clock=lambda: now[0], **kw)
    for _ in range(n):
        now[0] += every_s
        assert sampler.round([("a", 1)])
        sampler.join(10)
        yield sampler


def test_a_job_whose_bursts_count_too_few_steps_gets_longer_slower_bursts_and_back():
    reads = iter([(None, FEW), (None, FEW), (None, FEW), (1.5, None), (0.3, None), (0.3, None),
                  (0.05, None)])
    spans = []

    def record(pid, seconds, rate, exe):
        spans.append((seconds, rate))
        step, why = next(reads)
        est = StallEstimate(2, 40, step_time_s=step, cycles=5 if step else 0)
        est.why = why
        return est, None

    *_, sampler = each_burst(record, 7)
    # four times as long at a quarter of the rate (the same samples; 3 Hz at least), at most
    # LONGER times; shorter again once the shorter burst would count the steps it reads
    assert spans == [(2.0, 25), (8.0, 6), (32.0, 3), (32.0, 3), (8.0, 6), (2.0, 25), (2.0, 25)]
    assert sampler.result("a").step_time_s == pytest.approx(0.05)
    assert sampler.result("a").step_over_s is None


@pytest.mark.parametrize("floor, lengths", [(2.0, [2.0, 32.0, 32.0]), (1.7, [2.0, 32.0, 32.0]),
                                            (1.5, [2.0, 8.0, 32.0]), (None, [2.0, 8.0, 32.0])])
def test_steps_a_burst_says_are_too_long_for_the_next_length_skip_it(floor, lengths):
    """A 2 s burst that saw steps of 1.7 s or more: an 8 s burst would count fewer than 5 step
    starts again, so the next is the 32 s one (a word_language_model pair at 3.3 s a step got
    2, 8 and only then 32 s bursts, about a minute apart each); at 1.5 s the 8 s one counts
    them."""
    spans = []

    def record(pid, seconds, rate, exe):
        spans.append(seconds)
        est = StallEstimate(2, 40)
        est.why, est.floor_s = FEW, floor
        return est, None

    list(each_burst(record, 3))
    assert spans == lengths


def test_a_burst_that_counts_too_few_steps_says_how_long_they_are_at_least():
    rates = []

    def record(pid, seconds, rate, exe):
        rates.append(rate)
        est = StallEstimate(2, 40)
        est.why = FEW
        return est, None

    for seconds, sampler in zip((2.0, 8.0, 32.0, 32.0), each_burst(record, 4)):
        res = sampler.result("a")
        assert res.step_time_s is None and res.step_note == FEW
        assert res.step_over_s == pytest.approx(seconds / (MIN_CYCLES + 1))
    assert rates == [25, 6, 3, 3]  # the longest at 3 Hz, not 1 (twice the samples)


def test_a_step_a_check_confirmed_needs_no_check_until_it_changes():
    calls = []

    def burst(kind, reads):
        it = iter(reads)

        def record(pid, seconds, rate, exe):
            calls.append(kind)
            est = StallEstimate(2, 40, step_time_s=next(it), cycles=8)
            return est, None
        return record

    steps = [(sampler.result("a").step_time_s, sampler.result("a").step_note)
             for sampler in each_burst(burst("checked", [0.3, 0.6, 0.044, 0.045]), 7, every_s=10.0,
                                       unchecked=burst("unchecked", [0.31, 0.6, 0.05]))]
    # 0.3 s checked; 0.31 unchecked stands; 0.6 unchecked is held back and checked next; 50 ms
    # unchecked is held back too; a 44 ms step is too short for 25 Hz to time: always checked
    assert calls == ["checked", "unchecked", "unchecked", "checked", "unchecked", "checked",
                     "checked"]
    assert steps[1][0] == pytest.approx(0.305)
    assert steps[2] == (None, "its step changed from 300 ms to 600 ms: the next burst checks it")
    assert steps[3][0] == pytest.approx(0.6)
    assert steps[4] == (None, "its step changed from 600 ms to 50 ms: the next burst checks it")
    assert steps[6][0] == pytest.approx(0.0445)


def test_longer_bursts_get_a_check_long_enough_to_rule_out_a_beat():
    from gputop_dl.collect.pyspy.stall import check_seconds

    assert [check_seconds(s, r) for s, r in ((2, 25), (3, 50), (4, 12), (8, 6), (1, 6))] == [
        1, 1, 2, 3, 1]
    few = StallEstimate(8, 92)
    few.why = FEW
    # an 8 s burst at 6 Hz read 708 ms where the steps were ~195 ms (a beat); a 1 s check
    # counting fewer than 4 says only "over 0.2 s", which 6 Hz cannot time without beats
    got = checked(StallEstimate(4, 46, step_time_s=0.708, cycles=11), few, 6, 24, check_s=1)
    assert got.step_time_s is None and "not confirmed" in got.why
    # a 3 s check counting fewer than 4 says "over 0.6 s": 6 Hz times that
    got = checked(StallEstimate(4, 46, step_time_s=0.95, cycles=8), few, 6, 24, check_s=3)
    assert got.step_time_s == 0.95


def test_a_check_that_counted_micro_steps_gives_way_to_the_main_bursts_optimizer_steps():
    """tests/external/phased.py --accumulate 2 (300 ms steps: two forwards and backwards, one
    optimizer step): the 1 s check saw 3 optimizer steps and timed the backward's recurrence,
    150 ms; the 2 s main burst timed the optimizer's, 300 ms."""
    def est(step, anchor, opt):
        e = StallEstimate(0, 100, step_time_s=step, cycles=6 if step else 0)
        e.anchor, e.phases = anchor, {"forward": 40, "backward": 40, "optimizer": opt}
        return e

    got = checked(est(0.3, "optimizer", 20), est(0.15, "backward", 10), 50, 200)
    assert got.step_time_s == 0.3 and got.anchor == "optimizer"
    got = checked(est(None, None, 20), est(0.15, "backward", 10), 50, 200)
    assert got.step_time_s is None and "more than once a step" in got.why
    # no optimizer phase at all (word_language_model steps by hand): the check's step stands
    got = checked(est(None, None, 0), est(0.044, "backward", 0), 25, 100)
    assert got.step_time_s == 0.044
    # the check refused its backward's 150 ms itself (its 3 optimizer steps came two of them
    # apart): the same, read from the cycle it refused
    refused = est(None, None, 10)
    refused.why, refused.micro_s = MICRO_WHY, 0.15
    got = checked(est(0.3, "optimizer", 20), refused, 50, 200)
    assert got.step_time_s == 0.3 and got.anchor == "optimizer"
    refused = est(None, None, 10)
    refused.why, refused.micro_s = MICRO_WHY, 0.15
    got = checked(est(0.3, "backward", 0), refused, 50, 200)
    assert got.step_time_s is None and "more than once a step" in got.why
