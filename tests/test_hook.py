"""The start-up hook for `command` workloads: pure pieces in-process, then real launches."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import types

import pytest

from gputop_dl.injob import channel
from gputop_dl.collect.nvml.gpu_use import GpuUse
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.runner import run_file
from gputop_dl.injob.hook import SITE_DIR, dlhook, fw_lightning, report
from gputop_dl.control.launch import build_env
from gputop_dl.record.store import Store, session_work_dir
from gputop_dl.workload import Workload
from tests.conftest import write


@pytest.fixture(autouse=True)
def _no_phase_patches_in_this_process(monkeypatch):
    """The hooks these tests build in-process would patch the real torch that other test
    modules of this worker imported (the step phases, at a main loader's first iteration) and
    leave it patched; the phases are tested in test_phases.py, which undoes its patches."""
    monkeypatch.setattr(report, "torch_module", lambda: None)

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_PLAIN = os.path.join(HERE, "external", "train_plain.py")


class FakeWriter:
    def __init__(self):
        self.events = []

    def emit(self, ev, flush=False, **data):
        self.events.append(dict(data, ev=ev))

    def close(self):
        pass


def reporter(root=True):
    w = FakeWriter()
    return dlhook.Reporter("unused", root, writer=w), w


def kinds(w, ev):
    return [e for e in w.events if e["ev"] == ev]


class Batch:
    def __init__(self, n):
        self.shape = (n, 3)


# ---- pure pieces ------------------------------------------------------------------------------

def test_env_name_is_the_channels():
    assert dlhook.ENV_EVENTS == channel.ENV_EVENTS
    assert report.ENV_GO == channel.ENV_GO


def test_batch_len_of_common_batch_shapes():
    assert dlhook.batch_len(Batch(4)) == 4
    assert dlhook.batch_len((Batch(5), Batch(5))) == 5
    assert dlhook.batch_len([{"img": Batch(6)}]) == 6
    assert dlhook.batch_len({"input_ids": Batch(7), "labels": Batch(7)}) == 7
    assert dlhook.batch_len(["a.jpg", "b.jpg"]) is None
    assert dlhook.batch_len(types.SimpleNamespace(shape=())) is None
    assert dlhook.batch_len([]) is None


def test_tracker_steps_epochs_and_eval_between_epochs():
    rep, w = reporter()
    tr = dlhook.Tracker(rep, world_size=2)
    train, val, it, vit = object(), object(), object(), object()
    t = 100.0
    for _ in range(2):
        tr.on_iter(train, it, t)
        for _ in range(3):  # 0.1 s waiting for data, then 0.3 s compute
            tr.on_batch(it, Batch(4), t, t + 0.1)
            t += 0.4
        tr.on_stop(it, t)
        tr.on_iter(val, vit, t + 1)  # eval: not training, and no open epoch to pause
        tr.on_batch(vit, Batch(4), t + 1, t + 2)
        tr.on_stop(vit, t + 2)
        t += 10  # a long gap: must not be billed to the next epoch's first step
    steps, epochs = kinds(w, "step"), kinds(w, "epoch")
    assert [(s["epoch"], s["step"]) for s in steps] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert all(s["t_data"] == pytest.approx(0.1) for s in steps)
    assert [s["t_step"] for s in steps] == pytest.approx([0.1, 0.4, 0.4] * 2)
    assert all(s["samples"] == 8 for s in steps)  # 4 per rank x 2 ranks
    assert [(e["epoch"], e["steps"], e["samples"]) for e in epochs] == [(1, 3, 24), (2, 3, 24)]
    assert epochs[0]["time_s"] == pytest.approx(1.2) and epochs[0]["peak_mem"] > 0
    started = kinds(w, "started")
    assert len(started) == 1 and started[0]["steps_per_epoch"] is None  # object() has no len


def test_tracker_pauses_the_step_clock_for_a_mid_epoch_eval():
    rep, w = reporter()
    tr = dlhook.Tracker(rep)
    train, val, it, vit = [0] * 5, [0] * 2, object(), object()
    tr.on_iter(train, it, 0.0)
    tr.on_batch(it, Batch(2), 0.0, 0.1)  # step 1 returns at 0.1
    tr.on_iter(val, vit, 0.4)  # 0.3 s of compute, then eval until 5.0
    tr.on_batch(vit, Batch(2), 0.4, 4.0)
    tr.on_batch(it, Batch(2), 5.0, 5.1)  # step 2: 0.3 compute + 0.1 data, eval excluded
    tr.on_batch(it, Batch(2), 5.4, 5.5)
    steps = kinds(w, "step")
    assert [s["t_step"] for s in steps] == pytest.approx([0.1, 0.4, 0.4])
    assert kinds(w, "started")[0]["steps_per_epoch"] == 5


def test_tracker_an_abandoned_pass_is_no_epoch_and_unknown_samples_stay_unknown():
    rep, w = reporter()
    tr = dlhook.Tracker(rep)
    train, it1, it2 = object(), object(), object()
    tr.on_iter(train, it1, 0.0)  # `next(iter(loader))` to peek at a batch
    tr.on_batch(it1, ["a"], 0.0, 0.1)
    tr.on_iter(train, it2, 1.0)
    tr.on_batch(it2, ["a"], 1.0, 1.1)
    tr.on_stop(it1, 1.2)  # the abandoned iterator ending later changes nothing
    tr.on_stop(it2, 1.3)
    tr.on_stop(it2, 1.4)  # StopIteration again: still one epoch
    assert [(s["epoch"], s["step"], s["samples"]) for s in kinds(w, "step")] == [(1, 1, None), (1, 1, None)]
    assert [(e["epoch"], e["steps"], e["samples"]) for e in kinds(w, "epoch")] == [(1, 1, None)]


def test_tracker_under_a_framework_main_loader_epoch_end_and_plan():
    """What a framework's module (fw_lightning) tells the tracker: a loader iterated in an
    evaluation loop is never the main one; the framework ends the epoch although the main
    iterator was never exhausted, at the last training batch's end when validation followed."""
    rep, w = reporter()
    tr = dlhook.Tracker(rep)
    grad = {"on": False}
    tr.may_be_main = lambda loader: grad["on"]
    tr.plan = lambda loader, n: fw_lightning.plan(
        types.SimpleNamespace(limit_train_batches=3, max_epochs=2, max_steps=-1), n)
    train, val, sanity = [0] * 8, [0] * 2, object()
    tr.on_iter(val, sanity, 0.0)  # the sanity check, without grad: not the main loader
    tr.on_batch(sanity, Batch(2), 0.0, 0.1)
    grad["on"] = True
    t = 1.0
    for _ in range(2):
        it = object()
        tr.on_iter(train, it, t)
        for _ in range(3):
            tr.on_batch(it, Batch(2), t, t + 0.1)
            t += 0.4
        with_val = object()
        tr.on_iter(val, with_val, t + 0.2)  # validation after the last batch's compute
        tr.end_epoch(t + 5.0)  # the framework's epoch end, after its validation
        t += 10
    assert [(s["epoch"], s["step"]) for s in kinds(w, "step")] == [
        (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    epochs = kinds(w, "epoch")
    assert [(e["epoch"], e["steps"]) for e in epochs] == [(1, 3), (2, 3)]
    assert epochs[0]["time_s"] == pytest.approx(1.2 + 0.2)  # ends where validation began
    started = kinds(w, "started")
    assert len(started) == 1 and (started[0]["epochs"], started[0]["steps_per_epoch"]) == (2, 3)
    tr.end_epoch(t)  # no pass open: nothing
    assert len(kinds(w, "epoch")) == 2


def test_lightning_plan_follows_its_batch_limits():
    def trainer(limit=1.0, epochs=2, max_steps=-1):
        return types.SimpleNamespace(limit_train_batches=limit, max_epochs=epochs,
                                     max_steps=max_steps)

    assert fw_lightning.plan(trainer(), 40) == {"epochs": 2, "steps_per_epoch": 40}
    assert fw_lightning.plan(trainer(20), 40)["steps_per_epoch"] == 20
    assert fw_lightning.plan(trainer(0.25), 40)["steps_per_epoch"] == 10
    assert fw_lightning.plan(trainer(20), None)["steps_per_epoch"] == 20  # no length
    assert fw_lightning.plan(trainer(), None)["steps_per_epoch"] is None
    assert fw_lightning.plan(trainer(max_steps=100), 40)["epochs"] is None  # may stop first
    assert fw_lightning.plan(trainer(epochs=-1), 40)["epochs"] is None  # no epoch limit


def fake_dataloader_module():
    class _BaseDataLoaderIter:
        def __init__(self, loader):
            self.left = list(loader.data)

        def __next__(self):
            if not self.left:
                raise StopIteration
            return self.left.pop(0)

    class DataLoader:
        batch_size = 2

        def __init__(self, data):
            self.data = data

        def __iter__(self):
            return _BaseDataLoaderIter(self)

        def __len__(self):
            return len(self.data)

    return types.SimpleNamespace(DataLoader=DataLoader, _BaseDataLoaderIter=_BaseDataLoaderIter)


def test_patch_dataloader_times_the_main_loader_and_swallows_its_own_errors():
    mod = fake_dataloader_module()
    rep, w = reporter()
    tr = dlhook.Tracker(rep)
    dlhook.patch_dataloader(mod, tr, rep)
    dlhook.patch_dataloader(mod, tr, rep)  # a second patch is a no-op
    assert mod._BaseDataLoaderIter.__next__.__name__ == "__next__"
    train, val = mod.DataLoader([Batch(2)] * 3), mod.DataLoader([Batch(2)])
    for _ in range(2):
        assert len(list(train)) == 3
        assert len(list(val)) == 1
    assert len(kinds(w, "step")) == 6 and len(kinds(w, "epoch")) == 2
    assert kinds(w, "started")[0]["batch_size"] == 2
    tr.on_batch = None  # the hook breaks: the user's loop must not notice
    assert len(list(train)) == 3
    notes = kinds(w, "note")
    assert len(notes) == 1 and "gputop-dl hook: step failed" in notes[0]["message"]


def test_the_start_barrier_holds_the_main_loaders_first_pass_only_before_it_starts(tmp_path,
                                                                                    installs):
    """The co-run start barrier: a launched script says "ready" and waits for the go file
    before its main loader's first pass starts (its workers not started yet), once; an
    evaluation loader that a framework says is not the main one does not wait, and the wait
    is no part of the first step."""
    mod = fake_dataloader_module()
    seen = []
    orig_iter = mod.DataLoader.__iter__

    def iter_logged(self):
        seen.append(("iter", os.path.exists(go)))
        return orig_iter(self)

    mod.DataLoader.__iter__ = iter_logged
    go = str(tmp_path / "co-run.go")
    rep, w = reporter()
    hook = installs({dlhook.ENV_EVENTS: "unused", channel.ENV_GO: go})
    hook.report = hook.tracker.report = rep
    hook.tracker.may_be_main = lambda loader: loader is not val
    dlhook.patch_dataloader(mod, hook.tracker, rep)
    train, val = mod.DataLoader([Batch(2)] * 3), mod.DataLoader([Batch(2)])
    assert len(list(val)) == 1 and kinds(w, "ready") == []  # not the main loader: no wait

    def open_go():  # the launcher's go, once the script said "ready" (the event, polled;
        # the bound only keeps a broken gate from hanging the test: the order check fails)
        deadline = time.monotonic() + 60
        while not kinds(w, "ready") and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(("go", None))
        open(go, "w").close()

    opener = threading.Thread(target=open_go)
    opener.start()
    assert len(list(train)) == 3
    opener.join()
    assert seen == [("iter", False), ("go", None), ("iter", True)]  # val, then train after go
    assert len(list(train)) == 3 and len(kinds(w, "ready")) == 1  # the second pass: no wait
    assert len(kinds(w, "step")) == 6


def test_a_barrier_that_fails_is_the_hooks_error_not_the_scripts():
    mod = fake_dataloader_module()
    rep, w = reporter()
    tr = dlhook.Tracker(rep)
    tr.gate = lambda: 1 / 0
    dlhook.patch_dataloader(mod, tr, rep)
    assert len(list(mod.DataLoader([Batch(2)] * 2))) == 2
    notes = kinds(w, "note")
    assert len(notes) == 1 and "co-run start barrier failed (ZeroDivisionError" in notes[0]["message"]


def test_post_import_finder_patches_the_module_once_it_ran(tmp_path, monkeypatch):
    pkg = tmp_path / "gdl_fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "target.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    finder = dlhook.PostImportFinder("gdl_fakepkg.target", lambda m: seen.append(m.VALUE))
    sys.meta_path.insert(0, finder)
    try:
        import gdl_fakepkg.target as target
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for name in ("gdl_fakepkg.target", "gdl_fakepkg"):
            sys.modules.pop(name, None)
    assert seen == [1] and finder not in sys.meta_path
    assert type(target.__loader__).__name__ == "SourceFileLoader"  # no wrapper left behind


def test_excepthook_reports_the_failure_then_chains():
    rep, w = reporter(root=True)
    hook = dlhook.Hook(rep, 1)
    chained = []
    hook._prev_excepthook = lambda *a: chained.append(a[0])
    hook.excepthook(ValueError, ValueError("bad value\nsecond line"), None)
    hook.at_exit()
    assert chained == [ValueError]
    assert kinds(w, "failed") == [{"cause": "exception", "message": "ValueError: bad value", "ev": "failed"}]
    assert not kinds(w, "finished")


def test_a_helper_process_that_never_trained_reports_nothing():
    rep, w = reporter(root=False)
    hook = dlhook.Hook(rep, 1)
    hook._prev_excepthook = lambda *a: None
    hook.excepthook(ValueError, ValueError("x"), None)
    hook.at_exit()
    assert w.events == []


def test_classify_oom():
    torch = pytest.importorskip("torch")
    assert dlhook.classify(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried")) == "cuda-oom"
    assert dlhook.classify(RuntimeError("CUDA out of memory. Tried to allocate")) == "cuda-oom"
    assert dlhook.classify(MemoryError()) == "host-oom"
    assert dlhook.classify(KeyError("k")) == "exception"


def test_reporter_is_silent_in_a_forked_child():
    rep, w = reporter()
    rep.pid = -1
    rep.emit("step")
    assert w.events == []


@pytest.fixture
def installs(monkeypatch):
    """`dlhook.install` in this process, undone after the test: the excepthook, the import
    finders, the atexit report and the real DataLoader (patched at once where a test of this
    worker imported it)."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(dlhook.atexit, "register", lambda f: None)
    dl = sys.modules.get("torch.utils.data.dataloader")
    if dl is not None:
        monkeypatch.setattr(dl.DataLoader, "__iter__", dl.DataLoader.__iter__)
        monkeypatch.setattr(dl._BaseDataLoaderIter, "__next__", dl._BaseDataLoaderIter.__next__)
    return dlhook.install


def test_install_does_nothing_off_gputop_dl_and_only_steps_off_rank_0(installs):
    assert installs({}) is None
    hook = installs({"GPUTOP_DL_EVENTS": "/tmp/x", "RANK": "1", "LOCAL_RANK": "1"})
    assert hook.report.steps_only and hook.tracker.rank == 1  # its steps, as "rank_step"
    w = FakeWriter()
    rep = dlhook.Reporter("/x", False, writer=w, steps_only=True)
    for ev in ("started", "step", "epoch", "failed", "finished"):
        rep.emit(ev, step=1)
    assert [e["step"] for e in kinds(w, "rank_step")] == [1] and len(w.events) == 1


def test_build_env_puts_the_hook_first_and_keeps_the_users_env():
    base = {"PYTHONPATH": "/inherited", "PATH": "/bin", "GPUTOP_DL_HOOK_ROOT": "1"}
    w = Workload(name="c", command=("python", "t.py"), env={"FOO": "user", "OMP_NUM_THREADS": "3"})
    env = build_env(w.with_(threads=1), "/ev", "/work", False, base=base)
    assert env["PYTHONPATH"] == f"{SITE_DIR}{os.pathsep}/inherited"
    assert env["GPUTOP_DL_EVENTS"] == "/ev" and env["FOO"] == "user"
    assert env["OMP_NUM_THREADS"] == "3" and "GPUTOP_DL_HOOK_ROOT" not in env
    env = build_env(w.with_(env={"PYTHONPATH": "/mine:/also"}), "/ev", "/work", False, base=base)
    assert env["PYTHONPATH"] == f"{SITE_DIR}{os.pathsep}/mine:/also"
    env = build_env(w, "/ev", "/work", False, base={})
    assert env["PYTHONPATH"] == SITE_DIR
    env = build_env(w.with_(env={"GPUTOP_DL_HOOK": "0"}), "/ev", "/work", False, base=base)
    assert env["PYTHONPATH"] == "/inherited"
    trainer = build_env(Workload(name="t"), "/ev", "/work", False, base=base)
    assert trainer["PYTHONPATH"] == "/inherited"


def test_sitecustomize_alone_costs_no_hook_and_chains(tmp_path):
    """Without GPUTOP_DL_EVENTS the hook is not even loaded; a user sitecustomize still runs."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    code = ("import os, sys, json; print(json.dumps([os.environ.get('USER_SITE_RAN'), "
            f"'_gputop_dl_hook' in sys.modules, {SITE_DIR!r} in sys.path]))")
    env = dict(os.environ, PYTHONPATH=f"{SITE_DIR}{os.pathsep}{user}")
    env.pop("GPUTOP_DL_EVENTS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert json.loads(out.stdout) == ["1", False, False], out.stderr


# ---- real launches through the engine ---------------------------------------------------------

def command_file(tmp_path, argv, env=None):
    body = '[session]\nname = "hook"\ninterval = 0.2\nbaseline = "none"\n'
    body += f'[[workload]]\nname = "job"\ncommand = {json.dumps(argv)}\n'
    if env:
        body += "[workload.env]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in env.items())
    return write(tmp_path, "w.toml", body)


def launch(tmp_path, argv, env=None):
    eng = run_file(command_file(tmp_path, argv, env), nvml=Nvml())
    return eng, eng.runs["job"]


def last_json(run):
    with open(run.proc.log_path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    return json.loads(lines[-1])


@pytest.mark.shares_box("counts, and its stall against the script's own in the same run; 3 of 3 "
                        "passed beside two busy loops")
def test_real_launch_plain_script_gets_steps_epochs_and_its_true_stall(tmp_path):
    eng, run = launch(tmp_path, [sys.executable, TRAIN_PLAIN])
    assert run.status == "done", run.stderr_tail
    own = last_json(run)
    assert own["steps"] == [15, 15] and own["gputop_dl_imported"] is False
    assert [(e["epoch"], e["steps"], e["samples"]) for e in run.epochs] == [(1, 15, 60), (2, 15, 60)]
    assert [s["step"] for s in run.steps] == list(range(1, 16)) * 2
    js = run.sample(GpuUse())
    assert js.stall_source == "hook" and js.batch_size == 4 and js.steps_per_epoch == 15
    assert js.epoch_times and js.epochs is None and js.samples_per_s > 0
    assert abs(js.stall_fraction - own["stall"]) < 0.05, (js.stall_fraction, own["stall"])
    # the full log is kept in the session directory; its tail is the job's stderr_tail
    assert os.path.dirname(run.proc.log_path) == session_work_dir(eng.session_id)
    assert '"stall"' in run.stderr_tail[-1]
    store = Store()
    assert len(store.events(eng.session_id, job="job", ev="epoch", phase="co-run")) == 2
    assert store.events(eng.session_id, job="job", ev="finished")


@pytest.mark.shares_box("it runs")
def test_real_launch_a_command_that_is_not_python_still_runs(tmp_path):
    eng, run = launch(tmp_path, ["sh", "-c", "sleep 1"])
    assert run.status == "done" and run.exit_code == 0 and not run.steps
    assert run.sample(GpuUse()).stall_source is None


@pytest.mark.shares_box("an import chain")
def test_real_launch_chains_the_users_sitecustomize(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    (user / "usermod.py").write_text("X = 42\n")
    script = write(tmp_path, "s.py", textwrap.dedent("""
        import json, os, sys, usermod, sitecustomize
        print(json.dumps([os.environ.get("USER_SITE_RAN"), usermod.X,
                          "_gputop_dl_hook" in sys.modules, sitecustomize.__file__]))
    """))
    eng, run = launch(tmp_path, [sys.executable, script], env={"PYTHONPATH": str(user)})
    assert run.status == "done", run.stderr_tail
    ran, x, hooked, site_file = last_json(run)
    assert (ran, x, hooked) == ("yes", 42, True)
    assert site_file == str(user / "sitecustomize.py")


@pytest.mark.shares_box("a failure and its message")
def test_real_launch_a_failing_script_is_failed_with_its_message(tmp_path):
    script = write(tmp_path, "fail.py", textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader
        for i, x in enumerate(DataLoader(torch.zeros(20, 2), batch_size=2), 1):
            if i == 3:
                raise RuntimeError("boom at step 3")
    """))
    eng, run = launch(tmp_path, [sys.executable, script])
    assert run.status == "failed"
    assert run.failure == "exception: RuntimeError: boom at step 3"
    assert [s["step"] for s in run.steps] == [1, 2, 3]  # the third batch came, then the raise
    assert any("boom at step 3" in line for line in run.stderr_tail)
    assert eng.exit_code() == 1


@pytest.mark.shares_box("which modules a process loaded")
def test_real_launch_a_script_without_torch_does_not_get_torch(tmp_path):
    script = write(tmp_path, "notorch.py",
                   "import json, sys\nprint(json.dumps(['torch' in sys.modules, "
                   "'_gputop_dl_hook' in sys.modules]))\n")
    eng, run = launch(tmp_path, [sys.executable, script])
    assert run.status == "done", run.stderr_tail
    assert last_json(run) == [False, True]
    assert not run.steps and run.info == {}


def test_jobrun_shows_hook_events_like_the_trainers(tmp_path):
    from gputop_dl.engine.jobrun import JobRun
    from gputop_dl.control.launch import JobProcess

    proc = JobProcess("job", types.SimpleNamespace(pid=os.getpid(), poll=lambda: None),
                      str(tmp_path / "job.log"), str(tmp_path / "ev.jsonl"), ["x"], 0.0)
    run = JobRun(Workload(name="job", command=("python", "t.py")), proc, "co-run")
    steps = [{"ev": "step", "epoch": 1, "step": i, "t_data": 0.1, "t_step": 0.4, "samples": None}
             for i in range(1, 9)]
    run._take([{"ev": "started", "batch_size": 8, "steps_per_epoch": 8, "epochs": None}, *steps,
               {"ev": "epoch", "epoch": 1, "time_s": 3.2, "steps": 8},
               {"ev": "failed", "cause": "exception", "message": "RuntimeError: rank 0"},
               {"ev": "failed", "cause": "exception", "message": "ChildFailedError: later"}])
    js = run.sample(GpuUse())
    assert js.stall_source == "hook" and js.stall_fraction == pytest.approx(0.25)
    assert js.samples_per_s is None and js.batch_size == 8 and js.epochs is None
    assert js.steps_per_epoch == 8 and js.epoch_times == (3.2,) and js.eta_s is None
    assert run.failure == "exception: RuntimeError: rank 0"


def test_accelerate_loader_steps_are_the_batches_handed_over_and_a_drained_pass_ends():
    """A stand-in for accelerate's DataLoaderShard (its own generator that fetches one batch
    ahead from a DataLoader the tracker must not see): the steps are the batches it hands over,
    an evaluation shard's end is not the training pass's, and a pass whose last batch went out
    ends at the framework's epoch end or at exit, one stopped early never."""
    from gputop_dl.injob.hook import fw_accelerate

    rep, w = reporter()
    tr = dlhook.Tracker(rep)

    class DataLoaderShard:  # the class patch() wraps
        def __init__(self, n):
            self.n, self.end_of_dataloader = n, False

        def __len__(self):
            return self.n

        def __iter__(self):
            inner = object()  # the wrapped DataLoader: its events must be hidden
            tr.on_iter(inner, inner, 0.0)
            for i in range(self.n):
                tr.on_batch(inner, Batch(2), 0.0, 0.0)  # its look-ahead fetch
                self.end_of_dataloader = i == self.n - 1
                yield Batch(2)

    fw_accelerate.patch(types.SimpleNamespace(DataLoaderShard=DataLoaderShard), tr, rep)
    train, val = DataLoaderShard(4), DataLoaderShard(2)
    it = iter(train)
    for _ in range(3):
        next(it)
    for _ in val:  # an evaluation drains its own shard mid-epoch
        pass
    tr.end_epoch(1.0, drained_only=True)  # transformers' on_epoch_end after max_steps: no epoch
    assert len(kinds(w, "step")) == 3 and kinds(w, "epoch") == []
    it = iter(train)  # the next pass, drained this time, nobody asks past its last batch
    for _ in range(4):
        next(it)
    tr.finish(2.0)
    assert [(s["epoch"], s["step"]) for s in kinds(w, "step")][3:] == [(1, i) for i in range(1, 5)]
    assert [e["steps"] for e in kinds(w, "epoch")] == [4]
    assert kinds(w, "started")[0]["steps_per_epoch"] == 4
