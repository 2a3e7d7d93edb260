"""A plain PyTorch training script of known cost per step; it does NOT import gputop_dl.

Ground truth for the verdict on `command` jobs and for `diagnose`. Per sample the dataset
burns `--sample-cpu-ms` of CPU (a busy loop: like decoding and augmenting an image) and waits
`--sample-io-ms` (sleeping: like a slow disk); per step the main process waits `--compute-ms`
(a stand-in for device compute: it uses no CPU). So:

- light (io + compute, no CPU): several copies run truly in parallel on any machine;
- heavy (`--sample-cpu-ms` x batch / workers > compute): each copy needs about
  sample_cpu_ms x batch / step_time cores; three of them on two cores are CPU-bound;
- `--gpu-lock FILE`: the per-step wait holds an exclusive lock on FILE, an emulated GPU that
  copies given the same FILE share (they queue for it, as for one busy GPU; no NVML sees it).

`--ready FILE`: the script creates FILE once its warm-up steps are done (tests wait for it rather
than for a time: on a busy box, importing torch alone takes seconds of CPU).

`--steps 0` trains until killed. The script prints its own mean and median step time (from the
first step after `--warmup`) as JSON on its last stdout line when it ends normally.
"""

import argparse
import fcntl
import json
import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset


class CostlyDataset(Dataset):
    def __init__(self, n: int, cpu_s: float, io_s: float):
        self.n, self.cpu_s, self.io_s = n, cpu_s, io_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        end = time.thread_time() + self.cpu_s
        x = 0
        while time.thread_time() < end:
            x += 1
        if self.io_s:
            time.sleep(self.io_s)
        return torch.zeros(4), i % 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20, help="steps per epoch (0: forever)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--sample-cpu-ms", type=float, default=0.0)
    ap.add_argument("--sample-io-ms", type=float, default=0.0)
    ap.add_argument("--compute-ms", type=float, default=50.0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--gpu-lock", default=None, metavar="FILE")
    ap.add_argument("--ready", default=None, metavar="FILE")
    a = ap.parse_args()
    torch.set_num_threads(1)
    steps = a.steps or 10**9
    data = CostlyDataset(steps * a.batch_size, a.sample_cpu_ms / 1000, a.sample_io_ms / 1000)
    loader = DataLoader(data, batch_size=a.batch_size, num_workers=a.workers)
    gpu = open(a.gpu_lock, "a") if a.gpu_lock else None
    times = []
    for _ in range(a.epochs):
        t = time.perf_counter()
        for _x, _y in loader:
            if gpu is not None:
                fcntl.flock(gpu, fcntl.LOCK_EX)
            time.sleep(a.compute_ms / 1000)  # the "device"
            if gpu is not None:
                fcntl.flock(gpu, fcntl.LOCK_UN)
            now = time.perf_counter()
            times.append(now - t)
            t = now
            if a.ready and len(times) == a.warmup:
                open(a.ready, "w").close()
    used = times[a.warmup:] or times
    print(json.dumps({"step_time_s": sum(used) / len(used),
                      "median_step_s": statistics.median(used), "steps": len(times)}))


if __name__ == "__main__":
    main()
