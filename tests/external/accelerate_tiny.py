"""A plain Hugging Face `accelerate` training loop (no Trainer); it does NOT import gputop_dl.

`Accelerator(cpu=True)` prepares a one-layer model, AdamW and a DataLoader (accelerate wraps it in
its own loader, which fetches one batch ahead); the loop runs `--epochs` passes under
`accelerator.accumulate(model)` (`--accumulate` batches per optimizer step) and may stop after
`--stop-after` batches in all (a step-based run). Known phase times, as sleeps the script times
itself: the dataset waits `--data-ms` per batch, a forward pre-hook `--fwd-ms`, a backward hook on
the output `--bwd-ms`, an optimizer step pre-hook `--opt-ms`.

Its own figures (the truth), on its last stdout line as JSON: the passes it completed, the
batches it received in each pass, the mean time from one batch's arrival to the next within a
pass (after `--warmup`), and the mean ms per batch of each phase's sleeps.
"""

import argparse
import json
import time

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

from plain_tiny import SLEPT, sleep  # the timed sleeps, shared with the plain loops
from plain_tiny import Sized as Sleepy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--stop-after", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cuda", action="store_true", help="let accelerate use the GPU")
    for k, v in (("data", 8.0), ("fwd", 6.0), ("bwd", 6.0), ("opt", 3.0)):
        ap.add_argument(f"--{k}-ms", type=float, default=v)
    a = ap.parse_args()
    torch.set_num_threads(1)
    acc = Accelerator(cpu=not a.cuda, gradient_accumulation_steps=a.accumulate)
    model = torch.nn.Linear(8, 1)
    model.register_forward_pre_hook(lambda m, i: sleep("forward", a.fwd_ms / 1000))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.register_step_pre_hook(lambda o, a_, k: sleep("optimizer", a.opt_ms / 1000))
    loader = DataLoader(Sleepy(a.batches * a.batch, a.data_ms / 1000 / a.batch),
                        batch_size=a.batch)
    model, opt, loader = acc.prepare(model, opt, loader)
    epochs, batches, gaps, total, opt_steps = 0, [], [], 0, 0
    for _ in range(a.epochs):
        batches.append(0)
        last = None
        for x, y in loader:
            now = time.perf_counter()
            if last is not None and batches[-1] >= a.warmup:
                gaps.append(now - last)
            last = now
            batches[-1] += 1
            total += 1
            with acc.accumulate(model):
                out = model(x)
                out.register_hook(lambda g: sleep("backward", a.bwd_ms / 1000))
                acc.backward(torch.nn.functional.mse_loss(out, y))
                opt.step()
                opt.zero_grad()
                opt_steps += acc.sync_gradients
            if a.stop_after and total >= a.stop_after:
                break
        else:
            epochs += 1
            continue
        break
    print(json.dumps({"epochs": epochs, "batches": batches, "optimizer_steps": opt_steps,
                      "step_ms": 1000 * sum(gaps) / len(gaps),
                      **{f"{k}_ms": 1000 * v / total for k, v in SLEPT.items()}}))


if __name__ == "__main__":
    main()
