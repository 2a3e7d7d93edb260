"""A phase the loop calls from several lines a step (a GAN's two optimizers, its three
backward passes): its step time from one line's recurrences (`phase_site`, `anchor_marks`),
and gradient accumulation still told from steps whose optimizer py-spy mostly misses."""

from __future__ import annotations

import pytest

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.pyspy.stacks import phase_site
from gputop_dl.collect.pyspy.stall import MICRO_WHY
from gputop_dl.collect.pyspy.step_cycles import once_a_step
from tests.test_pyspy_timed import MAIN, PID, trace

LOOP = ["<module> (main.py:1)", "train (main.py:{line})"]
OPT = "Adam.step (torch/optim/adam.py:200)"
FWD = "Module._call_impl (torch/nn/modules/module.py:1798)"
BWD = "Tensor.backward (torch/_tensor.py:623)"
DATA = "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:733)"


def at(line: int, *frames: str) -> list[str]:
    return [LOOP[0], LOOP[1].format(line=line), *frames]


# PyTorch's dcgan example, one iteration: D on a real batch, D on a fake one, D's optimizer;
# G through D, G's optimizer (the lines are main.py's)
GAN = {"data": at(223, DATA), "fwd_real": at(234, FWD), "bwd_real": at(236, BWD),
       "fwd_g": at(241, FWD), "fwd_fake": at(243, FWD), "bwd_fake": at(245, BWD),
       "opt_d": at(248, OPT), "fwd_gd": at(255, FWD), "bwd_g": at(257, BWD),
       "opt_g": at(259, OPT)}
GAN_MS = (("data", 20), ("fwd_real", 100), ("bwd_real", 150), ("fwd_g", 80), ("fwd_fake", 100),
          ("bwd_fake", 150), ("opt_d", 40), ("fwd_gd", 100), ("bwd_g", 200), ("opt_g", 60))


def sampled(parts: tuple[tuple[str, float], ...], steps: int, rate: int, scale: float = 1.0,
            phase: float = 0.37) -> tuple[list[tuple[float, str]], float]:
    """`steps` steps of `parts` (name, ms), each `scale` times as long, sampled at `rate` Hz as
    py-spy does: a change of stack is stamped with the sample that saw it."""
    bounds, t = [], 0.0
    for _ in range(steps):
        for name, ms in parts:
            bounds.append((t, name))
            t += ms * scale / 1000
    out: list[tuple[float, str]] = []
    k, i = 0, 0
    while (ts := (k + phase) / rate) < t:
        while i + 1 < len(bounds) and bounds[i + 1][0] <= ts:
            i += 1
        if not out or out[-1][1] != bounds[i][1]:
            out.append((round(ts, 6), bounds[i][1]))
        k += 1
    return out, round((k + phase) / rate, 6)


def burst(parts, steps, rate, scale=1.0, stacks=GAN):
    seq, end = sampled(parts, steps, rate, scale)
    return pyspy.stall_from_timeline(pyspy.parse_chrometrace(trace(seq, end, stacks))[MAIN],
                                     rate, PID)


def test_phase_site_is_the_line_that_calls_the_phase():
    assert phase_site(";".join([MAIN, *GAN["opt_d"]]), PID) == ("optimizer", "train (main.py:248)")
    assert phase_site(";".join([MAIN, *GAN["bwd_g"]]), PID) == ("backward", "train (main.py:257)")
    # the outermost module call's caller, not a submodule's
    nested = ";".join([MAIN, *GAN["fwd_real"], "Net.forward (main.py:150)", FWD])
    assert phase_site(nested, PID) == ("forward", "train (main.py:234)")
    assert phase_site(";".join([MAIN, *GAN["data"]]), PID) == ("data", "train (main.py:223)")
    assert phase_site(";".join([MAIN, *at(300)]), PID) == ("other", None)


@pytest.mark.parametrize("rate,scale", [(50, 1.0), (25, 1.0), (50, 4.8), (12, 4.8)])
def test_a_gan_step_is_one_iteration_not_one_optimizer_step(rate, scale):
    """Its two optimizer steps (and three backward passes) a step once read as two (three)
    steps: 0.5 s for 1 s (the live monitor showed 2.25 s for a dcgan copy's 4.8 s)."""
    est = burst(GAN_MS, 12, rate, scale)
    assert est.why is None and est.step_time_s == pytest.approx(1.0 * scale, rel=0.03), est


