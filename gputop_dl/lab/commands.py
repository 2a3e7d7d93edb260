"""The lab commands `models`, `sweep` and `profile`: check the arguments, run, print, record.

Called by `cli/` with the parsed arguments; bad arguments are a one-line `UsageError` (exit 2).
The monitor process never imports torch: `models` and `profile` import it here, in the command
that needs it, and `sweep` runs each batch size in a worker process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from gputop_dl.errors import UsageError
from gputop_dl.text.console import console as text_console

if TYPE_CHECKING:
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.lab.sweep_worker_protocol import SweepRow


def check_model(name: str) -> str:
    """A torchvision classification model name, else a one-line UsageError with a suggestion."""
    import difflib

    from gputop_dl.config.model_names import CLASSIFICATION_MODELS, is_classification_model

    if is_classification_model(name):
        return name
    near = difflib.get_close_matches(name.lower(), sorted(CLASSIFICATION_MODELS), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise UsageError(f"unknown model {name!r}{hint}: expected a torchvision classification "
                     "model name such as resnet50")


def check_positive(**values: int) -> None:
    for key, v in values.items():
        if v is None or v < 1:
            raise UsageError(f"--{key.replace('_', '-')} {v}: expected a positive integer")


def parse_batches(text: str) -> list[int]:
    try:
        out = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise UsageError(f"--batch {text!r}: expected comma-separated positive integers, "
                         "e.g. 16,32,64")
    return sorted(set(out))


def _cuda_or_reason(gpu: int) -> tuple[Nvml, str, str | None]:
    """(Nvml, "cuda" | "cpu", why the CPU); a --gpu past the GPUs is a usage error."""
    from gputop_dl.collect.nvml.gpus import Nvml

    nvml = Nvml()
    n = nvml.device_count()
    if n and not 0 <= gpu < n:
        raise UsageError(f"--gpu {gpu}: expected a GPU index from 0 to {n - 1}")
    if n:
        return nvml, "cuda", None
    return nvml, "cpu", nvml.status_detail


def cmd_models(args: argparse.Namespace) -> int:
    names = [check_model(n) for n in args.names]
    check_positive(input_size=args.input_size)
    from gputop_dl.lab.cost import DEFAULT_MODELS, model_cost, rich_table

    costs = [model_cost(n, args.input_size) for n in names or DEFAULT_MODELS]
    if args.models_json:
        print(json.dumps([c.to_json() for c in costs], indent=2))
    else:
        text_console().print(rich_table(costs))
        print("GMac = FLOPs / 2 / 1e9 (torch FlopCounterMode, batch 1); training ≈ 3 × forward")
    return 1 if any(c.error for c in costs) else 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from gputop_dl.collect.environment import environment
    from gputop_dl.lab import sweep, sweep_report
    from gputop_dl.text.markdown import write_atomic
    from gputop_dl.text.fmt import secs, size
    from gputop_dl.record.store import Store

    model = check_model(args.model)
    batches = parse_batches(args.batch)
    check_positive(steps=args.steps, input_size=args.input_size, dataset_size=args.dataset_size)
    if args.warmup < 0 or args.threads < 0:
        bad = "--warmup" if args.warmup < 0 else "--threads"
        raise UsageError(f"{bad} {getattr(args, bad[2:])}: expected 0 or more")
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout}: expected a positive number of seconds")
    if args.out and os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: expected a file name (REPORT.md), found a folder")
    nvml, device, why = _cuda_or_reason(args.gpu)
    env = environment(nvml)
    gpu_name = nvml.names()[args.gpu] if device == "cuda" else None
    nvml.close()
    spec = sweep.SweepSpec(model=model, batches=tuple(batches), steps=args.steps,
                           warmup=args.warmup, input_size=args.input_size,
                           dataset_size=args.dataset_size, gpu=args.gpu, device=device,
                           device_note=why and "no CUDA: " + why, timeout_s=args.timeout,
                           keep_going=args.keep_going, threads=args.threads)
    console = text_console()
    if device == "cuda":
        console.print(f"sweep {model}: GPU {args.gpu} ({gpu_name}), batches {batches}",
                      markup=False)
    else:
        console.print(f"NO CUDA: the sweep runs on the CPU. {why}", markup=False)
        console.print(f"sweep {model}: cpu, batches {batches}", markup=False)
    command = (f"gputop-dl sweep --model {model} --batch {','.join(map(str, batches))} "
               f"--steps {args.steps} --warmup {args.warmup} --input-size {args.input_size} "
               f"--dataset-size {args.dataset_size}" + (f" --gpu {args.gpu}" if args.gpu else "")
               + (f" --threads {args.threads}" if args.threads else "")
               + (" --keep-going" if args.keep_going else "")
               + (f" --out {args.out}" if args.out else ""))

    def progress(r: SweepRow) -> None:
        if r["status"] == "ok":
            console.print(f"  bs{r['batch']}: {r['step_s'] * 1000:.1f} ms/step, "
                          f"peak {size(r.get('peak_mem'))} on {r.get('device')}", markup=False)
        else:
            console.print(f"  bs{r['batch']}: {r['status']}: {r.get('message', '')}",
                          markup=False)

    store = Store()
    try:
        sid = sweep.open_session(store, spec, command, env)
        try:
            res = sweep.run_sweep(spec, on_row=progress, store=store, session_id=sid)
        except BaseException:
            store.end_session(sid, "interrupted")
            raise
        sweep.close_session(store, res)
    finally:
        store.close()
    console.print(sweep_report.rich_table(res))
    console.print(sweep_report.fit_line(res), markup=False)
    console.print(sweep_report.knee_line(res), markup=False)
    ok = [r for r in res.rows if r["status"] == "ok"]
    if ok:
        best = max(ok, key=lambda r: r["samples_per_s"])
        console.print(f"fastest: batch {best['batch']}, {best['samples_per_s']:.1f} samples/s, "
                      f"epoch of {spec.dataset_size} ≈ {secs(best['epoch_s'])}", markup=False)
    if args.out:
        write_atomic(args.out, sweep_report.markdown(res, command, env))
        console.print(f"wrote {args.out}", markup=False)
    console.print(f"session {res.session_id} (sweep)", markup=False)
    return 1 if any(r["status"] == "error" for r in res.rows) else 0


def cmd_profile(args: argparse.Namespace) -> int:
    model = check_model(args.model)
    check_positive(batch=args.batch, steps=args.steps, input_size=args.input_size)
    if args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup}: expected 0 or more")
    nvml, device, why = _cuda_or_reason(args.gpu)
    nvml.close()
    out = args.out or f"profile-{model}-bs{args.batch}"
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out}: expected a folder, found a file")
    console = text_console()
    if why:
        console.print(f"NO CUDA: profiling on the CPU. {why}", markup=False)
    from gputop_dl.lab import opprofile

    try:
        res = opprofile.run_profile(model, args.batch, args.steps, args.warmup, args.input_size,
                                    out, device=device, gpu=args.gpu)
    except (RuntimeError, MemoryError) as exc:  # out of memory, an input too small, ...
        first = str(exc).strip().splitlines()
        print(f"gputop-dl: error: profile {model} bs{args.batch}: {type(exc).__name__}: "
              f"{first[0] if first else ''}", file=sys.stderr)
        return 1
    command = (f"gputop-dl profile --model {model} --batch {args.batch} --steps {args.steps} "
               f"--warmup {args.warmup} --input-size {args.input_size} --out {out}"
               + (f" --gpu {args.gpu}" if args.gpu else ""))
    for t in opprofile.rich_tables(res):
        console.print(t)
    md = opprofile.write_markdown(res, out, command)
    console.print(f"wrote {md} and {res.trace_path} (open the trace in https://ui.perfetto.dev)",
                  markup=False)
    return 0
