"""The CPU-aware queue on the machine profile's NUMA layout: sched/numa.py on a
fake two-node profile, QueuePlan's placement through a fake engine, and one real queue whose
started children run on the CPUs chosen (os.sched_getaffinity of each child)."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from gputop_dl.collect.jobs.found import FoundJobs
from gputop_dl.collect.machine import MachineSampler
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.engine import Engine, Recorder
from gputop_dl.engine.queue_plan import QueuePlan
from gputop_dl.sched.model import Job, Machine
from gputop_dl.sched.numa import Node, NumaPlacer, nodes_from
from gputop_dl.sched.policies import Policy
from gputop_dl.workload import SessionSpec, Workload

TWO_NODES = [{"node": 0, "cpus": "0-3", "mem_total": 1 << 34},
             {"node": 1, "cpus": "4-7", "mem_total": 1 << 34}]


def test_nodes_are_cut_to_the_allowed_cpus():
    assert nodes_from(TWO_NODES, range(8)) == [Node(0, frozenset(range(4))), Node(1, frozenset(range(4, 8)))]
    assert nodes_from(TWO_NODES, {0, 1, 2, 3, 4}) == [Node(0, frozenset(range(4))), Node(1, frozenset({4}))]
    assert nodes_from(TWO_NODES, {0, 1}) == [Node(0, frozenset({0, 1}))]  # one node left
    assert not NumaPlacer(nodes_from(TWO_NODES, {0, 1})).active


def test_a_job_goes_to_one_nodes_cores_when_it_fits_there():
    p = NumaPlacer(nodes_from(TWO_NODES, range(8)))
    a = p.place("a", 3.0)
    assert (a.node, a.cpulist) == (0, "0-3") and "4.0 free cores for a need of 3.0" in a.why
    b = p.place("b", 3.0)
    assert (b.node, b.cpulist) == (1, "4-7")  # the node with the most free cores
    c = p.place("c", 2.0)  # 1 core free on each: pinning it to one would slow it
    assert c.cpus is None and "no node has that free (at most 1.0)" in c.why
    p.release("a")
    assert p.place("c", 2.0).node == 0
    near = NumaPlacer(nodes_from(TWO_NODES, range(8))).place("g", 1.0, near=1)
    assert near.node == 1 and "(its GPU's node)" in near.why
    full_near = NumaPlacer(nodes_from(TWO_NODES, range(8)))
    full_near.place("x", 4.0, near=1)
    assert full_near.place("g", 1.0, near=1).node == 0  # its GPU's node is full: the other one
    unknown = NumaPlacer(nodes_from(TWO_NODES, range(8))).place("u", 0.0)
    assert unknown.cpus is None and "CPU need unknown" in unknown.why
    one = NumaPlacer(nodes_from(TWO_NODES[:1], range(8))).place("o", 1.0)
    assert one.cpus is None and one.why == "one NUMA node: every allowed CPU"


class _Run:
    def __init__(self):
        self.alive, self.ended, self.status = True, None, "running"


class _Rec:
    def __init__(self):
        self.events: list[tuple] = []

    def queue_event(self, job, ev, t, **data):
        self.events.append((job, ev, data))


class _Engine:
    def __init__(self):
        self.recorder, self.runs, self.said, self.started = _Rec(), {}, [], {}
        self.stopping = False

    def say(self, line):
        self.said.append(line)

    def start_run(self, w, phase, cuda, solo=None, cpus=None):
        self.started[w.name] = cpus
        self.runs[w.name] = _Run()
        return self.runs[w.name]


def test_queue_plan_pins_each_started_job_to_a_node_and_frees_it_at_its_end():
    jobs = [Job(n, arrival_s=0.0, duration_s=10.0, cpu_cores=3.0) for n in "abc"]
    spec = SessionSpec(name="q", path="q.toml", interval=0.1, baseline="none", cuda=False,
                       workloads=tuple(Workload(name=j.name, command=("true",)) for j in jobs))
    plan = QueuePlan(spec, jobs, Policy("fifo"), Machine(gpus=3, cpus=8.0, unit="slot"),
                     numa=NumaPlacer(nodes_from(TWO_NODES, range(8))))
    eng = _Engine()
    plan.t0 = 0.0
    plan._schedule(eng, 0.0)
    assert eng.started == {"a": frozenset(range(4)), "b": frozenset(range(4, 8))}  # c: 9 > 8 cores
    starts = {j: d["cpus"] for j, ev, d in eng.recorder.events if ev == "queue-start"}
    assert starts == {"a": "0-3", "b": "4-7"}
    assert any("NUMA node 1: CPUs 4-7" in s for s in eng.said)
    eng.runs["a"].alive, eng.runs["a"].ended, eng.runs["a"].status = False, 1.0, "done"
    plan._schedule(eng, 1.0)
    assert eng.started["c"] == frozenset(range(4))  # a's node, freed


def _sleeper(name: str) -> Workload:
    return Workload(name=name, command=(shutil.which("sleep"), "60"), env={"GPUTOP_DL_HOOK": "0"})


@pytest.mark.slow("an Engine given real commands (sleep) starts them")
def test_real_queue_children_run_on_the_cpus_chosen(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs this process may run on, to pin two jobs apart")
    # a fake two-node layout over this box's first two allowed CPUs: one job per node
    numa = NumaPlacer([Node(0, frozenset({allowed[0]})), Node(1, frozenset({allowed[1]}))])
    jobs = [Job(n, arrival_s=0.0, duration_s=60.0, cpu_cores=1.0) for n in "ab"]
    spec = SessionSpec(name="q", path="q.toml", interval=0.1, baseline="none", cuda=False,
                       workloads=tuple(_sleeper(j.name) for j in jobs))
    plan = QueuePlan(spec, jobs, Policy("fifo"), Machine(gpus=2, cpus=2.0, unit="slot"), numa=numa)
    engine = Engine(plan, sampler=MachineSampler(Nvml(), found=FoundJobs(stall=False)),
                    recorder=Recorder(str(tmp_path / "s.db")), interval=0.1, grace_s=2.0)
    engine.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
                n in engine.runs and engine.runs[n].proc.pid for n in "ab"):
            time.sleep(0.05)
        got = {n: os.sched_getaffinity(engine.runs[n].proc.pid) for n in "ab"}
    finally:
        threading.Thread(target=engine.request_stop).start()
        assert engine.join(30)
    assert got == {"a": {allowed[0]}, "b": {allowed[1]}}
