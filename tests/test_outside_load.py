"""Load from outside the jobs as a cause, on hand-made samples: the split of a job's
CPU wait between the other jobs and the processes outside them, the `outside-load` verdict that
names the busiest of those, and the busiest-process sampler on a fake /proc."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from gputop_dl.analyse.live.cpu_wait_model import set_share
from gputop_dl.analyse.live.passive import PassiveJudge
from gputop_dl.collect.proc.busiest import BusiestSampler
from gputop_dl.present.verdict_text import job_line
from gputop_dl.snapshot import HostSample, ProcLoad, Snapshot

from tests.test_passive import TWO, job, run

LOOP = ProcLoad(pid=4242, cores=1.0, user="ana", command="python3 -c 'while True: pass'")
SMALL = ProcLoad(pid=77, cores=0.1, user="root", command="[kworker/0:1]")


def busy(*procs, runnable=None):
    return replace(TWO, busiest=tuple(procs), runnable=runnable)


def test_outside_cores_seen_set_a_floor_under_what_the_runnable_count_leaves():
    # the pair wants 1 core more than itself; the runnable count says nothing else runs, but a
    # process outside the jobs was seen using 2 cores: a third of the competition is the pair
    assert set_share(1.0, 2.0, 2.0) == 1.0
    assert set_share(1.0, 2.0, 2.0, outside=2.0) == pytest.approx(1 / 3)
    assert set_share(1.0, 2.0, 6.0, outside=2.0) == pytest.approx(1 / 5)  # the larger of the two
    assert set_share(1.0, 2.0, None, outside=None) == 1.0  # both unknown: all to the jobs
    assert set_share(1.0, 1.0, None, outside=1.0) == 0.0  # one job: nothing beside it to blame


def test_jobs_slowed_by_a_busy_loop_outside_them_read_outside_load_never_parallel():
    # two jobs of 0.4 cores on 2 cores wait a third of their runnable time, behind a busy loop
    # (1 core) and a kernel thread: each other they barely touch
    pair = [job("a", 10, f=0.33, cores=0.4), job("b", 20, f=0.33, cores=0.4)]
    v, est = run(PassiveJudge(), 4, lambda t: pair, host=busy(LOOP, SMALL, runnable=3))
    assert v.kind == "outside-load", v.reason
    assert v.title == "concurrent: CPU taken by other processes"
    assert all(e.slowdown <= 1.10 < e.outside for e in est.values())
    # the busiest named: command, PID, user, cores; each job's slowdown from it; the fixes
    assert "python3 -c 'while True: pass' (PID 4242, user ana, 1.00 cores)" in v.reason
    assert f"a {est['a'].outside:.2f}×" in v.reason
    assert any("chrt -a --idle -p 0 4242" in r for r in v.recommendations)
    assert any("taskset" in r for r in v.recommendations)
    # the contract: the consumers and their share, each job's outside slowdown
    data = v.to_json()
    out = data["evidence"]["outside_load"]
    assert out["consumers"][0] == {"pid": 4242, "user": "ana",
                                   "command": "python3 -c 'while True: pass'", "cores": 1.0,
                                   "nice": None, "policy": None, "autogroup": None,
                                   "autogroup_nice": None}
    assert out["cores"] == pytest.approx(1.1)
    assert out["share"]["a"] == pytest.approx(1 - data["evidence"]["set_share"]["a"], abs=1e-3)
    assert out["share"]["a"] > 0.5
    assert [j["outside_slowdown"] for j in data["jobs"]] == [est["a"].outside, est["b"].outside]
    assert "estimated slowdown 1.0" in job_line(data["jobs"][0])


def test_jobs_own_contention_comes_first_and_the_outside_load_is_said_too():
    # two heavy jobs want 2 cores each on 2 cores, and a busy loop takes a third of a core
    heavy = [job("a", 10, f=0.6, cores=0.8), job("b", 20, f=0.6, cores=0.8)]
    v, est = run(PassiveJudge(), 4, lambda t: heavy, host=busy(replace(LOOP, cores=0.4)))
    assert v.kind == "cpu-bound", v.reason
    own = v.reason.index("waits for a CPU")
    assert own < v.reason.index("load from outside the jobs takes cores too") \
        < v.reason.index("PID 4242")
    assert v.reason.endswith("(estimated live, nothing paused)")
    assert any("chrt -a --idle" in r for r in v.recommendations)
    assert v.recommendations[0].startswith("these jobs' threads want")
    # the same jobs with nothing outside them: their own contention alone
    v, est = run(PassiveJudge(), 4, lambda t: heavy, host=busy())
    assert v.kind == "cpu-bound" and "outside" not in v.reason
    assert all(e.outside == 1.0 for e in est.values())


def test_outside_cost_is_its_own_part_of_the_wait_the_other_jobs_kept():
    # a heavy pair (1.75 cores wanted each on 2) beside a loop of 0.7 cores: of each job's wait
    # f * b = 0.525, the other job causes share = 1.75 / 2.45 and the loop the rest. Without
    # the loop (the other job still there) it runs 1 / (1 - 0.525 (1 - share)) faster, not
    # s_all / s_cpu (the loop's cost with the other job gone too: 1.32x, measured 1.38-1.39x
    # against own step times of 1.17-1.28x, docs/benchmarks.md)
    heavy = [job("a", 10, f=0.6, cores=0.7), job("b", 20, f=0.6, cores=0.7)]
    v, est = run(PassiveJudge(), 4, lambda t: heavy, host=busy(replace(LOOP, cores=0.7)))
    e = est["a"]
    share = 1.75 / 2.45
    assert e.last.set_share == pytest.approx(share)
    assert e.outside == pytest.approx(1 / (1 - 0.525 * (1 - share)), abs=1e-3)  # 1.176
    assert e.slowdown == pytest.approx(1 / (1 - 0.525 * share), abs=1e-3)  # 1.60
    s_all = 1 / (1 - 0.525)
    assert e.slowdown * e.outside < s_all  # each part removes only its own wait
    assert v.kind == "cpu-bound" and "a 1.18×" in v.reason


def test_jobs_at_solo_speed_read_parallel_whatever_runs_beside_them():
    # sleeping jobs (0.02 cores): however long their few runs wait, they lose no time worth it
    light = [job("a", 10, f=0.5, cores=0.02), job("b", 20, f=0.5, cores=0.02)]
    v, est = run(PassiveJudge(), 4, lambda t: light, host=busy(LOOP, runnable=4))
    assert v.kind == "parallel", v.reason
    assert all(e.outside <= 1.10 for e in est.values())


def test_one_job_beside_outside_load_is_alone_and_names_the_load():
    # one job is `alone`, and what slows it from outside is in its reason and fixes
    one = [job("a", 10, f=0.5, cores=0.5)]
    v, _ = run(PassiveJudge(), 4, lambda t: one, host=busy(LOOP, runnable=3))
    assert v.kind == "alone"
    assert "load from outside the jobs takes cores too" in v.reason and "PID 4242" in v.reason
    assert any("chrt -a --idle -p 0 4242" in r for r in v.recommendations)
    assert any("PID 4242" in line for line in v.evidence_lines)
    assert v.to_json()["evidence"]["outside_load"]["consumers"][0]["pid"] == 4242


def test_the_jobs_own_processes_are_never_outside_them():
    pair = [job("a", 10, f=0.33, cores=0.4), job("b", 20, f=0.33, cores=0.4)]
    mine = ProcLoad(pid=11, cores=1.5, user="ana", command="python train.py")  # a's worker
    v, _ = run(PassiveJudge(), 4, lambda t: pair, host=busy(mine, LOOP))
    assert [c["pid"] for c in v.evidence["outside_load"]["consumers"]] == [4242]


def test_the_busiest_are_the_mean_over_the_ticks_that_read_them():
    pair = [job("a", 10, f=0.33, cores=0.4), job("b", 20, f=0.33, cores=0.4)]
    judge = PassiveJudge()
    run(judge, 2, lambda t: pair, host=busy(LOOP))
    run(judge, 2, lambda t: pair, host=busy(SMALL))
    v, _ = run(judge, 1, lambda t: pair, host=replace(TWO, busiest=None))  # not read: no 0
    got = {c["pid"]: c["cores"] for c in v.evidence["outside_load"]["consumers"]}
    assert got == {4242: 0.5, 77: 0.05}


def test_snapshot_json_carries_the_busiest():
    snap = Snapshot(time=0.0, gpu_status="ok", gpus=(), host=HostSample(cpus=2, busiest=(LOOP,)))
    host = snap.to_json()["host"]
    assert host["busiest"] == [{"pid": 4242, "cores": 1.0, "user": "ana",
                                "command": "python3 -c 'while True: pass'", "nice": None,
                                "policy": None, "autogroup": None, "autogroup_nice": None}]
    assert Snapshot(time=0.0, gpu_status="ok", gpus=(),
                    host=HostSample(cpus=2)).to_json()["host"]["busiest"] is None


def _proc(root, pid, cpu_ticks, start=100, cmd=b"python3\0-c\0while True: pass\0", state="R"):
    d = root / str(pid)
    d.mkdir(exist_ok=True)
    (d / "stat").write_text(f"{pid} (python3) {state} 1 1 1 0 -1 0 0 0 0 0 {cpu_ticks} 0 0 0 "
                            f"20 0 1 0 {start} 0 0\n")
    (d / "cmdline").write_bytes(cmd)


def test_busiest_sampler_rates_between_passes_on_a_fake_proc(tmp_path, monkeypatch):
    tick = os.sysconf("SC_CLK_TCK")
    clock = iter([0.0, 1.0, 2.0])
    monkeypatch.setattr("gputop_dl.collect.proc.busiest.time.monotonic", lambda: next(clock))
    _proc(tmp_path, 5, 0)
    _proc(tmp_path, 6, 0, cmd=b"")  # a kernel thread: its name
    _proc(tmp_path, 7, 0, cmd=b"train.py\0--token\0s3cr3t\0")
    s = BusiestSampler(proc=str(tmp_path), every=1)
    assert s.sample() is None  # the first pass: no rates yet
    _proc(tmp_path, 5, tick)  # 1 s of CPU in 1 s: 1 core
    _proc(tmp_path, 6, tick // 2, cmd=b"")
    _proc(tmp_path, 7, tick // 4, cmd=b"train.py\0--token\0s3cr3t\0")
    got = s.sample()
    assert [(p.pid, p.cores) for p in got] == [(5, 1.0), (6, 0.5), (7, 0.25)]
    assert got[0].command == "python3 -c 'while True: pass'" and got[1].command == "[python3]"
    assert "s3cr3t" not in got[2].command
    _proc(tmp_path, 5, 5 * tick, start=999)  # the PID reused by another process: no rate
    assert 5 not in {p.pid for p in s.sample()}


def test_busiest_sampler_passes_every_second_call_and_names_each_process_once(tmp_path, monkeypatch):
    tick = os.sysconf("SC_CLK_TCK")
    clock = iter([0.0, 1.0, 3.0, 5.0])
    monkeypatch.setattr("gputop_dl.collect.proc.busiest.time.monotonic", lambda: next(clock))
    _proc(tmp_path, 5, 0)
    s = BusiestSampler(proc=str(tmp_path))  # every 2nd call, once it has rates
    assert s.sample() is None
    _proc(tmp_path, 5, tick)
    first = s.sample()  # the second pass at once: the first had no rates
    assert [(p.pid, p.cores) for p in first] == [(5, 1.0)]
    _proc(tmp_path, 5, 3 * tick, cmd=b"renamed\0")
    assert s.sample() is first  # between passes: the last pass's figures, /proc not read
    got = s.sample()  # a pass over the 2 s since the last: 2 s of CPU, 1 core
    assert [(p.pid, p.cores) for p in got] == [(5, 1.0)]
    assert got[0].command == first[0].command  # read once per process (NAME_AGE_S)
    s.forget()
    assert s.sample() is None  # afresh: no rates until the next pass


def _stat_fds(pid):
    """This process's open files that are /proc/PID/stat."""
    out = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            out += os.readlink(f"/proc/self/fd/{fd}") == f"/proc/{pid}/stat"
        except OSError:
            continue
    return out


