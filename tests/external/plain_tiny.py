"""Plain PyTorch training loops as people write them; it does NOT import gputop_dl.

One small model on the CPU (`--cuda`: on the GPU), phases of known length (sleeps the script
times itself: the dataset waits `--data-ms` per batch, a forward pre-hook `--fwd-ms`, a hook on the output's gradient
`--bwd-ms`, an optimizer step pre-hook `--opt-ms`), in one of these loops:

- `--amp`: `torch.autocast("cpu", dtype=torch.bfloat16)` around the forward, and a
  `torch.amp.GradScaler("cpu")` (on torch 2.3+ it really scales on the CPU: `scale`, then
  `step` unscales and skips the step on inf/NaN, and `update`);
- `--accumulate K`: gradients accumulated over K batches (an optimizer step every K-th batch
  and on the pass's last);
- `--iterable`: an `IterableDataset` with no `__len__` (`--batches` batches a pass: the loader's
  iterator ends, nobody knows the pass's length beforehand);
- `--max-steps N`: step-based training: an endless `IterableDataset`, stopped after N batches
  (no epoch ever ends).

Its own figures (the truth), on its last stdout line as JSON: the passes completed, the
batches of each pass, the optimizer steps, the mean time from one batch's arrival to the next
within a pass (after `--warmup`), and the mean ms per batch of each phase's sleeps.
"""

import argparse
import itertools
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

SLEPT: dict = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}


def sleep(key, s):
    t0 = time.perf_counter()
    time.sleep(s)
    SLEPT[key] += time.perf_counter() - t0


def sample(wait_s):
    time.sleep(wait_s)
    return torch.randn(8), torch.randn(1)


class Sized(Dataset):
    def __init__(self, n, wait_s):
        self.n, self.wait = n, wait_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return sample(self.wait)


class Stream(IterableDataset):
    """No __len__; `n` samples a pass (None: endless)."""

    def __init__(self, n, wait_s):
        self.n, self.wait = n, wait_s

    def __iter__(self):
        count = itertools.count() if self.n is None else range(self.n)
        return (sample(self.wait) for _ in count)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--iterable", action="store_true")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cuda", action="store_true", help="train on the GPU (the batch copied to it)")
    for k, v in (("data", 8.0), ("fwd", 6.0), ("bwd", 6.0), ("opt", 3.0)):
        ap.add_argument(f"--{k}-ms", type=float, default=v)
    a = ap.parse_args()
    torch.set_num_threads(1)
    wait = a.data_ms / 1000 / a.batch
    n = a.batches * a.batch
    if a.max_steps:
        data, epochs = Stream(None, wait), 1
    else:
        data, epochs = (Stream(n, wait) if a.iterable else Sized(n, wait)), a.epochs
    loader = DataLoader(data, batch_size=a.batch)
    dev = "cuda" if a.cuda else "cpu"
    model = torch.nn.Linear(8, 1).to(dev)
    model.register_forward_pre_hook(lambda m, i: sleep("forward", a.fwd_ms / 1000))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.register_step_pre_hook(lambda o, a_, k: sleep("optimizer", a.opt_ms / 1000))
    scaler = torch.amp.GradScaler(dev, enabled=a.amp)
    done, batches, gaps, total, opt_steps = 0, [], [], 0, 0
    for _ in range(epochs):
        batches.append(0)
        last = None
        for i, (x, y) in enumerate(loader, 1):
            now = time.perf_counter()
            if last is not None and batches[-1] >= a.warmup:
                gaps.append(now - last)
            last = now
            batches[-1] += 1
            total += 1
            if a.cuda:
                x, y = x.to(dev), y.to(dev)
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=a.amp):
                out = model(x)
                loss = torch.nn.functional.mse_loss(out.float(), y) / a.accumulate
            out.register_hook(lambda g: sleep("backward", a.bwd_ms / 1000))
            scaler.scale(loss).backward()
            if i % a.accumulate == 0 or (not a.iterable and not a.max_steps and i == len(loader)):
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
                opt_steps += 1
            if a.max_steps and total >= a.max_steps:
                break
        else:
            done += 1
    print(json.dumps({"epochs": done, "batches": batches, "optimizer_steps": opt_steps,
                      "step_ms": 1000 * sum(gaps) / len(gaps),
                      **{f"{k}_ms": 1000 * v / total for k, v in SLEPT.items()}}))


if __name__ == "__main__":
    main()
