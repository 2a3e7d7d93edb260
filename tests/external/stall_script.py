"""A plain PyTorch training-like loop with a known data stall, run OUTSIDE gputop-dl.

It does not import gputop_dl. With `num_workers=0` the main thread loads each batch itself:
the dataset waits `--data-ms` per batch (spread over the batch's samples) and the "model"
computes for `--compute-ms` (a spin of small matmuls until the time is up) or, with
`--compute-iters N`, a fixed amount of work (N matmuls; used by the overhead benchmark).
It measures its own stall = time inside `next(loader)` / total loop time, and prints it as
JSON on its last line when it ends (after `--seconds`, or on SIGTERM/SIGINT); with
`--log-steps` that line also has every step's (start, batch ready, end) in `time.monotonic()`,
so a test can compute the true stall over exactly the windows py-spy sampled. `--stamps FILE`
appends each step's start (`time.monotonic()`) to FILE as it goes, one a line.
"""

import argparse
import json
import os
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SleepyDataset(Dataset):
    def __init__(self, n: int, wait_s: float):
        self.n, self.wait_s = n, wait_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.wait_s > 0:
            time.sleep(self.wait_s)
        return torch.full((16,), float(i % 7))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--data-ms", type=float, default=40.0)
    ap.add_argument("--compute-ms", type=float, default=60.0)
    ap.add_argument("--compute-iters", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--log-steps", action="store_true",
                    help="also print every step's (start, batch ready, end) in time.monotonic()")
    ap.add_argument("--stamps", default=None, metavar="FILE",
                    help="append each step's start (time.monotonic()) to FILE as it goes")
    args = ap.parse_args()
    stamps = open(args.stamps, "a", buffering=1) if args.stamps else None
    torch.set_num_threads(1)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    ds = SleepyDataset(10**9, args.data_ms / 1000.0 / args.batch_size)
    loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.num_workers)
    w = torch.randn(64, 64)
    x = torch.randn(64, 64)
    print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
    t_data = t_total = 0.0
    log = []
    steps = 0
    it = iter(loader)
    t_end = time.perf_counter() + args.seconds
    t_start = time.perf_counter()
    while not stop and time.perf_counter() < t_end:
        t0 = time.perf_counter()
        if stamps:
            stamps.write(f"{time.monotonic():.6f}\n")
        batch = next(it)
        t1 = time.perf_counter()
        if args.compute_iters:
            for _ in range(args.compute_iters):
                x = torch.tanh(x @ w)
        else:
            deadline = t1 + args.compute_ms / 1000.0
            while time.perf_counter() < deadline:
                x = torch.tanh(x @ w)
        x = x + batch.sum() * 0.0
        t2 = time.perf_counter()
        t_data += t1 - t0
        t_total += t2 - t0
        steps += 1
        if args.log_steps:  # perf_counter -> monotonic (the same clock for another process)
            off = time.monotonic() - time.perf_counter()
            log.append((round(t0 + off, 5), round(t1 + off, 5), round(t2 + off, 5)))
    wall = time.perf_counter() - t_start
    print(json.dumps({"stall": t_data / t_total if t_total else None, "steps": steps,
                      "samples_per_s": steps * args.batch_size / wall if wall else None,
                      "wall_s": wall, **({"steps_log": log} if args.log_steps else {})}),
          flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