def test_busiest_sampler_keeps_the_files_of_the_pids_given_and_closes_those_gone():
    """A pass reads only the processes it is given (the discovery's listing), keeps their
    `stat` files open for the next pass (pread: half the system calls), closes the file of a
    process that ended, and all of them when nobody waits."""
    import subprocess
    import sys

    a = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    b = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        s = BusiestSampler(every=1)
        s.sample([a.pid])
        assert _stat_fds(a.pid) == 1 and _stat_fds(b.pid) == 0  # b not given: not read
        s.sample([a.pid, b.pid])
        assert _stat_fds(a.pid) == 1 and _stat_fds(b.pid) == 1  # kept, not opened again
        a.kill()
        a.wait()
        s.sample([a.pid, b.pid])  # a reaped: its kept file fails, is read by path, is gone
        assert _stat_fds(a.pid) == 0 and _stat_fds(b.pid) == 1
        s.forget()
        assert _stat_fds(b.pid) == 0
    finally:
        for p in (a, b):
            p.kill()
            p.wait()


def test_proc_files_with_their_own_budget_leave_the_shared_one_alone(tmp_path):
    from gputop_dl.collect.proc import procfs

    for i in range(3):
        (tmp_path / f"f{i}").write_text(str(i))
    shared = procfs.ProcFiles.kept
    own = procfs.ProcFiles(own_max=2)
    assert [own.read(str(tmp_path / f"f{i}")) for i in range(3)] == [b"0", b"1", b"2"]
    assert procfs.ProcFiles.kept == shared and len(own._fds) == 2  # the third read by path
    own.close()
    assert procfs.ProcFiles.kept == shared and not own._fds


