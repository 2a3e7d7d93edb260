"""Step phases: the phase clock, its torch patches, the analysis, the straggler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from gputop_dl.analyse.stats import phases as ap
from gputop_dl.injob.hook import stepclock
from gputop_dl.injob.hook.stepclock import CudaResolver, StepClock
from tests.schema_check import check

torch = pytest.importorskip("torch")


class Tick:
    """A clock that moves only when told."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


# --- the clock ------------------------------------------------------------------------------
def test_outermost_phase_wins_and_take_resets():
    t = Tick()
    sc = StepClock(clock=t)
    assert sc.enter("forward")
    t.t = 0.01
    assert not sc.enter("h2d")  # inside forward: not a phase of its own
    sc.leave("h2d")
    t.t = 0.03
    sc.leave("forward")
    sc.enter("backward")
    t.t = 0.05
    sc.leave("backward")
    sc.enter("optimizer")  # never left (an exception): dropped at the step's end
    ph, pairs = sc.take()
    assert ph == pytest.approx({"forward": 0.03, "backward": 0.02}) and pairs == []
    assert sc.take() == ({}, []) and sc.active is None


class FakeEvent:
    """A CUDA event stand-in: resolves when the test says so."""

    def __init__(self, clock):
        self.clock, self.t, self.ready = clock, None, False

    def record(self):
        self.t = self.clock()

    def query(self):
        return self.ready

    def elapsed_time(self, end):
        assert self.ready and end.ready, "elapsed_time before both events resolved"
        return (end.t - self.t) * 1000.0


def cuda_clock():
    """A manual clock, the fake events made so far, and a StepClock in CUDA mode with them."""
    t, made = Tick(), []

    def factory():
        made.append(FakeEvent(t))
        return made[-1]

    return t, made, StepClock(clock=t, event_factory=factory)


def test_cuda_steps_wait_for_their_events_and_unresolved_ones_are_dropped_and_counted():
    t, made, sc = cuda_clock()
    out = []
    now = [0.0]
    res = CudaResolver(out.append, sc, max_age_s=5.0, now=lambda: now[0])
    for i in range(2):
        sc.enter("forward")
        t.t += 0.004
        sc.leave("forward")
        ph, pairs = sc.take()
        res.put({"step": i + 1, "ph": ph}, pairs)
    assert res.poll() == 0 and out == []  # nothing resolved: nothing emitted, nothing waited
    for e in made[:2]:
        e.ready = True
    assert res.poll() == 1 and out[0]["ph_clock"] == "cuda"
    assert out[0]["ph"]["forward"] == pytest.approx(0.004)
    now[0] = 6.0  # the second step's events never resolve
    assert res.poll() == 1 and out[1]["ph_dropped"] == 1 and res.dropped == 1
    assert "ph_clock" not in out[1] and out[1]["ph"]["forward"] == pytest.approx(0.004)  # host


def test_the_hot_path_never_synchronises(monkeypatch):
    """enter/leave/take and the sampler's poll with CUDA-like events: no synchronize anywhere."""
    def boom(*a, **k):
        raise AssertionError("torch.cuda.synchronize on the hot path")

    monkeypatch.setattr(torch.cuda, "synchronize", boom)
    monkeypatch.setattr(torch.cuda.Event, "synchronize", boom, raising=False)
    monkeypatch.setattr(torch.cuda.Event, "wait", boom, raising=False)
    t = Tick()
    sc = StepClock(clock=t, event_factory=lambda: FakeEvent(t))
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    undo = stepclock.patch_torch(torch, sc)
    res = CudaResolver(lambda rec: None, sc, max_age_s=0.0)
    try:
        for _ in range(3):
            x = torch.randn(3, 4).to("cpu")
            model(x).sum().backward()
            opt.step()
            ph, pairs = sc.take()
            assert set(ph) == {"h2d", "forward", "backward", "optimizer"} and len(pairs) == 4
            res.put({"ph": ph}, pairs)
            res.poll()
    finally:
        for u in undo:
            u()


