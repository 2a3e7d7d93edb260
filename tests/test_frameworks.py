"""Training frameworks with no code change (issue 33): small real scripts launched as `command`
jobs, each printing its own figures (epochs, batches, step time, phase times) as the truth
that gputop-dl's hook figures are checked against. Each framework is a test extra: the tests
skip, saying why, where it is not installed."""

from __future__ import annotations

import io
import json
import os
import statistics
import sys

import pytest
from rich.console import Console

from gputop_dl.collect.nvml import Nvml
from gputop_dl.runner import run_file
from tests.conftest import write
from tests.schema_check import check

HERE = os.path.dirname(os.path.abspath(__file__))
LIGHTNING = os.path.join(HERE, "external", "lightning_tiny.py")
HF = os.path.join(HERE, "external", "hf_tiny.py")


def launch(tmp_path, argv):
    body = ('[session]\nname = "frameworks"\ninterval = 0.2\nbaseline = "none"\n'
            f'[[workload]]\nname = "job"\ncommand = {json.dumps(argv)}\nwarmup_steps = 2\n')
    path = tmp_path / "w.toml"
    path.write_text(body)
    eng = run_file(str(path), nvml=Nvml())
    run = eng.runs["job"]
    assert run.status == "done", run.stderr_tail
    with open(run.proc.log_path, encoding="utf-8") as f:
        own = json.loads(f.read().strip().splitlines()[-1])
    return eng, run, own


def assert_counts_and_times(run, own, steps_per_epoch):
    """Epochs and steps exact, step time within 10 %, phases within 10 % or 3 ms."""
    assert [e["steps"] for e in run.epochs] == own["batches"]
    assert [e["epoch"] for e in run.epochs] == list(range(1, own["epochs"] + 1))
    assert [(s["epoch"], s["step"]) for s in run.steps] == [
        (e, i) for e, n in enumerate(own["batches"], 1) for i in range(1, n + 1)]
    assert run.info["epochs"] == own["epochs"] and run.info["steps_per_epoch"] == steps_per_epoch
    # an epoch's first step is the first batch's wait only (docs/phases.md); the others carry
    # one batch's compute each
    steady = [s for s in run.steps if s["step"] > 1]
    step = statistics.fmean(s["t_step"] for s in steady)
    assert step == pytest.approx(own["step_ms"] / 1000, rel=0.10), (step, own)
    for k in ("forward", "backward", "optimizer"):
        got = statistics.fmean(s["ph"].get(k, 0.0) for s in steady)
        want = own[f"{k}_ms"] / 1000
        assert abs(got - want) <= max(0.1 * want, 0.003), (k, got, want)


def test_real_lightning_fit_with_a_batch_limit_counts_epochs_and_splits_the_closure(tmp_path):
    """`Trainer.fit(max_epochs=2, limit_train_batches=5)` of 8 batches, one loader worker, a
    sanity check and a mid-epoch validation every 3 batches, gradients accumulated over 2:
    2 epochs of 5 steps (not the validation batches), and the forward and backward that
    Lightning runs inside the closure it hands to `optimizer.step` are forward and backward."""
    pytest.importorskip("lightning", reason="lightning (a test extra) is not installed")
    eng, run, own = launch(tmp_path, [sys.executable, LIGHTNING, "--batches", "8", "--limit",
                                      "5", "--val-every", "3", "--accumulate", "2",
                                      "--workers", "1"])
    assert own["epochs"] == 2 and own["batches"] == [5, 5]
    assert_counts_and_times(run, own, steps_per_epoch=5)


def test_real_lightning_manual_optimization_counts_epochs_and_phases(tmp_path):
    pytest.importorskip("lightning", reason="lightning (a test extra) is not installed")
    eng, run, own = launch(tmp_path, [sys.executable, LIGHTNING, "--batches", "6", "--manual"])
    assert own["epochs"] == 2 and own["batches"] == [6, 6] and own["global_step"] == 12
    assert_counts_and_times(run, own, steps_per_epoch=6)