def test_serve_says_what_the_outside_load_costs_each_job_and_the_cores_it_takes():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gputop_dl.analyse.live import passive as P
    from gputop_dl.present.prometheus import SnapshotCollector

    pair = (job("a", 10, f=0.33, cores=0.4), job("b", 20, f=0.33, cores=0.4))
    judge = PassiveJudge()
    v = est = None
    for t in range(4):
        v, est = judge.verdict(pair, busy(LOOP, runnable=3), t=float(t))
    c = SnapshotCollector(hostname="n")
    c.feed(Snapshot(time=1.0, gpu_status="ok", host=busy(LOOP), jobs=tuple(P.annotate(pair, est)),
                    verdict=v.to_json()))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(c)
    got = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            got.setdefault(s.name, []).append((s.labels, s.value))
    assert {lab["job_name"]: val for lab, val in got["gputop_dl_job_outside_slowdown"]} == {
        "a": est["a"].outside, "b": est["b"].outside}
    assert got["gputop_dl_outside_load_cores"][0][1] == 1.0
    assert {lab["kind"]: val for lab, val in got["gputop_dl_verdict"]}["outside-load"] == 1.0


def test_once_json_names_the_outside_load_from_its_one_reading():
    from gputop_dl.analyse.live import passive as P

    pair = (job("a", 10, f=0.33, cores=0.4), job("b", 20, f=0.33, cores=0.4))
    snap = Snapshot(time=1.0, gpu_status="no-driver", gpus=(), host=busy(LOOP, runnable=3),
                    jobs=pair)
    data = P.once(snap).to_json()
    assert data["verdict"]["kind"] == "outside-load"
    assert data["verdict"]["evidence"]["outside_load"]["consumers"][0]["pid"] == 4242
    assert data["host"]["busiest"][0]["pid"] == 4242
    assert all(j["outside_slowdown"] > 1.1 for j in data["jobs"])


