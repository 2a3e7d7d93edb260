"""Workloads as queued jobs (engine/queue_plan.job_for, QueuePlan.profile) and pinned GPUs in the policies."""

from __future__ import annotations

import pytest

from gputop_dl.engine.queue_plan import UNKNOWN_DURATION_S, QueuePlan, job_for
from gputop_dl.sched.model import Job, Machine, Running
from gputop_dl.sched.policies import Policy, decide
from gputop_dl.workload import SessionSpec, Workload

BASE = {"step_time_s": 0.25, "cpu_cores": 1.8}


def test_duration_from_the_file_wins_over_the_profile():
    job, src = job_for(Workload("a", duration_s=7.0, epochs=2, steps_per_epoch=10), BASE, cuda=False)
    assert (job.duration_s, src, job.cpu_cores) == (7.0, "duration_s", 1.8)


def test_duration_from_steps_times_the_solo_step_time():
    job, src = job_for(Workload("a", epochs=2, steps_per_epoch=10), BASE, cuda=False)
    assert job.duration_s == pytest.approx(20 * 0.25) and src.startswith("20 steps x solo 0.250 s")
    job, _ = job_for(Workload("b", epochs=3, dataset_size=640, batch_size=64), BASE, cuda=False)
    assert job.duration_s == pytest.approx(30 * 0.25)


def test_no_duration_and_no_profile_is_said_to_be_unknown():
    cmd = Workload("c", command=("python", "x.py"))
    job, src = job_for(cmd, BASE, cuda=False)  # a command's step count is unknown
    assert job.duration_s == UNKNOWN_DURATION_S and src.startswith("unknown")
    job, _ = job_for(Workload("d", epochs=1, steps_per_epoch=5), None, cuda=False)
    assert (job.duration_s, job.cpu_cores) == (UNKNOWN_DURATION_S, 0.0)


@pytest.mark.parametrize(("w", "cuda", "gpus", "pin"), [
    (Workload("a", gpu_count=2), True, 2, ()),
    (Workload("a", gpus=(1, 3)), True, 2, (1, 3)),
    (Workload("a", gpus=(1, 3)), False, 2, ()),  # no CUDA: as many slots, any
    (Workload("a"), True, 1, ()),
    (Workload("a"), False, 1, ()),
])
def test_gpus_as_a_count_or_pinned(w, cuda, gpus, pin):
    job, _ = job_for(w, None, cuda)
    assert (job.gpus, job.pin) == (gpus, pin)


def test_profile_turns_cpu_aware_on_only_when_a_profile_has_a_cpu_need():
    spec = SessionSpec(name="q", path="q.toml", workloads=(Workload("a", epochs=1, steps_per_epoch=4),
                                                           Workload("b", duration_s=3.0)), cuda=False)
    machine = Machine(gpus=2, cpus=2.0, unit="slot")
    plan = QueuePlan(spec, None, Policy("sjf"), machine, cpu_aware=None)
    plan.profile(lambda fp: None, {})
    assert plan.cpu_aware is False and plan.jobs["b"].duration_s == 3.0
    plan = QueuePlan(spec, None, Policy("sjf"), machine, cpu_aware=None)
    plan.profile(lambda fp: BASE, {})
    assert plan.cpu_aware is True and plan.jobs["a"].duration_s == pytest.approx(1.0)
    plan = QueuePlan(spec, None, Policy("sjf"), machine, cpu_aware=False)
    plan.profile(lambda fp: BASE, {})
    assert plan.cpu_aware is False


def test_a_pinned_job_waits_for_its_gpu_while_another_is_free():
    m = Machine(gpus=2, cpus=16.0)
    q = Policy("fifo").queue()
    q.add(Job("pinned", gpus=1, pin=(0,)))
    running = [Running(Job("r", duration_s=10.0), 0.0, (0,))]
    d = decide(Policy("fifo"), q, running, m, 1.0, explain=True)
    assert d.starts == [] and d.reasons["pinned"] == "pinned to GPU 0; GPU 0 busy"
    d = decide(Policy("fifo"), q, [Running(Job("r"), 0.0, (1,))], m, 1.0, explain=True)
    assert [(s.job.name, s.gpus) for s in d.starts] == [("pinned", (0,))]


def test_backfill_never_runs_past_a_pinned_heads_reservation():
    """The head is pinned to GPU 0 (busy until t = 10); a long job may not take GPU 1 past the
    reservation (it could not know it would not delay the head), a short one may."""
    m = Machine(gpus=2, cpus=16.0)
    pol = Policy("fifo-backfill")
    q = pol.queue()
    for j in (Job("head", arrival_s=0.0, gpus=1, pin=(0,)), Job("long", arrival_s=1.0, duration_s=50.0),
              Job("short", arrival_s=2.0, duration_s=5.0)):
        q.add(j)
    running = [Running(Job("r", duration_s=10.0), 0.0, (0,))]
    d = decide(pol, q, running, m, 3.0, explain=True)
    assert [s.job.name for s in d.starts] == ["short"]
    assert d.reasons["long"].startswith("would delay head")
