"""A job's energy (analyse/live/energy.py): its GPUs' joules tick by tick, a shared GPU split by time
share and marked an estimate, per step, per epoch, samples per joule, and unknown (never 0 J)
where there is no GPU energy."""

from __future__ import annotations

import pytest

from gputop_dl.analyse.live.energy import EnergyLedger, once, split_shares
from gputop_dl.analyse.recorded.energy_phases import corun_energy_ratio
from gputop_dl.snapshot import GpuProcess, GpuSample, JobSample, Snapshot, evolve


def _gpu(i: int, joules: float | None, source: str = "counter") -> GpuSample:
    return GpuSample(i, energy_j=joules, energy_since=0.0 if joules is not None else None,
                     energy_source=source if joules is not None else None)


def _run(ledger: EnergyLedger, watts: dict[int, float], procs, jobs, ticks: int, t0: float = 0.0,
         status: str = "ok", sources: dict[int, str] | None = None):
    """`ticks` 1-s ticks of GPUs drawing `watts` (their joules from t0)."""
    for k in range(ticks + 1):
        t = t0 + k
        gpus = [_gpu(i, w * t, (sources or {}).get(i, "counter")) for i, w in watts.items()]
        ledger.update(t, status, gpus, procs, jobs)


def test_a_job_alone_on_its_gpu_gets_all_its_joules_and_the_per_step_figures():
    led = EnergyLedger()
    procs = [GpuProcess(0, 100, sm_util=0.9), GpuProcess(1, 101, sm_util=0.9)]
    _run(led, {0: 300.0, 1: 200.0, 2: 50.0}, procs, [("a", 100, (100, 101))], ticks=5)
    e = led.result("a", 100, step_time_s=0.2, samples_per_s=640.0, steps_per_epoch=100)
    assert e.joules == pytest.approx(5 * 500.0)  # GPUs 0 and 1, not the idle GPU 2
    assert e.power_w == pytest.approx(500.0)
    assert e.per_step_j == pytest.approx(100.0)
    assert e.per_epoch_j == pytest.approx(100.0 * 100)
    assert e.samples_per_joule == pytest.approx(640.0 / 500.0)
    assert e.estimate is False and e.source == "counter" and e.note is None


def test_epoch_energy_comes_from_the_epochs_own_times_where_known():
    led = EnergyLedger()
    _run(led, {0: 100.0}, [GpuProcess(0, 1)], [("a", 1, (1,))], ticks=3)
    e = led.result("a", 1, step_time_s=0.1, epoch_times=(30.0, 32.0, 31.0), steps_per_epoch=10)
    assert e.per_epoch_j == pytest.approx(100.0 * 31.0)


def test_a_shared_gpu_is_split_by_time_share_and_marked_an_estimate():
    led = EnergyLedger()
    # NVML's SM shares of identical time-sliced processes are lopsided (57 %/19 % measured):
    # the computing owners share the time equally; pid 9 is no job's, its third goes to no job
    procs = [GpuProcess(0, 1, sm_util=0.57), GpuProcess(0, 2, sm_util=0.19),
             GpuProcess(0, 9, sm_util=0.1)]
    _run(led, {0: 300.0}, procs, [("a", 1, (1,)), ("b", 2, (2,))], ticks=4)
    a, b = led.result("a", 1), led.result("b", 2)
    assert a.joules == pytest.approx(4 * 100.0) and b.joules == pytest.approx(4 * 100.0)
    assert a.estimate and b.estimate and a.note and b.note


def test_owners_share_equally_and_an_idle_one_gets_nothing():
    owners = {1: ("a", 1), 2: ("a", 1), 3: ("b", 3), 4: ("c", 4)}
    shares = split_shares([GpuProcess(0, 1), GpuProcess(0, 2), GpuProcess(0, 3)], owners)
    assert shares == {0: {("a", 1): 0.5, ("b", 3): 0.5}}  # SM unknown: both may compute
    shares = split_shares([GpuProcess(0, 1, sm_util=0.0), GpuProcess(0, 2, sm_util=0.4),
                           GpuProcess(0, 4, sm_util=0.0), GpuProcess(1, 4, sm_util=0.0)], owners)
    assert shares == {0: {("a", 1): 1.0, ("c", 4): 0.0}, 1: {("c", 4): 1.0}}


