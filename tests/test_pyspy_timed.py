"""Found jobs' step time from py-spy's timed trace: the chrome trace's own
sample times, a step that hid a phase counted as two, and the reason where none is read."""

from __future__ import annotations

import json

import pytest

from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.pyspy.stall_sampler import StallResult, StallSampler
from gputop_dl.snapshot import JobSample, Snapshot

PID = 4242
MAIN = f"thread ({PID}): MainThread"
LOOP = ["<module> (train.py:80)", "fit (lightning/pytorch/trainer/trainer.py:1)"]
WRAP = "Optimizer.profile_hook_step.<locals>.wrapper (torch/optim/optimizer.py:567)"
CLOSURE = "Closure.__call__ (lightning/pytorch/loops/optimization/automatic.py:1)"
# Lightning's automatic optimization: forward and backward run inside optimizer.step(closure)
STACKS = {
    "data": LOOP + ["_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:733)"],
    "forward": LOOP + [WRAP, "SlowSGD.step (train.py:70)", CLOSURE,
                       "Module._call_impl (torch/nn/modules/module.py:1798)", "Net.forward (train.py:20)"],
    "backward": LOOP + [WRAP, "SlowSGD.step (train.py:70)", CLOSURE,
                        "Tensor.backward (torch/_tensor.py:623)"],
    "optimizer": LOOP + [WRAP, "SlowSGD.step (train.py:72)"],
}


def trace(phases_at: list[tuple[float, str]], end: float,
          stacks: dict[str, list[str]] = STACKS) -> str:
    """A chrome trace as py-spy writes it: begin/end events for the frames that change, each
    stamped with its sample's time (µs); (seconds, phase) per change."""
    events, stack = [], []

    def frame(name):
        fn, _, rest = name.partition(" (")
        path, _, line = rest.rstrip(")").rpartition(":")
        return fn, path, int(line)

    for t, ph in [*phases_at, (end, None)]:
        new = [MAIN] + stacks[ph] if ph else []
        keep = 0
        while keep < min(len(stack), len(new)) and stack[keep] == new[keep]:
            keep += 1
        for name in reversed(stack[keep:]):
            fn, path, line = frame(name) if name != MAIN else (name, "", 0)
            events.append({"ph": "E", "name": fn, "tid": 1, "pid": PID, "ts": t * 1e6,
                           "args": {"filename": path, "line": line}})
        for name in new[keep:]:
            fn, path, line = frame(name) if name != MAIN else (name, "", 0)
            events.append({"ph": "B", "name": fn, "tid": 1, "pid": PID, "ts": t * 1e6,
                           "args": {"filename": path, "line": line}})
        stack = new
    return json.dumps(events)


def steps(n: int, step: float = 0.154, hide_data: tuple[int, ...] = (), jitter: float = 0.0):
    """n steps of data 40 ms, forward 40, backward 40, optimizer `step` - 120 ms; the samples
    come 20 ms apart, give or take `jitter`; the data wait of the steps in `hide_data` falls
    between two samples (the step reads as part of the one before)."""
    out, t = [], 0.0
    for i in range(n):
        parts = [("data", 0.04), ("forward", 0.04), ("backward", 0.04), ("optimizer", step - 0.12)]
        for k, (ph, d) in enumerate(parts):
            if ph == "data" and i in hide_data:
                t += d
                continue
            out.append((round(t + (jitter if (i + k) % 2 else -jitter), 6), ph))
            t += d
    return out, t


def test_phase_of_gives_the_closure_its_forward_and_backward():
    line = ";".join([MAIN, *STACKS["forward"]])
    assert pyspy.phase_of(line, PID) == "forward"
    assert pyspy.phase_of(";".join([MAIN, *STACKS["backward"]]), PID) == "backward"
    assert pyspy.phase_of(";".join([MAIN, *STACKS["optimizer"]]), PID) == "optimizer"


def test_chrome_trace_timeline_holds_each_stack_until_the_next_change():
    seq, end = steps(2)
    tl = pyspy.parse_chrometrace(trace(seq, end))
    line = tl[MAIN]
    assert [round(t, 3) for t, _ in line] == [round(t, 3) for t, _ in seq] + [round(end, 3)]
    assert line[0][1].endswith("_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:733)")
    assert line[-1][1] == ""  # the end of the last sample


