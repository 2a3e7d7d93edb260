"""Unit tests of the live (passive) verdict: each job's slowdown estimated from its CPU and GPU
waits, smoothed over a few ticks, on hand-made samples (no process, no clock)."""

from dataclasses import replace

import pytest

from gputop_dl.analyse.live import job_estimate as E
from gputop_dl.analyse.live import passive as P
from gputop_dl.analyse.live.cpu_wait_model import cpu_speedup
from gputop_dl.analyse.live.gpu_share import gpu_estimates
from gputop_dl.analyse.live.passive import PassiveJudge, judge_passive
from gputop_dl.present.verdict_text import job_line
from gputop_dl.snapshot import GpuProcess, GpuSample, HostSample, JobSample, ProcLoad

TWO = HostSample(cpus=2, cpu_busy=1.0, cpu_pressure_some10=0.9)  # load unknown: all to the jobs
CALM = HostSample(cpus=2, cpu_busy=0.2, cpu_pressure_some10=0.0, load1=0.3)


def job(name, pid, f=0.0, cores=0.6, **kw):
    return JobSample(name=name, pid=pid, launched=False, pids=(pid, pid + 1), cpu_cores=cores,
                     cpu_wait_fraction=f, **kw)


def run(judge, ticks, jobs_at, host=TWO, **kw):
    v = est = None
    for t in range(ticks):
        v, est = judge.verdict(jobs_at(t), host, t=float(t), **kw)
    return v, est


def test_demand_over_use_capped_by_the_cores_allowed():
    assert cpu_speedup(0.56, 0.014, 2) == pytest.approx(1.018, abs=0.001)  # sleeps: waits little
    assert cpu_speedup(0.0, 1.0, 2) == 1.0
    assert cpu_speedup(0.96, 0.0, 2) == 1.0  # used no CPU to speak of: lost no time waiting
    assert cpu_speedup(0.5, 0.5, 2) == pytest.approx(2.0)  # one thread, always runnable
    assert cpu_speedup(0.8, 0.6, 2) == pytest.approx(2 / 0.6)  # wants 3 cores: 2 allowed
    assert cpu_speedup(0.9, 1.5, 2) == pytest.approx(2 / 1.5)  # alone it still has only 2
    assert cpu_speedup(None, 1.0, 2) is None


def test_heavy_trio_reads_cpu_bound_with_each_estimate_from_its_wait():
    # three jobs, each ~1.8 cores alone, on 2 cores: each got 0.66, waited two thirds
    jobs = [job(n, 100 * i, f=0.66, cores=0.66, cpu_wait_workers=0.7, cpu_wait_trainer=0.4)
            for i, n in enumerate("abc", 1)]
    v, est = run(PassiveJudge(), 3, lambda t: jobs)
    assert v.kind == "cpu-bound"
    for e in est.values():
        demand = 0.66 / 0.34  # ~2 threads runnable 97 % of the time, waiting 66 % of that
        assert e.slowdown == pytest.approx(1 / (1 - 0.66 * demand / 2), rel=0.01)
        assert e.cause == "cpu"
        assert e.confidence > 0.8
    data = v.to_json()
    assert [j["slowdown_source"] for j in data["jobs"]] == ["estimated"] * 3
    assert "waits for a CPU" in v.reason and "nothing paused" in v.reason
    assert "estimated slowdown 2.78×" in job_line(data["jobs"][0])


def test_waits_caused_by_load_from_outside_the_jobs_are_not_theirs():
    # the pair waits 60 % of its runnable time, but the box runs 9 more runnable threads than
    # the pair wants: alone, each would still wait for those
    pair = [job("a", 10, f=0.6, cores=0.2), job("b", 20, f=0.6, cores=0.2)]
    busy_box = replace(TWO, load1=10.0)
    v, est = run(PassiveJudge(), 3, lambda t: pair, host=busy_box)
    # not theirs, and not "truly parallel" either: the load outside slows them
    assert v.kind == "outside-load", v.reason
    assert max(e.slowdown for e in est.values()) <= 1.10
    assert all(e.outside > 1.10 for e in est.values())
    assert P.set_share(0.5, 1.0, 10.0) == pytest.approx(0.5 / 9.5)
    # the same waits on a box that runs only the jobs: theirs
    own = replace(TWO, load1=1.0)
    v, est = run(PassiveJudge(), 3, lambda t: pair, host=own)
    assert v.kind == "cpu-bound" and est["a"].last.set_share == 1.0
    # one job alone on a loaded box: nothing beside it to blame
    assert E.set_share(0.5, 0.5, 4.0) == 0.0 and E.set_share(0.5, 0.5, None) == 1.0


