"""A tiny PyTorch Lightning script whose phases take known times; it does NOT import gputop_dl.

`Trainer.fit` on the CPU: random data, a one-layer model, no download, no logger, no
checkpoint. The phases are sleeps (their truth holds on a loaded box): the dataset waits
`--data-ms` per batch, the model's forward `--fwd-ms`, an autograd function `--bwd-ms` in its
backward, the optimizer (SGD) `--opt-ms` in its `step` before the update. Lightning runs the
forward and backward inside the closure it passes to `optimizer.step` (automatic
optimization); `--manual` steps by hand. A validation loader runs a sanity check before
training and a validation pass at each epoch's end (`--val-every` for mid-epoch ones).

Its own figures (the truth), on its last stdout line as JSON (with `--stamps FILE`, also each
training batch's start in `time.monotonic()`, one a line, flushed as it goes, so a reading
taken while it runs can be checked against the steps of its own window): from a callback, the epochs
ended, the training batches per epoch and the mean step (from one `on_train_batch_start` to the
next, within an epoch, after `--warmup` steps); from the sleeps' own timers, the mean ms per
training step of forward, backward and optimizer (the optimizer without its closure).
"""

import argparse
import json
import time

import lightning.pytorch as pl
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


OWN: dict = {"forward": [], "backward": [], "optimizer": []}
STATE = {"training": False}


def own(key, dt):
    if STATE["training"]:
        OWN[key].append(dt)


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wait):
        ctx.wait = wait
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        t0 = time.perf_counter()
        time.sleep(ctx.wait)
        own("backward", time.perf_counter() - t0)
        return g, None


class Net(nn.Module):
    def __init__(self, fwd_ms, bwd_ms):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.fwd, self.bwd = fwd_ms / 1000, bwd_ms / 1000

    def forward(self, x):
        t0 = time.perf_counter()
        time.sleep(self.fwd)
        out = SlowBackward.apply(self.fc(x), self.bwd)
        own("forward", time.perf_counter() - t0)
        return out


class SlowSGD(torch.optim.SGD):
    def __init__(self, params, wait_s, **kw):
        super().__init__(params, **kw)
        self.wait = wait_s

    def step(self, closure=None):
        t0 = time.perf_counter()
        time.sleep(self.wait)
        own("optimizer", time.perf_counter() - t0)
        return super().step(closure)


class Tiny(pl.LightningModule):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.net = Net(a.fwd_ms, a.bwd_ms)
        self.loss = nn.CrossEntropyLoss()
        self.automatic_optimization = not a.manual

    def training_step(self, batch, i):
        x, y = batch
        loss = self.loss(self.net(x), y)
        if self.a.manual:
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
        return loss

    def validation_step(self, batch, i):
        x, y = batch
        return self.loss(self.net(x), y)

    def configure_optimizers(self):
        return SlowSGD(self.parameters(), self.a.opt_ms / 1000, lr=0.01)


class Truth(pl.Callback):
    """The script's own counters: epochs, training batches, the time between batch starts."""

    def __init__(self, stamps=None):
        self.epochs, self.batches, self.gaps, self.last = 0, [], [], None
        self.stamps = open(stamps, "a", buffering=1) if stamps else None

    def on_train_epoch_start(self, trainer, module):
        self.batches.append(0)
        self.last = None

    def on_train_batch_start(self, trainer, module, batch, i):
        now = time.perf_counter()
        if self.last is not None:
            self.gaps.append(now - self.last)
        self.last = now
        self.batches[-1] += 1
        STATE["training"] = True
        if self.stamps:
            self.stamps.write(f"{time.monotonic():.6f}\n")

    def on_train_batch_end(self, trainer, module, outputs, batch, i):
        STATE["training"] = False

    def on_validation_start(self, trainer, module):
        self.last = None  # a validation pass is no training step's time

    def on_train_epoch_end(self, trainer, module):
        self.epochs += 1


def main():
    ap = argparse.ArgumentParser()
    for k, v in (("data", 10.0), ("fwd", 10.0), ("bwd", 10.0), ("opt", 5.0)):
        ap.add_argument(f"--{k}-ms", type=float, default=v)
    ap.add_argument("--batches", type=int, default=12)  # in the training set
    ap.add_argument("--limit", type=int, default=None)  # limit_train_batches
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--val-every", type=int, default=None)  # val_check_interval (batches)
    ap.add_argument("--workers", type=int, default=0)  # training loader workers
    ap.add_argument("--manual", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cuda", action="store_true", help="accelerator='cuda' instead of 'cpu'")
    ap.add_argument("--stamps", default=None, metavar="FILE",
                    help="append each training batch's start (time.monotonic()) to FILE")
    a = ap.parse_args()
    torch.set_num_threads(1)
    truth = Truth(a.stamps)
    train = DataLoader(SleepyData(a.batches * a.batch, a.batch, a.data_ms), batch_size=a.batch,
                       num_workers=a.workers)
    val = DataLoader(SleepyData(3 * a.batch, a.batch, 0.0), batch_size=a.batch)
    trainer = pl.Trainer(max_epochs=a.epochs, limit_train_batches=a.limit, limit_val_batches=3,
                         accumulate_grad_batches=a.accumulate, val_check_interval=a.val_every,
                         accelerator="cuda" if a.cuda else "cpu", devices=1, logger=False,
                         enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=2, callbacks=[truth])
    trainer.fit(Tiny(a), train, val)
    gaps = truth.gaps[a.warmup:]
    per_step = sum(truth.batches)
    print(json.dumps({"epochs": truth.epochs, "batches": truth.batches,
                      "global_step": trainer.global_step,
                      "step_ms": 1000 * sum(gaps) / len(gaps),
                      **{f"{k}_ms": 1000 * sum(v) / per_step for k, v in OWN.items()}}))


if __name__ == "__main__":
    main()