def test_every_verdict_kind_has_a_header_label_and_tone():
    from gputop_dl.analyse.verdict_types import KINDS
    from gputop_dl.present.tui.verdict_banner import KIND_LABEL, verdict_class

    assert set(KINDS) <= KIND_LABEL.keys()
    assert KIND_LABEL["outside-load"] == "CONCURRENT · OUTSIDE LOAD"
    assert verdict_class("outside-load") == "-bad"


def test_a_solo_window_beside_outside_load_is_slowed_by_its_wait_its_own_demand_is_not():
    from gputop_dl.analyse.live.outside_load import solo_outside

    # one thread of half a core, waiting half its runnable time, beside a busy loop: 2x
    assert solo_outside(0.5, 0.5, 1.0, 2) == pytest.approx(2.0)
    # nothing seen outside and its threads fit the cores: still put down to what is outside
    # (a burst between the two passes), as they cannot wait behind each other there
    assert solo_outside(0.5, 0.5, 0.0, 2) == pytest.approx(2.0)
    # threads that want 3 cores on 2 wait behind each other: that wait is there alone too
    assert solo_outside(1 / 3, 2.0, 0.0, 2) == 1.0
    # 2.4 cores wanted on 2, 0.8 used outside: two thirds of its wait is theirs
    assert solo_outside(0.5, 1.2, 0.8, 2) == pytest.approx(1 / (1 - 0.5 * 2 / 3))
    # on a GPU only the data stall can shrink; an unknown wait is no figure
    assert solo_outside(0.5, 0.5, 1.0, 2, stall=0.2) == pytest.approx(1.25)
    assert solo_outside(None, 0.5, 1.0, 2) is None


