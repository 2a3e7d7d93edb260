"""A plain PyTorch script whose step phases take known times; it does NOT import gputop_dl.

data: the dataset waits `--data-ms` per batch (sleeps, split over the batch's samples);
forward: a module that waits `--fwd-ms`; backward: an autograd function that waits `--bwd-ms`
in its backward; optimizer: an SGD whose step waits `--opt-ms` first. Sleeps, so the truth
holds on a loaded machine. With `--ddp` it runs as one rank of a gloo DDP job (under torchrun:
RANK, WORLD_SIZE and the rendezvous come from the environment); `--slow-rank R --slow-ms S`
adds S ms of data wait per batch on rank R only. It times its own phases too (the truth the
hook's figures are checked against, whatever the sleeps overshoot on a loaded machine) and prints
their means in ms, after the first `--warmup` steps, as JSON on its last stdout line.
"""

import argparse
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SleepyData(Dataset):
    def __init__(self, n, batch, data_ms):
        self.n, self.wait = n, data_ms / 1000 / batch

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.wait)
        return torch.randn(8), torch.randint(0, 2, ()).long()


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wait):
        ctx.wait = wait
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        time.sleep(ctx.wait)
        return g, None


class Net(nn.Module):
    def __init__(self, fwd_ms, bwd_ms):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.fwd, self.bwd = fwd_ms / 1000, bwd_ms / 1000

    def forward(self, x):
        time.sleep(self.fwd)
        return SlowBackward.apply(self.fc(x), self.bwd)


def timed(own, key, f, *args):
    t0 = time.perf_counter()
    out = f(*args)
    own.setdefault(key, []).append(time.perf_counter() - t0)
    return out


class SlowSGD(torch.optim.SGD):
    def __init__(self, params, wait_s, **kw):
        super().__init__(params, **kw)
        self.wait = wait_s

    def step(self, closure=None):
        time.sleep(self.wait)
        return super().step(closure)


def main():
    ap = argparse.ArgumentParser()
    for k, v in (("data", 40.0), ("fwd", 20.0), ("bwd", 30.0), ("opt", 10.0), ("slow", 0.0)):
        ap.add_argument(f"--{k}-ms", type=float, default=v)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    data_ms = a.data_ms + (a.slow_ms if rank == a.slow_rank else 0.0)
    model = Net(a.fwd_ms, a.bwd_ms)
    if a.ddp:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        model = nn.parallel.DistributedDataParallel(model)
    loader = DataLoader(SleepyData(a.steps * a.batch, a.batch, data_ms), batch_size=a.batch)
    opt = SlowSGD(model.parameters(), a.opt_ms / 1000, lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    own: dict = {}
    it = iter(loader)
    for _ in range(len(loader)):
        x, y = timed(own, "data", next, it)
        x, y = x.to("cpu"), y.to("cpu")
        opt.zero_grad()
        loss = timed(own, "forward", lambda x=x, y=y: loss_fn(model(x), y))
        timed(own, "backward", loss.backward)
        timed(own, "optimizer", opt.step)
    if a.ddp:
        dist.destroy_process_group()
    print(json.dumps({"rank": rank, **{f"{k}_ms": 1000 * sum(v[a.warmup:]) / len(v[a.warmup:])
                                       for k, v in own.items()}}))


if __name__ == "__main__":
    main()
