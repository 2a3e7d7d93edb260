"""A transformers `Trainer` run of a real model, timed by `torch.profiler`; it does NOT import gputop_dl.

`Trainer.train` on the CPU (`--cuda`: the GPU) of a small GPT-2 built from a config (no
download; a few layers, random tokens; no sleeps: the phases are the model's own work), with
`max_steps`, no logging, no checkpoint, the loader in the main process. A `TrainerCallback`
runs `torch.profiler.profile` over `--active` training steps: started at the first step's
`on_step_begin`, stepped (`prof.step()`) at each further one, its schedule waiting `--skip`
steps and warming up one, so that each `ProfilerStep#N` of the trace spans one training step
from its `on_step_begin` to the next. The script labels the phases itself, without touching
what the model, the Trainer or the optimizer run:

- forward: a `record_function("hf_profiled.forward")` range opened in a forward pre-hook on the
  model and closed in its forward hook (the model's call, the loss inside it);
- backward: a `record_function("hf_profiled.backward")` range around the Trainer's
  `accelerator.backward` (an instance attribute: the Trainer's `training_step` calls it);
- optimizer: torch's own `Optimizer.step#AdamW.step` (the Trainer calls `optimizer.step()`
  with no closure);
- step: the active window's span (`ProfilerStep#N`, all of them) over their count.

Each as the mean ms per active step (the ranges that start in the window), and their share of
the mean step, on the last stdout line as JSON. `first_batch`: the run's batch (1-based) whose
step the window's first `ProfilerStep` is (`ProfilerStep#k` is batch k + 1: the profiler's
step 0 is the first batch's); with the defaults, batches `--skip` + 2 onwards.
"""

import argparse
import json
import os
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

FWD, BWD = "hf_profiled.forward", "hf_profiled.backward"


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, length, vocab):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


class Profiled(TrainerCallback):
    """torch.profiler over `active` training steps after `skip` and one warm-up step."""

    def __init__(self, trace, skip, active, cuda):
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] * cuda)
        self.prof = profile(activities=acts,
                            schedule=schedule(wait=skip, warmup=1, active=active, repeat=1),
                            on_trace_ready=lambda p: p.export_chrome_trace(trace))
        self.started = self.stopped = False

    def on_step_begin(self, args, state, control, **kw):
        if not self.started:
            self.started = True
            self.prof.start()  # the profiler's step 0: this (the first) batch's step
        elif not self.stopped:
            self.prof.step()

    def on_train_end(self, args, state, control, **kw):
        self.stop()

    def stop(self):
        if self.started and not self.stopped:
            self.stopped = True
            self.prof.stop()


def label_forward(model):
    """A record_function range from the model's forward pre-hook to its forward hook."""
    open_ = []

    def pre(m, i):
        rf = record_function(FWD)
        rf.__enter__()
        open_.append(rf)

    def post(m, i, out):
        if open_:
            open_.pop().__exit__(None, None, None)

    model.register_forward_pre_hook(pre)
    model.register_forward_hook(post)


def label_backward(trainer):
    """A record_function range around the Trainer's `accelerator.backward` (this instance's)."""
    acc = trainer.accelerator
    orig = acc.backward

    def backward(loss, **kwargs):
        with record_function(BWD):
            return orig(loss, **kwargs)

    acc.backward = backward


def phases(trace_path):
    """(first batch, active steps, mean step ms, forward, backward, optimizer ms) from the trace."""
    with open(trace_path, encoding="utf-8") as f:
        d = json.load(f)
    events = [e for e in (d["traceEvents"] if isinstance(d, dict) else d)
              if e.get("ph") == "X" and "dur" in e]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    if not steps:
        return None
    lo = min(e["ts"] for e in steps)
    hi = max(e["ts"] + e["dur"] for e in steps)
    inside = [e for e in events if lo <= e["ts"] < hi]

    def total(pred):
        return sum(e["dur"] for e in inside if pred(e["name"]))

    fwd = total(lambda n: n == FWD)
    bwd = total(lambda n: n == BWD)
    opt = total(lambda n: n.startswith("Optimizer.step#"))
    first = min(int(e["name"].split("#")[1]) for e in steps) + 1
    n = len(steps)
    return first, n, (hi - lo) / n / 1e3, fwd / n / 1e3, bwd / n / 1e3, opt / n / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-steps", type=int, default=24)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--skip", type=int, default=4)
    ap.add_argument("--active", type=int, default=12)
    ap.add_argument("--cuda", action="store_true", help="let the Trainer use the GPU")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.length, n_embd=a.width, n_layer=a.layers,
                     n_head=4)
    model = GPT2LMHeadModel(cfg)
    label_forward(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with tempfile.TemporaryDirectory() as out:
        trace = os.path.join(out, "trace.json")
        prof = Profiled(trace, a.skip, a.active, a.cuda)
        args = TrainingArguments(
            output_dir=os.path.join(out, "run"), max_steps=a.max_steps,
            per_device_train_batch_size=a.batch, logging_strategy="no", save_strategy="no",
            report_to=[], use_cpu=not a.cuda, dataloader_num_workers=0, disable_tqdm=True, seed=0)
        trainer = Trainer(model=model, args=args, optimizers=(opt, None), callbacks=[prof],
                          train_dataset=Tokens(a.max_steps * a.batch, a.length, a.vocab))
        label_backward(trainer)
        trainer.train()
        prof.stop()
        got = phases(trace) if os.path.exists(trace) else None
    if got is None:
        print(json.dumps({"error": "no profiler trace"}))
        return
    first, n, step, fwd, bwd, opt_ms = got
    print(json.dumps({"first_batch": first, "steps": n, "step_ms": step,
                      "forward_ms": fwd, "backward_ms": bwd, "optimizer_ms": opt_ms,
                      "forward_share": fwd / step, "backward_share": bwd / step,
                      "optimizer_share": opt_ms / step}))


if __name__ == "__main__":
    main()
