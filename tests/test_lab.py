"""The lab commands: sweep analysis (fit, knee, growth), model cost, the sweep worker's OOM path,
a real CPU sweep and a real CPU profile."""

import argparse
import json
import os

import pytest

from gputop_dl.lab import sweep, sweepfit
from gputop_dl.lab.sweep_worker_protocol import ENV_FAKE_OOM, RESULT_KEY
from tests.schema_check import check

# The lab notebooks' resnet34 table, 224×224, Titan Xp: (batch, peak GPU MiB, epoch time s).
RESNET34 = [(16, 1259, 29.1), (32, 1539, 16.7), (64, 2047, 12.3), (128, 3233, 11.4),
            (256, 5527, 11.4), (512, 9905, 12.8)]
N = 50000


def _rows(table):
    # The table gives epoch times; a sweep measures step times: step = epoch * batch / N.
    return [{"batch": b, "status": "ok", "peak_mem": mib * 2**20, "step_s": epoch * b / N}
            for b, mib, epoch in table]


def test_knee_of_the_background_resnet34_table_is_batch_32():
    rows = sweepfit.annotate(_rows(RESNET34), N)
    k = sweepfit.knee_rows(rows)
    assert k is not None and (k.batch, k.next_batch) == (32, 64)
    assert k.mem_growth == pytest.approx(0.33, abs=0.005)  # 1539 -> 2047 MiB
    assert k.time_fall == pytest.approx(0.26, abs=0.005)  # 16.7 -> 12.3 s
    # the growth columns reproduce the lab notebooks' table
    assert [round(r.get("mem_growth") or 0, 2) for r in rows] == [0, 0.22, 0.33, 0.58, 0.71, 0.79]
    assert [round(r.get("time_change") or 0, 2) for r in rows] == [0, -0.43, -0.26, -0.07, 0, 0.12]
    assert rows[1]["epoch_s"] == pytest.approx(16.7)


def test_knee_needs_memory_to_outgrow_the_time_gain():
    assert sweepfit.knee([(16, 100, 1.0), (32, 120, 0.5), (64, 140, 0.3)]) is None
    k = sweepfit.knee([(16, 100, 1.0), (32, 120, 0.5), (64, 200, 0.45)])
    assert k.batch == 32 and k.mem_growth == pytest.approx(2 / 3)


def test_a_failed_row_breaks_the_pair_and_oom_rows_get_no_growth():
    rows = _rows(RESNET34[:2]) + [{"batch": 64, "status": "oom"}] + _rows(RESNET34[3:5])
    rows = sweepfit.annotate(rows, N)
    assert rows[2].get("mem_growth") is None and rows[3].get("mem_growth") is None
    assert rows[4]["mem_growth"] == pytest.approx(5527 / 3233 - 1)
    k = sweepfit.knee_rows(rows)  # 16->32 pays; 32->64 failed; 128->256: +71 % vs 0 %
    assert k.batch == 128


def test_fit_is_exact_on_a_line_and_fits_the_background_alexnet_times():
    f = sweepfit.fit_step_time([2, 4, 8, 16], [0.05 + 0.01 * b for b in (2, 4, 8, 16)])
    assert f.alpha == pytest.approx(0.05) and f.beta == pytest.approx(0.01)
    assert f.r2 == pytest.approx(1.0) and f.max_rel_err < 1e-9
    # Background: AlexNet epoch time vs batch, 60 000 images: t_iter = epoch * B / N.
    alex = {512: 15.5, 256: 16.7, 128: 17.7, 64: 20.8, 32: 25.8, 16: 40.0, 8: 73.4, 4: 133.4,
            2: 259.6, 1: 507.7}
    bs = sorted(alex)
    f = sweepfit.fit_step_time(bs, [alex[b] * b / 60000 for b in bs])
    assert f.r2 > 0.999 and f.alpha > 0 and f.beta > 0
    assert sweepfit.fit_step_time([8], [0.1]) is None
    assert sweepfit.fit_step_time([8, 8], [0.1, 0.2]) is None


def test_worker_output_parsing():
    line = json.dumps({RESULT_KEY: 1, "batch": 4, "status": "ok", "step_s": 0.1})
    assert sweep.parse_worker_output(4, 0, "noise\n" + line + "\n", "")["status"] == "ok"
    r = sweep.parse_worker_output(8, -9, "", "")
    assert r["status"] == "oom" and "SIGKILL" in r["message"]
    r = sweep.parse_worker_output(8, 1, "", "Traceback\nValueError: boom\n")
    assert r["status"] == "error" and "ValueError: boom" in r["message"]


def test_sweep_skips_larger_batches_after_the_first_oom(monkeypatch):
    ran = []

    def fake(spec, b):
        ran.append(b)
        if b >= 32:
            return {"batch": b, "status": "oom", "message": "CUDA out of memory"}
        return {"batch": b, "status": "ok", "step_s": 0.01 + 0.001 * b, "peak_mem": 100 * b}

    monkeypatch.setattr(sweep, "run_batch", fake)
    spec = sweep.SweepSpec(model="resnet18", batches=(64, 8, 16, 32, 8))
    res = sweep.run_sweep(spec)
    assert ran == [8, 16, 32]
    assert [r["status"] for r in res.rows] == ["ok", "ok", "oom", "skipped"]
    assert res.fit.n == 2
    ran.clear()
    res = sweep.run_sweep(sweep.SweepSpec(model="resnet18", batches=(8, 32, 64), keep_going=True))
    assert ran == [8, 32, 64]


