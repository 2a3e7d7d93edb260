"""Calibrated jobs for the stuck tests: a hang, a busy pause, a slow loop (run as a script).

    python stuck_jobs.py loader-hang N     a DataLoader whose worker sleeps forever at sample N
    python stuck_jobs.py checkpoint N S    N steps, then S seconds of CPU work without a step
    python stuck_jobs.py slow N S          N steps asleep: every 4th of S seconds, the others S / 3
    python stuck_jobs.py lock N            N steps, then a lock taken twice (a deadlock)
    torchrun --nproc-per-node 2 stuck_jobs.py ddp N
                                           DDP on gloo: after N steps rank 1 sleeps in its own
                                           code while rank 0 waits in the all-reduce

Each walks a torch DataLoader, so gputop-dl's start-up hook counts its steps. With
STUCK_JOBS_MARK set, a job appends the wall time it hangs at (or, not hanging, the time its
no-step stretch begins) to that file: the truth a detection time is measured from.
"""

import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset


def mark():
    path = os.environ.get("STUCK_JOBS_MARK")
    if path:
        with open(path, "a") as f:
            f.write(f"{time.time()}\n")


class Samples(Dataset):
    def __init__(self, hang_at=None):
        self.hang_at = hang_at

    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        if self.hang_at is not None and i >= self.hang_at:
            if i == self.hang_at:
                mark()
            time.sleep(10**6)  # a read from a dead mount, say
        return torch.zeros(4)


def checkpoint(seconds):
    """CPU work with no step: what saving a checkpoint or evaluating looks like."""
    end, x = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        x += sum(range(10_000))
    return x


def ddp(n):
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    loader = DataLoader(Samples(), batch_size=1)
    for step, batch in enumerate(loader):
        time.sleep(0.05)
        if step + 1 == n and rank == 1:
            rank_work_that_never_ends()
        dist.all_reduce(batch)


def rank_work_that_never_ends():
    mark()
    time.sleep(10**6)  # a rank held up in its own code: the others wait in the collective


def main(mode, n, s):
    if mode == "ddp":
        return ddp(n)
    workers = 1 if mode == "loader-hang" else 0
    loader = DataLoader(Samples(n if mode == "loader-hang" else None), batch_size=1,
                        num_workers=workers)
    lock = threading.Lock()
    for step, _batch in enumerate(loader):
        if mode == "slow":
            time.sleep(s if step % 4 == 3 else s / 3)
        else:
            time.sleep(0.05)
        if step + 1 == n:
            if mode == "checkpoint":
                mark()
                checkpoint(s)
                return
            if mode == "slow":
                return
            if mode == "lock":
                with lock:
                    mark()
                    lock.acquire()  # never given: the same thread holds it


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
