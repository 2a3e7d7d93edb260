"""The live verdict on real scripts of known cost (tests/external/calibrated.py) beside an
outside load this test starts itself (busy loops of one core each, each in a session of its
own). Three cases, each asserted strictly: two CPU-hungry jobs contend with each other
(cpu-bound); two jobs that fit beside each other wait behind the busy loops (outside-load, the
loops named); two jobs that sleep run at their solo speed (parallel). And `diagnose`'s probe
beside the loops: each solo window says it was not alone, never parallel.

The judge reads only this test's scripts; the test waits for its evidence (each job judged over
2 × WINDOW ticks, so the window holds none of the scripts' start; the busiest processes read in
3 of them where they count), never for a time. Whatever else loads the box (the xdist
neighbour, other people) only adds to the load outside the jobs: each case's margins hold
with it (docs/verdict.md, "Load from outside the jobs"). The loops have sessions of their own
because the kernel's autogroup shares the CPUs between sessions first: in the worker's session
they cost the light pair only 1.10-1.14x on a quiet box, on the 1.10 line (docs/benchmarks.md,
"Why the light pair beside busy loops read parallel")."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import psutil
import pytest

from gputop_dl.analyse.live.passive import WINDOW
from gputop_dl.analyse.live.job_estimate import Estimate
from gputop_dl.analyse.live.passive import PassiveJudge
from gputop_dl.collect.machine import MachineSampler
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.runner import diagnose_engine

from tests.fakes import busy
from tests.fakes.by_hand import HEAVY, LIGHT, Reused, never_left_stopped, only_found

pytestmark = pytest.mark.heavy
INTERVAL = 0.5  # the monitor's tick at its fastest
DEADLINE_S = 120.0  # generous: only a box too slow to tick at all reaches it
# one thread: 5 ms of CPU per sample x 4 a step, then 60 ms asleep: a quarter of a core alone
FITS = ["--workers", "0", "--sample-cpu-ms", "5", "--compute-ms", "60"]
LOOPS = 3  # outside busy loops: 3 cores wanted on the box's 2 (with the jobs, 3.5)


@pytest.fixture(scope="module")
def by_hand():
    """The scripts, kept from one test to the next that runs the same (tests/fakes/by_hand.py:
    `Reused`): the tests below are in that order, and start any busy loops after them."""
    scripts = Reused()
    yield scripts.start
    scripts.stop()


@pytest.fixture
def busy_loops():
    procs: list[subprocess.Popen] = []

    def start(n: int) -> set[int]:
        # each in its own session, as another user's process or another terminal's: with the
        # kernel's autogroup, loops in the test's own session would share one session's CPU
        # with it and the other xdist worker, and cost the jobs next to nothing on a quiet box
        procs.extend(busy.busy_loops(n))
        return {p.pid for p in procs}

    yield start
    busy.stop(procs)


def judged(pids: set[int], *, outside: bool = False, on_tick=lambda: None):
    """Tick the judge on these jobs until each is judged over 2 x WINDOW ticks (and, with
    `outside`, the busiest processes were read in 3 ticks of the window); the verdict (JSON)
    and the estimates at that tick. `on_tick()` runs right after each tick's sample."""
    sampler = MachineSampler(Nvml(), found=only_found(pids, stall=False))
    judge = PassiveJudge()
    deadline = time.monotonic() + DEADLINE_S
    v = est = None
    full = 0  # ticks at which every job's window was full (it holds the last WINDOW)
    while time.monotonic() < deadline:
        m = sampler.sample()
        on_tick()
        v, est = judge.verdict(m.found, m.host, m.gpu_processes, m.gpus, m.time)
        if {j.pid for j in m.found} == pids and all(e.ticks == WINDOW for e in est.values()):
            full += 1
        if full > WINDOW and (not outside or v.evidence["outside_load"]["readings"] >= 3):
            return v.to_json(), est
        time.sleep(INTERVAL)  # the sampling interval (CPU figures are rates over it)
    raise AssertionError(f"not judged within {DEADLINE_S:.0f} s: {v and v.to_json()}")


class LoopCpu:
    """The busy loops' own CPU seconds at each tick (psutil): ground truth for the busiest."""

    def __init__(self, loops: set[int]) -> None:
        self.loops, self.ran = loops, []

    def __call__(self) -> None:
        self.ran.append((time.monotonic(),
                         {p: sum(psutil.Process(p).cpu_times()[:2]) for p in self.loops}))

    def named(self, out: dict) -> dict | None:
        """The busiest loop of ours the verdict names; None only where what the box runs besides
        (other people's work) took more cores than each loop over the window's readings."""
        named = {c["pid"]: c for c in out["consumers"]}
        (t0, c0), (t1, c1) = self.ran[-1 - out["readings"]], self.ran[-1]
        loop_cores = max((c1[p] - c0[p]) / (t1 - t0) for p in self.loops)
        if not self.loops & named.keys():
            assert len(named) == 3 and min(c["cores"] for c in named.values()) >= 0.8 * loop_cores, \
                (out, loop_cores)
            return None
        loop = named[max(self.loops & named.keys(), key=lambda pid: named[pid]["cores"])]
        assert "while True: pass" in loop["command"] and loop["user"] and loop["cores"] > 0.2
        return loop