def test_model_cost_matches_the_background_table():
    from gputop_dl.lab.cost import REFERENCE, model_cost

    for name in ("alexnet", "resnet18", "resnet50", "vgg16", "googlenet"):
        c = model_cost(name)
        gmac, params_m = REFERENCE[name]
        assert c.error is None and c.device == "meta"
        assert c.gmac == pytest.approx(gmac, rel=0.02), name
        assert c.params / 1e6 == pytest.approx(params_m, rel=0.02), name


def _worker_args(batch):
    return argparse.Namespace(model="resnet18", batch=batch, steps=2, warmup=1, input_size=32,
                              num_classes=10, device="cpu", gpu=0)


def test_worker_reports_an_injected_cuda_oom_as_oom(monkeypatch):
    from gputop_dl.lab import sweep_worker

    monkeypatch.setenv(ENV_FAKE_OOM, "4")
    res = sweep_worker.run(_worker_args(4))
    assert res["status"] == "oom" and "out of memory" in res["message"]
    assert res["mem_kind"] == "host-rss-delta" and res["peak_mem"] >= 0
    assert sweep_worker.run(_worker_args(2))["status"] == "ok"  # below the hook's threshold
    assert sweep_worker.is_oom(RuntimeError("CUDA error: out of memory"))
    assert not sweep_worker.is_oom(ValueError("bad shape"))


def test_cli_one_line_errors(capsys):
    from gputop_dl.cli import main

    assert main(["models", "resnet5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'resnet5'" in err and "did you mean 'resnet50'" in err
    assert main(["sweep", "--model", "resnet18", "--batch", "16,x"]) == 2
    assert "--batch" in capsys.readouterr().err
    assert main(["profile", "--model", "resnet18", "--steps", "0"]) == 2
    assert "--steps 0" in capsys.readouterr().err


def test_models_json(capsys):
    from gputop_dl.cli import main

    assert main(["models", "alexnet", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["model"] == "alexnet" and row["gmac"] == pytest.approx(0.71, rel=0.02)
    assert row["train_gmac"] == pytest.approx(3 * row["gmac"])


@pytest.mark.shares_box("a sweep point that fails, and the others")
def test_real_launch_sweep_on_cpu_with_an_injected_oom(tmp_path, monkeypatch, capsys):
    from gputop_dl.cli import main
    from gputop_dl.record.store import Store

    monkeypatch.setenv(ENV_FAKE_OOM, "8")  # bs8 runs out of memory (hook); bs16 is skipped
    out = tmp_path / "sweep.md"
    rc = main(["sweep", "--model", "resnet18", "--batch", "2,4,8,16", "--steps", "3",
               "--warmup", "1", "--input-size", "32", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "NO CUDA" in text or "GPU" in text
    md = out.read_text()
    assert "| 2 | ok |" in md and "| 4 | ok |" in md
    assert "| 8 | out of memory |" in md and "| 16 | skipped |" in md
    assert "α =" in md and "Knee" in md
    store = Store()
    try:
        s = store.session()
        assert s.kind == "sweep" and s.state == "finished"
        jobs = {j["name"]: j for j in store.jobs(s.id)}
        assert [jobs[n]["status"] for n in ("bs2", "bs4", "bs8", "bs16")] == \
            ["done", "done", "failed", "skipped"]
        assert jobs["bs2"]["info"]["step_s"] > 0
        assert len(store.events(s.id, ev="sweep_result")) == 4
    finally:
        store.close()
    # the recorded sweep exports as the same report (rows, fit, knee), and as JSON
    again = tmp_path / "again.md"
    assert main(["export", str(again)]) == 0
    md2 = again.read_text()
    for line in md.splitlines():
        if line.startswith("| 2 |") or line.startswith("| 8 |") or line.startswith("- **Fit"):
            assert line in md2
    assert "α =" in md2 and "| 16 | skipped |" in md2
    js = tmp_path / "again.json"
    assert main(["export", str(js)]) == 0
    data = check(json.loads(js.read_text()))
    assert data["schema"] == "gputop-dl.sweep/1" and [r["status"] for r in data["rows"]] == \
        ["ok", "ok", "oom", "skipped"]


@pytest.mark.shares_box("a profile run completes")
def test_real_launch_profile_on_cpu(tmp_path, capsys):
    from gputop_dl.cli import main

    out = tmp_path / "prof"
    assert main(["profile", "--model", "resnet18", "--batch", "2", "--steps", "2", "--warmup",
                 "1", "--input-size", "32", "--out", str(out)]) == 0
    md = (out / "profile.md").read_text()
    assert "Top 10 operators by self CPU time" in md and "aten::" in md
    with open(out / "trace.json") as f:
        assert json.load(f)["traceEvents"]
    assert "trace.json" in capsys.readouterr().out
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]


LAB_TORCH_FREE = ["__init__.py", "sweepfit.py", "sweep.py", "sweep_report.py",
                  "sweep_worker_protocol.py"]


def test_the_sweep_parent_and_the_analysis_never_import_torch():
    import ast
    import subprocess
    import sys

    lab = os.path.join(os.path.dirname(__file__), "..", "gputop_dl", "lab")
    for f in LAB_TORCH_FREE:
        tree = ast.parse(open(os.path.join(lab, f), encoding="utf-8").read())
        mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
        mods |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
        assert not mods & {"torch", "torchvision"}, f
    code = ("import sys, gputop_dl.lab.sweep, gputop_dl.lab.sweep_report\n"
            "sys.exit(1 if [m for m in sys.modules if m.split('.')[0] == 'torch'] else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