def test_diagnose_says_a_solo_window_was_not_alone_and_a_parallel_probe_is_outside_load():
    from gputop_dl.analyse.verdict_types import JobVerdict, Verdict
    from gputop_dl.collect.pyspy.run import StallEstimate
    from gputop_dl.collect.jobs.solo_window import SoloReading
    from gputop_dl.analyse.live.outside_load import not_alone
    from gputop_dl.engine.diagnose_plan import DiagnosePlan

    plan = DiagnosePlan(seconds=6)

    def probed(v):  # the probe's verdict with its solo windows (engine -> analyse/slowdown)
        return not_alone(v, [plan._window(plan.jobs[pid]) for pid in (10, 20)], plan._cpus)

    plan._cpus = 2
    for name, pid in (("a", 10), ("b", 20)):
        plan.jobs[pid] = {"name": name, "pid": pid, "pids": [pid], "cpu": [0.2],
                          "together": StallEstimate(1, 99, 0.12, 10),
                          "alone": StallEstimate(1, 99, 0.118, 10),
                          "window": SoloReading(seconds=3.0, wait=0.6, cores=0.17,
                                                outside=(LOOP, SMALL))}
    parallel = Verdict(kind="parallel", reason="no job is slowed", confidence=0.9,
                       jobs=(JobVerdict(name="a", slowdown=1.02), JobVerdict(name="b", slowdown=1.01)))
    v = probed(parallel)
    s_out = 1 / (1 - 0.6 * 0.17 / 0.4)  # one thread, runnable 0.425 of the time
    assert v.kind == "outside-load" and v.title == "concurrent: CPU taken by other processes"
    assert "do not slow each other" in v.reason and "PID 4242" in v.reason
    assert f"a {s_out:.2f}×" in v.reason
    assert any("chrt -a --idle -p 0 4242" in r for r in v.recommendations)
    line = next(x for x in v.evidence_lines if x.startswith("probe: a was not alone"))
    assert "0.118 s" in line and f"about {s_out:.2f}×" in line and f"{1.02 * s_out:.2f}×" in line
    win = v.evidence["probe_outside"]["a"]
    assert win["outside_cores"] == pytest.approx(1.1) and win["consumers"][0]["pid"] == 4242
    assert win["slowdown"] == pytest.approx(s_out, abs=1e-3)
    # --json: each job's window, in the contract
    from tests.schema_check import check

    plan.verdict = v.to_json()
    doc = check({**plan.result(), "session": "s"}, "diagnosis")
    assert {j["name"]: j["solo_outside"]["slowdown"] for j in doc["jobs"]} == {
        "a": win["slowdown"], "b": v.evidence["probe_outside"]["b"]["slowdown"]}
    # a window with nothing outside: no line, the probe's kind kept
    for pid in (10, 20):
        plan.jobs[pid]["window"] = SoloReading(seconds=3.0, wait=0.01, cores=0.25, outside=())
    v = probed(parallel)
    assert v.kind == "parallel" and not v.evidence_lines
    assert v.evidence["probe_outside"]["a"]["slowdown"] < 1.1
    # the jobs' own contention stays the verdict; the window's line is added
    plan.jobs[10]["window"] = SoloReading(seconds=3.0, wait=0.6, cores=0.17, outside=(LOOP,))
    bound = parallel.replace(kind="cpu-bound", title="")
    v = probed(bound)
    assert v.kind == "cpu-bound" and any("probe: a was not alone" in x for x in v.evidence_lines)
    assert v.reason.startswith("no job is slowed; even alone the jobs waited for a CPU behind")
    assert any("chrt -a --idle -p 0 4242" in r for r in v.recommendations)


@pytest.fixture
def fake_sched(tmp_path, monkeypatch):
    """A fake clock for the solo watch (`now[0]`) and a writer of a thread's schedstat."""
    now = [0.0]
    for mod in ("proc.busiest", "jobs.solo_window"):
        monkeypatch.setattr(f"gputop_dl.collect.{mod}.time.monotonic", lambda: now[0])

    def sched(pid, tid, ran_s, waited_s):
        d = tmp_path / str(pid) / "task" / str(tid)
        d.mkdir(parents=True, exist_ok=True)
        (d / "schedstat").write_text(f"{int(ran_s * 1e9)} {int(waited_s * 1e9)} 7\n")

    return now, sched


