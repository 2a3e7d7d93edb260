"""Samples/s of the built-in trainer (events on) vs a plain loop of the same model and data.

Usage: python benchmarks/trainer_overhead.py [--rounds 5] [--steps 20]
Alternates plain and trainer runs (A/B/A/B...) in this process and prints medians and ratio.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from gputop_dl.injob.channel import EventWriter  # noqa: E402
from gputop_dl.injob.trainer.loop import Trainer  # noqa: E402
from gputop_dl.workload import Workload  # noqa: E402


def plain(tr: Trainer, steps: int) -> float:
    """The loop a user would write: no timing, no events."""
    it = iter(tr.loader)
    t0 = time.perf_counter()
    for _ in range(steps):
        x, y = next(it)
        tr.optimizer.zero_grad(set_to_none=True)
        loss = tr.criterion(tr.model(x), y)
        loss.backward()
        tr.optimizer.step()
        loss.item()
    return steps * tr.w.batch_size / (time.perf_counter() - t0)


def instrumented(tr: Trainer, steps: int) -> float:
    t0 = time.perf_counter()
    tr.run()
    return steps * tr.w.batch_size / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--model", default="mobilenet_v2")
    args = ap.parse_args()
    torch.set_num_threads(2)
    w = Workload(name="bench", model=args.model, input_size=64, num_classes=10, batch_size=16,
                 num_workers=0, transforms="light", epochs=1, steps_per_epoch=args.steps)
    ev_path = os.path.join(tempfile.mkdtemp(), "ev.jsonl")
    tr = Trainer(w, EventWriter(ev_path))
    plain(tr, 3)  # warm-up
    a, b = [], []
    for _ in range(args.rounds):
        a.append(plain(tr, args.steps))
        b.append(instrumented(tr, args.steps))
    pa, pb = statistics.median(a), statistics.median(b)
    print(f"model {args.model}, 64 px, batch 16, {args.steps} steps x {args.rounds} rounds")
    print(f"plain loop: median {pa:.1f} samples/s  ({', '.join(f'{x:.1f}' for x in a)})")
    print(f"trainer:    median {pb:.1f} samples/s  ({', '.join(f'{x:.1f}' for x in b)})")
    ratios = sorted(y / x for x, y in zip(a, b))
    print(f"ratio trainer/plain: median of per-round ratios {statistics.median(ratios):.3f}, "
          f"ratio of medians {pb / pa:.3f}  (target >= 0.98)")


if __name__ == "__main__":
    main()
