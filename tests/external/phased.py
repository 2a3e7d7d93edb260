"""A plain PyTorch training loop whose data, forward, backward and optimizer steps take known times; it does NOT import gputop_dl.

Ground truth for the step time and phase shares that py-spy reads from a job found running.
Each phase waits its time (sleeping, so the script uses almost no CPU and the truth holds on a
loaded machine): the dataset `--data-ms` per batch (0: in-memory batches, the loop never waits
on data), the model's forward `--forward-ms`, its backward `--backward-ms` (a custom autograd
function), the optimizer's step `--optimizer-ms` (an `Optimizer` subclass), and
`--accumulate N` forwards and backwards per optimizer step (gradient accumulation).
`--no-optimizer` runs an inference loop: forward only, under `torch.no_grad()`.

`--steps 0` trains until killed. At the end it prints its own mean step time (one optimizer
step, or one forward without an optimizer) as JSON on its last stdout line; `--report-every N`
also prints the mean of the last N steps every N steps (`recent_step_s`, and the time `t`).
"""

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, n: int, wait_s: float):
        self.n, self.wait_s = n, wait_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.wait_s:
            time.sleep(self.wait_s)
        return torch.ones(4), torch.zeros(1)


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wait_s):
        ctx.wait_s = wait_s
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.wait_s)
        return grad, None


class Model(nn.Module):
    def __init__(self, forward_s: float, backward_s: float):
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.forward_s, self.backward_s = forward_s, backward_s

    def forward(self, x):
        time.sleep(self.forward_s)
        return SlowBackward.apply(self.lin(x), self.backward_s)


class SlowSGD(torch.optim.SGD):
    def __init__(self, params, wait_s: float):
        super().__init__(params, lr=0.01)
        self.wait_s = wait_s

    def step(self, closure=None):
        time.sleep(self.wait_s)
        return super().step(closure)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps (0: forever)")
    ap.add_argument("--data-ms", type=float, default=0.0, help="per batch (0: never waits)")
    ap.add_argument("--forward-ms", type=float, default=30.0)
    ap.add_argument("--backward-ms", type=float, default=30.0)
    ap.add_argument("--optimizer-ms", type=float, default=20.0)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--no-optimizer", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--report-every", type=int, default=0,
                    help="also print the mean of the last N steps every N steps (0: never)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    steps = a.steps or 10**9
    model = Model(a.forward_ms / 1000, a.backward_ms / 1000)
    opt = SlowSGD(model.parameters(), a.optimizer_ms / 1000)
    per = 1 if a.no_optimizer else a.accumulate
    if a.data_ms:
        loader = DataLoader(SlowDataset(steps * per, a.data_ms / 1000), batch_size=1)
        batches = iter(loader)
    else:
        x, y = torch.ones(1, 4), torch.zeros(1, 1)
        batches = iter(lambda: (x, y), None)
    times, t = [], time.perf_counter()
    for _ in range(steps):
        if a.no_optimizer:
            with torch.no_grad():
                model(next(batches)[0])
        else:
            opt.zero_grad()
            for _ in range(per):
                xb, yb = next(batches)
                loss = ((model(xb) - yb) ** 2).mean()
                loss.backward()
            opt.step()
        now = time.perf_counter()
        times.append(now - t)
        t = now
        if a.report_every and len(times) % a.report_every == 0:
            recent = times[-a.report_every:]
            print(json.dumps({"recent_step_s": sum(recent) / len(recent), "t": time.time()}),
                  flush=True)
    used = times[a.warmup:] or times
    print(json.dumps({"step_time_s": sum(used) / len(used), "steps": len(times)}))


if __name__ == "__main__":
    main()
