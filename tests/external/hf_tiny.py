"""A tiny Hugging Face `transformers.Trainer` run; it does NOT import gputop_dl.

A one-layer GPT-2 built from a config (no download), random token data, on the CPU, no
logging, no checkpoint. Known phase times, as sleeps the script times itself: the dataset waits
`--data-ms` per batch, a forward pre-hook on the model `--fwd-ms`, a full backward hook
`--bwd-ms`, an optimizer step pre-hook (AdamW) `--opt-ms`. Its own figures (the truth), on its
last stdout line as JSON: from a `TrainerCallback`, the epochs ended, the training batches per
epoch (`on_step_end` counts optimizer steps: times the accumulation) and the mean time per batch
(between `on_step_begin`s, after `--warmup`); `global_step` as the Trainer counts it; the mean
ms per batch of each phase's sleeps, and of each phase's whole span (`*_wall_ms`: the sleep and
the model's own compute, timed by the script's hooks). With `--stamps FILE`, also each step's start in
`time.monotonic()`, one a line, flushed as it goes.
"""

import argparse
import json
import os
import tempfile
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


SLEPT: dict = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
# Each phase's whole span as the script itself sees it: its sleep and the model's own compute,
# which a loaded box stretches. Forward: forward pre-hook to forward hook; backward: the loss's
# gradient to the last parameter's accumulated gradient; optimizer: step pre-hook to post-hook.
SPANS: dict = {"forward": [], "backward": [], "optimizer": []}  # [start, end] each


def begin(key):
    SPANS[key].append([time.perf_counter(), None])


def end(key):
    SPANS[key][-1][1] = time.perf_counter()


def wall(key):
    return sum(e - s for s, e in SPANS[key] if e is not None)


def sleep(key, s):
    t0 = time.perf_counter()
    time.sleep(s)
    SLEPT[key] += time.perf_counter() - t0


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, wait_s, length=16, vocab=64):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, vocab, (n, length), generator=g)
        self.wait = wait_s

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.wait)
        return {"input_ids": self.x[i], "labels": self.x[i]}


class Truth(TrainerCallback):
    def __init__(self, stamps=None):
        self.epochs, self.steps, self.gaps, self.last = 0, [0], [], None
        self.stamps = open(stamps, "a", buffering=1) if stamps else None

    def on_epoch_begin(self, args, state, control, **kw):
        self.last = None
        if self.epochs:
            self.steps.append(0)

    def on_step_begin(self, args, state, control, **kw):
        now = time.perf_counter()
        if self.last is not None:
            self.gaps.append(now - self.last)
        self.last = now
        if self.stamps:
            self.stamps.write(f"{time.monotonic():.6f}\n")

    def on_step_end(self, args, state, control, **kw):
        self.steps[-1] += 1

    def on_epoch_end(self, args, state, control, **kw):
        self.epochs += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=48)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--max-steps", type=int, default=-1)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cuda", action="store_true", help="let the Trainer use the GPU")
    ap.add_argument("--stamps", default=None, metavar="FILE",
                    help="append each step's start (time.monotonic()) to FILE")
    for k, v in (("data", 8.0), ("fwd", 6.0), ("bwd", 6.0), ("opt", 3.0)):
        ap.add_argument(f"--{k}-ms", type=float, default=v)
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2)
    truth = Truth(a.stamps)
    model = GPT2LMHeadModel(cfg)
    model.register_forward_pre_hook(lambda m, i: begin("forward"))
    model.register_forward_pre_hook(lambda m, i: sleep("forward", a.fwd_ms / 1000))

    def forward_end(m, i, out):
        end("forward")
        out.loss.register_hook(lambda g: begin("backward"))

    model.register_forward_hook(forward_end)
    for p in model.parameters():  # the backward's span ends at its last accumulated gradient
        p.register_post_accumulate_grad_hook(lambda p: end("backward"))
    model.transformer.h[0].register_full_backward_hook(
        lambda m, gi, go: sleep("backward", a.bwd_ms / 1000))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.register_step_pre_hook(lambda o, a_, k: begin("optimizer"))
    opt.register_step_pre_hook(lambda o, a_, k: sleep("optimizer", a.opt_ms / 1000))
    opt.register_step_post_hook(lambda o, a_, k: end("optimizer"))
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=os.path.join(out, "run"), num_train_epochs=a.epochs, max_steps=a.max_steps,
            per_device_train_batch_size=a.batch, gradient_accumulation_steps=a.accumulate,
            logging_strategy="no", save_strategy="no", report_to=[], use_cpu=not a.cuda,
            dataloader_num_workers=0, disable_tqdm=True, seed=0)
        trainer = Trainer(model=model, args=args, optimizers=(opt, None), callbacks=[truth],
                          train_dataset=Tokens(a.samples, a.data_ms / 1000 / a.batch))
        trainer.train()
    gaps = truth.gaps[a.warmup:]
    batches = [n * a.accumulate for n in truth.steps]
    print(json.dumps({"epochs": truth.epochs, "optimizer_steps": truth.steps,
                      "batches": batches, "global_step": trainer.state.global_step,
                      "step_ms": 1000 * sum(gaps) / len(gaps) / a.accumulate,
                      **{f"{k}_ms": 1000 * v / sum(batches) for k, v in SLEPT.items()},
                      **{f"{k}_wall_ms": 1000 * wall(k) / sum(batches) for k in SPANS}}))


if __name__ == "__main__":
    main()
