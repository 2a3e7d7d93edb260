"""A DataLoader with one worker, consumed in phases the caller paces through stdin.

    python loader_batches.py          # prints "ready PID" (its worker), then for each line
                                      # "N SECONDS" on stdin: consumes N batches, SECONDS apart,
                                      # and prints "done TOTAL" (batches consumed so far)

For tests/test_loader_batches.py: a worker's write calls per batch, fast and slow."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    """Random 3x16x16 images and labels, each a little CPU work (a real transform's share)."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, 16, 16, generator=g)
        return (x - x.mean()) / (x.std() + 1e-6), i % 10


def main() -> None:
    torch.set_num_threads(1)
    it = iter(DataLoader(Images(), batch_size=8, num_workers=1, persistent_workers=True))
    next(it)  # the worker is up and has made its first batches
    import psutil

    workers = psutil.Process().children()
    print(f"ready {workers[0].pid}", flush=True)
    total = 1
    for line in sys.stdin:
        n, gap = line.split()
        for _ in range(int(n)):
            next(it)
            total += 1
            time.sleep(float(gap))
        print(f"done {total}", flush=True)


if __name__ == "__main__":
    main()