def test_a_gan_whose_optimizer_steps_hide_between_samples_is_timed_by_one_backward():
    """At 12 Hz the optimizer's 50-70 ms hide between samples; each backward line recurs
    once a step (the whole backward phase, three times a step, read a third of it)."""
    est = burst(GAN_MS, 12, 12, 1.2)
    assert est.anchor == "backward" and est.step_time_s == pytest.approx(1.2, rel=0.05), est


def test_gradient_accumulation_still_reads_no_micro_steps():
    """Two micro-steps a step with one backward line, an optimizer step seen in some steps
    only: the backward's cycles are micro-steps (the optimizer steps it saw are two cycles
    apart), so no step time is read from them."""
    one = {"data": at(10, DATA), "fwd": at(11, FWD), "bwd": at(12, BWD), "opt": at(14, OPT)}
    parts = (("data", 30), ("fwd", 100), ("bwd", 150), ("data", 30), ("fwd", 100), ("bwd", 150),
             ("opt", 25))
    est = burst(parts, 10, 25, stacks=one)
    assert est.step_time_s is None or est.step_time_s == pytest.approx(0.585, rel=0.05), est


def test_once_a_step_tells_steps_from_micro_steps():
    """Optimizer steps one anchor step apart (of 1 s) say steps; always two apart (however
    many were missed), micro-steps; a run split in two (0.1 s apart) says neither."""
    assert once_a_step(1.0, [3.7, 4.7])  # optimizer steps seen in two running steps
    assert once_a_step(1.0, [3.7, 6.9, 8.1])  # missed some, two running ones among them
    assert not once_a_step(1.0, [3.7, 5.7, 9.7])  # always two steps apart: micro-steps
    assert not once_a_step(1.0, [3.7, 3.8, 5.7, 7.8])  # a split run is not a step apart
    assert not once_a_step(1.0, [3.7])
    assert not once_a_step(0.0, [3.7, 4.7])


def test_a_short_burst_of_two_micro_steps_a_step_counts_no_micro_step():
    """py-spy's own trace of `phased.py --accumulate 2` (forward, backward and optimizer 60
    ms each: 300 ms a step) under load, 1.6 s of it: a 12 ms glitch of the backward shifted
    its cycles' count, so that two optimizer steps fell in counted running cycles, and the
    backward read 173 ms. In time they are 290-340 ms apart: two micro-steps each."""
    seq = [("opt", 0.246), ("fwd", 0.306), ("bwd", 0.380), ("fwd", 0.451), ("opt", 0.544),
           ("fwd", 0.611), ("bwd", 0.722), ("fwd", 0.735), ("bwd", 0.790), ("opt", 0.882),
           ("fwd", 0.953), ("bwd", 1.005), ("fwd", 1.042), ("bwd", 1.109), ("opt", 1.168),
           ("fwd", 1.243), ("bwd", 1.302), ("fwd", 1.389), ("opt", 1.493), ("fwd", 1.538),
           ("bwd", 1.593)]
    one = {"fwd": at(104, FWD), "bwd": at(105, BWD), "opt": at(106, OPT)}

    def read(changes):
        return pyspy.stall_from_timeline(
            pyspy.parse_chrometrace(trace([(t, ph) for ph, t in changes], 1.68, one))[MAIN], 50, PID)

    # forward and backward joined recur once a step: 308 ms
    assert read(seq).step_time_s == pytest.approx(0.30, rel=0.05)
    est = read(seq[1:])  # without the first optimizer step: none, and the micro-step refused
    assert est.step_time_s is None and est.why == MICRO_WHY, est
    assert est.micro_s == pytest.approx(0.173, abs=0.01)  # what the check gives way by


def test_optimizer_steps_seen_in_some_steps_do_not_make_the_steps_micro_steps():
    """Alone at 50 Hz the dcgan copy's optimizer steps (10-20 ms) were seen in 6 of its 17
    steps: the backward's 17 cycles are almost three times 6, yet some of the six
    fell in running cycles, so they are steps (it read 1.07 s, its own 1.07 s). Here 3 ms
    optimizer steps are seen in 3 of 18."""
    short = tuple((n, {"opt_d": 3.0, "opt_g": 3.0}.get(n, ms * 1.013)) for n, ms in GAN_MS)
    est = burst(short, 18, 50)
    assert est.step_time_s == pytest.approx(sum(ms for _, ms in short) / 1000, rel=0.03), est


