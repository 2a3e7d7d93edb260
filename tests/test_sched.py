"""Scheduling policies on hand-made traces whose best order is known, and the simulator."""

from __future__ import annotations

import pytest

from gputop_dl.sched.model import Job, JobQueue, Machine, Running
from gputop_dl.sched.policies import POLICIES, Policy, decide


def queue_of(policy: Policy, *jobs: Job) -> JobQueue:
    q = policy.queue()
    for j in jobs:
        q.add(j)
    return q


def names(decision) -> list[str]:
    return [s.job.name for s in decision.starts]


# --- the waiting queue ------------------------------------------------------------------------

def test_job_queue_keeps_the_policy_order_overall_and_per_class():
    q = JobQueue(lambda j: (j.duration_s,))
    for name, d, c in (("a", 30, "x"), ("b", 10, "y"), ("c", 20, "x"), ("d", 10, "x")):
        q.add(Job(name, duration_s=d, klass=c, gpus=0 if name == "d" else 1))
    assert [j.name for j in q] == ["b", "d", "c", "a"]  # ties keep the order they came in
    assert q.classes() == {"x": [q._entry["d"][2], q._entry["c"][2], q._entry["a"][2]],
                           "y": [q._entry["b"][2]]}
    assert q.cpu_only == 1
    q.remove(q._entry["d"][2])
    q.remove(q._entry["b"][2])
    assert [j.name for j in q] == ["c", "a"] and list(q.classes()) == ["x"] and q.cpu_only == 0
    with pytest.raises(ValueError):
        q.add(Job("a"))


def test_unknown_policy_and_bad_parameters_are_value_errors():
    with pytest.raises(ValueError, match="unknown policy 'lifo'"):
        Policy("lifo")
    with pytest.raises(ValueError):
        Policy("priority", ageing_s=0)
    with pytest.raises(ValueError):
        Policy("lyapunov", v=-1)


# --- one decision -------------------------------------------------------------------------------

def test_fifo_starts_in_arrival_order_until_the_gpus_are_taken():
    m = Machine(gpus=2, cpus=16)
    p = Policy("fifo")
    q = queue_of(p, Job("c", arrival_s=2), Job("a", arrival_s=0), Job("b", arrival_s=1))
    d = decide(p, q, [], m, now=2, explain=True)
    assert [(s.job.name, s.gpus) for s in d.starts] == [("a", (0,)), ("b", (1,))]
    assert d.reasons == {"c": "all 2 GPUs busy"}


def test_head_of_line_blocking_of_a_two_gpu_job_under_fifo_and_its_backfill():
    """GPU 0 runs a job expected to end at t = 100; a 2-GPU job waits for it. Plain FIFO keeps
    the short 1-GPU job behind it idle on GPU 1; backfilling starts it (it ends at 11 < 100),
    but not the long one that would delay the 2-GPU job's reservation."""
    m = Machine(gpus=2, cpus=16)
    running = [Running(Job("r", duration_s=100), start_s=0, gpus=(0,))]
    jobs = (Job("big", arrival_s=0, gpus=2, duration_s=50),
            Job("short", arrival_s=0.5, duration_s=10), Job("long", arrival_s=0.7, duration_s=200))
    fifo = decide(Policy("fifo"), queue_of(Policy("fifo"), *jobs), running, m, now=1, explain=True)
    assert names(fifo) == []
    assert fifo.reasons["big"] == "needs 2 GPUs, 1 free (GPU 1)"
    assert fifo.reasons["short"] == "behind big (first come, first served)"
    bf = Policy("fifo-backfill")
    d = decide(bf, queue_of(bf, *jobs), running, m, now=1, explain=True)
    assert [(s.job.name, s.gpus) for s in d.starts] == [("short", (1,))]
    assert d.reasons["big"] == "needs 2 GPUs, 1 free (GPU 1); reserved in 99 s"
    assert d.reasons["long"] == "all 2 GPUs busy"  # after short took GPU 1
    d = decide(bf, queue_of(bf, jobs[0], jobs[2]), running, m, now=1, explain=True)
    assert names(d) == [] and d.reasons["long"] == "would delay big, which has GPUs reserved in 99 s"


def test_cpu_aware_admission_says_how_many_cores_are_short():
    m = Machine(gpus=4, cpus=8)
    running = [Running(Job("a", cpu_cores=3.1), 0, (0,)), Running(Job("b", cpu_cores=3.1), 0, (1,))]
    p = Policy("fifo")
    q = queue_of(p, Job("c", cpu_cores=4.0), Job("d", cpu_cores=1.0, duration_s=30))
    d = decide(p, q, running, m, now=5, explain=True)
    assert names(d) == [] and d.reasons["c"] == "GPU 2 free, but 2.2 cores short"
    assert d.reasons["d"] == "behind c (first come, first served)"
    # backfilling: d fits beside a and b and ends (t = 35) before c's reservation (t = 60, when
    # a ends); a longer d would still hold 1.0 core then, 0.1 more than c leaves: it waits
    bf = Policy("fifo-backfill")
    assert names(decide(bf, queue_of(bf, *q), running, m, now=5)) == ["d"]
    d = decide(bf, queue_of(bf, Job("c", cpu_cores=4.0), Job("d", cpu_cores=1.0, duration_s=90)),
               running, m, now=5, explain=True)
    assert names(d) == [] and d.reasons["d"] == "would delay c, which has GPUs reserved in 55 s"
    assert names(decide(p, queue_of(p, *q), running, m, now=5, cpu_aware=False)) == ["c", "d"]
    # a job needing more cores than the machine has starts alone, never beside others
    huge = Job("huge", cpu_cores=12.0)
    assert names(decide(p, queue_of(p, huge), [], m, now=5)) == ["huge"]
    assert decide(p, queue_of(p, huge), running, m, now=5, explain=True).reasons["huge"] \
        == "GPU 2 free, but 10.2 cores short"
    cpu_job = Job("prep", gpus=0, cpu_cores=2.5)  # a CPU-only job takes no GPU
    assert decide(p, queue_of(p, cpu_job), running, m, now=5, explain=True).reasons["prep"] \
        == "0.7 cores short"


