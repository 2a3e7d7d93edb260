"""Scheduling policies on hand-made traces whose best order is known, and the simulator."""

from __future__ import annotations

import pytest

from gputop_dl.sched.model import Job, JobQueue, Machine, Running
from gputop_dl.sched import POLICIES
from gputop_dl.sched.policies import Policy, decide
from tests.schema_check import check


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


# --- the simulator --------------------------------------------------------------------------------

from gputop_dl.sched.simulate import (JobKind, percentile, poisson_jobs, simulate,  # noqa: E402
                                      slowdowns, summarise)


def by_name(outcomes):
    return {o.job.name: o for o in outcomes}


def test_sjf_mean_jct_beats_fifo_on_a_long_job_first_trace():
    """One GPU; a 100 s job arrives just before two 10 s jobs. FIFO: JCTs 100, 110, 120 (mean
    110); SJF: 10, 20, 120 (mean 50)."""
    m = Machine(gpus=1, cpus=8)
    jobs = [Job("long", arrival_s=0, duration_s=100), Job("s1", arrival_s=0, duration_s=10),
            Job("s2", arrival_s=0, duration_s=10)]
    fifo = summarise("fifo", simulate(Policy("fifo"), jobs, m))
    sjf = summarise("sjf", simulate(Policy("sjf"), jobs, m))
    assert fifo.mean_jct_s == pytest.approx(110) and sjf.mean_jct_s == pytest.approx(50)
    assert fifo.makespan_s == sjf.makespan_s == pytest.approx(120)
    assert sjf.mean_wait_s == pytest.approx(10) and fifo.mean_wait_s == pytest.approx(70)


def test_backfill_removes_the_head_of_line_blocking_of_a_two_gpu_job():
    """Two GPUs: a 100 s job on one, then a 2-GPU job, then four 20 s jobs. Plain FIFO leaves
    GPU 1 idle for 100 s; backfilling runs the short jobs there without delaying the big one."""
    m = Machine(gpus=2, cpus=8)
    jobs = [Job("r", duration_s=100), Job("big", arrival_s=1, gpus=2, duration_s=50)]
    jobs += [Job(f"s{i}", arrival_s=2 + i, duration_s=20) for i in range(4)]
    fifo = by_name(simulate(Policy("fifo"), jobs, m))
    bf = by_name(simulate(Policy("fifo-backfill"), jobs, m))
    assert fifo["big"].start_s == bf["big"].start_s == pytest.approx(100)  # not delayed
    assert [fifo[f"s{i}"].start_s for i in range(4)] == pytest.approx([150, 150, 170, 170])
    assert [bf[f"s{i}"].start_s for i in range(4)] == pytest.approx([2, 22, 42, 62])
    assert summarise("bf", bf.values()).mean_jct_s < summarise("fifo", fifo.values()).mean_jct_s


def test_priority_with_ageing_lets_nothing_starve():
    """A priority-0 job under a stream of priority-5 jobs (one every 10 s, 10 s each, one GPU).
    It passes an urgent job that arrived more than 5 x ageing_s = 300 s after it; without
    ageing it waits for the whole stream."""
    m = Machine(gpus=1, cpus=8)
    stream = [Job(f"u{i}", arrival_s=i * 10.0, duration_s=10, priority=5) for i in range(100)]
    low = Job("low", arrival_s=0.5, duration_s=10, priority=0)
    aged = by_name(simulate(Policy("priority", ageing_s=60), [*stream, low], m))
    assert 300 <= aged["low"].start_s <= 320
    no_ageing = by_name(simulate(Policy("priority", ageing_s=1e9), [*stream, low], m))
    assert no_ageing["low"].start_s == pytest.approx(1000)


def test_cpu_oversubscription_slows_in_proportion_and_a_shared_gpu_time_slices():
    m = Machine(gpus=2, cpus=4)
    a, b = Job("a", duration_s=10, cpu_cores=4), Job("b", duration_s=10, cpu_cores=4)
    # 8 cores asked of 4: both run at half speed
    out = by_name(simulate(Policy("fifo"), [a, b], m, cpu_aware=False))
    assert out["a"].end_s == out["b"].end_s == pytest.approx(20)
    # cpu_aware: b waits for a, both at full speed
    out = by_name(simulate(Policy("fifo"), [a, b], m))
    assert (out["a"].end_s, out["b"].start_s, out["b"].end_s) == pytest.approx((10, 10, 20))
    # half the interference strength: 1 + 0.5 * (8 - 4) / 4 = 1.5
    out = by_name(simulate(Policy("fifo"), [a, b], m, cpu_aware=False, cpu_alpha=0.5))
    assert out["a"].end_s == pytest.approx(15)
    shared = Machine(gpus=1, cpus=16, jobs_per_gpu=2)
    busy = [Job("g1", duration_s=10, gpu_util=1.0), Job("g2", duration_s=10, gpu_util=1.0)]
    assert [o.end_s for o in simulate(Policy("fifo"), busy, shared)] == pytest.approx([20, 20])
    light = [Job("g1", duration_s=10, gpu_util=0.5), Job("g2", duration_s=10, gpu_util=0.4)]
    assert [o.end_s for o in simulate(Policy("fifo"), light, shared)] == pytest.approx([10, 10])
    # the slowdowns themselves: the larger of the CPU and the GPU factor
    running = [Running(Job("x", cpu_cores=6, gpu_util=0.8), 0, (0,)),
               Running(Job("y", cpu_cores=0, gpu_util=0.9), 0, (0,))]
    assert slowdowns(running, Machine(gpus=1, cpus=4, jobs_per_gpu=2)) == pytest.approx([1.7, 1.7])
    assert slowdowns(running[:1], Machine(gpus=1, cpus=4)) == pytest.approx([1.5])


