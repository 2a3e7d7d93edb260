"""A Lightning run of a real model, timed by Lightning's own PyTorch profiler; it does NOT import gputop_dl.

`Trainer.fit` on the CPU (`--cuda`: the GPU) of a small convolutional net on random images (no
sleeps: the phases are the model's own work), with `profiler=PyTorchProfiler(...)`, Lightning's
wrapper of `torch.profiler`, active over `--active` training steps after `--skip`. Lightning
names its actions in the trace itself (`[pl][profile][Strategy]...training_step`, `...backward`,
`[LightningModule]...optimizer_step`) and torch names the optimizer's step
(`Optimizer.step#Adam.step`). From the exported Chrome trace, per profiler step (the truth, on
the last stdout line as JSON):

- forward: Lightning's `training_step` (the model's forward and the loss);
- backward: Lightning's `backward`;
- optimizer: torch's `Optimizer.step#...` less the Lightning actions inside it (automatic
  optimization runs `training_step`, `zero_grad` and `backward` in the closure it hands to
  `step`; the optimizer is the rest);
- step: the active window's span (`ProfilerStep#N`, all of them) over their count.

Each as the mean ms per active step, and their share of the mean step. The active steps
are the run's batches `--skip` + 2 onwards (the profiler's schedule waits `--skip`, warms up
one) — up to one batch off the hook's, since Lightning steps its profiler at `training_step`'s
end, not at the batch's start.
"""

import argparse
import glob
import json
import os
import tempfile

import lightning.pytorch as pl
import torch
from lightning.pytorch.profilers import PyTorchProfiler
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(pl.LightningModule):
    def __init__(self, width):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(16 * 30 * 30, width), nn.ReLU(), nn.Linear(width, 10))

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-4)


PL = "[pl][profile]"


def phases(trace_path):
    """(active steps, mean step ms, forward, backward, optimizer ms) from the Chrome trace.

    Lightning steps its profiler at `training_step`'s end, inside the optimizer's step (the
    closure): an optimizer step straddles two profiler steps. So each figure is summed over the
    whole active window (the actions that start in it) and divided by its steps."""
    with open(trace_path, encoding="utf-8") as f:
        d = json.load(f)
    events = [e for e in (d["traceEvents"] if isinstance(d, dict) else d)
              if e.get("ph") == "X" and "dur" in e]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    if not steps:
        return None
    lo = min(e["ts"] for e in steps)
    hi = max(e["ts"] + e["dur"] for e in steps)
    acts = [e for e in events if lo <= e["ts"] < hi
            and (e["name"].startswith(PL) or e["name"].startswith("Optimizer.step#"))]
    fwd = sum(e["dur"] for e in acts if e["name"].endswith(".training_step"))
    bwd = sum(e["dur"] for e in acts if e["name"].endswith(".backward"))
    opt = 0.0
    for o in (e for e in acts if e["name"].startswith("Optimizer.step#")):
        o_end = o["ts"] + o["dur"]
        # the Lightning actions inside the optimizer's step: its closure's parts (outermost)
        nested = [e for e in events if e["name"].startswith(PL) and o["ts"] <= e["ts"]
                  and e["ts"] + e["dur"] <= o_end and not e["name"].endswith("optimizer_step")]
        top = [e for e in nested if not any(
            p is not e and p["ts"] <= e["ts"] and e["ts"] + e["dur"] <= p["ts"] + p["dur"]
            for p in nested)]
        opt += o["dur"] - sum(e["dur"] for e in top)
    n = len(steps)
    return n, (hi - lo) / n / 1e3, fwd / n / 1e3, bwd / n / 1e3, opt / n / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--skip", type=int, default=4)
    ap.add_argument("--active", type=int, default=12)
    ap.add_argument("--cuda", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    n = a.batches * a.batch
    data = TensorDataset(torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g))
    with tempfile.TemporaryDirectory() as out:
        prof = PyTorchProfiler(dirpath=out, filename="p", export_to_chrome=True,
                               schedule=torch.profiler.schedule(wait=a.skip, warmup=1, active=a.active))
        trainer = pl.Trainer(max_epochs=1, accelerator="cuda" if a.cuda else "cpu", devices=1,
                             logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, profiler=prof)
        trainer.fit(Net(a.width), DataLoader(data, batch_size=a.batch))
        traces = glob.glob(os.path.join(out, "*.json"))
        got = phases(traces[0]) if traces else None
    if got is None:
        print(json.dumps({"error": "no profiler trace"}))
        return
    n, step, fwd, bwd, opt = got
    print(json.dumps({"first_batch": a.skip + 2, "steps": n, "step_ms": step,
                      "forward_ms": fwd, "backward_ms": bwd, "optimizer_ms": opt,
                      "forward_share": fwd / step, "backward_share": bwd / step,
                      "optimizer_share": opt / step}))


if __name__ == "__main__":
    main()