def test_real_jobs_that_contend_with_each_other_read_cpu_bound(by_hand):
    pids = by_hand(HEAVY, 2)  # ~1.8 cores each alone, on 2 cores
    v, est = judged(pids)
    assert v["kind"] == "cpu-bound", v["reason"]
    assert max(e.slowdown for e in est.values()) > 1.10
    assert v["reason"].index("waits for a CPU") < v["reason"].find("load from outside") \
        or "load from outside" not in v["reason"]  # the jobs' own contention first


def test_real_heavy_jobs_beside_a_busy_loop_say_both_their_own_contention_first(by_hand,
                                                                                busy_loops):
    # the newcomer's case: two heavy scripts beside a busy loop of their own
    pids = by_hand(HEAVY, 2)
    cpu = LoopCpu(busy_loops(1))
    v, est = judged(pids, outside=True, on_tick=cpu)
    assert v["kind"] == "cpu-bound", v["reason"]
    reason = v["reason"]
    assert reason.index("waits for a CPU") < reason.index("load from outside the jobs"), reason
    assert max(e.outside for e in est.values()) > 1.10
    loop = cpu.named(v["evidence"]["outside_load"])
    assert loop is None or f"PID {loop['pid']}" in reason


def test_real_jobs_beside_busy_loops_read_outside_load_with_the_loops_named(by_hand, busy_loops):
    pids = by_hand(FITS, 2)
    cpu = LoopCpu(busy_loops(LOOPS))
    v, est = judged(pids, outside=True, on_tick=cpu)
    assert v["kind"] == "outside-load", v["reason"]
    assert v["title"] == "concurrent: CPU taken by other processes"
    assert all(e.slowdown <= 1.10 for e in est.values()), {n: e.slowdown for n, e in est.items()}
    assert all(e.outside > 1.10 for e in est.values()), {n: e.outside for n, e in est.items()}
    out = v["evidence"]["outside_load"]
    assert all(s > 0.5 for s in out["share"].values()), out
    assert {j["name"]: j["outside_slowdown"] for j in v["jobs"]} == {
        n: e.outside for n, e in est.items()}
    assert any(outside_fix(out, est) in r for r in v["recommendations"]), v["recommendations"]
    loop = cpu.named(out)
    assert loop is None or f"PID {loop['pid']}" in v["reason"]


def outside_fix(out: dict[str, Any], est: dict[str, Estimate]) -> str:
    """The command the busiest consumer calls for: its session's nice value where it is in
    another autogroup than the jobs (the loops run in sessions of their own), else the idle
    class (collect/proc/autogroup.py)."""
    top = out["consumers"][0]
    groups = {e.last.autogroup for e in est.values()} - {None}
    if top["autogroup"] is not None and top["autogroup"] not in groups:
        return f"echo 19 > /proc/{top['pid']}/autogroup"
    return f"chrt -a --idle -p 0 {top['pid']}"


def test_real_diagnose_probe_beside_busy_loops_says_the_solo_windows_were_not_alone(by_hand,
                                                                                   busy_loops):
    # the probe pauses the other job, not the loops: each solo window is slowed by them, and
    # says so with its figure. Never "parallel": outside-load, or, where pausing the other job
    # sped one up by more than 10 % (each job is a session, as each loop is), cpu-bound with
    # the outside load said after it
    pids = by_hand(FITS, 2)
    loops = busy_loops(LOOPS)
    eng = diagnose_engine(Nvml(), pids=pids, interval=INTERVAL, seconds=12, record=False)
    eng.start()
    eng.join()
    v, res = eng.verdict, eng.plan.result()
    assert never_left_stopped(pids)
    assert v["kind"] in ("outside-load", "cpu-bound"), v["reason"]
    assert "behind processes" in v["reason"] and any("chrt -a --idle" in r for r in v["recommendations"])
    assert {j["pid"] for j in res["jobs"]} == pids
    for j in res["jobs"]:
        out = j["solo_outside"]
        assert j["measured_alone"] and out is not None, j
        assert out["slowdown"] > 1.10 and out["outside_cores"] > 1.0, out
        named = {c["pid"] for c in out["consumers"]}
        # a loop is named, unless three other processes each took as much as a loop can
        assert loops & named or min(c["cores"] for c in out["consumers"]) > 0.5, out
        assert f"probe: {j['name']} was not alone in its solo window" in "\n".join(
            v["evidence_lines"])


def test_real_jobs_at_solo_speed_read_parallel(by_hand):
    pids = by_hand(LIGHT, 2)  # they sleep: no CPU to speak of
    v, est = judged(pids)
    assert v["kind"] == "parallel", v["reason"]
    assert all(e.slowdown <= 1.10 and (e.outside or 1.0) <= 1.10 for e in est.values())
