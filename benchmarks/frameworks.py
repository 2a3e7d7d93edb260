"""Training frameworks and plain loops as `command` jobs: each script's own figures beside the hook's.

    python benchmarks/frameworks.py [--only hf]
    python benchmarks/frameworks.py --long [--cuda]   # the gradient-accumulation rows, longer

Runs the small scripts of tests/external/ (Lightning, transformers.Trainer, a plain accelerate
loop, plain PyTorch loops), each launched by gputop-dl as a `command` workload with no code
change, and prints docs/validation.md's table "Training frameworks as command workloads": the
script's own epochs, batches per epoch, step time and phase times (its callback and the timers
around its phases' sleeps) / gputop-dl's (the hook's events). Step: the mean time per training
batch after the script's warm-up / the hook's mean step after each epoch's first; phases: mean
ms per batch, over the same steps. A hook step over 3× the median is left out and the row says
so, with the slowest step's phases: on CUDA one early step holds one-time costs (the first
cuBLAS call, lazily loaded kernels) that the scripts' warm-up leaves out. Where a script also
times each phase's whole span (hf_tiny.py: the sleep and the model's own work, host time), the
span is shown beside the sleep: on CUDA a real model's kernel launches are part of the phase. A framework that is not installed is
skipped with a line saying so. The phases are sleeps: their truth holds on a busy box.
`--cuda` runs each script on the GPU (`--cuda` passed to it), where the hook times the phases
with CUDA events; the label then says which clock each row's steps were timed by.
`--long`: the gradient-accumulation rows only, each with 5-6 times the batches, where a few
steps that hold one-time costs (the optimizer's first step comes only after the accumulation)
weigh less in the mean.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gputop_dl.collect.nvml.gpus import Nvml  # noqa: E402
from gputop_dl.runner import run_file  # noqa: E402

OUTLIER = 3.0  # a step this many times the median holds a one-time cost, not the loop's pace
EXT = os.path.join(os.path.dirname(HERE), "tests", "external")
ROWS = [  # (label, needs, script, arguments)
    ("Lightning `--batches 40 --limit 20 --workers 1`", "lightning", "lightning_tiny.py",
     ["--batches", "40", "--limit", "20", "--workers", "1"]),
    ("Lightning `--batches 8 --limit 5 --val-every 3 --accumulate 2 --workers 1`", "lightning",
     "lightning_tiny.py", ["--batches", "8", "--limit", "5", "--val-every", "3", "--accumulate",
                           "2", "--workers", "1"]),
    ("Lightning `--batches 6 --manual`", "lightning", "lightning_tiny.py",
     ["--batches", "6", "--manual"]),
    ("transformers `Trainer` (2 epochs of 12)", "transformers", "hf_tiny.py", []),
    ("transformers `Trainer --accumulate 2`", "transformers", "hf_tiny.py", ["--accumulate", "2"]),
    ("transformers `Trainer --max-steps 8`", "transformers", "hf_tiny.py", ["--max-steps", "8"]),
    ("accelerate loop (2 epochs of 10)", "accelerate", "accelerate_tiny.py", []),
    ("accelerate loop `--accumulate 2 --stop-after 7`", "accelerate", "accelerate_tiny.py",
     ["--accumulate", "2", "--stop-after", "7"]),
    ("plain loop `--amp` (autocast bf16 + GradScaler)", None, "plain_tiny.py", ["--amp"]),
    ("plain loop `--accumulate 3`", None, "plain_tiny.py", ["--accumulate", "3"]),
    ("plain loop `--iterable` (IterableDataset, no length)", None, "plain_tiny.py", ["--iterable"]),
    ("plain loop `--max-steps 12` (endless stream)", None, "plain_tiny.py", ["--max-steps", "12"]),
]

LONG_ROWS = [  # the accumulation rows, longer (--long)
    ("Lightning `--batches 48 --limit 30 --val-every 12 --accumulate 2 --workers 1`",
     "lightning", "lightning_tiny.py", ["--batches", "48", "--limit", "30", "--val-every", "12",
                                        "--accumulate", "2", "--workers", "1"]),
    ("transformers `Trainer --accumulate 2 --samples 240`", "transformers", "hf_tiny.py",
     ["--accumulate", "2", "--samples", "240"]),
    ("accelerate loop `--accumulate 2 --batches 60 --stop-after 50`", "accelerate",
     "accelerate_tiny.py", ["--accumulate", "2", "--batches", "60", "--stop-after", "50"]),
    ("plain loop `--accumulate 3 --batches 60`", None, "plain_tiny.py",
     ["--accumulate", "3", "--batches", "60"]),
]


def launch(work: str, argv: list[str]):
    body = ('[session]\nname = "frameworks"\ninterval = 0.2\nbaseline = "none"\n'
            f'[[workload]]\nname = "job"\ncommand = {json.dumps(argv)}\nwarmup_steps = 2\n')
    path = os.path.join(work, "w.toml")
    with open(path, "w") as f:
        f.write(body)
    run = run_file(path, nvml=Nvml()).runs["job"]
    with open(run.proc.log_path, encoding="utf-8") as f:
        own = json.loads(f.read().strip().splitlines()[-1])
    return run, own


def ms(x) -> str:
    return "–" if x is None else f"{x:.1f}"


def mean_ms(xs: list[float]) -> float | None:
    return statistics.fmean(xs) * 1000 if xs else None


def steady_steps(run) -> tuple[list[dict], int]:
    """The steps after each epoch's first (whose interval holds the epoch's start), less the
    slowest while it is over OUTLIER × the mean of the others (a one-time cost); and how many
    those were. (Not the median: with gradient accumulation some loops fetch a step's batches
    back to back, so half the steps are near 0 ms and a median rule would drop the other half.)"""
    seen: dict = {}
    after = []
    for s in run.steps:
        seen[s.get("epoch")] = n = seen.get(s.get("epoch"), 0) + 1
        if n > 1:
            after.append(s)
    kept = sorted(after, key=lambda s: s["t_step"])
    while len(kept) > 2 and kept[-1]["t_step"] > OUTLIER * statistics.fmean(
            s["t_step"] for s in kept[:-1]):
        kept.pop()
    return [s for s in after if s in kept], len(after) - len(kept)


def slowest(run) -> str:
    """The slowest step of the run, with its phases: where one-time costs went."""
    s = max(run.steps, key=lambda s: s["t_step"])
    ph = ", ".join(f"{k} {1000 * v:.0f}" for k, v in s.get("ph", {}).items())
    return f"slowest: epoch {s.get('epoch')} step {s['step']}: {1000 * s['t_step']:.0f} ms ({ph})"


def row(label: str, run, own: dict, cuda: bool = False) -> str:
    steady, dropped = steady_steps(run)
    if cuda:
        clocks = sorted({s.get("ph_clock", "host") for s in steady if s.get("ph")})
        label += f" on CUDA (phase clock: {', '.join(clocks) or '–'})"
    if dropped:
        label += f" ({dropped} step(s) over {OUTLIER:g}× the median left out; {slowest(run)})"
    mean = mean_ms
    epochs = f"{own['epochs'] or 'no epochs'} / {len(run.epochs) or 'no epochs'}"
    spe = (", ".join(map(str, own["batches"])) + " / "
           + (", ".join(str(e["steps"]) for e in run.epochs) if run.epochs
              else f"{len(run.steps)} steps"))
    cells = [epochs, spe, f"{own['step_ms']:.1f} / {ms(mean([s['t_step'] for s in steady]))}"]
    for k in ("forward", "backward", "optimizer"):
        got = mean([s.get("ph", {}).get(k, 0.0) for s in steady])
        span = own.get(f"{k}_wall_ms")  # the phase's whole span, where the script times it
        cells.append(f"{own[f'{k}_ms']:.1f}{'' if span is None else f' (span {span:.1f})'}"
                     f" / {ms(got)}")
    return f"| {label} | " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="rows whose label contains this")
    ap.add_argument("--cuda", action="store_true", help="each script on the GPU")
    ap.add_argument("--long", action="store_true",
                    help="the gradient-accumulation rows only, with 5-6x the batches")
    a = ap.parse_args()
    print("| stack, how it was run | epochs | steps per epoch | step ms | forward ms | "
          "backward ms | optimizer ms |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        os.environ["GPUTOP_DL_HOME"] = os.path.join(work, "home")
        for label, needs, script, args in LONG_ROWS if a.long else ROWS:
            if a.only and a.only not in label:
                continue
            if needs and importlib.util.find_spec(needs) is None:
                print(f"| {label} | skipped: {needs} is not installed | | | | | |")
                continue
            argv = [sys.executable, os.path.join(EXT, script), *args, *(["--cuda"] * a.cuda)]
            run, own = launch(work, argv)
            print(row(label, run, own, a.cuda), flush=True)


if __name__ == "__main__":
    main()
