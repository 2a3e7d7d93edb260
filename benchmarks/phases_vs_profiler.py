"""The hook's phase split beside a `torch.profiler` trace of the same steps.

    python benchmarks/phases_vs_profiler.py [--stack {lightning,hf}] [--runs 3] [--cuda]

Launches a real model's training script (no sleeps) as a `command` workload with no code
change, and prints, per run, the trace's forward, backward and optimizer (ms per step and share
of the step) beside the hook's over the same batches: the hook bills batch j's work to its step
j + 1 (docs/phases.md, "What a step is"). Target: each share within 10 points.

- `--stack lightning` (the default): tests/external/lightning_profiled.py, a convolutional net
  under Lightning's own `PyTorchProfiler`, active over 12 steps. Lightning runs the forward and
  backward inside the closure it hands to `optimizer.step`; the hook must bill them to forward
  and backward, not to the optimizer.
- `--stack hf`: tests/external/hf_profiled.py, a small GPT-2 under transformers' `Trainer`, with
  `torch.profiler` active over 12 steps from a `TrainerCallback`; the script labels the model's
  forward and the Trainer's `accelerator.backward` with `record_function` ranges, and the
  optimizer is torch's own `Optimizer.step#AdamW.step`. The Trainer fetches each batch through
  accelerate's loader (one batch ahead) and clips the gradients before the step (not a phase).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from frameworks import EXT, launch  # noqa: E402

PHASES = ("forward", "backward", "optimizer")
SCRIPTS = {"lightning": "lightning_profiled.py", "hf": "hf_profiled.py"}


def hook_figures(run, own: dict) -> dict:
    """The hook's mean step and phases (ms) over the steps that hold the trace's batches."""
    first = own["first_batch"] + 1
    steps = [s for s in run.steps if first <= s["step"] < first + own["steps"]]
    step = statistics.fmean(s["t_step"] for s in steps) * 1000
    out = {"steps": len(steps), "step_ms": step}
    for k in PHASES:
        out[f"{k}_ms"] = statistics.fmean(s.get("ph", {}).get(k, 0.0) for s in steps) * 1000
        out[f"{k}_share"] = out[f"{k}_ms"] / step
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", choices=sorted(SCRIPTS), default="lightning",
                    help="the training stack and its profiled script (default: lightning)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cuda", action="store_true", help="the script on the GPU")
    a = ap.parse_args()
    print("| run | step ms | forward ms (share) | backward ms (share) | optimizer ms (share) | "
          "largest share gap |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        os.environ["GPUTOP_DL_HOME"] = os.path.join(work, "home")
        for i in range(a.runs):
            argv = [sys.executable, os.path.join(EXT, SCRIPTS[a.stack]), *(["--cuda"] * a.cuda)]
            run, own = launch(work, argv)
            if "error" in own:
                print(f"| {i + 1} | {own['error']} | | | | |")
                continue
            got = hook_figures(run, own)
            cells = [f"{own['step_ms']:.1f} / {got['step_ms']:.1f}"]
            gap = 0.0
            for k in PHASES:
                cells.append(f"{own[f'{k}_ms']:.1f} ({own[f'{k}_share']:.0%}) / "
                             f"{got[f'{k}_ms']:.1f} ({got[f'{k}_share']:.0%})")
                gap = max(gap, abs(own[f"{k}_share"] - got[f"{k}_share"]))
            print(f"| {i + 1} | " + " | ".join(cells) + f" | {100 * gap:.1f} points |", flush=True)


if __name__ == "__main__":
    main()