def test_gpu_memory_and_shared_gpus():
    gib = 1024**3
    m = Machine(gpus=2, cpus=16, jobs_per_gpu=2, gpu_mem=16 * gib)
    running = [Running(Job("a", gpu_mem=10 * gib), 0, (0,)), Running(Job("b", gpu_mem=12 * gib), 0, (1,))]
    p = Policy("fifo")
    d = decide(p, queue_of(p, Job("c", gpu_mem=5 * gib)), running, m, now=1)
    assert [(s.job.name, s.gpus) for s in d.starts] == [("c", (0,))]  # only GPU 0 has 6 GiB left
    d = decide(p, queue_of(p, Job("c", gpu_mem=8 * gib)), running, m, now=1, explain=True)
    assert d.reasons["c"] == "GPUs 0, 1 free, but 2.0 GiB of GPU memory short"


def test_sjf_picks_the_shortest_and_priority_ages():
    m = Machine(gpus=1, cpus=16)
    jobs = (Job("long", arrival_s=0, duration_s=100), Job("short", arrival_s=1, duration_s=10))
    assert names(decide(Policy("sjf"), queue_of(Policy("sjf"), *jobs), [], m, now=1)) == ["short"]
    old = Job("old", arrival_s=0, priority=0)
    urgent = Job("urgent", arrival_s=100, priority=1)
    # at t = 100 "old" waited 100 s: worth 100/60 = 1.7 levels with ageing_s = 60, 0.17 with 600
    fast, slow = Policy("priority", ageing_s=60), Policy("priority", ageing_s=600)
    assert names(decide(fast, queue_of(fast, old, urgent), [], m, now=100)) == ["old"]
    assert names(decide(slow, queue_of(slow, old, urgent), [], m, now=100)) == ["urgent"]


def test_lyapunov_trades_cpu_overcommit_against_the_backlog():
    m = Machine(gpus=4, cpus=8)
    running = [Running(Job("a", cpu_cores=6), 0, (0,))]
    job = Job("b", cpu_cores=4, duration_s=60, klass="x")
    lazy, eager = Policy("lyapunov", v=100), Policy("lyapunov", v=0)
    d = decide(lazy, queue_of(lazy, job), running, m, now=1, explain=True)
    assert names(d) == []
    assert d.reasons["b"] == "held: it would overcommit 2.0 cores and class x's backlog of 1 " \
        "does not outweigh v = 100 yet"
    assert names(decide(eager, queue_of(eager, job), running, m, now=1)) == ["b"]
    assert names(decide(lazy, queue_of(lazy, job), [], m, now=1)) == ["b"]  # alone: always
    # a long backlog outweighs the same penalty: 300 jobs of class x -> score 300 - 100*2/8 > 0
    many = [Job(f"b{i}", arrival_s=i, cpu_cores=4, duration_s=60, klass="x") for i in range(300)]
    assert names(decide(lazy, queue_of(lazy, *many), running, m, now=1))[:1] == ["b0"]
    # among classes: the one whose head is shortest per GPU, weighted by its backlog
    mix = [Job("l1", duration_s=100, klass="long"), Job("s1", arrival_s=1, duration_s=10, klass="short")]
    one = Machine(gpus=1, cpus=8)
    assert names(decide(eager, queue_of(eager, *mix), [], one, now=1)) == ["s1"]
    more = [Job(f"s{i}", arrival_s=i, duration_s=10, klass="short") for i in (2, 3)]
    d = decide(eager, queue_of(eager, *mix, *more), [], one, now=3, explain=True)
    assert names(d) == ["s1"]
    assert d.reasons == {"l1": "the GPU is busy", "s2": "the GPU is busy",
                         "s3": "behind s2 in class short"}


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_explains_every_job_it_leaves_waiting(name):
    m = Machine(gpus=2, cpus=4)
    p = Policy(name)
    jobs = [Job(f"j{i}", arrival_s=i, gpus=1 + i % 2, cpu_cores=1.5, duration_s=10 + i, klass=f"c{i % 3}")
            for i in range(8)]
    d = decide(p, queue_of(p, *jobs), [], m, now=8, explain=True)
    started = set(names(d))
    assert started and set(d.reasons) == {j.name for j in jobs} - started
    assert all(d.reasons.values())
    # without explain the same jobs start
    assert names(decide(p, queue_of(p, *jobs), [], m, now=8)) == names(d)
