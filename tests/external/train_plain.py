"""A plain PyTorch training script with a known data stall; it does NOT import gputop_dl.

Run as a `command` workload, gputop-dl's start-up hook must measure it with no code change.
The dataset waits `--sample-ms` per sample (I/O-like: sleeps, no CPU), each training step runs
a tiny model and then waits until `--compute-ms` have passed (a stand-in for device compute).
Per epoch: one pass of the training loader (num_workers=0), a short validation pass in the
middle of the epoch (`--mid-eval-at`) and an eval pass at the end, neither of which is
training. The script measures its own stall = time inside next(train iterator) / training
loop time (eval excluded) and prints it as JSON on its last stdout line.
"""

import argparse
import json
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SleepyDataset(Dataset):
    """n random (x, y) samples; each __getitem__ waits wait_s first (like a slow disk)."""

    def __init__(self, n: int, wait_s: float, dim: int = 8):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, dim, generator=g)
        self.y = torch.randint(0, 2, (n,), generator=g)
        self.wait_s = wait_s

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        time.sleep(self.wait_s)
        return self.x[i], self.y[i]


def evaluate(model, loader, compute_s: float) -> float:
    """One eval pass; returns the seconds it took."""
    t0 = time.perf_counter()
    model.eval()
    with torch.no_grad():
        for x, _ in loader:
            model(x)
            time.sleep(compute_s / 2)
    model.train()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--sample-ms", type=float, default=4.0)
    ap.add_argument("--compute-ms", type=float, default=25.0)
    ap.add_argument("--eval-batches", type=int, default=3)
    ap.add_argument("--mid-eval-at", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(1)
    bs = a.batch_size
    train = DataLoader(SleepyDataset(a.steps * bs, a.sample_ms / 1000), batch_size=bs,
                       shuffle=True, num_workers=0)
    val = DataLoader(SleepyDataset(a.eval_batches * bs, a.sample_ms / 1000), batch_size=bs,
                     num_workers=0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    wait = total = 0.0
    steps = []
    for _ in range(a.epochs):
        t_start = time.perf_counter()
        eval_s = 0.0
        n = 0
        it = iter(train)
        while True:
            t0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - t0
            n += 1
            t_c = time.perf_counter()
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            time.sleep(max(0.0, a.compute_ms / 1000 - (time.perf_counter() - t_c)))
            if n == a.mid_eval_at:
                eval_s += evaluate(model, val, a.compute_ms / 1000)
        total += time.perf_counter() - t_start - eval_s
        steps.append(n)
        evaluate(model, val, a.compute_ms / 1000)
    print(json.dumps({"stall": wait / total, "steps": steps, "total_s": total,
                      "gputop_dl_imported": "gputop_dl" in sys.modules}))


if __name__ == "__main__":
    main()