def test_no_gpu_box_is_unknown_with_the_reason_never_zero():
    led = EnergyLedger()
    _run(led, {}, [], [("a", 1, (1,))], ticks=3, status="no-driver")
    e = led.result("a", 1, step_time_s=0.1, samples_per_s=100.0)
    assert e.joules is None and e.per_step_j is None and e.samples_per_joule is None
    assert e.note and "no-driver" in e.note


def test_a_job_on_no_gpu_is_unknown_with_the_reason():
    led = EnergyLedger()
    _run(led, {0: 100.0}, [GpuProcess(0, 5)], [("cpu-job", 1, (1,)), ("gpu-job", 5, (5,))], ticks=2)
    e = led.result("cpu-job", 1)
    assert e.joules is None and e.note
    assert led.result("gpu-job", 5).joules == pytest.approx(200.0)


def test_gpus_without_energy_say_why():
    led = EnergyLedger()
    gpus = [GpuSample(0, energy_note="NVML gives neither the energy counter nor the power")]
    for t in range(3):
        led.update(float(t), "ok", gpus, [GpuProcess(0, 1)], [("a", 1, (1,))])
    e = led.result("a", 1)
    assert e.joules is None and "neither" in (e.note or "")


def test_mixed_sources_and_power_over_the_recent_window_only():
    led = EnergyLedger()
    procs = [GpuProcess(0, 1), GpuProcess(1, 1)]
    _run(led, {0: 100.0, 1: 100.0}, procs, [("a", 1, (1,))], ticks=30,
         sources={1: "power-integral"})
    e = led.result("a", 1)
    assert e.source == "mixed" and e.power_w == pytest.approx(200.0)
    # the GPU's draw falls: the power follows within the window, the joules keep the past
    for k in range(1, 16):
        t = 30.0 + k
        led.update(t, "ok", [_gpu(0, 3000 + 10 * k), _gpu(1, 3000 + 10 * k)], procs,
                   [("a", 1, (1,))])
    e = led.result("a", 1)
    assert e.power_w == pytest.approx(20.0)
    assert e.joules == pytest.approx(6000.0 + 15 * 20.0)


def test_a_job_that_ended_is_forgotten_and_a_new_run_starts_from_nothing():
    led = EnergyLedger()
    _run(led, {0: 100.0}, [GpuProcess(0, 1)], [("a", 1, (1,))], ticks=3)
    led.update(4.0, "ok", [_gpu(0, 400.0)], [], [])
    assert led.result("a", 1).joules is None
    _run(led, {0: 100.0}, [GpuProcess(0, 2)], [("a", 2, (2,))], ticks=2, t0=5.0)
    # each interval goes to the processes on the GPU at its end: 4 s -> 7 s
    assert led.result("a", 2).joules == pytest.approx(300.0)


def test_corun_energy_ratio():
    # alone: 1000 J for 100 samples each; together: 3000 J for 200 samples -> 1.5x
    assert corun_energy_ratio(3000.0, 200.0, [(1000.0, 100.0), (1000.0, 100.0)]) == pytest.approx(1.5)
    assert corun_energy_ratio(3000.0, 0.0, [(1000.0, 100.0)]) is None
    assert corun_energy_ratio(3000.0, 200.0, []) is None


def test_once_attributes_the_gpus_first_interval():
    gpus = (GpuSample(0, energy_j=150.0, energy_since=100.0, energy_source="counter"),)
    jobs = (JobSample("a", 7, False, pids=(7, 8), step_time_s=0.1, samples_per_s=300.0),
            JobSample("b", 9, False, pids=(9,)))
    snap = once(Snapshot(time=100.5, gpu_status="ok", gpus=gpus, jobs=jobs,
                         gpu_processes=(GpuProcess(0, 8, sm_util=0.5),)))
    a, b = snap.jobs
    assert a.energy_j == pytest.approx(150.0) and a.energy_w == pytest.approx(300.0)
    assert a.energy_per_step_j == pytest.approx(30.0) and a.samples_per_joule == pytest.approx(1.0)
    assert a.energy_estimate is False and a.energy_source == "counter"
    assert b.energy_j is None and b.energy_note
    doc = snap.to_json()  # the schema check of conftest runs here
    assert doc["jobs"][0]["energy_j"] == pytest.approx(150.0) and doc["jobs"][1]["energy_j"] is None


