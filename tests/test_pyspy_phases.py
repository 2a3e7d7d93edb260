"""Found jobs: step phases and step time from py-spy's ordered main-thread samples (collect/pyspy/run.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.pyspy.stall_sampler import StallResult, StallSampler
from gputop_dl.snapshot import JobSample, Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASED = os.path.join(ROOT, "tests", "external", "phased.py")

MAIN = "thread (4242): MainThread"
LOOP = "<module> (train.py:80);main (train.py:60)"
DATA = f"{MAIN};{LOOP};_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:733)"
FWD = (f"{MAIN};{LOOP};Module._wrapped_call_impl (torch/nn/modules/module.py:1787);"
       "Module._call_impl (torch/nn/modules/module.py:1798);Net.forward (train.py:20)")
BWD = (f"{MAIN};{LOOP};Tensor.backward (torch/_tensor.py:623);"
       "backward (torch/autograd/__init__.py:395)")
OPT = (f"{MAIN};{LOOP};Optimizer.profile_hook_step.<locals>.wrapper (torch/optim/optimizer.py:567);"
       "SGD.step (torch/optim/sgd.py:80)")
OTHER = f"{MAIN};{LOOP}"
ZERO = f"{MAIN};{LOOP};Optimizer.zero_grad (torch/optim/optimizer.py:900)"
INIT = (f"{MAIN};{LOOP};SGD.__init__ (torch/optim/sgd.py:66);"
        "Optimizer.__init__ (torch/optim/optimizer.py:442)")
IMPORT = (f"{MAIN};{LOOP};Optimizer.__init__ (torch/optim/optimizer.py:442);"
          "_find_and_load (<frozen importlib._bootstrap>:1176);"
          "Optimizer.step (torch/optim/optimizer.py:10)")
WORKER = "thread (4250): Thread-1;_bootstrap (threading.py:1002);_worker (x.py:1)"


def test_phase_of_each_sample():
    assert [pyspy.phase_of(s, 4242) for s in (DATA, FWD, BWD, OPT, OTHER)] == list(pyspy.PHASES)
    assert pyspy.phase_of(WORKER, 4242) is None  # another thread
    # not a step: zero_grad, the optimizer's __init__, an import in its files
    assert {pyspy.phase_of(s, 4242) for s in (ZERO, INIT, IMPORT)} == {"other"}
    # the outermost phase wins: a module called inside backward (checkpointing) is backward;
    # a loss module called inside the model's forward is forward
    assert pyspy.phase_of(BWD + ";Module._call_impl (torch/nn/modules/module.py:1)", 4242) == "backward"
    # an LR scheduler's step is no optimizer step
    assert pyspy.phase_of(f"{MAIN};{LOOP};StepLR.step (torch/optim/lr_scheduler.py:1)", 4242) == "other"


def test_step_time_from_the_optimizer_in_a_job_that_never_waits_on_data():
    seq = ([FWD] * 4 + [BWD] * 4 + [OPT] * 2) * 8  # 10 samples a step, no data wait
    est = pyspy.stall_from_sequence(seq, 0.02, 4242)
    assert est.fraction == 0.0 and est.anchor == "optimizer"
    assert est.cycles == 7 and est.step_time_s == pytest.approx(0.2)
    assert pyspy.phase_shares(est.phases) == (("data", 0.0), ("forward", 0.4), ("backward", 0.4),
                                              ("optimizer", 0.2), ("other", 0.0))


def test_gradient_accumulation_steps_are_optimizer_steps():
    micro = [FWD] * 3 + [BWD] * 3
    seq = (micro * 4 + [OPT] * 2) * 6  # 4 micro-steps per optimizer step: 26 samples
    est = pyspy.stall_from_sequence(seq, 0.01, 4242)
    assert est.anchor == "optimizer" and est.step_time_s == pytest.approx(0.26)
    # its optimizer step too short to read: backward recurs 4 times as often, no step time
    seq = (micro * 4 + [OPT]) * 6
    assert pyspy.stall_from_sequence(seq, 0.01, 4242).step_time_s is None


def test_short_phases_fall_back_to_a_longer_anchor_or_stay_unknown():
    # the optimizer step shorter than the sampling interval (1-sample runs): backward marks it
    seq = ([FWD] * 3 + [BWD] * 3 + [OPT] + [OTHER] * 2) * 8
    est = pyspy.stall_from_sequence(seq, 0.02, 4242)
    assert est.anchor == "backward" and est.step_time_s == pytest.approx(0.18)
    # every phase a single sample: nothing is read honestly
    seq = ([FWD] + [OTHER] + [BWD] + [OTHER] + [OPT] + [OTHER]) * 8
    assert pyspy.stall_from_sequence(seq, 0.02, 4242).step_time_s is None
    # an inference loop: forward only, one run: no boundary to see
    est = pyspy.stall_from_sequence([FWD] * 60, 0.02, 4242)
    assert est.step_time_s is None and est.phases["forward"] == 60


def test_pooled_bursts_carry_phase_counts_and_the_snapshot_shows_shares():
    clock = [0.0]

    def record(pid, duration_s, rate, exe):
        est = pyspy.stall_from_sequence(([FWD] * 2 + [BWD] * 2 + [DATA]) * 10, 0.02, 4242)
        return est, None

    s = StallSampler(duration_s=0.01, rate=50, every_s=0.0, record=record,
                     clock=lambda: clock[0], cpu_budget=None)
    for _ in range(2):
        assert s.round([("job", 4242)])
        s.join(5)
        clock[0] += 1
    res = s.result("job")
    assert res.phase_samples == 100 and dict(res.phases)["forward"] == 40
    # the step time too is the pool's: each burst's cycles' mean, weighted by its cycles
    assert res.step_time_s == pytest.approx(0.1)
    assert pyspy.pooled_step_time([(0.3, 4), (0.45, 4), (0.25, 8), (None, 0)]) == 0.3125
    assert pyspy.pooled_step_time([(None, 0)]) is None
    shares = pyspy.phase_shares(dict(res.phases))
    j = JobSample(name="t", pid=1, launched=False, phase_shares=shares,
                  phase_shares_samples=res.phase_samples)
    out = Snapshot(time=0.0, gpu_status="ok", jobs=(j,)).to_json()["jobs"][0]
    assert out["phase_shares"] == {"data": 0.2, "forward": 0.4, "backward": 0.4,
                                   "optimizer": 0.0, "other": 0.0}
    assert out["phase_shares_samples"] == 100
    none = Snapshot(time=0.0, gpu_status="ok",
                    jobs=(JobSample(name="u", pid=2, launched=False),)).to_json()["jobs"][0]
    assert none["phase_shares"] is None and none["phase_shares_samples"] is None
    assert StallResult(None, 0, None, 0.0).phase_samples is None


MIN_PHASE_SAMPLES = 250  # main-thread samples the phase shares are judged over
MIN_POOLED_CYCLES = 15  # cycles the step time is judged over (about three bursts)


def _spy_until(pid: int, want, deadline_s: float = 60.0):
    """py-spy bursts on `pid` until `want(est)` holds or the deadline passes; the last estimate."""
    end, est = time.monotonic() + deadline_s, None
    while time.monotonic() < end:
        est, err = pyspy.record_stall(pid, 2, 50)
        assert err is None, err
        if want(est):
            break
    return est


@pytest.mark.shares_box("py-spy's step time and shares against the script's own clock, in the "
                        "same run; its phases sleep, which a busy box does not stretch")
@pytest.mark.skipif(pyspy.pyspy_path() is None, reason="py-spy is not installed")
@pytest.mark.parametrize("extra", [
    [],  # never waits on data
    ["--accumulate", "2"],  # two forwards and backwards per optimizer step
])
def test_real_torch_loop_step_time_and_phase_shares(extra):
    """tests/external/phased.py (forward, backward, optimizer 60 ms each, sleeping): py-spy's
    step time, pooled over bursts as the stall sampler reports it, is within 25 % of the
    script's own recent mean step, and the three phases share the samples about evenly."""
    pytest.importorskip("torch")
    proc = subprocess.Popen([sys.executable, PHASED, "--steps", "0", "--report-every", "5",
                             "--forward-ms", "60", "--backward-ms", "60", "--optimizer-ms", "60",
                             *extra], stdout=subprocess.PIPE, text=True)
    try:
        own0 = json.loads(proc.stdout.readline())["recent_step_s"]  # training has begun
        # the step time as the stall sampler reports it: pooled over bursts (one burst's 4-7
        # cycles read a 0.3 s step as 0.27-0.46 s), here until MIN_POOLED_CYCLES are in
        bursts = [_spy_until(proc.pid, lambda e: e.step_time_s is not None)]
        end = time.monotonic() + 60
        while sum(b.cycles for b in bursts) < MIN_POOLED_CYCLES and time.monotonic() < end:
            more, err = pyspy.record_stall(proc.pid, 2, 50)
            assert err is None, err
            bursts.append(more)
        own = (own0 + json.loads(proc.stdout.readline())["recent_step_s"]) / 2
        step = pyspy.pooled_step_time(bursts)
        assert step is not None, f"no step time read: {bursts[0]}"
        # (with accumulation, an anchor of micro-steps would read half the step)
        assert step == pytest.approx(own, rel=0.25), [(b.step_time_s, b.cycles) for b in bursts]
        # the shares over at least MIN_PHASE_SAMPLES main-thread samples (a starved py-spy on a
        # loaded machine takes fewer a burst), judged within 3.5 standard errors of their count
        counts: dict[str, int] = {}
        for b in bursts:
            for k, v in b.phases.items():
                counts[k] = counts.get(k, 0) + v
        end = time.monotonic() + 60
        while sum(counts.values()) < MIN_PHASE_SAMPLES and time.monotonic() < end:
            more, err = pyspy.record_stall(proc.pid, 2, 50)
            assert err is None, err
            for k, v in more.phases.items():
                counts[k] = counts.get(k, 0) + v
        n = sum(counts.values())
        shares = dict(pyspy.phase_shares(counts))
        per = 2 if extra else 1  # forwards and backwards per optimizer step
        total = 60 * (2 * per + 1)
        assert shares["data"] == 0.0
        for phase, ms in (("forward", 60 * per), ("backward", 60 * per), ("optimizer", 60)):
            p = ms / total
            tol = max(0.12, 3.5 * math.sqrt(p * (1 - p) / n))
            assert shares[phase] == pytest.approx(p, abs=tol), (shares, n)
    finally:
        proc.kill()
        proc.wait()