def test_solo_watch_reads_the_jobs_wait_and_the_others_over_the_window(tmp_path, fake_sched):
    from gputop_dl.collect.jobs.solo_window import SoloWatch

    tick = os.sysconf("SC_CLK_TCK")
    now, sched = fake_sched

    _proc(tmp_path, 10, 0, cmd=b"python\0train.py\0")  # the job
    _proc(tmp_path, 4242, 0)  # a busy loop outside it
    _proc(tmp_path, 20, 0, cmd=b"python\0other.py\0")  # a paused job
    sched(10, 10, 1.0, 1.0)
    sched(10, 11, 0.0, 0.0)
    w = SoloWatch(proc=str(tmp_path))
    w.start([10])
    _proc(tmp_path, 10, tick // 2, cmd=b"python\0train.py\0")
    _proc(tmp_path, 4242, 2 * tick)
    _proc(tmp_path, 20, tick // 10, cmd=b"python\0other.py\0")
    sched(10, 10, 1.5, 1.8)  # 0.5 s ran, 0.8 s waited
    sched(10, 11, 0.5, 0.2)  # 0.5 s ran, 0.2 s waited
    sched(10, 12, 9.0, 9.0)  # a thread born in the window: no delta
    now[0] = 2.0
    r = w.stop(exclude=[20])
    assert r.seconds == 2.0 and r.wait == pytest.approx(0.5) and r.cores == pytest.approx(0.5)
    assert [(p.pid, p.cores) for p in r.outside] == [(4242, 1.0)]


def test_solo_watch_keeps_a_thread_that_ended_and_stops_at_a_jobs_end(tmp_path, fake_sched):
    """A loader worker that exits inside the window keeps what it ran; a job that ended inside
    the window is read up to its last mark, not over the time after its end."""
    import shutil

    from gputop_dl.collect.jobs.solo_window import SoloWatch

    now, sched = fake_sched

    _proc(tmp_path, 10, 0, cmd=b"python\0train.py\0")  # the trainer
    _proc(tmp_path, 11, 0, cmd=b"python\0train.py\0")  # its loader worker
    sched(10, 10, 0.0, 0.0)
    sched(11, 11, 0.0, 0.0)
    w = SoloWatch(proc=str(tmp_path))
    w.start([10, 11])
    sched(10, 10, 0.2, 0.1)
    sched(11, 11, 0.6, 0.3)
    now[0] = 1.0
    w.mark()
    shutil.rmtree(tmp_path / "11")  # the worker ends: its 0.6 s stay counted
    sched(10, 10, 0.4, 0.2)
    now[0] = 1.5
    w.mark()
    shutil.rmtree(tmp_path / "10")  # the job ends; the window closes a tick later
    now[0] = 3.0
    r = w.stop(ended=True)
    assert r.seconds == 1.5 and r.cores == pytest.approx(1.0 / 1.5, abs=1e-3)
    assert r.wait == pytest.approx(0.5 / 1.5, abs=1e-3)


def test_a_solo_baseline_beside_outside_load_is_said_and_the_kind_kept():
    """baseline = "measure": a job's solo run beside a busy loop makes its solo figure slow and
    its slowdown too small; the verdict says so per job, keeps its kind (the loop may have gone
    before the co-run, which the live judge reads) and says to measure again."""
    from gputop_dl.analyse.live.outside_load import not_alone
    from gputop_dl.analyse.verdict_types import JobVerdict, Verdict
    from gputop_dl.engine.solo_beside import slowed_by_outside, windows

    beside = {"seconds": 1.5, "wait": 0.6, "cores": 0.17,
              "consumers": [{"pid": 4242, "user": "ana", "command": "python3 -c 'while True: pass'",
                             "cores": 1.0}]}
    solo = {"a": {"step_time_s": 0.118, "device": "cpu", "beside": beside},
            "b": {"step_time_s": 0.120, "device": "cpu",
                  "beside": dict(beside, wait=0.01, consumers=[])},
            "c": {"step_time_s": 0.120, "device": "cpu"}}  # an old cached baseline: not read
    wins = windows(solo, ["a", "b", "c", "gone"])
    assert [w.name for w in wins] == ["a", "b"]
    s_out = 1 / (1 - 0.6 * 0.17 / 0.4)  # as a probe window of the same figures
    assert slowed_by_outside("a", solo["a"], 2) == pytest.approx(s_out, abs=1e-3)
    assert slowed_by_outside("b", solo["b"], 2) is None  # nothing beside it
    assert slowed_by_outside("c", solo["c"], 2) is None  # not read: nothing claimed
    parallel = Verdict(kind="parallel", reason="no job is slowed", confidence=0.9,
                       jobs=(JobVerdict(name="a", slowdown=0.8), JobVerdict(name="b", slowdown=1.01)))
    v = not_alone(parallel, wins, 2, by="baseline")
    assert v.kind == "parallel" and v.reason == "no job is slowed"
    line = next(x for x in v.evidence_lines if x.startswith("solo baseline: a was not alone"))
    assert "its solo run" in line and "PID 4242" in line and f"about {s_out:.2f}×" in line
    assert f"{0.8 * s_out:.2f}× against an idle box" in line
    assert not any(x.startswith("solo baseline: b") for x in v.evidence_lines)
    assert set(v.evidence["baseline_outside"]) == {"a", "b"} and "probe_outside" not in v.evidence
    assert any("measure the solo baselines again" in r and "a shared the CPU" in r
               and "its slowdown here is too small" in r for r in v.recommendations)
    # nothing beside any solo run: evidence only, no line, no fix
    quiet = not_alone(parallel, windows(solo, ["b"]), 2, by="baseline")
    assert quiet == parallel.with_evidence(baseline_outside=quiet.evidence["baseline_outside"])


def test_many_small_outside_processes_get_no_fix_with_a_pid_to_fill_in():
    """A pass that found no process worth naming (each under 0.05 cores) gives no `renice -p
    PID` with "PID" left in it: how to find them instead. Named ones keep their PID."""
    from gputop_dl.analyse.live import outside_load
    from gputop_dl.collect.proc import busiest

    assert outside_load.NAMED_CORES == busiest.MIN_CORES  # the one threshold, said the same
    none = outside_load.fixes((), 2)
    assert not any("-p 0 PID`" not in f and "chrt" in f for f in none)  # none with a PID
    assert not any("taskset -a -cp" in f for f in none)  # no single process to pin away
    assert "many small processes" in none[0] and "ps -eo pid,user,pcpu,args" in none[0]
    assert none[-1].startswith("move the job")
    named = outside_load.fixes((LOOP,), 2)
    assert f"chrt -a --idle -p 0 {LOOP.pid}`" in named[0] and f"0-0 {LOOP.pid}`" in named[1]
    # not read yet: the PID comes with the second reading, the placeholder says where it goes
    assert "chrt -a --idle -p 0 PID`" in outside_load.fixes(None, 2)[0]


def test_the_fix_for_an_outside_process_follows_its_priority():
    """Measured beside a two-thread trainer on 2 cores (docs/validation.md): two busy loops at
    nice 0 left it 2.46× slower, at nice 19 1.43×, in the idle class not slower. So: the idle
    class for one at nice 0 (renice -n 19 named as the milder step), the idle class alone for
    one at nice 19, and for one already idle no priority to lower: the cgroup's weight."""
    from gputop_dl.analyse.live import outside_load

    at0 = outside_load.fixes((replace(LOOP, nice=0, policy="other"),), 2)
    assert "chrt -a --idle -p 0 4242" in at0[0] and "renice -n 19 -p 4242" in at0[0]
    at19 = outside_load.fixes((replace(LOOP, nice=19, policy="other"),), 2)
    assert "chrt -a --idle -p 0 4242" in at19[0] and "renice" not in at19[0]
    idle = outside_load.fixes((replace(LOOP, nice=19, policy="idle"),), 2)
    assert not any("chrt" in f or "renice" in f for f in idle)
    assert "CPUWeight" in idle[0] and "taskset -a -cp 0-0 4242" in idle[1]
    words = outside_load.named((replace(LOOP, nice=19), replace(SMALL, policy="idle"),
                                replace(SMALL, pid=78, nice=0, policy="batch")))
    assert "(PID 4242, user ana, nice 19, 1.00 cores)" in words
    assert "(PID 77, user root, idle class, 0.10 cores)" in words
    assert "(PID 78, user root, batch class, 0.10 cores)" in words
    ev = outside_load.consumer_json(replace(LOOP, nice=19, policy="other"))
    assert (ev["nice"], ev["policy"]) == (19, "other")


@pytest.mark.parametrize("how, nice, policy", [([], 0, "other"), (["nice", "-n", "19"], 19, "other"),
                                               (["chrt", "--idle", "0"], 0, "idle"),
                                               (["chrt", "--batch", "0"], 0, "batch")])
def test_a_real_processs_nice_and_class_are_read_from_its_stat(how, nice, policy):
    """The fields' places on this kernel: a sleeping child started under nice or chrt."""
    import shutil
    import subprocess

    from gputop_dl.collect.proc.busiest import priority
    from gputop_dl.collect.proc.procfs import read_proc
    from gputop_dl.collect.proc.procs import stat_fields

    if how and shutil.which(how[0]) is None:
        pytest.skip(f"no {how[0]} here")
    p = subprocess.Popen([*how, "sleep", "30"])
    try:
        while read_proc(f"/proc/{p.pid}/comm") != b"sleep\n":  # until nice or chrt has set it
            os.sched_yield()
        assert priority(stat_fields(read_proc(f"/proc/{p.pid}/stat"), 20)) == {
            "nice": nice, "policy": policy}
    finally:
        p.kill()
        p.wait()


def test_a_solo_runs_readings_are_its_ticks_after_warm_up_by_the_steps_clock(tmp_path, monkeypatch):
    """The solo run's warm-up ended at 11.5 by its steps' own times, though the engine read
    those steps only later: its wait and the busiest processes are over the ticks after 11.5,
    its own processes and gputop-dl's never among them."""
    from types import SimpleNamespace

    from gputop_dl.collect.proc.procs import TreeSample
    from gputop_dl.engine.solo_beside import SoloRunWatch

    tick = os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr("gputop_dl.collect.proc.busiest.time.monotonic", iter([0, 1, 2, 3]).__next__)
    monkeypatch.setattr("gputop_dl.engine.solo_beside.time.time", iter([10, 11, 12, 13]).__next__)
    run = SimpleNamespace(alive=True, tree_sample=None, warm_at=lambda: None,
                          measured_cpu_cores=lambda: 0.9)
    watch = SoloRunWatch(run, proc=str(tmp_path))
    for k, (waited, busy) in enumerate([(0, 0), (0, tick), (100, 2 * tick), (100, 3 * tick)]):
        _proc(tmp_path, 5, busy)  # a busy loop beside it: 1 core from the second tick on
        _proc(tmp_path, 7, k * tick, cmd=b"train.py\0")  # the job itself
        run.tree_sample = TreeSample(pids=(7,), cpu_cores=None, rss=0, threads=1,
                                     waits={7: (100, waited)})
        watch.tick()
    assert watch.reading() is None  # not past its warm-up (yet): no reading
    run.warm_at = lambda: 11.5
    run.alive, run.tree_sample = False, None
    watch.tick()  # the tick that read it ended: nothing of it is read
    got = watch.reading()
    assert got["seconds"] == 1.5 and got["wait"] == 0.5 and got["cores"] == 0.9
    assert [(c["pid"], c["cores"]) for c in got["consumers"]] == [(5, 1.0)]


def test_the_windows_consumers_keep_their_priority():
    from gputop_dl.analyse.live.outside_load import OutsideWindow

    w = OutsideWindow(window=2)
    w.add((replace(LOOP, nice=19, policy="idle"),))
    w.add((replace(LOOP, cores=0.5, nice=19, policy="idle"),))
    (top,) = w.consumers()
    assert (top.pid, top.cores, top.nice, top.policy) == (4242, 0.75, 19, "idle")


def test_a_process_busy_in_one_tick_of_the_window_is_not_named():
    """gputop-dl's own start, a shell's `ls`: busy one tick of five, 0.01 cores on the mean, is
    no consumer to name; the loop beside it is."""
    from gputop_dl.analyse.live.outside_load import OutsideWindow

    w = OutsideWindow(window=5)
    w.add((LOOP, replace(LOOP, pid=7, cores=0.06)))
    for _ in range(4):
        w.add((LOOP,))
    assert [(p.pid, p.cores) for p in w.consumers()] == [(4242, 1.0)]
    quiet = OutsideWindow(window=5)
    quiet.add((replace(LOOP, pid=7, cores=0.06),))
    for _ in range(4):
        quiet.add(())
    assert quiet.consumers() == ()  # read, none worth naming: "many small ones"


def test_a_row_slowed_from_outside_shows_that_figure_marked_out():
    """A job alone among the jobs but slowed by another user's busy loop: its row showed
    "1.00× est" (against the other jobs, none). It shows the outside figure, marked "out" (and
    "?" with the estimate's doubt), in the TUI's table and the headless one; where the other
    jobs cost it more, or the outside load costs little, its own slowdown."""
    from rich.console import Console

    from gputop_dl.present.headless import jobs_table
    from gputop_dl.present.tui.jobs_table import COLUMN_KEYS, Palette, job_row
    from gputop_dl.snapshot import JobSample, Snapshot

    j = JobSample(name="train.py", pid=10, launched=False, pids=(10,), cpu_cores=0.96,
                  cpu_wait_fraction=0.5, slowdown=1.0, slowdown_source="estimated",
                  slowdown_doubt="its intra-op pool spins", outside_slowdown=3.77)
    i = COLUMN_KEYS.index("slowdown")
    cell = job_row(j, Palette()).cells[i]
    assert cell.text == "3.77× out?" and cell.style == Palette().tone("bad")
    con = Console(width=200, record=True)
    con.print(jobs_table(Snapshot(time=0.0, gpu_status="ok", jobs=(j,))))
    assert "3.77× out?" in con.export_text()
    own = replace(j, slowdown=4.0, slowdown_doubt=None)
    assert job_row(own, Palette()).cells[i].text == "4.00× est"
    small = replace(j, outside_slowdown=1.05, slowdown_doubt=None)
    assert job_row(small, Palette()).cells[i].text == "1.00× est"