def test_the_monitor_gives_a_found_job_its_gpus_joules(tmp_path):
    """The engine over fake NVML (its counter grows by power x the real clock) and a found job on
    a faked /proc (a real `sleep`): the job's row carries its GPU's joules and power, the other
    GPU's joules go to no one, and its JSON keeps to the schema."""
    import subprocess
    import time

    from gputop_dl.collect.jobs.discover import Discoverer
    from gputop_dl.collect.jobs.found import FoundJobs
    from gputop_dl.collect.machine import MachineSampler
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.engine.core import Engine
    from gputop_dl.engine.monitor_plan import MonitorPlan
    from tests.fakes.nvml import FakeProcess, FakePynvml
    from tests.fakes.procs import GPU_MAPS, TORCH_MAPS, Clock, FakeProc

    fake = FakePynvml(gpus=2)
    fake.gpus[1].power_mw = 100_000
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        fp = FakeProc(str(tmp_path / "proc"))
        fp.add(10, 1, ["bash"])
        fp.add(sleeper.pid, 10, ["python", "train.py"], TORCH_MAPS + GPU_MAPS)
        fake.gpus[0].processes = [FakeProcess(pid=sleeper.pid)]
        found = FoundJobs(stall=False, discoverer=Discoverer(fp.root, own_pid=1, clock=Clock()))
        engine = Engine(MonitorPlan(), sampler=MachineSampler(Nvml(module=fake), found=found))
        t0 = time.time()
        for _ in range(4):
            engine.tick()
            time.sleep(0.25)  # the time the GPUs draw power over: what is measured
        engine.tick()
        elapsed = time.time() - t0
        snap = engine.snapshot
        assert snap is not None
        job = next(j for j in snap.jobs if j.pid == sleeper.pid)
        gpu0 = snap.gpus[0]
        assert gpu0.energy_source == "counter" and gpu0.energy_j is not None
        assert job.energy_j == pytest.approx(gpu0.energy_j, rel=1e-6)  # alone on GPU 0: all of it
        assert 0.5 * 300 * elapsed < job.energy_j <= 300 * elapsed * 1.05
        assert job.energy_w == pytest.approx(300.0, rel=0.2)
        assert job.energy_estimate is False and job.energy_source == "counter"
        doc = snap.to_json()
        assert doc["jobs"][0]["energy_j"] == pytest.approx(job.energy_j)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_phase_means_make_the_verdict_s_energy_evidence():
    from gputop_dl.analyse.recorded.energy_phases import energy_evidence
    from gputop_dl.analyse.verdict_types import Verdict

    led = EnergyLedger()
    for name in ("a", "b"):
        for phase, spj in (("baseline", 2.0), ("co-run", 1.0)):
            led.note_phase(JobSample(name, 1, True, phase=phase, step_time_s=None,
                                     samples_per_joule=9.0))  # warm-up: not counted
            for _ in range(3):
                led.note_phase(JobSample(name, 1, True, phase=phase, step_time_s=0.1,
                                         samples_per_joule=spj, energy_estimate=phase == "co-run"))
    v = Verdict(kind="parallel", reason="r", confidence=1.0)
    got = energy_evidence(v, led.phases(), ["a", "b"])
    assert got.evidence["energy_per_sample_ratio"] == pytest.approx(2.0)
    assert len(got.evidence_lines) == 1 and "2.00×" in got.evidence_lines[0]
    assert energy_evidence(v, led.phases(), ["a", "b", "c"]) is v  # c has none: no figure


@pytest.mark.shares_box("the energy ratio against the same run's own steps; 3 of 3 passed "
                        "beside two busy loops")
