"""Training frameworks and plain loops as `command` jobs: each script's own figures beside the hook's.

    python benchmarks/frameworks.py [--only hf]

Runs the small scripts of tests/external/ (Lightning, transformers.Trainer, a plain accelerate
loop, plain PyTorch loops), each launched by gputop-dl as a `command` workload with no code
change, and prints docs/validation.md's table "Training frameworks as command workloads": the
script's own epochs, batches per epoch, step time and phase times (its callback and the timers
around its phases' sleeps) / gputop-dl's (the hook's events). Step: the mean time per training
batch after each epoch's first; phases: mean ms per batch. A framework that is not installed is
skipped with a line saying so. The phases are sleeps: their truth holds on a busy box.
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

from gputop_dl.collect.nvml import Nvml  # noqa: E402
from gputop_dl.runner import run_file  # noqa: E402

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


def row(label: str, run, own: dict) -> str:
    steady = [s for s in run.steps if s["step"] > 1]
    mean = mean_ms
    epochs = f"{own['epochs'] or 'no epochs'} / {len(run.epochs) or 'no epochs'}"
    spe = (", ".join(map(str, own["batches"])) + " / "
           + (", ".join(str(e["steps"]) for e in run.epochs) if run.epochs
              else f"{len(run.steps)} steps"))
    cells = [epochs, spe, f"{own['step_ms']:.1f} / {ms(mean([s['t_step'] for s in steady]))}"]
    for k in ("forward", "backward", "optimizer"):
        got = mean([s.get("ph", {}).get(k, 0.0) for s in steady])
        cells.append(f"{own[f'{k}_ms']:.1f} / {ms(got)}")
    return f"| {label} | " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="rows whose label contains this")
    a = ap.parse_args()
    print("| stack, how it was run | epochs | steps per epoch | step ms | forward ms | "
          "backward ms | optimizer ms |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        os.environ["GPUTOP_DL_HOME"] = os.path.join(work, "home")
        for label, needs, script, args in ROWS:
            if a.only and a.only not in label:
                continue
            if needs and importlib.util.find_spec(needs) is None:
                print(f"| {label} | skipped: {needs} is not installed | | | | | |")
                continue
            run, own = launch(work, [sys.executable, os.path.join(EXT, script), *args])
            print(row(label, run, own), flush=True)


if __name__ == "__main__":
    main()