def test_the_runnable_threads_replace_the_lagging_load_average_once_known():
    pair = [job("a", 10, f=0.6, cores=0.2), job("b", 20, f=0.6, cores=0.2)]
    # outside load that just started: 9 more threads runnable now, the load average still low
    started = replace(TWO, load1=1.0, runnable=10)
    judge = PassiveJudge()
    v, est = run(judge, P.RUNNABLE_MIN - 1, lambda t: pair, host=started)
    assert v.kind == "cpu-bound" and judge.runnable() is None  # too few readings: load1
    v, est = run(judge, 1, lambda t: pair, host=started)
    assert judge.runnable() == 10 and est["a"].last.set_share < 0.1
    # each job's estimate is the median of its last WINDOW ticks: it turns within a few ticks,
    # where the load average would take a minute
    v, est = run(judge, P.WINDOW // 2, lambda t: pair, host=started)
    assert v.kind == "outside-load", v.reason
    assert v.evidence["runnable_mean"] == 10
    outside = [x for x in v.to_json()["evidence_lines"] if x.startswith("load from outside")]
    assert outside and "(host: 10.0 threads runnable, mean of the last 5 readings)" in outside[0]
    # outside load that just stopped: the load average still high, only the pair runnable
    stopped = replace(TWO, load1=10.0, runnable=1)
    v, est = run(PassiveJudge(), P.RUNNABLE_MIN + P.WINDOW, lambda t: pair, host=stopped)
    assert v.kind == "cpu-bound" and est["a"].last.set_share == 1.0
    # the mean is over the last RUNNABLE_WINDOW readings
    judge = PassiveJudge()
    run(judge, P.RUNNABLE_WINDOW, lambda t: pair, host=started)
    run(judge, P.RUNNABLE_WINDOW // 2, lambda t: pair, host=stopped)
    assert judge.runnable() == pytest.approx((10 + 1) / 2)


def test_procs_running_is_read_from_proc_stat():
    from gputop_dl.collect.proc.host import parse_procs_running

    stat = (b"cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 5 0\nctxt 9\n"
            b"btime 1\nprocesses 77\nprocs_running 3\nprocs_blocked 0\n")
    assert parse_procs_running(stat) == 3
    assert parse_procs_running(b"cpu  1 2 3\nprocesses 7\n") is None


def test_light_pair_reads_parallel():
    jobs = [job("a", 10, f=0.02, cores=0.05), job("b", 20, f=0.03, cores=0.05)]
    v, est = run(PassiveJudge(), 3, lambda t: jobs, host=CALM)
    assert v.kind == "parallel" and max(e.slowdown for e in est.values()) <= 1.10
    assert v.confidence > 0.5


def test_one_noisy_tick_does_not_flip_the_verdict():
    calm = [job("a", 10, f=0.02), job("b", 20, f=0.02)]
    spike = [job("a", 10, f=0.6), job("b", 20, f=0.6)]
    judge = PassiveJudge()
    v, _ = run(judge, 3, lambda t: calm, host=CALM)
    assert v.kind == "parallel"
    v, _ = judge.verdict(spike, TWO)
    assert v.kind == "parallel"  # median of 4 ticks: still calm
    v, _ = judge.verdict(spike, TWO)
    v, _ = judge.verdict(spike, TWO)
    assert v.kind == "cpu-bound"  # a lasting change is followed within the window


def test_first_reading_waits_for_the_second():
    judge = PassiveJudge()
    v, est = judge.verdict([job("a", 10, f=None), job("b", 20, f=None)], TWO)
    assert v.kind == "insufficient-data" and "readings" in v.reason
    v, est = judge.verdict([job("a", 10, f=0.5), job("b", 20, f=0.5)], TWO)
    assert v.kind == "insufficient-data"  # one known tick of MIN_TICKS
    v, est = judge.verdict([job("a", 10, f=0.5), job("b", 20, f=0.5)], TWO)
    assert v.kind == "cpu-bound"


def test_unknown_cpu_wait_abstains_and_falls_back_to_the_signals():
    note = "CPU wait: not available (kernel: no /proc/PID/task/TID/schedstat)"
    jobs = [job("a", 10, f=None, cpu_wait_note=note), job("b", 20, f=None, cpu_wait_note=note)]
    v, est = run(PassiveJudge(), 3, lambda t: jobs)
    assert v.kind == "no-baseline" and "judged on signals alone" in v.reason
    assert "not available (kernel" in v.reason
    assert all(e.slowdown is None and "kernel" in e.why for e in est.values())
    line = job_line(v.to_json()["jobs"][0])
    assert "slowdown –" in line and "kernel" in line


def test_one_job_unknown_the_others_judged():
    jobs = [job("a", 10, f=0.6), job("b", 20, f=None, cpu_wait_note="CPU wait: not available "
                                   "(another user's process)")]
    v, est = run(PassiveJudge(), 3, lambda t: jobs)
    assert v.kind == "cpu-bound" and est["b"].slowdown is None
    assert any("not estimated: b" in x for x in v.evidence_lines)


def test_gpu_job_whose_loader_keeps_up_is_not_slowed_by_its_waiting_workers():
    gp = (GpuProcess(gpu_index=0, pid=10, sm_util=0.5), GpuProcess(gpu_index=1, pid=20, sm_util=0.5))
    jobs = [job("a", 10, f=0.5, cpu_wait_workers=0.6, stall_fraction=0.01),
            job("b", 20, f=0.5, cpu_wait_workers=0.6, stall_fraction=0.30)]
    v, est = run(PassiveJudge(), 3, lambda t: jobs, gprocs=gp)
    assert est["a"].slowdown == 1.0  # data arrives in time: the workers' wait is off its path
    assert est["b"].slowdown == pytest.approx(1 / 0.7, rel=0.01)  # at most its data wait
    assert v.kind == "cpu-bound"


def test_jobs_sharing_a_busy_gpu_read_gpu_contended():
    gp = (GpuProcess(gpu_index=0, pid=10, sm_util=0.5), GpuProcess(gpu_index=0, pid=20, sm_util=0.48))
    gpus = (GpuSample(index=0, util=0.99),)
    jobs = [job("a", 10, f=0.01, cores=0.3), job("b", 20, f=0.02, cores=0.3)]
    v, est = run(PassiveJudge(), 3, lambda t: jobs, host=CALM, gprocs=gp, gpus=gpus)
    assert v.kind == "gpu-contended"
    assert est["a"].cause == "gpu" and est["a"].slowdown == pytest.approx(0.99 / 0.5, rel=0.01)
    assert "share a busy GPU" in v.reason


def test_a_shared_gpu_that_is_not_busy_is_no_contention():
    shares = {"a": {0: 0.3}, "b": {0: 0.3}}
    assert gpu_estimates(shares) == {}
    assert gpu_estimates(shares, (GpuSample(index=0, util=0.95),))["a"][0] > 1.1
    assert gpu_estimates({"a": {0: 0.9}, "b": {1: 0.9}}) == {}  # separate GPUs


def test_jobs_gone_are_forgotten():
    judge = PassiveJudge()
    run(judge, 3, lambda t: [job("a", 10, f=0.5), job("b", 20, f=0.5)])
    v, est = judge.verdict([job("a", 10, f=0.5)], TWO)
    assert set(est) == {"a"} and len(judge._hist) == 1
    v, est = judge.verdict([], TWO)
    assert v is None


def test_confidence_grows_with_steady_ticks_and_falls_near_the_line():
    judge = PassiveJudge(min_ticks=1)
    few = judge.verdict([job("a", 10, f=0.5)], TWO)[1]["a"].confidence
    many = run(judge, 4, lambda t: [job("a", 10, f=0.5)])[1]["a"].confidence
    assert many > few
    f = [0.07, 0.11]  # one thread always runnable: 1.075x and 1.124x, either side of 1.10
    near = run(PassiveJudge(), 5, lambda t: [job("a", 10, f=f[t % 2], cores=1 - f[t % 2])])[1]["a"]
    assert near.confidence < 0.6


def test_verdict_json_keeps_the_contract_keys():
    v, _ = run(PassiveJudge(), 3, lambda t: [job("a", 10, f=0.5), job("b", 20, f=0.5)])
    data = v.to_json()
    assert list(data) == ["kind", "title", "reason", "confidence", "evidence", "evidence_lines",
                          "recommendations", "jobs", "fixes"]  # fixes: added, last
    assert data["title"] == "concurrent: CPU-bound"
    assert data["evidence"]["estimated_slowdowns"] == {"a": 2.0, "b": 2.0}
    j = data["jobs"][0]
    assert (j["slowdown"], j["slowdown_source"], j["cpu_wait"]) == (2.0, "estimated", 0.5)


def test_judge_passive_of_no_estimates_is_pure():
    e = E.smooth([E.Tick(t=0, cpu=None, gpu=None, cpu_wait=None, critical_wait=None,
                         gpu_wait=None, cpu_cores=None, on_cpu=True, stall_known=False,
                         note="CPU wait: not available (kernel)")], "a")
    assert judge_passive([e], CALM).kind == "no-baseline"
    assert judge_passive([e], CALM) == judge_passive([replace(e)], CALM)


def test_nvml_per_process_samples_of_the_fake_gpu_read_gpu_contended():
    # two jobs' processes on fake GPU 0, each with NVML per-process SM samples of ~50 %
    from gputop_dl.collect.nvml.gpus import Nvml

    from tests.fakes.nvml import FakeGpu, FakeProcess, FakePynvml

    gpu = FakeGpu(util=99, processes=[FakeProcess(10), FakeProcess(20)])
    fake = FakePynvml([gpu, FakeGpu()])
    nvml = Nvml(module=fake)
    judge = PassiveJudge()
    jobs = [job("a", 10, f=0.02, cores=0.3), job("b", 20, f=0.02, cores=0.3)]
    for _ in range(3):
        gpu.add_util_sample(10, 50)
        gpu.add_util_sample(20, 48)
        v, est = judge.verdict(jobs, CALM, nvml.processes(), nvml.sample())
    nvml.close()
    assert v.kind == "gpu-contended", v.reason
    assert est["a"].slowdown > 1.5 and est["a"].cause == "gpu"
    assert fake.calls["nvmlDeviceGetProcessUtilization"] >= 3


def test_serve_exports_each_jobs_slowdown_with_its_source():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gputop_dl.present.prometheus import SnapshotCollector
    from gputop_dl.snapshot import Snapshot

    jobs = (replace(job("a", 10), slowdown=2.5, slowdown_source="estimated",
                    slowdown_confidence=0.8),
            replace(job("b", 20), launched=True, slowdown=1.4, slowdown_source="measured"),
            job("c", 30), replace(job("d", 40), slowdown_at_least=35.6, slowdown_source="own pace",
                                  slowdown_method="py-spy steps"))
    c = SnapshotCollector(hostname="n")
    c.feed(Snapshot(time=1.0, gpu_status="ok", host=TWO, jobs=jobs,
                    verdict={"kind": "cpu-bound", "confidence": 0.8}))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(c)
    got = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            got.setdefault(s.name, []).append((s.labels, s.value))
    by = {(lab["job_name"], lab["source"]): v for lab, v in got["gputop_dl_job_slowdown_by_source"]}
    assert by == {("a", "estimated"): 2.5, ("b", "measured"): 1.4}
    assert [(lab["job_name"], v) for lab, v in got["gputop_dl_job_slowdown_confidence"]] == [("a", 0.8)]
    assert [(lab["job_name"], lab["source"], v) for lab, v in got["gputop_dl_job_slowdown_at_least"]
            ] == [("d", "own pace", 35.6)]  # a bound, not a slowdown: not in the one above
    kinds = {lab["kind"]: v for lab, v in got["gputop_dl_verdict"]}
    assert kinds["cpu-bound"] == 1.0


def test_once_judges_one_snapshot_from_its_one_reading():
    from gputop_dl.snapshot import Snapshot

    snap = Snapshot(time=1.0, gpu_status="no-driver", host=TWO,
                    jobs=(job("a", 10, f=0.6), job("b", 20, f=0.6)))
    out = P.once(snap)
    assert out.verdict["kind"] == "cpu-bound"
    assert [j.slowdown_source for j in out.jobs] == ["estimated", "estimated"]
    data = out.to_json()
    assert data["jobs"][0]["slowdown_source"] == "estimated" and data["jobs"][0]["slowdown"] > 1.1
    empty = P.once(Snapshot(time=1.0, gpu_status="no-driver", host=TWO))
    assert empty.verdict is None


def launch_pair():
    """A launch plan of two co-run jobs on the 2-core host, both waiting for a CPU: (plan,
    engine, their rows)."""
    from types import SimpleNamespace

    from gputop_dl.engine.launch_plan import LaunchPlan
    from gputop_dl.workload import SessionSpec, Workload

    spec = SessionSpec(name="pair", path="pair.toml", baseline="measure",
                       workloads=(Workload(name="a"), Workload(name="b")))
    plan = LaunchPlan(spec)
    engine = SimpleNamespace(runs={"a": None, "b": None})
    plan._machine = SimpleNamespace(host=TWO, gpu_processes=(), gpus=(), time=1.0)
    launched = [replace(job("a", 10, f=0.6), launched=True, phase="co-run"),
                replace(job("b", 20, f=0.6), launched=True, phase="co-run")]
    return plan, engine, launched


def test_a_launch_shows_the_estimate_until_the_measured_slowdown_replaces_it():
    plan, engine, launched = launch_pair()
    first = plan.rows(engine, launched)
    assert [j.slowdown for j in first] == [None, None]  # one reading: not yet
    second = plan.rows(engine, launched)  # the first co-run ticks: the estimate
    assert [j.slowdown_source for j in second] == ["estimated", "estimated"]
    plan.verdict = {"jobs": [{"name": "a", "slowdown": 1.5}, {"name": "b", "slowdown": None}]}
    third = plan.rows(engine, launched)
    assert (third[0].slowdown, third[0].slowdown_source) == (1.5, "measured")
    assert third[1].slowdown_source == "estimated"  # one slowdown per job, with its source


def test_a_launch_banner_shows_the_live_verdict_until_the_measured_one_has_its_steps():
    plan, engine, launched = launch_pair()
    plan.verdict = {"kind": "insufficient-data", "jobs": []}
    for _ in range(2):
        plan.rows(engine, launched)
    live = plan.shown_verdict()
    assert live is not None and live["kind"] == "cpu-bound"
    assert str(live["evidence"]["method"]).startswith("passive")  # the banner says "live estimate"
    assert plan.verdict["kind"] == "insufficient-data"  # what is recorded stays the measured one
    plan.verdict = {"kind": "parallel", "jobs": []}  # measured, with its steps: it wins
    assert plan.shown_verdict()["kind"] == "parallel"
    plan.verdict = {"kind": "insufficient-data", "jobs": []}
    plan.rows(engine, [replace(j, status="done") for j in launched])  # none runs together now
    assert plan.shown_verdict()["kind"] == "insufficient-data"


def test_float_pstdev_agrees_with_the_exact_one():
    import random
    import statistics

    from gputop_dl.analyse.live.job_estimate import _pstdev

    rng = random.Random(7)
    for n in (2, 3, 10, 60):
        xs = [rng.lognormvariate(0, 0.5) for _ in range(n)]
        assert _pstdev(xs) == pytest.approx(statistics.pstdev(xs), rel=1e-12)
    assert _pstdev([1.5, 1.5, 1.5]) == 0.0


def test_evolve_copies_a_snapshot_as_replace_does_and_refuses_unknown_fields():
    """snapshot.evolve, the per-tick copy of a JobSample that annotate() makes."""
    import dataclasses

    import pytest

    from gputop_dl.snapshot import evolve

    j = JobSample(name="a", pid=1, launched=False, pids=(1, 2), status="running", cpu_cores=1.5)
    e = evolve(j, slowdown=1.4, slowdown_source="estimated")
    assert e == dataclasses.replace(j, slowdown=1.4, slowdown_source="estimated")
    assert j.slowdown is None and e is not j  # the original is untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.slowdown = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field slowdwn"):
        evolve(j, slowdwn=1.4)


def test_one_job_alone_is_not_called_parallel():
    """A single script started by hand read `TRULY PARALLEL — no job waits for a
    CPU or a shared GPU`. With one job the verdict says it runs alone, its own waits, and what a
    second job like it would meet on this box's cores."""
    light = job("a.py", 10, f=0.05, cores=0.6, stall_fraction=0.28)
    v, _ = run(PassiveJudge(), 3, lambda t: [light], host=CALM)
    assert v.kind == "alone" and v.title == "one job, alone"
    assert "runs alone" in v.reason and "no job waits" not in v.reason and "truly" not in v.reason
    assert "CPU wait 5%" in v.reason and "data wait 28%" in v.reason and "disk wait –" in v.reason
    assert v.evidence["second_job_fits"] is True
    assert v.evidence["cpu_demand_cores"] == pytest.approx(0.6 / 0.95, abs=0.01)
    assert "fits beside it" in v.recommendations[0]
    heavy = job("b.py", 20, f=0.1, cores=1.8)  # wants 2 of the 2 cores: a second would wait
    v, _ = run(PassiveJudge(), 3, lambda t: [heavy], host=CALM)
    assert v.kind == "alone" and v.evidence["second_job_fits"] is False
    assert "would make them wait for a CPU" in v.recommendations[0]
    # --once --json: the same verdict object (the contract's kinds: one added)
    from gputop_dl.snapshot import Snapshot

    data = P.once(Snapshot(time=1.0, gpu_status="no-driver", host=CALM, jobs=(light,))).to_json()
    assert data["verdict"]["kind"] == "alone" and data["verdict"]["evidence"]["alone"] == "a.py"
    # two jobs: judged as a set again
    v, _ = run(PassiveJudge(), 3, lambda t: [light, replace(light, name="c.py", pid=30)], host=CALM)
    assert v.kind == "parallel"


def test_one_launched_job_is_alone_in_the_measured_verdict_too():
    from gputop_dl.analyse.verdict import judge
    from gputop_dl.analyse.verdict_evidence import HostEvidence, JobEvidence

    j = JobEvidence(name="bs32", device="cpu", gpus=(), steps=40, step_time_s=0.1, stall=0.1,
                    cpu_cores=0.8, solo_step_time_s=0.1, solo_stall=0.1)
    v = judge([j], HostEvidence(cpus=2))
    assert v.kind == "alone" and "runs alone" in v.reason
    assert v.evidence["cpu_demand_cores"] == 0.8 and v.evidence["second_job_fits"] is None
    assert "may fit beside it" in v.reason and "may fit beside it" in v.recommendations[0]


def test_an_intra_op_pool_waits_on_its_slowest_thread_and_its_spin_is_said():
    """Two CPU jobs of two OpenMP threads each on 2 cores (dcgan pair): each thread
    runnable all the time (it spins while its peer waits), waiting half of it. The mean thread
    says 2×; the pool moves only while both threads run, so the estimate is the product of the
    threads' rates (4×, not capped at cpus / cores: spin is CPU time without work), and the
    evidence says the threads spin."""
    from gputop_dl.analyse.live.cpu_wait_model import pool_speedup, spins

    pool = ((0.5, 1.0), (0.5, 0.98))
    assert pool_speedup(pool) == pytest.approx(1 / (0.5 * 0.51))
    assert pool_speedup(((0.5, 1.0),)) is None and pool_speedup(()) is None  # one thread: none
    assert pool_speedup(((0.5, 1.0), (0.5, 0.3))) == pytest.approx(2 / 0.85)  # one sleeps often
    assert pool_speedup(((0.99, 1.0), (0.99, 1.0))) == pytest.approx(20)  # clipped
    assert spins(pool) and not spins(((0.5, 1.0), (0.5, 0.5)))
    jobs = [job(n, 100 * i, f=0.5, cores=1.0, cpu_pool=pool) for i, n in enumerate("ab", 1)]
    v, est = run(PassiveJudge(), 3, lambda t: jobs)
    assert v.kind == "cpu-bound"
    for e in est.values():
        assert e.slowdown == pytest.approx(pool_speedup(pool), rel=0.01) and e.cause == "cpu"
        assert e.last.critical_wait == pytest.approx(1 - 0.5 * 0.51, abs=0.001)
    line = next(ln for ln in v.evidence_lines if ln.startswith("a: 2 busy threads"))
    assert "they spin while they wait for each other" in line and "3.92×" in line
    # the same jobs without a pool (one busy thread each): the mean thread's 2×, no such line
    v, est = run(PassiveJudge(), 3, lambda t: [replace(j, cpu_pool=((0.5, 1.0),)) for j in jobs])
    assert est["a"].slowdown == pytest.approx(2.0) and not any("busy threads" in ln
                                                               for ln in v.evidence_lines)


def test_spinning_pools_get_the_wait_policy_fix_and_sleeping_ones_do_not():
    """How a pool's threads leave their CPU tells a pool that spins at its barrier (2.2-3.8 ms
    a slice, 0.8-11 % of its switches voluntary; 1.6 ms with 36 % voluntary, libgomp's
    default beside a busy loop) from one that sleeps (OMP_WAIT_POLICY=PASSIVE: 0.07-1.21 ms a
    slice, 25-98 % voluntary), where runnable shares cannot (a sleeping pool on a busy box was runnable
    87-94 %). Spinning pools beside each other get the fix first, named; the evidence says
    their true cost can be several times the estimate. A pool wider than the cores it gets
    gets fewer threads instead (the next test)."""
    from gputop_dl.analyse.live.cpu_wait_model import spins

    pool = ((0.5, 1.0), (0.5, 0.98))
    assert spins(pool, 1.6, 0.36) and not spins(pool, 0.09, 0.35)  # a long slice: it spins
    assert spins(pool, 0.9, 0.05) and spins(pool, None, 0.05)  # few of its switches its own
    assert not spins(pool, None, 0.5) and not spins(pool, 1.1, 0.42)  # neither sign
    assert spins(pool) and not spins(((0.5, 1.0), (0.5, 0.5)))  # else runnable shares
    assert not spins(((0.5, 1.0),), 3.0, 0.0)  # one thread is no pool
    fits = ((0.35, 1.0), (0.0, 1.0))  # its threads wait 17 % (mean): not wider than its cores
    jobs = [job(n, 100 * i, f=0.3, cores=1.0, cpu_pool=fits, cpu_pool_slice_ms=3.1,
                cpu_pool_yields=0.03) for i, n in enumerate("ab", 1)]
    v, _ = run(PassiveJudge(), 3, lambda t: jobs)
    assert v.kind == "cpu-bound"
    assert v.fixes[0].kind == "spinning-pools" and v.fixes[0].jobs == ("a", "b")
    assert "OMP_WAIT_POLICY=PASSIVE" in v.fixes[0].text
    line = next(ln for ln in v.evidence_lines if ln.startswith("a: 2 busy threads"))
    assert ("on a CPU 3.10 ms per time slice, 3% of their switches their own: they spin"
            in line and "several times" in line)
    # the same waits, short slices: a sleeping pool (still cpu-bound), no spin, no such fix
    v, _ = run(PassiveJudge(), 3, lambda t: [replace(j, cpu_pool_slice_ms=0.9,
                                                     cpu_pool_yields=0.5) for j in jobs])
    assert v.kind == "cpu-bound"
    assert not any("OMP_WAIT_POLICY" in r for r in v.recommendations)
    line = next(ln for ln in v.evidence_lines if ln.startswith("a: 2 busy threads"))
    assert "0.90 ms per time slice, 50% of their switches their own" in line
    assert "spin" not in line
    # one job's pool spins, the other's sleeps: only it is named
    v, _ = run(PassiveJudge(), 3, lambda t: [jobs[0], replace(jobs[1], cpu_pool_slice_ms=0.9,
                                                              cpu_pool_yields=0.5)])
    assert v.fixes[0].kind == "spinning-pools" and v.fixes[0].jobs == ("a",)


def test_a_pool_wider_than_its_cores_gets_fewer_threads_first_whatever_slows_it():
    """A 2-thread trainer whose threads each wait half their runnable time gets ≈ 1 core: every
    operator waits for the thread off a CPU (15 steps/s beside one busy loop, 201 with one
    thread; a pair 11 each, 200 and 207 with one thread each). Its owner's fix comes first,
    with the threads it fits in, beside copies of it (cpu-bound) and beside load from outside
    the jobs alone; not for a pool that fits, nor for a job with no pool."""
    from gputop_dl.analyse.live.wide_pools import pool_width, width_fix

    wide = ((0.5, 0.99), (0.49, 0.98))
    assert pool_width(wide) == 1
    assert pool_width(((0.3, 1.0),) * 4) == 3  # 2.8 cores of 4 threads
    assert pool_width(((0.05, 1.0), (0.05, 1.0))) is None  # hardly waits
    assert pool_width(((0.5, 1.0),)) is None  # one thread is no pool
    assert "OMP_NUM_THREADS=3" in width_fix([("j", ((0.3, 1.0),) * 4)])
    both = width_fix([("a", wide), ("b", wide), ("j", ((0.3, 1.0),) * 4)])
    assert both.count("OMP_NUM_THREADS=1") == 1 and both.startswith("a, b: ")  # alike: once
    pair = [job(n, 100 * i, f=0.5, cores=1.0, cpu_pool=wide, cpu_pool_slice_ms=1.6,
                cpu_pool_yields=0.36) for i, n in enumerate("ab", 1)]
    v, _ = run(PassiveJudge(), 3, lambda t: pair)
    assert v.kind == "cpu-bound"
    assert [f.kind for f in v.fixes][:2] == ["pool-width", "cores"]  # no second, spin fix
    assert v.fixes[0].jobs == ("a", "b") and "OMP_NUM_THREADS=1" in v.fixes[0].text
    assert v.evidence["wide_pools"] == {"a": 1, "b": 1}
    # one such job beside a busy loop that is not a job: alone among the jobs, slowed from outside
    loop = ProcLoad(pid=4242, cores=0.99, user="bob", command="python3 -c 'while True: pass'")
    host = HostSample(cpus=2, cpu_busy=1.0, cpu_pressure_some10=0.3, busiest=(loop,))
    v, est = run(PassiveJudge(), 3, lambda t: pair[:1], host=host)
    assert v.kind == "alone" and est["a"].outside is not None and est["a"].outside > 1.1
    assert v.fixes[0].kind == "pool-width" and "OMP_NUM_THREADS=1" in v.recommendations[0]
    assert "several times" in v.reason  # its pool spins: the outside figure may be far off
    # a pool that fits, and no pool: no such fix
    v, _ = run(PassiveJudge(), 3, lambda t: [replace(j, cpu_pool=()) for j in pair])
    assert "pool-width" not in [f.kind for f in v.fixes] and "wide_pools" not in v.evidence


def test_a_measured_verdict_gets_the_pool_width_fix_once():
    """A launch's or the probe's measured verdict: the pools' widths are read live only, so the
    fix of the pools read wide goes first on it, with its evidence; once, and not for none."""
    from gputop_dl.analyse.live.wide_pools import width_fix, with_width_fix
    from gputop_dl.analyse.verdict_types import Fix, Verdict

    pools = [("a", ((0.5, 1.0), (0.5, 1.0)))]
    measured = Verdict.fixed([Fix("queue", ("a", "b"), "run fewer")], kind="cpu-bound",
                             reason="m", confidence=0.8)
    v = with_width_fix(measured, pools)
    assert [f.kind for f in v.fixes] == ["pool-width", "queue"]
    assert v.recommendations[0] == width_fix(pools) and v.evidence["wide_pools"] == {"a": 1}
    assert with_width_fix(v, pools) == v  # once
    assert with_width_fix(measured, []) == measured  # no pool read wide


def test_a_launch_names_the_pools_wide_over_half_its_co_run():
    """A launch's measured verdict gets the fix for the jobs whose pools were wider than their
    cores in half of their live readings or more (not only in the last one: a pair's last
    live verdict named one of two)."""
    import types

    from gputop_dl.analyse.live.wide_pools import WidePools
    from gputop_dl.analyse.verdict_types import Fix, Verdict

    wide, fits = ((0.5, 1.0), (0.5, 1.0)), ((0.05, 1.0), (0.05, 1.0))

    def e(name, pool, s=2.0):
        return types.SimpleNamespace(name=name, slowdown=s, last=types.SimpleNamespace(pool=pool))

    w = WidePools()
    for a, b in ((wide, wide), (wide, fits), (wide, fits), (fits, fits)):
        w.add([e("a", a), e("b", b), e("c", wide, s=None)])  # c never judged
    measured = Verdict.fixed([Fix("queue", ("a", "b"), "run fewer")], kind="cpu-bound",
                             reason="m", confidence=0.8)
    v = w.on(measured)
    assert v.fixes[0].kind == "pool-width" and v.fixes[0].jobs == ("a",)
    assert v.evidence["wide_pools"] == {"a": 1} and w.on(v) == v
    assert WidePools().on(measured) == measured


def test_a_pool_on_a_gpu_job_is_left_to_the_gpu_model():
    pool = ((0.5, 1.0), (0.5, 1.0))
    jobs = [job(n, 100 * i, f=0.5, cores=1.0, cpu_pool=pool, device="cuda:0", stall_fraction=0.0)
            for i, n in enumerate("ab", 1)]
    v, est = run(PassiveJudge(), 3, lambda t: jobs)
    assert all(e.last.pool_speedup is None for e in est.values())


def test_a_job_hovering_about_the_threshold_does_not_flip_the_verdict():
    """Hysteresis (audit: the header and its recorded changes flipped between
    cpu-bound and parallel every few seconds): a job taken for slowed stays so until its
    estimate falls to SLOW_STAY (1.05); one not slowed must pass SLOW (1.10) to become so."""
    from gputop_dl.analyse.thresholds import SLOW, SLOW_STAY

    assert SLOW_STAY < SLOW
    # each tick's wait is its own estimate (a window of one tick): 1.25x, 1.07x, 1.03x, 1.07x
    waits = [0.2, 0.07, 0.2, 0.07, 0.07, 0.03, 0.07, 0.2]
    kinds = ["cpu-bound", "cpu-bound", "cpu-bound", "cpu-bound", "cpu-bound", "parallel",
             "parallel", "cpu-bound"]
    judge = PassiveJudge(window=1, min_ticks=1)
    for t, (f, kind) in enumerate(zip(waits, kinds)):
        pair = [job(n, 10 * i, f=f, cores=0.9) for i, n in enumerate("ab", 1)]
        v, est = judge.verdict(pair, TWO, t=float(t))
        assert v.kind == kind, (t, f, est["a"].slowdown, v.reason)
        if kind == "cpu-bound":  # named with their waits, whichever side of SLOW
            assert "the critical path of a (waits" in v.reason
    # the same 1.07x with no verdict before it: parallel (a fresh judge, or the pure function)
    pair = [job(n, 10 * i, f=0.07, cores=0.9) for i, n in enumerate("ab", 1)]
    assert PassiveJudge(window=1, min_ticks=1).verdict(pair, TWO)[0].kind == "parallel"
    est = PassiveJudge(window=1, min_ticks=1).update(pair, TWO)
    assert judge_passive(list(est.values()), TWO).kind == "parallel"
    assert [e.name for e in P.slowed(est.values(), frozenset({"a"}))] == ["a"]  # stays
    assert judge_passive(list(est.values()), TWO,
                         slowed_names=frozenset({"a"})).kind == "cpu-bound"