def test_a_launch_with_baselines_has_the_energy_evidence_real_launch(tmp_path):
    """Two tiny trainers, each measured alone then together, put on fake GPU 0 (its counter
    grows by 300 W x the real clock) once they run: the verdict's evidence has the co-run's
    energy per sample against alone."""
    import time

    from gputop_dl.collect.machine import MachineSampler
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.engine import Engine, LaunchPlan, Recorder
    from gputop_dl.runner import open_spec
    from tests.fakes.nvml import FakeProcess, FakePynvml

    wl = tmp_path / "two.toml"
    job = ('[[workload]]\nname = "{}"\nmodel = "synthetic"\ninput_size = 4\nnum_classes = 2\n'
           'batch_size = 2\nnum_workers = 0\nstep_device_ms = 20.0\nepochs = 1\n'
           'steps_per_epoch = 60\nwarmup_steps = 2\n')
    wl.write_text('[session]\nname = "two"\ninterval = 0.2\nbaseline = "measure"\n'
                  'baseline_steps = 25\n' + job.format("a") + job.format("b"))
    fake = FakePynvml(gpus=1)
    nvml = Nvml(module=fake)
    spec = open_spec(str(wl), nvml)
    engine = Engine(LaunchPlan(spec, "test"), sampler=MachineSampler(nvml, found=None),
                    recorder=Recorder(str(tmp_path / "s.db")), interval=spec.interval)
    try:
        engine.start()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and engine.running:
            pids = {r.proc.pid for r in engine.runs.values() if r.alive and r.proc.pid}
            fake.gpus[0].processes = [FakeProcess(pid=p) for p in sorted(pids)]
            time.sleep(0.05)
        assert engine.join(60), "the launch did not end"
    finally:
        engine.request_stop()
        engine.join(30)
    v = engine.verdict
    assert v is not None, "no verdict"
    ratio = v["evidence"].get("energy_per_sample_ratio")
    assert ratio is not None, v["evidence"]
    assert any(line.startswith("energy per sample") for line in v["evidence_lines"])
    # ground truth: 300 W alone, 150 W each together (the GPU's time split in two), over each
    # job's own recorded samples per second in each phase
    from gputop_dl.record.store import Store

    store = Store(str(tmp_path / "s.db"), readonly=True)
    try:
        def per_sample(name: str, phase: str, watts: float) -> float:
            rows = store.step_rows(engine.session_id, name, phase, offset=2)
            return watts * sum(r[1] for r in rows) / sum(r[3] for r in rows)

        alone = [per_sample(n, "baseline", 300.0) for n in ("a", "b")]
        together = [per_sample(n, "co-run", 150.0) for n in ("a", "b")]
    finally:
        store.close()
    assert ratio == pytest.approx(sum(together) / sum(alone), rel=0.05)


def _meter(fake, t: list[float]):
    """An Nvml over `fake` whose clock is `t[0]` (the counter grows by power x that clock)."""
    from gputop_dl.collect.nvml.gpus import Nvml

    fake.clock = lambda: t[0]
    return Nvml(module=fake)


def test_a_tick_shorter_than_the_counter_s_update_period_is_neither_0_j_nor_a_spike():
    """A launch's phase switch adds a tick 40 ms after the last: NVML's counter (one new value
    per 100 ms) has not moved. The job that appears there has no joules yet (not 0 J, not
    0 W); the next tick's difference covers from the last moving read, so its power is the
    GPU's 300 W and its joules the GPU's over the seconds it was there."""
    from tests.fakes.nvml import FakeProcess, FakePynvml

    fake = FakePynvml(gpus=1)
    t = [1000.0]
    nv = _meter(fake, t)
    led = EnergyLedger()
    rows = {}
    for now, pids in ((1000.0, []), (1001.0, [1]), (1002.0, [1]), (1002.04, [2]),
                      (1003.0, [2]), (1004.0, [2]), (1005.0, [2])):
        t[0] = now
        fake.gpus[0].processes = [FakeProcess(pid=p) for p in pids]
        led.update(now, nv.status, nv.sample(), nv.processes(), [("a", 1, (1,)), ("b", 2, (2,))])
        rows[now] = (led.result("a", 1, step_time_s=0.1), led.result("b", 2, step_time_s=0.1))
    nv.close()
    b_first = rows[1002.04][1]
    assert b_first.joules is None and b_first.power_w is None and b_first.note
    assert rows[1002.04][0].joules == pytest.approx(600.0, rel=1e-3)  # a: its 2 s, kept
    for now in (1003.0, 1004.0, 1005.0):
        b = rows[now][1]
        assert b.power_w == pytest.approx(300.0, rel=0.01)
        assert b.joules == pytest.approx(300.0 * (now - 1002.0), rel=1e-3)
        assert b.per_step_j == pytest.approx(30.0, rel=0.01)