def test_few_steps_counted_say_long_steps_only_where_each_step_would_be_seen():
    """Fewer than MIN_CYCLES entries into an anchor whose runs last about one sample interval
    say nothing of the steps (most were missed): the dcgan copy's 8 s at 6 Hz counted three
    of its 1.2 s steps and was shown as 'over 1.6 s'. Runs seen well say the steps are long."""
    def runs(on_s: float, every_s: float, n: int) -> list[tuple[bool, float, float]]:
        out = []
        for i in range(n):
            out += [(False, i * every_s, i * every_s + every_s - on_s),
                    (True, i * every_s + every_s - on_s, (i + 1) * every_s)]
        return out
    from gputop_dl.collect.pyspy.step_cycles import timed_cycles
    missed = timed_cycles(runs(0.17, 2.5, 3), 1 / 6)  # one sample of a missed-most phase
    assert missed[3] is not None and "too short" in missed[3]
    long = timed_cycles(runs(0.5, 2.5, 3), 1 / 6)
    assert long[3] is not None and long[3].startswith("fewer than")


def test_a_long_step_whose_optimizer_is_too_short_to_see_still_says_its_steps_are_long():
    """The optimizer (the first anchor) is seen once in one sample; the backward, seen every
    step, counts two: the steps are long (the sampler then times them with longer bursts)."""
    one = {"data": at(10, DATA), "fwd": at(11, FWD), "bwd": at(12, BWD), "opt": at(14, OPT)}
    est = burst((("data", 30), ("fwd", 1200), ("bwd", 1730), ("opt", 40)), 2, 25, stacks=one)
    assert est.step_time_s is None and est.why.startswith("fewer than"), est.why


def test_few_steps_on_one_line_are_no_bound_where_another_counted_them():
    """A dcgan copy alone (1.2 s a step) at 8 s and 6 Hz: one backward line counted 6 steps
    but its optimizer, seen once, made them look like micro-steps; a forward line seen in 4
    steps, in long runs, said 'fewer than 4 steps', and the table showed '>1.6 s'. Steps
    another anchor counted are not long: the reason is the counted anchor's."""
    a = ["fwd_fake", "fwd_fake", "bwd_real", "bwd_g", "bwd_g", "data", "data"]
    b = ["bwd_real", "bwd_real", "data", "bwd_g", "bwd_g", "data", "data"]
    labels = (a + b) * 3 + a  # 7 steps of 7 samples at 6 Hz
    labels[20] = "opt_g"  # its optimizer, seen once
    seq = [(round(i / 6, 6), n) for i, n in enumerate(labels) if i == 0 or labels[i - 1] != n]
    est = pyspy.stall_from_timeline(
        pyspy.parse_chrometrace(trace(seq, len(labels) / 6, GAN))[MAIN], 6, PID)
    assert est.step_time_s is None
    assert est.why == "its data, forward or backward recur more often than its optimizer steps"


def test_a_burst_that_counts_too_few_steps_says_how_long_they_are_at_least_from_what_it_saw():
    """A 2 s burst inside a 3.3 s step (a word_language_model pair's 70x regime) sees one
    phase change at most: the steps are at least as long as the longer side of it (`floor_s`),
    which sizes the sampler's next burst; a burst that counted its steps has none."""
    one = {"data": at(10, DATA), "fwd": at(11, FWD), "bwd": at(12, BWD), "opt": at(14, OPT)}
    est = burst((("fwd", 500), ("bwd", 1500)), 1, 25, stacks=one)  # backward began at 0.5 s
    assert est.step_time_s is None and est.why.startswith("fewer than")
    assert est.floor_s == pytest.approx(1.5, abs=0.05)
    est = burst((("fwd", 2000),), 1, 25, stacks=one)  # one phase: no step began at all
    assert est.floor_s == pytest.approx(2.0, abs=0.05)
    est = burst((("data", 30), ("fwd", 1200), ("bwd", 1730), ("opt", 40)), 2, 25, stacks=one)
    assert est.why.startswith("fewer than") and est.floor_s == pytest.approx(3.0, abs=0.1)
    est = burst(GAN_MS, 6, 25)  # counted: no floor
    assert est.step_time_s is not None and est.floor_s is None
