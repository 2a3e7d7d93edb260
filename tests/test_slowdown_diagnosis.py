"""`diagnose`'s verdict from what it measured (analyse/slowdown/diagnosis.py), on constructed
readings: no process paused, no py-spy, no clock."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gputop_dl.analyse.recorded.evidence import HostPoint
from gputop_dl.analyse.slowdown.loader_rate import LoaderSlowdown
from gputop_dl.analyse.slowdown import diagnosis as D
from gputop_dl.present.verdict_text import job_line


@dataclass(frozen=True)
class Burst:
    step_time_s: float | None = None
    fraction: float | None = 0.01
    samples: int = 100
    cycles: int = 10
    cv: float | None = 0.05


BUSY = [HostPoint(float(t), 1.0, 0.9, 4.0, None) for t in range(5)]


NO_LOADER = LoaderSlowdown()


def job(name, pid, tog=None, alone=None, loader=NO_LOADER, **kw):
    return D.Measured(name=name, pid=pid, pids=(pid,), cpu=(1.0, 1.0), cpu_wait=(0.5, 0.6),
                      together=Burst(tog), alone=Burst(alone), loader=loader, **kw)


def slowdowns(jobs, probe=True):
    return {j["name"]: (j["slowdown"], j["slowdown_source"], j["slowdown_from"])
            for j in D.jobs_json(jobs, {}, probe, 2)}


def test_step_times_together_and_alone_give_the_probes_slowdown():
    jobs = [job("a", 10, 0.4, 0.2), job("b", 20, 0.3, 0.2)]
    v = D.verdict(jobs, BUSY, {}, 2, True, 6.0, D.Estimated())
    assert v.kind == "cpu-bound"
    assert {j.name: j.slowdown for j in v.jobs} == {"a": pytest.approx(2.0),
                                                    "b": pytest.approx(1.5)}
    assert v.evidence["method"]["paused_job_s"] == 6.0
    assert v.jobs[0].to_json()["slowdown_method"] == "py-spy steps"
    assert slowdowns(jobs) == {"a": (2.0, "probe", "py-spy step times"),
                               "b": (1.5, "probe", "py-spy step times")}


def test_a_loader_far_from_py_spys_ratio_replaces_it():
    loader = LoaderSlowdown(slowdown=4.0, by_cpu=4.0, by_switches=4.4, agreement=0.9)
    jobs = [job("a", 10, 0.3, 0.2, loader=loader), job("b", 20, 0.3, 0.2, loader=loader)]
    v = D.verdict(jobs, BUSY, {}, 2, True, 0.0, D.Estimated())
    assert v.evidence["loader_slowdowns"] == {"a": 4.0, "b": 4.0}
    assert v.confidence == pytest.approx(0.9)
    assert slowdowns(jobs)["a"] == (4.0, "probe", "loader work rate")
    row = v.jobs[0].to_json()  # the verdict's job says where its figure comes from
    assert (row["slowdown_source"], row["slowdown_method"], row["slowdown_reference"]) == (
        "probe", "loader CPU", "probe window")
    assert "by its loader's CPU alone" in job_line(row)
    # near py-spy's ratio (within CONTRADICT): py-spy's stays
    near = LoaderSlowdown(slowdown=1.6, by_cpu=1.6, agreement=0.9)
    assert slowdowns([job("a", 10, 0.3, 0.2, loader=near)])["a"] == (1.5, "probe",
                                                                     "py-spy step times")


def test_an_untimed_job_without_a_loader_figure_claims_no_slowdown():
    why = "its loader workers did too little"
    jobs = [job("a", 10, 0.4, 0.2), job("b", 20, None, None, loader=LoaderSlowdown(why=why))]
    v = D.verdict(jobs, BUSY, {}, 2, True, 0.0, D.Estimated())
    assert all(j.slowdown is None for j in v.jobs)
    assert 0.0 <= v.confidence <= 1.0
    assert f"b: no slowdown from its loader: {why}" in v.evidence_lines
    assert slowdowns(jobs)["b"] == (None, None, None)


def test_a_job_not_measured_alone_says_why():
    jobs = [job("a", 10, 0.4, None, no_solo="may not pause b"), job("b", 20, 0.3, 0.2)]
    v = D.verdict(jobs, BUSY, {}, 2, True, 0.0, D.Estimated())
    assert "a: measured passively, may not pause b" in v.evidence_lines
    out = {j["name"]: j for j in D.jobs_json(jobs, {}, True, 2)}
    assert out["a"]["why_not_alone"] == "may not pause b" and out["b"]["measured_alone"]


def test_a_solo_baseline_is_its_steps_after_warm_up():
    from gputop_dl.analyse.slowdown.solo import solo_baseline

    # two warm-up steps of 1 s, then 4 of 0.2 s with 0.05 s of data wait, 32 samples each
    steps = ([{"t": float(i), "t_step": 1.0, "t_data": 0.5, "samples": 32} for i in range(2)]
             + [{"t": 2 + i * 0.2, "t_step": 0.2, "t_data": 0.05, "samples": 32}
                for i in range(4)])
    base = solo_baseline(steps, 2, 1.5, "cuda:0")
    assert base is not None
    assert (base["steps"], base["step_time_s"], base["cpu_cores"], base["device"]) == (
        4, pytest.approx(0.2), 1.5, "cuda:0")
    assert base["samples_per_s"] == pytest.approx(160.0)
    assert base["stall_fraction"] == pytest.approx(0.25) and base["cv"] == pytest.approx(0.0)
    assert solo_baseline(steps[:2], 2, 1.5, "cuda:0") is None  # nothing past its warm-up