# --- the torch patches ------------------------------------------------------------------------
def test_patches_time_each_phase_and_keep_the_users_hooks():
    sc = StepClock()
    seen = []
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    model.register_forward_hook(lambda m, i, o: seen.append("fwd-hook"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.register_step_post_hook(lambda o, a, k: seen.append("opt-hook"))
    undo = stepclock.patch_torch(torch, sc)
    try:
        x = torch.randn(3, 4).to(torch.float32)
        with torch.no_grad():  # an inference step: no backward, no optimizer (absent, not 0)
            model(x)
        ph, _ = sc.take()
        assert set(ph) == {"h2d", "forward"}
        loss = model(x).sum()
        torch.autograd.backward(loss)
        opt.step()
        opt.zero_grad()
        ph, _ = sc.take()
        assert set(ph) == {"forward", "backward", "optimizer"}
        assert seen == ["fwd-hook", "fwd-hook", "opt-hook"]
    finally:
        for u in undo:
            u()
    assert not getattr(torch.nn.Module.__call__, "_gputop_dl", False)
    assert not getattr(torch.Tensor.to, "_gputop_dl", False)


def _ticking_model(t):
    """A model whose forward moves the clock `t` by 10 ms, and whose backward by 20 ms."""

    class Back(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            t.t += 0.02
            return g

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 1)

        def forward(self, x):
            t.t += 0.01
            return Back.apply(self.fc(x))

    return Net()


@pytest.mark.parametrize("optimizer", ["lbfgs", "sgd-positional", "sgd-keyword"])
def test_an_optimizer_closure_is_forward_and_backward_and_only_the_rest_is_optimizer(optimizer):
    """LBFGS (and Lightning's automatic optimization) run forward and backward inside the
    closure handed to `optimizer.step`: those are forward and backward; the rest of `step`
    (here 5 ms per step, plus LBFGS's own work, none on this clock) is optimizer."""
    t = Tick()
    sc = StepClock(clock=t)
    model = _ticking_model(t)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    if optimizer == "lbfgs":
        base = torch.optim.LBFGS
        kw = dict(lr=0.1, max_iter=3)
    else:
        base = torch.optim.SGD
        kw = dict(lr=0.1)

    class Slow(base):
        def step(self, closure=None):
            t.t += 0.005
            return super().step(closure)

    opt = Slow(model.parameters(), **kw)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    undo = stepclock.patch_torch(torch, sc)
    try:
        for _ in range(2):
            calls.clear()
            if optimizer == "sgd-positional":
                out = opt.step(closure)
            else:
                out = opt.step(closure=closure)
            assert isinstance(out, torch.Tensor)  # the closure's loss comes back
            ph, _ = sc.take()
            n = len(calls)
            assert n >= 1 and (optimizer == "lbfgs" or n == 1)
            assert ph["forward"] == pytest.approx(0.01 * n)
            assert ph["backward"] == pytest.approx(0.02 * n)
            assert ph["optimizer"] == pytest.approx(0.005)
            assert sc.active is None
    finally:
        for u in undo:
            u()


def test_a_compiled_model_is_timed_as_one_forward():
    sc = StepClock()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    undo = stepclock.patch_torch(torch, sc)
    try:
        compiled = torch.compile(model, backend="eager")  # dynamo traces through our patches
        x = torch.randn(3, 4)
        for _ in range(2):
            compiled(x).sum().backward()
            ph, _ = sc.take()
            assert set(ph) == {"forward", "backward"} and sc.active is None
        assert torch.allclose(compiled(x), model(x))
        sc.take()
    finally:
        for u in undo:
            u()


# --- the analysis -----------------------------------------------------------------------------
def step(t_step, t_data, **ph):
    return {"t_step": t_step, "t_data": t_data, "ph": ph}


def test_mean_phases_add_up_and_unseen_phases_are_null():
    steps = [step(0.100, 0.030, forward=0.020, backward=0.040)] * 10
    m = ap.mean_phases(steps)
    assert m["data_s"] == pytest.approx(0.03) and m["other_s"] == pytest.approx(0.01)
    assert m["h2d_s"] is None and m["optimizer_s"] is None
    assert ap.step_of(m) == pytest.approx(0.1)
    assert ap.mean_phases([{"t_step": 1.0, "t_data": 0.1}]) is None  # no phases measured


def test_input_bound_class_and_abstention():
    m = ap.mean_phases([step(0.1, 0.02, forward=0.08)] * 30)
    assert ap.phase_class(m, 30) == "input-bound"  # exactly 20 %
    assert ap.phase_class(m, ap.MIN_STEPS - 1) is None
    m = ap.mean_phases([step(0.1, 0.019, forward=0.08)] * 30)
    assert ap.phase_class(m, 30) == "compute-bound"


def test_phase_evidence_names_the_phase_that_grew_most():
    solo = ap.mean_phases([step(0.1, 0.01, forward=0.05, backward=0.04)])
    now = ap.mean_phases([step(0.512, 0.42, forward=0.052, backward=0.04)])
    assert ap.phase_evidence("bs64", solo, now) == "bs64: data +410 ms/step, forward +2.0 ms"
    assert ap.phase_evidence("bs64", None, now) is None


def test_the_straggler_is_the_rank_with_the_most_own_work_not_the_longest_backward():
    fast = [step(0.2, 0.01, forward=0.05, backward=0.13)] * 30  # waits in the all-reduce
    slow = [step(0.2, 0.09, forward=0.05, backward=0.05)] * 30
    rows = ap.rank_rows({0: fast, 1: slow, 2: fast})
    assert [r["rank"] for r in rows] == [0, 1, 2]
    assert ap.find_straggler(rows) == {"rank": 1, "cause": "data", "excess_s": 0.08}
    assert ap.find_straggler(ap.rank_rows({0: fast, 1: fast})) is None
    assert ap.find_straggler(ap.rank_rows({0: fast[:5], 1: slow[:5]})) is None  # too few steps


# --- real launches: the start-up hook in a user's script, no code change ---------------------
HERE = os.path.dirname(os.path.abspath(__file__))
CALIBRATED = os.path.join(HERE, "external", "phases_calibrated.py")
DCGAN = os.path.join(HERE, "external", "dcgan_tiny.py")


def _launch(tmp_path, argv, extra=""):
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner import run_file

    body = ('[session]\nname = "phases"\ninterval = 0.2\nbaseline = "none"\n'
            f'[[workload]]\nname = "job"\ncommand = {json.dumps(argv)}\nwarmup_steps = 2\n'
            + extra)
    path = tmp_path / "w.toml"
    path.write_text(body)
    eng = run_file(str(path), nvml=Nvml())
    return eng, eng.runs["job"]


@pytest.mark.shares_box("its phases' means against its own timing of the same steps; 3 of 3 "
                        "passed beside two busy loops and a training script")
def test_real_launch_calibrated_phases_are_within_10_percent_or_3_ms(tmp_path):
    eng, run = _launch(tmp_path, [sys.executable, CALIBRATED, "--steps", "24"])
    assert run.status == "done", run.stderr_tail
    m = ap.mean_phases(run.steps[2:])
    with open(run.proc.log_path, encoding="utf-8") as f:  # the script's own timing of each
        own = json.loads(f.read().strip().splitlines()[-1])  # phase (sleeps of 40/20/30/10 ms)
    for k in ("data", "forward", "backward", "optimizer"):
        want = own[f"{k}_ms"] / 1000
        assert abs(m[f"{k}_s"] - want) <= max(0.1 * want, 0.003), (k, m[f"{k}_s"], want)
    assert m["h2d_s"] is not None and m["h2d_s"] < 0.003
    mean_step = sum(s["t_step"] for s in run.steps[2:]) / len(run.steps[2:])
    assert ap.step_of(m) == pytest.approx(mean_step, rel=0.05)
    # the session JSON: phases per job, over the co-run steps after warm-up
    from gputop_dl.present.report.document import session_json
    from gputop_dl.record.store import Store

    job = next(j for j in check(session_json(Store(), eng.session_id))["jobs"] if j["name"] == "job")
    assert set(job["phases"]) == {"data_s", "h2d_s", "forward_s", "backward_s", "optimizer_s",
                                  "other_s"}
    assert job["phases"]["backward_s"] == pytest.approx(m["backward_s"], rel=0.05)
    assert job["phase_class"] == "input-bound"  # data is ~40 % of the step
    # the Markdown report: a phases table and a chart
    from gputop_dl.present.report.markdown import render_markdown

    md = render_markdown(session_json(Store(), eng.session_id))
    assert "## Step phases" in md and "ms per step by phase" in md
    # TensorBoard: per-step phase scalars
    acc_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                  reason="the tensorboard package (test extra) reads them back")
    from gputop_dl.present.report.export import export_tensorboard_session

    export_tensorboard_session(eng.session_id, str(tmp_path / "tb"))
    acc = acc_mod.EventAccumulator(str(tmp_path / "tb" / eng.session_id / "job"),
                                   size_guidance={"scalars": 0})
    acc.Reload()
    fwd = [e.value for e in acc.Scalars("phase/forward_s")]
    # (the first step is the first batch's wait only: no forward in it, so no point)
    assert len(fwd) == sum("forward" in s["ph"] for s in run.steps) == len(run.steps) - 1
    assert {"phase/data_s", "phase/other_s"} <= set(
        acc.Tags()["scalars"])


@pytest.mark.shares_box("its phases against its own step; 3 of 3 passed beside two busy loops")
def test_real_launch_a_gan_with_two_optimizers_adds_up_to_its_step(tmp_path):
    eng, run = _launch(tmp_path, [sys.executable, DCGAN])
    assert run.status == "done", run.stderr_tail
    steps = run.steps[2:]
    m = ap.mean_phases(steps)
    assert all(m[k] is not None for k in ("forward_s", "backward_s", "optimizer_s"))
    parts = sum(m[k] for k in ("data_s", "h2d_s", "forward_s", "backward_s", "optimizer_s"))
    mean_step = sum(s["t_step"] for s in steps) / len(steps)
    # nothing billed twice (D's second forward inside G's step, two optimizers), and what is
    # left (zero_grad, randn, ones/zeros, the loop itself) is the smaller part of the step
    assert parts <= mean_step * 1.0001 and m["other_s"] < 0.25 * mean_step, m
    for s in steps:
        assert s["t_data"] + sum(s["ph"].values()) <= s["t_step"] + 1e-6, s


@pytest.mark.shares_box("which rank's data is slower, by 30 ms a step; 3 of 3 passed beside two "
                        "busy loops and a training script")
def test_real_launch_nproc_2_runs_both_ranks_and_names_the_slow_data_rank(tmp_path):
    """nproc on a one-node command job: torchrun --standalone, every rank reports its steps,
    and the rank whose data is slower (rank 1) is the straggler, cause data, although DDP's
    all-reduce makes both ranks' steps equally long."""
    eng, run = _launch(tmp_path, [sys.executable, CALIBRATED, "--ddp", "--steps", "30",
                                  "--data-ms", "8", "--fwd-ms", "4", "--bwd-ms", "4",
                                  "--opt-ms", "2", "--slow-rank", "1", "--slow-ms", "30"],
                       'nproc = 2\n')
    assert run.status == "done", run.stderr_tail
    assert "--standalone" in run.proc.argv and "--nproc-per-node=2" in run.proc.argv
    assert sorted(run.rank_steps) == [0, 1] and len(run.rank_steps[1]) == 30
    rows = ap.rank_rows({r: s[2:] for r, s in run.rank_steps.items()})
    assert rows[0]["step_time_s"] == pytest.approx(rows[1]["step_time_s"], rel=0.25)
    st = ap.find_straggler(rows)
    assert st is not None and st["rank"] == 1 and st["cause"] == "data", (st, rows)
    assert st["excess_s"] == pytest.approx(0.030, abs=0.010)
    from gputop_dl.collect.nvml.gpu_use import GpuUse

    js = run.sample(GpuUse())
    assert js.straggler is not None and js.straggler.rank == 1 and len(js.ranks) == 2
    # the session JSON and the report: the ranks at the job's end, the late one named
    from gputop_dl.present.report.document import session_json
    from gputop_dl.present.report.markdown import render_markdown
    from gputop_dl.record.store import Store

    data = session_json(Store(), eng.session_id)
    job = next(j for j in data["jobs"] if j["name"] == "job")
    assert [r["rank"] for r in job["ranks"]] == [0, 1]
    assert job["straggler"]["rank"] == 1 and job["straggler"]["cause"] == "data"
    assert "rank 1 is late, data +" in render_markdown(data)


# --- where the phases show -----------------------------------------------------------------
def _job_with_phases():
    from gputop_dl.snapshot import JobSample
    from gputop_dl.step_phases import RankPhases, StepPhases, Straggler

    solo = StepPhases(0.01, 0.001, 0.05, 0.04, 0.01, 0.002, steps=40)
    now = StepPhases(0.42, 0.001, 0.052, 0.04, 0.01, 0.002, steps=40, cls="input-bound",
                     solo=solo)
    ranks = (RankPhases(0, 0.52, StepPhases(0.01, 0.0, 0.05, 0.45, 0.01, 0.0, steps=40)),
             RankPhases(1, 0.52, now))
    return JobSample(name="bs64", pid=7, launched=True, status="running", phases=now,
                     ranks=ranks, straggler=Straggler(1, "data", 0.41))


def test_prometheus_phase_series():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gputop_dl.present.prometheus import SnapshotCollector
    from gputop_dl.snapshot import JobSample, Snapshot

    c = SnapshotCollector(hostname="h")
    plain = JobSample(name="old", pid=8, launched=False)  # no phases: no series, never a 0
    c.feed(Snapshot(time=1.0, gpu_status="no NVML", jobs=(_job_with_phases(), plain)))
    reg = CollectorRegistry()
    reg.register(c)
    got = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            got.setdefault(s.name, []).append((s.labels, s.value))
    ph = {lab["phase"]: v for lab, v in got["gputop_dl_job_phase_seconds"]}
    assert ph == {"data": 0.42, "h2d": 0.001, "forward": 0.052, "backward": 0.04,
                  "optimizer": 0.01, "other": 0.002}
    assert all(lab["job_name"] == "bs64" for lab, _ in got["gputop_dl_job_phase_seconds"])
    assert len(got["gputop_dl_job_rank_phase_seconds"]) == 12
    [(lab, v)] = got["gputop_dl_job_straggler_excess_seconds"]
    assert (lab["rank"], lab["cause"], v) == ("1", "data", 0.41)


def test_tui_details_show_the_phase_bars_and_mark_the_late_rank():
    pytest.importorskip("textual")
    from gputop_dl.present.tui.phase_bar import phase_lines, stacked_bar
    from gputop_dl.present.tui.job_detail import job_detail_lines
    from gputop_dl.snapshot import JobSample

    j = _job_with_phases()
    text = job_detail_lines(j, None).plain
    assert "step phases" in text and "data 420 ms (+410.0)" in text
    assert "input-bound" in text
    late = [line for line in text.splitlines() if "late" in line]
    assert late and late[0].split()[0] == "1" and "data +410 ms" in late[0]
    # the bars share one scale: solo is shorter than now, and the cells add up to the width
    solo_bar = stacked_bar(j.phases.solo, 0.525, 48).plain
    assert len(solo_bar) == 48 and solo_bar.count("█") < 48 // 3
    lines = phase_lines(JobSample(name="x", pid=1, launched=False))
    assert "not measured" in lines[-1].plain
    # a found job that py-spy sampled: its shares, said to be shares, not per-step times
    found = JobSample(name="y", pid=2, launched=False, phase_shares_samples=200,
                      phase_shares=(("data", 0.5), ("forward", 0.25), ("backward", 0.125),
                                    ("optimizer", 0.125), ("other", 0.0)))
    text = "\n".join(line.plain for line in phase_lines(found))
    assert "not measured" not in text
    assert "data 50 %" in text and "optimizer 12 %" in text and "200 samples" in text
    bar = [line.plain for line in phase_lines(found) if line.plain.startswith("  share")][0]
    assert bar.count("█") == 48 and "not per-step means" in text


# --- nproc on a one-node command job ---------------------------------------------------------
def test_nproc_on_a_command_job_runs_it_once_per_rank_under_torchrun_standalone(tmp_path):
    from gputop_dl.control.launch import build_argv
    from gputop_dl.workload import Workload

    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    for name in ("python", "torchrun"):
        (venv / name).write_text("#!/bin/sh\n")
        (venv / name).chmod(0o755)
    w = Workload(name="ddp", command=("python", "train.py"), nproc=2)
    assert build_argv(w, "/s/x.json", cuda=False, env={"PATH": str(venv)}) == [
        str(venv / "torchrun"), "--standalone", "--nproc-per-node=2", "--no-python", "python",
        "train.py"]
    # nproc 1 or unset, and a command job's gpus alone: the command as given, once
    for one in (w.with_(nproc=1), w.with_(nproc=None, gpus=(0, 1))):
        assert build_argv(one, "/s/x.json", cuda=True, env={"PATH": str(venv)}) == [
            "python", "train.py"]


def test_nproc_with_a_command_that_starts_torchrun_itself_is_one_line(tmp_path):
    from gputop_dl.config import ConfigError, load_session

    path = tmp_path / "w.toml"
    path.write_text('[[workload]]\nname = "ddp"\nnproc = 2\ncommand = ["torchrun", "t.py"]\n')
    with pytest.raises(ConfigError) as e:
        load_session(str(path), gpu_count=0)
    msg = str(e.value)
    assert "\n" not in msg and "command starts \"torchrun\" with nproc = 2: gputop-dl runs " \
        "torchrun itself" in msg, msg


@pytest.mark.shares_box("the phases' keys and lower bounds, which a busy box only raises")
def test_real_launch_the_builtin_trainer_reports_its_phases(tmp_path):
    from gputop_dl.collect.nvml.gpu_use import GpuUse
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner import run_file

    path = tmp_path / "w.toml"
    path.write_text('[session]\nname = "t"\ninterval = 0.2\nbaseline = "none"\n'
                    '[[workload]]\nname = "syn"\nmodel = "synthetic"\ninput_size = 8\n'
                    'num_classes = 10\nbatch_size = 4\nnum_workers = 0\nsample_io_ms = 2.0\n'
                    'step_device_ms = 5.0\nepochs = 1\nsteps_per_epoch = 30\nwarmup_steps = 2\n')
    run = run_file(str(path), nvml=Nvml()).runs["syn"]
    assert run.status == "done", run.stderr_tail
    assert all(set(s["ph"]) == {"h2d", "forward", "backward", "optimizer"} for s in run.steps)
    m = ap.mean_phases(run.steps[2:])
    assert m["forward_s"] >= 0.004  # the emulated device's 5 ms wait is in the forward
    assert m["data_s"] >= 0.006  # 4 samples x 2 ms of I/O-like wait
    js = run.sample(GpuUse())
    assert js.phases is not None and js.phases.steps == 28 and js.phases.cls is not None
    assert run.seen_gpus == set()  # NVML saw none of its processes


class Series:
    def __init__(self, name, steps, solo=None):
        self.name, self.steps, self.solo = name, steps, solo
        self.config, self.ended = {"warmup_steps": 1}, None


def test_add_phase_evidence_names_the_phase_that_grew_over_the_overlap_window():
    solo_steps = [dict(step(0.1, 0.01, forward=0.05, backward=0.04), t=float(i))
                  for i in range(1, 30)]
    now_steps = [dict(step(0.5, 0.41, forward=0.05, backward=0.04), t=float(i))
                 for i in range(1, 30)]
    a = Series("bs64", now_steps, {"solo_phases": ap.solo_phases(solo_steps)})
    b = Series("other", [dict(s) for s in now_steps])  # no baseline: phases, no line
    v = ap.add_phase_evidence(plain_verdict(), [a, b], now=100.0)
    assert list(v.evidence_lines) == ["bs64: data +400 ms/step"]  # nothing else grew
    assert v.evidence["phases"]["bs64"]["class"] == "input-bound"
    assert v.evidence["phases"]["other"]["growth"] is None
    empty = plain_verdict()
    assert ap.add_phase_evidence(empty, [Series("x", [])], now=1.0) == empty


def plain_verdict():
    """A verdict with no evidence yet, built with the real constructor."""
    from gputop_dl.analyse.verdict_types import Verdict

    return Verdict(kind="parallel", reason="r", confidence=0.5)


def test_store_keeps_step_phases_and_reads_them_back(tmp_path):
    from gputop_dl.record.store import Store

    st = Store(str(tmp_path / "s.db"))
    sid = st.create_session("s", file=None, command="x", kind="launch", environment={})
    evs = [{"ev": "step", "t": 1.0, "epoch": 1, "step": 1, "t_data": 0.1, "t_step": 0.3,
            "samples": 4, "ph": {"forward": 0.1, "backward": 0.05}, "rank": 0},
           {"ev": "step", "t": 2.0, "epoch": 1, "step": 2, "t_data": 0.1, "t_step": 0.3,
            "samples": 4},
           {"ev": "rank_step", "t": 2.0, "rank": 1, "t_step": 0.3}]
    st.add_events(sid, "a", "co-run", evs)
    rows = st.phase_rows(sid, "a", "co-run")
    assert rows[0]["ph"] == {"forward": 0.1, "backward": 0.05} and "ph" not in rows[1]
    assert len(st.step_rows(sid, "a", "co-run")) == 2  # rank_step is not recorded
    assert not st.events(sid, job="a", ev="rank_step")


def test_ranks_appending_to_one_file_never_interleave_lines(tmp_path):
    """Each flush is one O_APPEND write: lines of several writers (the ranks) stay whole."""
    from gputop_dl.injob.channel import EventReader, EventWriter

    path = str(tmp_path / "ev.jsonl")
    code = ("import sys; sys.path.insert(0, sys.argv[2]);"
            "from gputop_dl.injob.channel import EventWriter;"
            "w = EventWriter(sys.argv[1], flush_s=0.0);"
            "[w.emit('rank_step', rank=int(sys.argv[3]), step=i, pad='x' * 3000)"
            " for i in range(300)]; w.close()")
    root = os.path.dirname(HERE)
    procs = [subprocess.Popen([sys.executable, "-c", code, path, root, str(r)]) for r in (1, 2, 3)]
    w = EventWriter(path, flush_s=0.0)
    for i in range(300):
        w.emit("step", rank=0, step=i, pad="y" * 3000)
    w.close()
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    evs = EventReader(path).read_new()
    with open(path, encoding="utf-8") as f:
        assert sum(1 for _ in f) == len(evs) == 1200  # every line parsed: none torn
    for r in range(4):
        assert [e["step"] for e in evs if e["rank"] == r] == list(range(300))


def test_in_process_hook_a_transform_module_in_the_dataset_is_data_not_forward(monkeypatch):
    """num_workers=0 and a transform that is an nn.Module (torchvision v2): run inside the
    loader's __next__, it is data (the clock is in the data phase when it runs, so its call
    cannot start a forward); the model's call after it is forward. Checked by the phase each
    call saw, not by how long the model's forward took (which a loaded box stretches: CI,
    2026-11-27, read it over a 2 ms bound once)."""
    import torch.utils.data.dataloader as dl

    from gputop_dl.injob.hook import dlhook

    seen: list[object] = []  # the clock's phase when the transform ran, and when the model did

    class Slow(torch.nn.Module):
        def forward(self, x):
            seen.append(("transform", sc.active))
            time.sleep(0.002)
            return x

    class Data(torch.utils.data.Dataset):
        tf = Slow()

        def __len__(self):
            return 8

        def __getitem__(self, i):
            return self.tf(torch.zeros(2))

    for cls, attr in ((dl.DataLoader, "__iter__"), (dl._BaseDataLoaderIter, "__next__")):
        monkeypatch.setattr(cls, attr, getattr(cls, attr))  # restored after the test
    out = []

    class Rep:
        steps_only = False

        def emit(self, ev, flush=False, **data):
            out.append(dict(data, ev=ev))

    tracker = dlhook.Tracker(Rep())
    dlhook.patch_dataloader(dl, tracker, Rep())
    sc = StepClock()
    tracker.clock = sc
    undo = stepclock.patch_torch(torch, sc)
    try:
        model = torch.nn.Linear(2, 2)
        model.register_forward_pre_hook(lambda m, i: seen.append(("model", sc.active)))
        for x in torch.utils.data.DataLoader(Data(), batch_size=2):
            model(x)
    finally:
        for u in undo:
            u()
    steps = [e for e in out if e["ev"] == "step"]
    assert len(steps) == 4 and all(s["t_data"] >= 0.004 for s in steps)  # both sleeps: data
    assert seen.count(("transform", "data")) == 8, seen  # 2 samples a batch, inside the data
    assert seen.count(("model", "forward")) == 4, seen  # the model's call: forward
    assert all("forward" in s["ph"] for s in steps[1:]), steps


def test_cuda_steps_leave_in_order_also_those_without_gpu_phases():
    t, made, sc = cuda_clock()
    out = []
    res = CudaResolver(out.append, sc)
    sc.enter("forward")
    sc.leave("forward")
    res.put({"step": 1}, sc.take()[1])
    res.put({"step": 2}, sc.take()[1])  # a step with no GPU phase: waits for step 1 anyway
    assert res.poll() == 0
    for e in made:
        e.ready = True
    assert res.poll() == 2 and [r["step"] for r in out] == [1, 2]
    assert out[0]["ph_clock"] == "cuda" and "ph_clock" not in out[1]


def test_a_torch_without_global_optimizer_hooks_is_left_unpatched(monkeypatch):
    import importlib

    opt = importlib.import_module("torch.optim.optimizer")
    monkeypatch.delattr(opt, "register_optimizer_step_post_hook")
    call, to = torch.nn.Module.__call__, torch.Tensor.to
    with pytest.raises(AttributeError):
        stepclock.patch_torch(torch, StepClock())
    assert torch.nn.Module.__call__ is call and torch.Tensor.to is to
    assert not opt._global_optimizer_pre_hooks
