"""`gputop-dl export DIR --tensorboard`: the event files read back with TensorBoard's own reader."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gputop_dl.cli import main
from gputop_dl.present.report.tensorboard import export_tensorboard
from gputop_dl.record.store import Store, default_db_path

from tests.fakes.reports import EPOCH_TIMES, GIB, JOBS, make_session

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the tensorboard package (test extra) reads the files back")


def load(run_dir: str):
    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def test_export_tensorboard_writes_one_run_per_job_and_phase(tmp_path, capsys):
    os.makedirs(os.path.dirname(default_db_path()), exist_ok=True)
    store = Store(default_db_path())
    sid = make_session(store)
    store.close()
    out = tmp_path / "tb"
    assert main(["export", str(out), "--tensorboard"]) == 0
    assert f"tensorboard --logdir {out}" in capsys.readouterr().out
    runs = sorted(os.listdir(out / sid))
    assert runs == ["bs32", "bs32.solo", "bs64", "bs64.solo"]  # bs128 failed before any sample

    name, batch, gpus, (t_step, t_data), *_ = JOBS[0]
    acc = load(str(out / sid / "bs32"))
    tags = set(acc.Tags()["scalars"])
    assert {"step/time_s", "step/samples_per_s", "step/data_stall", "epoch/time_s", "epoch/loss",
            "job/cpu_cores", "job/rss_bytes", "job/gpu_memory_bytes", "gpu/util",
            "gpu/memory_used_bytes"} <= tags
    steps = acc.Scalars("step/time_s")
    assert [e.step for e in steps] == list(range(1, 31))  # 3 epochs x 10 steps, global step
    assert all(e.value == pytest.approx(t_step) for e in steps)
    assert steps[-1].wall_time > steps[0].wall_time > 1e9  # wall time is the step's own
    assert acc.Scalars("step/samples_per_s")[0].value == pytest.approx(batch / t_step)
    assert acc.Scalars("step/data_stall")[0].value == pytest.approx(t_data / t_step)
    epochs = acc.Scalars("epoch/time_s")
    assert [e.step for e in epochs] == [10, 20, 30]  # at the step each epoch ended
    assert [e.value for e in epochs] == pytest.approx(EPOCH_TIMES[name])
    assert [e.value for e in acc.Scalars("epoch/loss")] == pytest.approx([2.0] * 3)
    assert [e.value for e in acc.Scalars("epoch/train_accuracy")] == pytest.approx([0.25] * 3)
    cores = acc.Scalars("job/cpu_cores")
    assert cores and all(e.value == pytest.approx(2.4) for e in cores)
    assert [e.step for e in cores] == sorted(e.step for e in cores)
    gpu = acc.Scalars("gpu/util")  # the fixture's GPU g runs at 0.25 * g; bs32 is on GPU 0
    assert gpu and all(e.value == 0 for e in gpu)
    assert all(e.value == pytest.approx(GIB) for e in acc.Scalars("gpu/memory_used_bytes"))
    bs64 = load(str(out / sid / "bs64"))
    assert all(e.value == pytest.approx(0.25) for e in bs64.Scalars("gpu/util"))  # GPU 1
    solo = load(str(out / sid / "bs32.solo"))
    assert "job/cpu_cores" in solo.Tags()["scalars"]
    assert "epoch/loss" not in solo.Tags()["scalars"]


def test_export_tensorboard_bad_target_and_no_session(tmp_path, capsys):
    assert main(["export", str(tmp_path / "tb"), "--tensorboard"]) == 2  # no session: exit 2
    assert "no sessions recorded yet" in capsys.readouterr().err
    store = Store(default_db_path())
    make_session(store)
    store.close()
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert main(["export", str(f), "--tensorboard"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err


def test_export_tensorboard_without_the_package_says_what_to_install(tmp_path):
    """With tensorboard unimportable: one line naming the extra, exit 2."""
    code = ("import sys, builtins\n"
            "real = builtins.__import__\n"
            "def imp(name, *a, **k):\n"
            "    if name.startswith('tensorboard'): raise ImportError('no ' + name)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = imp\n"
            "from gputop_dl.record.store import Store, default_db_path\n"
            "from tests.fakes.reports import make_session\n"
            "import os; os.makedirs(os.path.dirname(default_db_path()), exist_ok=True)\n"
            "make_session(Store(default_db_path()))\n"
            "from gputop_dl.cli import main\n"
            f"sys.exit(main(['export', {str(tmp_path / 'tb')!r}, '--tensorboard']))\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, PYTHONPATH=root))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "gputop-dl[tensorboard]" in r.stderr


def test_export_tensorboard_never_imports_torch(tmp_path):
    code = ("import sys, os\n"
            "from gputop_dl.record.store import Store, default_db_path\n"
            "from tests.fakes.reports import make_session\n"
            "os.makedirs(os.path.dirname(default_db_path()), exist_ok=True)\n"
            "make_session(Store(default_db_path()))\n"
            "from gputop_dl.cli import main\n"
            f"assert main(['export', {str(tmp_path / 'tb')!r}, '--tensorboard']) == 0\n"
            "assert 'tensorboard' in sys.modules\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision'))\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, PYTHONPATH=root))
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.shares_box("files written")
def test_real_launch_with_tensorboard_writes_the_session_at_the_end(tmp_path, capsys):
    import json

    job = [sys.executable, os.path.join(os.path.dirname(__file__), "external", "calibrated.py"),
           "--steps", "12", "--compute-ms", "20"]
    toml = tmp_path / "w.toml"
    toml.write_text('[session]\nname = "tb"\ninterval = 0.3\nbaseline = "none"\n'
                    f'[defaults]\nwarmup_steps = 2\n[[workload]]\nname = "a"\n'
                    f'command = {json.dumps(job)}\n')
    out = tmp_path / "tb"
    assert main(["launch", str(toml), "--headless", "--tensorboard", str(out)]) == 0
    sid = Store(default_db_path()).sessions()[0].id
    acc = load(str(out / sid / "a"))
    assert "step/time_s" in acc.Tags()["scalars"] and len(acc.Scalars("step/time_s")) >= 10
    assert "open with: tensorboard --logdir" in capsys.readouterr().out


def test_launch_tensorboard_into_a_file_is_exit_2_before_anything_runs(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    toml = tmp_path / "w.toml"
    toml.write_text('[[workload]]\nname = "a"\ncommand = ["sleep", "30"]\n')
    assert main(["launch", str(toml), "--headless", "--tensorboard", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_jobs_whose_names_clean_to_one_folder_keep_their_own_runs(tmp_path):
    """A session recorded before `.` and `..` were refused (or found jobs named `a b` and
    `a_b`): each job still gets a run of its own, never one run holding two jobs."""
    from gputop_dl.present.report.tensorboard import export_tensorboard

    store = Store(default_db_path())
    sid = store.create_session("s", file=None, command="t", kind="launch", environment={})
    for name in (".", "..", "a b", "a_b"):
        store.upsert_job(sid, name, launched=True, config={}, status="done")
        store.add_events(sid, name, "co-run", [{"ev": "step", "t": 2.0, "epoch": 0, "step": 0,
                                                "t_data": 0.0, "t_step": 0.1, "samples": 4}])
    store.commit()
    runs = export_tensorboard(store, sid, str(tmp_path / "tb"))
    store.close()
    assert sorted(os.path.basename(p) for p, _ in runs) == ["a_b", "a_b-2", "job", "job-2"]


def _text(event) -> str:
    return event.tensor_proto.string_val[0].decode()


def test_the_verdict_changes_are_their_own_run_text_and_steps(tmp_path):
    """parallel -> cpu-bound -> parallel: a text per change, the worst slowdown, and a 0/1 step
    per kind that changes where the verdict did (read back with TensorBoard's own reader)."""
    store = Store(str(tmp_path / "s.db"))
    sid = make_session(store, ticks=120)
    t0 = store.session(sid).started
    store.add_verdict_change(sid, t0 + 10, None, "parallel", "the jobs keep their pace", 1.05)
    store.add_verdict_change(sid, t0 + 40, "parallel", "cpu-bound", "CPU saturated", 2.5)
    store.add_verdict_change(sid, t0 + 80, "cpu-bound", "parallel", "recovered", None)
    store.commit()
    written = export_tensorboard(store, sid, str(tmp_path / "tb"))
    run = str(tmp_path / "tb" / sid / "_verdict")
    assert (run, 3 + 2 + 2 * 7) in written  # 3 texts, 2 slowdowns, 2 kinds x (3 x 2 + 1)
    acc = event_accumulator.EventAccumulator(run, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    texts = acc.Tensors("verdict/change")
    assert [(e.step, e.wall_time - t0) for e in texts] == [(1, 10), (2, 40), (3, 80)]
    assert _text(texts[0]).startswith("**parallel** (was no verdict yet) (0:10 after the start)")
    assert _text(texts[1]) == ("**cpu-bound** (was parallel) (0:40 after the start)  \n"
                               "worst slowdown 2.50×  \nCPU saturated")
    assert "worst slowdown" not in _text(texts[2]) and _text(texts[2]).endswith("recovered")
    assert [(e.step, e.value) for e in acc.Scalars("verdict/worst_slowdown")] == [
        (1, pytest.approx(1.05)), (2, pytest.approx(2.5))]
    cpu = [(e.wall_time - t0, e.value) for e in acc.Scalars("verdict/is/cpu-bound")]
    assert cpu == [(10, 0), (10, 0), (40, 0), (40, 1), (80, 1), (80, 0), (120, 0)]
    par = [(e.wall_time - t0, e.value) for e in acc.Scalars("verdict/is/parallel")]
    assert par == [(10, 0), (10, 1), (40, 1), (40, 0), (80, 0), (80, 1), (120, 1)]
    store.close()


def test_no_verdict_run_without_recorded_changes(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    sid = make_session(store)  # its verdict was set without a change recorded
    export_tensorboard(store, sid, str(tmp_path / "tb"))
    assert "_verdict" not in os.listdir(tmp_path / "tb" / sid)
    store.close()