def test_a_job_off_its_gpu_keeps_the_power_of_its_seconds_there():
    """A job's last rows after its process left the GPU (it ended; the row is kept a tick or
    two): its power, J/step and samples/J stay those of its time on the GPU, not diluted
    by seconds it was not there."""
    led = EnergyLedger()
    _run(led, {0: 300.0}, [GpuProcess(0, 1)], [("a", 1, (1,))], ticks=6)
    for k in range(1, 4):
        led.update(6.0 + k, "ok", [_gpu(0, 300.0 * (6 + k))], [], [("a", 1, (1,))])
    e = led.result("a", 1, step_time_s=0.05, samples_per_s=640.0)
    assert e.joules == pytest.approx(1800.0)
    assert e.power_w == pytest.approx(300.0)
    assert e.per_step_j == pytest.approx(15.0)
    assert e.samples_per_joule == pytest.approx(640.0 / 300.0)


def test_joules_per_step_are_the_gpu_s_joules_over_the_steps_slow_ones_included():
    """Ground truth: a job alone on a 300 W GPU takes 53 steps, every fifth one ten times
    longer (a loader refill); the GPU's joules over those steps / the steps after warm-up is
    its J/step. Its median step would make it about a third of that."""
    from gputop_dl.analyse.live.energy import with_energy
    from gputop_dl.analyse.stats.jobstats import step_stats

    steps = [{"t_step": 0.4 if k % 5 == 4 else 0.04, "t_data": 0.0, "samples": 32}
             for k in range(53)]
    st = step_stats(steps, warmup=3)
    counted = steps[3:]
    seconds = sum(s["t_step"] for s in counted)
    led = EnergyLedger()
    ticks = int(seconds) + 1
    for k in range(ticks + 1):  # the GPU's counter over the steps' seconds, 300 W
        t = seconds * k / ticks
        led.update(t, "ok", [_gpu(0, 300.0 * t)], [GpuProcess(0, 1)], [("a", 1, (1,))])
    row = with_energy(led, JobSample("a", 1, True, pids=(1,), step_time_s=st.step_time_s,
                                     mean_step_time_s=st.mean_step_s,
                                     samples_per_s=st.samples_per_s))
    truth_j_per_step = 300.0 * seconds / len(counted)
    assert row.energy_j == pytest.approx(300.0 * seconds)
    assert row.energy_per_step_j == pytest.approx(truth_j_per_step, rel=1e-6)
    assert row.samples_per_joule == pytest.approx(32 * len(counted) / (300.0 * seconds))
    assert st.step_time_s is not None and 300.0 * st.step_time_s < 0.5 * truth_j_per_step


def test_a_job_on_a_grace_module_says_its_joules_include_the_cpu():
    """NVML's power of a GH200 is the module's (CPU and memory too): the job's figure says so,
    on its own and beside the estimate's note."""
    led = EnergyLedger()
    gpu = GpuSample(0, energy_j=0.0, energy_since=0.0, energy_source="counter",
                    energy_scope="module")
    for t in range(1, 4):
        led.update(float(t), "ok", [evolve(gpu, energy_j=500.0 * t)], [GpuProcess(0, 1)],
                   [("a", 1, (1,))])
    alone = led.result("a", 1)
    assert alone.joules == pytest.approx(1500.0) and alone.estimate is False
    assert alone.note is not None and "module" in alone.note
    on_gpu = EnergyLedger()
    _run(on_gpu, {0: 500.0}, [GpuProcess(0, 1)], [("a", 1, (1,))], ticks=3)
    assert on_gpu.result("a", 1).note is None  # a GPU's own power: nothing to say
