"""Command line: the monitor, `--once`, `launch`, `export`, `sessions`, `models`, `sweep`, `profile`.

Exit codes: 0 success; 2 bad usage or bad input (one line, no traceback); 1 anything else
(a job failed, an engine error), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys

from gputop_dl import __version__

EPILOG = """\
examples:
  gputop-dl                                         live monitor of this machine and its training jobs
  gputop-dl --once --json                           one snapshot as JSON, for scripts
  gputop-dl --once --stall 2                        ... with each job's data-stall % (py-spy, 2 s)
  gputop-dl launch workloads/mobilenet_trio.toml    run the workloads, live, recorded
  gputop-dl launch FILE --headless --only bs32,bs64 without the TUI, two of the jobs
  gputop-dl export report.md                        the latest session as a Markdown report
  gputop-dl sessions                                list recorded sessions
  gputop-dl models resnet50 vgg16                   parameters and forward GMac
  gputop-dl sweep --model resnet34 --batch 16,32,64 memory and time per batch size, the knee
  gputop-dl profile --model resnet18 --batch 32     top-10 operators and a Chrome trace

data: sessions are kept in $GPUTOP_DL_HOME (default: the user data dir, e.g.
~/.local/share/gputop-dl/sessions.db)."""


class UsageError(Exception):
    """Bad usage: printed as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gputop-dl", description="Terminal monitor and profiler for deep-learning training.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"gputop-dl {__version__}")
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--json", action="store_true", help="with --once: print the snapshot as JSON")
    p.add_argument("--stall", type=float, default=0.0, metavar="S",
                   help="with --once: sample every training job's main thread with py-spy for "
                   "S seconds (e.g. 2) to measure its data-stall %% (default: not measured)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="monitor: seconds between samples (default 1)")
    p.add_argument("--stall-budget", type=float, default=None, metavar="PCT",
                   help="monitor: %% of one core that py-spy may use to measure the data-stall of "
                   "jobs gputop-dl did not start (default 0.25; 0: do not measure it)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    lp = sub.add_parser("launch", help="start the workloads of a TOML file, live and recorded",
                        description="Start the workloads in FILE: solo baselines (per the file's "
                        "[session] baseline), then all together; live view; recorded session.")
    lp.add_argument("file", metavar="FILE.toml")
    lp.add_argument("--headless", action="store_true",
                    help="console output instead of the TUI (for ssh, nohup, CI)")
    lp.add_argument("--only", metavar="NAMES", help="comma-separated workload names to start")
    lp.add_argument("--baseline", choices=("measure", "cache", "none"),
                    help="override the file's [session] baseline")
    ep = sub.add_parser("export", help="write a recorded session as a Markdown or JSON report",
                        description="Write the latest session (or --session ID) to OUT: "
                        "OUT.md is a GitHub-flavoured Markdown report, OUT.json the same content "
                        "as JSON (schema gputop-dl.session/1).")
    ep.add_argument("out", metavar="OUT.md|OUT.json")
    ep.add_argument("--session", metavar="ID", help="session id or a unique prefix of it "
                    "(default: the latest; see `gputop-dl sessions`)")
    sub.add_parser("sessions", help="list recorded sessions", description="List recorded "
                   "sessions, newest first: id, name, start, duration, jobs, verdict, state.")
    add_lab_parsers(sub)
    return p


def add_lab_parsers(sub) -> None:
    """The lab experiments: `models`, `sweep`, `profile` (they import torch, the monitor never)."""
    mp = sub.add_parser("models", help="parameters and forward GMac of torchvision models",
                        description="Parameters (M) and forward GMac for one image, counted with "
                        "torch's FlopCounterMode (GMac = FLOPs / 2 / 1e9). Training costs about "
                        "3 × forward. Default: the background's models.")
    mp.add_argument("names", nargs="*", metavar="MODEL")
    mp.add_argument("--input-size", type=int, default=224, metavar="PX")
    mp.add_argument("--json", action="store_true", dest="models_json", help="print JSON")
    sp = sub.add_parser("sweep", help="run a model at each batch size: memory, time, the knee",
                        description="Train MODEL for a few steps at each batch size, each in its "
                        "own process (an out-of-memory batch cannot stop the sweep), smallest "
                        "first; larger batches after the first out-of-memory one are skipped "
                        "unless --keep-going. Reports peak memory, median step time, samples/s, "
                        "projected epoch time, the fit t_step = a + b*batch and the knee. "
                        "Exit 1 if a batch failed with an error other than out of memory.")
    sp.add_argument("--model", required=True)
    sp.add_argument("--batch", required=True, metavar="B1,B2,...",
                    help="comma-separated batch sizes, e.g. 16,32,64")
    sp.add_argument("--gpu", type=int, default=0, help="GPU index (default 0)")
    sp.add_argument("--steps", type=int, default=10, help="timed steps per batch (default 10)")
    sp.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    sp.add_argument("--input-size", type=int, default=224, metavar="PX")
    sp.add_argument("--dataset-size", type=int, default=50000, metavar="N",
                    help="samples per epoch, for the projected epoch time (default 50000)")
    sp.add_argument("--timeout", type=float, default=600.0, metavar="S",
                    help="seconds allowed per batch size (default 600)")
    sp.add_argument("--threads", type=int, default=0, metavar="N",
                    help="torch CPU threads per worker (default: torch's own choice)")
    sp.add_argument("--keep-going", action="store_true",
                    help="run the larger batches even after one ran out of memory")
    sp.add_argument("--out", metavar="REPORT.md", help="also write a Markdown report")
    pp = sub.add_parser("profile", help="top-10 operators of a few training steps, Chrome trace",
                        description="Train MODEL on random tensors: warm-up, then a short "
                        "torch.profiler window. Prints the top-10 operators by self CPU time "
                        "(and self CUDA time on a GPU); writes DIR/profile.md and DIR/trace.json "
                        "(open it in https://ui.perfetto.dev).")
    pp.add_argument("--model", required=True)
    pp.add_argument("--batch", type=int, default=32)
    pp.add_argument("--steps", type=int, default=5, help="profiled steps (default 5)")
    pp.add_argument("--warmup", type=int, default=3, help="steps before the window (default 3)")
    pp.add_argument("--input-size", type=int, default=224, metavar="PX")
    pp.add_argument("--gpu", type=int, default=0, help="GPU index (default 0)")
    pp.add_argument("--out", metavar="DIR", help="output folder (default profile-MODEL-bsB)")


def _install_stop_handlers(engine) -> None:
    def handler(signum, _frame):
        engine.request_stop("interrupted")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def cmd_launch(args) -> int:
    from gputop_dl.collect.nvml import Nvml
    from gputop_dl.config import load_session
    from gputop_dl.engine import Engine

    nvml = Nvml()
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    spec = load_session(args.file, gpu_count=nvml.device_count(), only=only)
    if args.baseline:
        spec = dataclasses.replace(spec, baseline=args.baseline)
    if not spec.cuda:
        spec = dataclasses.replace(spec, cpu_fallback_reason=nvml.status_detail)
    engine = Engine(spec, nvml=nvml, command="gputop-dl " + " ".join(sys.argv[1:]))
    if not args.headless and sys.stdout.isatty():
        try:
            from gputop_dl.present.tui.app import run_launch_tui
        except ImportError:
            run_launch_tui = None
        if run_launch_tui is not None:
            return run_launch_tui(engine, spec)
    return run_headless(engine, spec)


def run_headless(engine, spec) -> int:
    from gputop_dl.analyse.summary import summarize
    from gputop_dl.present.headless import Headless, header_lines, summary_table, verdict_lines
    from gputop_dl.record.store import Store

    view = Headless()
    engine.subscribe(view.feed)
    _install_stop_handlers(engine)
    engine.start()
    while engine.session_id is None and engine.running:
        engine.join(0.05)
    for line in header_lines(spec, engine.session_id, engine.env.get("gpu_status_detail")):
        view.console.print(line)
    view.run(engine)
    engine.join()
    if engine.session_id:
        store = Store()
        try:
            summary = summarize(store, engine.session_id)
        finally:
            store.close()
        view.console.print(summary_table(summary.jobs))
        for line in verdict_lines(engine.verdict):
            view.console.print(line)
        view.console.print(f"session {engine.session_id} ({engine.state})")
    return engine.exit_code()


def cmd_export(args) -> int:
    from gputop_dl.present.report import ExportError, export_session

    try:
        path = export_session(args.session, args.out)
    except ExportError as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {path}")
    return 0


def cmd_sessions(args) -> int:
    from rich.console import Console

    from gputop_dl.present.report import list_sessions, sessions_table
    from gputop_dl.record.store import default_db_path

    rows = list_sessions()
    if not rows:
        print(f"no sessions recorded yet (in {default_db_path()}): run "
              "`gputop-dl launch FILE.toml` first")
        return 0
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    console.print(sessions_table(rows))
    return 0


def cmd_once(args) -> int:
    from gputop_dl.present.once import print_once, take_snapshot

    if args.stall < 0 or args.stall > 60:
        raise UsageError(f"--stall {args.stall:g}: expected seconds between 0 and 60")
    snap = take_snapshot(stall_s=args.stall)
    if args.json:
        print(json.dumps(snap.to_json(), indent=2))
    else:
        print_once(snap)
    return 0


def check_model(name: str) -> str:
    """A torchvision classification model name, else a one-line UsageError with a suggestion."""
    import difflib

    from gputop_dl.model_names import CLASSIFICATION_MODELS, is_classification_model

    if is_classification_model(name):
        return name
    near = difflib.get_close_matches(name.lower(), sorted(CLASSIFICATION_MODELS), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise UsageError(f"unknown model {name!r}{hint}: expected a torchvision classification "
                     "model name such as resnet50")


def check_positive(**values) -> None:
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


def _lab_console():
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def _cuda_or_reason(gpu: int):
    """(Nvml, "cuda" | "cpu", why the CPU); a --gpu past the GPUs is a usage error."""
    from gputop_dl.collect.nvml import Nvml

    nvml = Nvml()
    n = nvml.device_count()
    if n and not 0 <= gpu < n:
        raise UsageError(f"--gpu {gpu}: expected a GPU index from 0 to {n - 1}")
    if n:
        return nvml, "cuda", None
    return nvml, "cpu", nvml.status_detail


def cmd_models(args) -> int:
    names = [check_model(n) for n in args.names]
    check_positive(input_size=args.input_size)
    from gputop_dl.lab.cost import DEFAULT_MODELS, model_cost, rich_table

    costs = [model_cost(n, args.input_size) for n in names or DEFAULT_MODELS]
    if args.models_json:
        print(json.dumps([c.to_json() for c in costs], indent=2))
    else:
        _lab_console().print(rich_table(costs))
        print("GMac = FLOPs / 2 / 1e9 (torch FlopCounterMode, batch 1); training ≈ 3 × forward")
    return 1 if any(c.error for c in costs) else 0


def cmd_sweep(args) -> int:
    from gputop_dl.collect.environment import environment
    from gputop_dl.lab import sweep, sweep_report
    from gputop_dl.present.markdown import write_atomic
    from gputop_dl.present.fmt import secs, size
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
    console = _lab_console()
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

    def progress(r: dict) -> None:
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


def cmd_profile(args) -> int:
    model = check_model(args.model)
    check_positive(batch=args.batch, steps=args.steps, input_size=args.input_size)
    if args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup}: expected 0 or more")
    nvml, device, why = _cuda_or_reason(args.gpu)
    nvml.close()
    out = args.out or f"profile-{model}-bs{args.batch}"
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out}: expected a folder, found a file")
    console = _lab_console()
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


