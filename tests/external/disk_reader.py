"""A plain PyTorch training script whose data comes from a disk; it does NOT import gputop_dl.
Ground truth for the I/O-bound verdict. Each sample is `--block-kib` KiB read at a random
aligned offset of `--file` with O_DIRECT (the page cache cannot hide the disk: each read goes
to the device; `--buffered`: through the page cache, so a file that fits in memory is read from
the disk once), in the DataLoader's `--workers` worker processes (0: the main process reads);
each step then waits `--compute-ms` (a stand-in for device compute, no CPU). Two copies on one
slow disk (or in one cgroup whose reads are throttled) share its bandwidth: each runs about
twice as slow as alone, while the CPU stays idle.
`--make SIZE_MIB` writes the file first (random bytes) and exits. It times every step and
prints, every `--report-every` steps, the median of the last ones as JSON (`recent_step_s`,
`t`: time.time()), and at the end the median step time after `--warmup` steps.
"""
import argparse
import json
import mmap
import os
import random
import statistics
import sys
import time

import torch
from data_file import make  # beside this script
from torch.utils.data import DataLoader, Dataset


class DiskBlocks(Dataset):
    def __init__(self, path, block, buffered=False):
        self.path, self.block, self.buffered = path, block, buffered
        self.blocks = os.path.getsize(path) // block
        self.fd = None

    def __len__(self):
        return 10 ** 7

    def __getitem__(self, i):
        if self.fd is None:  # opened in the process that reads (a worker, or the main one)
            self.fd = os.open(self.path, os.O_RDONLY | (0 if self.buffered else os.O_DIRECT))
            self.buf = mmap.mmap(-1, self.block)  # page-aligned, as O_DIRECT needs
            self.rng = random.Random(os.getpid())
        off = self.rng.randrange(self.blocks) * self.block
        os.preadv(self.fd, [self.buf], off)
        return torch.frombuffer(self.buf, dtype=torch.uint8)[:64].float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", required=True)
    ap.add_argument("--make", type=int, default=0, metavar="SIZE_MIB")
    ap.add_argument("--block-kib", type=int, default=128)
    ap.add_argument("--buffered", action="store_true",
                    help="read through the page cache (no O_DIRECT): a file that fits stays cached")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--compute-ms", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=0, help="0: until --seconds")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--report-every", type=int, default=5)
    args = ap.parse_args()
    if args.make:
        make(args.file, args.make)
        return 0
    torch.set_num_threads(1)
    data = DiskBlocks(args.file, args.block_kib << 10, args.buffered)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers)
    times, t_end = [], time.monotonic() + args.seconds
    t0 = time.monotonic()
    for i, x in enumerate(loader):
        time.sleep(args.compute_ms / 1000)
        x.sum()
        now = time.monotonic()
        times.append(now - t0)
        t0 = now
        if args.report_every and (i + 1) % args.report_every == 0:
            print(json.dumps({"step": i + 1, "t": time.time(),
                              "recent_step_s": statistics.median(times[-args.report_every:])}),
                  flush=True)
        if (args.steps and i + 1 >= args.steps) or now >= t_end:
            break
    kept = times[args.warmup:] or times
    print(json.dumps({"steps": len(times), "median_step_s": statistics.median(kept)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