def test_a_job_ends_at_its_rate_after_the_others_change():
    """Piecewise speed: a (10 s of work) runs alone for 5 s, then at half speed beside b."""
    m = Machine(gpus=2, cpus=4)
    jobs = [Job("a", duration_s=10, cpu_cores=4), Job("b", arrival_s=5, duration_s=100, cpu_cores=4)]
    out = by_name(simulate(Policy("fifo"), jobs, m, cpu_aware=False))
    assert out["a"].end_s == pytest.approx(15)  # 5 s alone + 5 s of work at half speed
    assert out["b"].end_s == pytest.approx(5 + 10 + 95)  # 5 s of work in 10 s, then alone


def test_poisson_stream_is_reproducible_and_has_the_asked_rate():
    kinds = [JobKind(Job("a", duration_s=10), 3.0), JobKind(Job("b", duration_s=50, gpus=2), 1.0)]
    one, two = poisson_jobs(kinds, 0.5, 4000, seed=7), poisson_jobs(kinds, 0.5, 4000, seed=7)
    assert one == two and one != poisson_jobs(kinds, 0.5, 4000, seed=8)
    assert one[-1].arrival_s / 4000 == pytest.approx(2.0, rel=0.05)
    share_a = sum(j.klass == "a" for j in one) / len(one)
    assert share_a == pytest.approx(0.75, abs=0.03)
    assert len({j.name for j in one}) == 4000
    with pytest.raises(ValueError):
        poisson_jobs(kinds, 0, 10, seed=1)


def test_percentile():
    assert percentile([3, 1, 2, 4], 50) == pytest.approx(2.5)
    assert percentile(list(range(101)), 95) == pytest.approx(95)
    assert percentile([5], 95) == 5


@pytest.mark.parametrize("name", POLICIES)
def test_every_job_runs_once_and_no_gpu_or_core_is_handed_out_twice(name):
    """An overloaded stream with 1-, 2- and 0-GPU jobs: every job ends once, never before its
    arrival or faster than alone, GPUs are never double-booked, and with cpu_aware (or a large
    V) the cores are never overcommitted by two or more jobs."""
    m = Machine(gpus=4, cpus=8)
    kinds = [JobKind(Job("one", duration_s=30, cpu_cores=3)), JobKind(Job("two", duration_s=90, gpus=2, cpu_cores=5), 0.4),
             JobKind(Job("cpu", duration_s=20, gpus=0, cpu_cores=2), 0.3)]
    jobs = poisson_jobs(kinds, 0.2, 400, seed=3)
    p = Policy(name, v=1e6)
    out = simulate(p, jobs, m)
    assert sorted(o.job.name for o in out) == sorted(j.name for j in jobs)
    for o in out:
        assert o.start_s >= o.job.arrival_s - 1e-9 and o.end_s - o.start_s >= o.job.duration_s - 1e-6
    events = sorted([(o.start_s, 1, o) for o in out] + [(o.end_s, 0, o) for o in out],
                    key=lambda e: (e[0], e[1]))
    now_running, cores, on_gpu = set(), 0.0, {}
    for _, kind, o in events:
        assert len(o.gpus) == o.job.gpus
        if kind:
            now_running.add(o.job.name)
            cores += o.job.cpu_cores
            assert len(now_running) == 1 or cores <= m.cpus + 1e-9
            for g in o.gpus:
                assert g not in on_gpu, f"GPU {g}: {o.job.name} beside {on_gpu[g]}"
                on_gpu[g] = o.job.name
        else:
            now_running.discard(o.job.name)
            cores -= o.job.cpu_cores
            for g in o.gpus:
                del on_gpu[g]


# --- the simulation report ------------------------------------------------------------------------

def test_simulation_json_and_markdown_from_real_results():
    import json

    from gputop_dl.present.report.simulation import (SIMULATION_SCHEMA, render_simulation_markdown,
                                                     simulation_json)
    from gputop_dl.sched.simulate import sweep

    kinds = [JobKind(Job("long", duration_s=100)), JobKind(Job("short", duration_s=10), 3.0)]
    results = [r.to_json() for r in sweep([Policy("fifo"), Policy("sjf")], kinds, Machine(gpus=2, cpus=8),
                                          rates=[0.01, 0.05], seeds=[1, 2], n_jobs=200)]
    doc = check(json.loads(json.dumps(simulation_json({"name": "t"}, results))))
    assert doc["schema"] == SIMULATION_SCHEMA == "gputop-dl.simulation/1"
    assert len(doc["results"]) == 2 * 2 * 2
    for row in doc["results"]:
        assert {"policy", "rate", "seed", "mean_jct_s", "p95_jct_s", "makespan_s", "mean_wait_s"} <= set(row)
        assert row["p95_jct_s"] >= row["mean_wait_s"] >= 0 and row["makespan_s"] > 0
    by = {(r["policy"], r["rate"], r["seed"]): r["mean_jct_s"] for r in doc["results"]}
    assert all(by[("sjf", rate, s)] <= by[("fifo", rate, s)] + 1e-9 for rate in (0.01, 0.05) for s in (1, 2))
    md = render_simulation_markdown({"name": "t", "lines": [("machine", "2 GPUs")], "load": {"0.05": 0.7}},
                                    results)
    assert md.count("```mermaid") == 4 and "Lines, in order: fifo, sjf." in md
    fifo_mean = sum(by[("fifo", 0.05, s)] for s in (1, 2)) / 2
    assert f"| fifo | {sum(by[('fifo', 0.01, s)] for s in (1, 2)) / 2:.1f} | {fifo_mean:.1f} |" in md
    assert "| 0.05/s | 0.70 | sjf |" in md