def main(argv: list[str] | None = None) -> int:
    from gputop_dl.config import ConfigError

    args = build_parser().parse_args(argv)
    try:
        if args.json and not args.once:
            raise UsageError("--json goes with --once")
        if args.stall and not args.once:
            raise UsageError("--stall goes with --once (the live monitor samples on its own)")
        if args.stall_budget is not None and (args.once or args.cmd):
            raise UsageError("--stall-budget goes with the live monitor (plain `gputop-dl`)")
        if args.stall_budget is not None and not 0 <= args.stall_budget <= 100:
            raise UsageError(f"--stall-budget {args.stall_budget:g}: expected a percentage between 0 and 100")
        if args.cmd == "launch":
            return cmd_launch(args)
        if args.cmd == "export":
            return cmd_export(args)
        if args.cmd == "sessions":
            return cmd_sessions(args)
        if args.cmd in LAB_COMMANDS:
            return LAB_COMMANDS[args.cmd](args)
        if args.once:
            return cmd_once(args)
        from gputop_dl.present.tui.app import run_monitor_tui

        budget = None if args.stall_budget is None else args.stall_budget / 100
        return run_monitor_tui(interval=args.interval, stall_budget=budget)
    except (ConfigError, UsageError) as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


LAB_COMMANDS = {"models": cmd_models, "sweep": cmd_sweep, "profile": cmd_profile}