def test_lightning_step_time_and_phases_from_the_timed_trace():
    seq, end = steps(20, jitter=0.004)
    est = pyspy.stall_from_timeline(pyspy.parse_chrometrace(trace(seq, end))[MAIN], 50, PID)
    assert est.step_time_s == pytest.approx(0.154, rel=0.02) and est.why is None
    shares = dict(pyspy.phase_shares(est.phases))
    assert shares["forward"] == pytest.approx(0.26, abs=0.02)  # not all "optimizer"
    assert shares["data"] == pytest.approx(0.26, abs=0.02)
    assert est.fraction == pytest.approx(0.26, abs=0.02)


def test_a_step_that_hid_its_data_wait_counts_as_two():
    seq, end = steps(20, hide_data=(5, 12))  # the optimizer still marks each step
    tl = pyspy.parse_chrometrace(trace(seq, end))[MAIN]
    runs = []
    for (t, st), (t2, _) in zip(tl, tl[1:]):
        runs.append((pyspy.phase_of(st, PID) == "data", t, t2))
    merged = []
    for m, a, b in runs:
        if merged and merged[-1][0] == m:
            merged[-1] = (m, merged[-1][1], b)
        else:
            merged.append((m, a, b))
    step, n, _cv, why = pyspy.timed_cycles(merged, 0.02)
    assert why is None and step == pytest.approx(0.154, rel=0.02)  # 2 cycles of 2 steps
    assert n == 18  # 19 entries after the first, two of them 2 steps long


def test_no_step_time_when_the_phases_hide_too_often_and_why():
    # a 40 ms step of four 10 ms phases, sampled every 20 ms: each run is one sample or less
    short = [(round(0.04 * i + 0.01 * k, 3), ph) for i in range(60)
             for k, ph in enumerate(("data", "forward", "backward", "optimizer"))]
    est = pyspy.stall_from_timeline(pyspy.parse_chrometrace(trace(short, 2.4))[MAIN], 50, PID)
    assert est.step_time_s is None and "too short" in est.why
    few, end = steps(3)
    est = pyspy.stall_from_timeline(pyspy.parse_chrometrace(trace(few, end))[MAIN], 50, PID)
    assert est.step_time_s is None and "fewer than" in est.why


def test_the_reason_reaches_the_snapshot_json():
    class Est:
        data, compute, step_time_s, cycles, cpu_s, phases = 10, 30, None, 0, 0.01, {}
        samples, why = 40, "its step phases are too short for py-spy's sampling interval"

    sampler = StallSampler(duration_s=1, every_s=10, record=lambda *a: (Est(), None),
                           cpu_budget=None)
    assert sampler.round([("a", 1)])
    sampler.join(10)
    res = sampler.result("a")
    assert isinstance(res, StallResult) and res.step_time_s is None and "too short" in res.step_note
    j = JobSample(name="a.py", pid=1, launched=False, step_time_note=res.step_note)
    out = Snapshot(time=0.0, gpu_status="ok", jobs=(j,)).to_json()["jobs"][0]
    assert out["step_time_s"] is None and "too short" in out["step_time_note"]


def test_the_job_details_show_the_step_time_or_why_not():
    pytest.importorskip("textual")
    from gputop_dl.present.tui.job_detail import job_detail_lines

    why = "its step phases are too short for py-spy's sampling interval"
    text = str(job_detail_lines(JobSample(name="a.py", pid=1, launched=False, step_time_note=why),
                                None))
    assert f"step time –: {why}" in text
    text = str(job_detail_lines(JobSample(name="a.py", pid=1, launched=False, step_time_s=0.154),
                                None))
    assert "154 ms" in text and "step time –" not in text


def test_steps_longer_than_a_burst_counts_show_as_over_in_details_and_table():
    pytest.importorskip("textual")
    from gputop_dl.present.tui.job_detail import job_detail_lines
    from gputop_dl.present.tui.jobs_table import Palette, job_row

    why = "fewer than 4 steps seen (a step longer than a quarter of the burst)"
    j = JobSample(name="a.py", pid=1, launched=False, step_time_note=why, step_time_over_s=1.6)
    text = str(job_detail_lines(j, None))
    assert "over 1.6 s" in text and f"step time –: {why}" in text
    assert job_row(j, Palette()).cell("step").text.strip().endswith(">1.6 s")