def test_real_step_based_training_says_no_epochs_never_0(tmp_path):
    """A loop over an endless IterableDataset (no length) that stops after 12 steps: 12 steps,
    no epoch ended; the console summary and the report say "no epochs", not "0"."""
    from gputop_dl.analyse.summary import summarize
    from gputop_dl.present.headless import summary_table
    from gputop_dl.present.report.document import session_json
    from gputop_dl.present.report.markdown import render_markdown
    from gputop_dl.record.store import Store

    script = write(tmp_path, "steps.py", """
import itertools, json, torch
from torch.utils.data import DataLoader, IterableDataset

class Endless(IterableDataset):
    def __iter__(self):
        return (torch.randn(4) for _ in itertools.count())

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, x in enumerate(DataLoader(Endless(), batch_size=2), 1):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    if step == 12:
        break
print(json.dumps({"steps": step}))
""")
    eng, run, own = launch(tmp_path, [sys.executable, script])
    assert own["steps"] == 12 and len(run.steps) == 12 and run.epochs == []
    assert run.info["steps_per_epoch"] is None
    job = summarize(Store(), eng.session_id).jobs[0]
    con = Console(width=220, record=True, file=io.StringIO())
    con.print(summary_table([job]))
    row = next(line for line in con.export_text().splitlines() if line.startswith("│ job"))
    assert "no epochs" in row and " 0 " not in row.split("│")[4]
    md = render_markdown(check(session_json(Store(), eng.session_id)))
    assert "| no epochs |" in md


def test_real_hf_trainer_with_accumulation_counts_epochs_steps_and_phases(tmp_path):
    """`transformers.Trainer` (a one-layer GPT-2 from a config, random tokens), 2 epochs of 12
    batches, gradients accumulated over 2 (the Trainer fetches both batches before computing):
    epochs and steps exact, the step within 10 % of the script's own, and each phase at least
    its sleep and at most 3 ms more (the tiny model's own compute)."""
    pytest.importorskip("transformers", reason="transformers (a test extra) is not installed")
    pytest.importorskip("accelerate", reason="accelerate (the Trainer needs it) is not installed")
    eng, run, own = launch(tmp_path, [sys.executable, HF, "--accumulate", "2"])
    assert own["epochs"] == 2 and own["batches"] == [12, 12] and own["global_step"] == 12
    assert [e["steps"] for e in run.epochs] == own["batches"]
    assert [(s["epoch"], s["step"]) for s in run.steps] == [
        (e, i) for e in (1, 2) for i in range(1, 13)]
    assert run.info["steps_per_epoch"] == 12
    steady = [s for s in run.steps if s["step"] > 1]
    step = statistics.fmean(s["t_step"] for s in steady)
    assert step == pytest.approx(own["step_ms"] / 1000, rel=0.10), (step, own)
    for k in ("forward", "backward", "optimizer"):
        got = statistics.fmean(s["ph"].get(k, 0.0) for s in steady)
        want = own[f"{k}_ms"] / 1000
        assert 0.9 * want <= got <= want + 0.003, (k, got, want)


@pytest.mark.xfail(strict=True, reason="accelerate's DataLoaderShard fetches one batch ahead: "
                   "the hook counts 9 steps where the Trainer stopped after 8 (not fixed yet)")
def test_real_hf_trainer_stopped_by_max_steps_says_no_epochs(tmp_path):
    """`max_steps = 8` of a 12-batch epoch: the Trainer's callback says one epoch ended (it
    calls `on_epoch_end` when it stops), but no epoch was completed: 8 steps, no epochs."""
    pytest.importorskip("transformers", reason="transformers (a test extra) is not installed")
    pytest.importorskip("accelerate", reason="accelerate (the Trainer needs it) is not installed")
    eng, run, own = launch(tmp_path, [sys.executable, HF, "--max-steps", "8"])
    assert own["global_step"] == 8 and own["batches"] == [8]
    assert [(s["epoch"], s["step"]) for s in run.steps] == [(1, i) for i in range(1, 9)]
    assert run.epochs == []
