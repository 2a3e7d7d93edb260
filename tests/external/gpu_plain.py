"""A plain PyTorch training script on a CUDA GPU with known costs; it does NOT import gputop_dl.
Ground truth for found GPU jobs and for the live verdict's GPU-sharing judgement. Each step
trains a stack of `--layers` square Linear layers of width `--width` in bf16 (forward,
backward, SGD step) on a batch of `--batch` rows, so one step keeps the GPU busy for a fixed
amount of work; the dataset waits `--data-ms` per batch in the main process (sleeping, like a
slow disk; 0: batches are ready at once; the batches are made once, so the data costs no CPU). Two copies on one GPU queue for its SMs: each one's
step time then rises toward twice its time alone, while its data wait does not.
It times every step itself (CUDA-synchronised) and prints, every `--report-every` steps, the
median of the last ones as JSON (`recent_step_s`, `t`: time.time()), and at the end the
median step time after `--warmup` steps on its last stdout line. `--seconds` stops it.
`--workers N`: the wait happens in N loader workers instead, which hand over a token per batch
(the batch itself stays on the GPU: a 128 MiB batch through the workers' shared memory would
cost the host more than the step), so a monitor can pace the job by its loader's hand-overs.
`--stamps`: also one line `it N T` per step (T: time.time() when it ended), the ground truth of
benchmarks/own_pace.py --cuda.
"""
import argparse
import json
import statistics
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowData(Dataset):
    """Whole batches (the loader does not collate): one made once in bf16 and handed out
    again after a wait of `data_ms` each, so the data costs no CPU beyond the copy."""

    def __init__(self, n, batch, width, data_ms, token=False):
        self.n, self.wait = n, data_ms / 1000
        self.batch = torch.zeros(1) if token else torch.randn(batch, width).to(torch.bfloat16)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.wait:
            time.sleep(self.wait)
        return self.batch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--data-ms", type=float, default=0.0)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--report-every", type=int, default=10)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--stamps", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="a dry run of the harness on the CPU")
    args = ap.parse_args()
    if not (args.cpu or torch.cuda.is_available()):
        print("gpu_plain.py: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cpu" if args.cpu else "cuda")
    sync = (lambda: None) if args.cpu else torch.cuda.synchronize
    model = nn.Sequential(*[nn.Linear(args.width, args.width, bias=False)
                            for _ in range(args.layers)]).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    data = SlowData(10 ** 7, args.batch, args.width, args.data_ms, token=args.workers > 0)
    loader = DataLoader(data, batch_size=None, num_workers=args.workers)
    on_gpu = (torch.randn(args.batch, args.width, device=dev).to(torch.bfloat16)
              if args.workers else None)
    times, t_end = [], time.monotonic() + args.seconds
    for i, x in enumerate(loader):
        t0 = time.monotonic()
        x = on_gpu if on_gpu is not None else x.to(dev, torch.bfloat16, non_blocking=True)
        loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        times.append(time.monotonic() - t0)
        if args.stamps:
            print(f"it {i} {time.time():.4f}", flush=True)
        if args.report_every and (i + 1) % args.report_every == 0:
            print(json.dumps({"step": i + 1, "t": time.time(),
                              "recent_step_s": statistics.median(times[-args.report_every:])}),
                  flush=True)
        if time.monotonic() >= t_end:
            break
    kept = times[args.warmup:] or times
    print(json.dumps({"steps": len(times), "median_step_s": statistics.median(kept),
                      "peak_mem_gib": None if args.cpu else torch.cuda.max_memory_allocated() / 2 ** 30}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
