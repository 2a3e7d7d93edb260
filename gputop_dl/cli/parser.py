"""The command line's parser: every command, option and help text (`gputop-dl --help`).

`gputop_dl.cli` parses with it and runs the command; the help texts here are the user's manual
of each option, kept true to what the command does.
"""

from __future__ import annotations

import argparse

from gputop_dl import __version__
from gputop_dl.choices import BASELINES

EPILOG = """\
examples:
  gputop-dl                                         live monitor of this machine and its training jobs
  gputop-dl --once --json                           one snapshot as JSON, for scripts
  gputop-dl --once --stall 2                        ... with each job's data stall % (py-spy, 2 s)
  gputop-dl launch workloads/mobilenet_trio.toml    run the workloads, live, recorded
  gputop-dl launch FILE --headless --only bs32,bs64 without the TUI, two of the jobs
  gputop-dl serve                                   Prometheus metrics on http://127.0.0.1:9402/metrics
  gputop-dl --nodes gpu-1:9402,gpu-2:9402           live view of several nodes running `serve`
  gputop-dl --nodes docs/nodes.toml --once          ... the node list in a file, one table
  gputop-dl --prometheus http://prometheus:9090     ... read from a Prometheus server instead
  gputop-dl export report.md                        the latest session as a Markdown report
  gputop-dl export tb/ --tensorboard                ... as TensorBoard event files (tensorboard --logdir tb)
  gputop-dl sessions [--json]                       list recorded sessions
  gputop-dl compare A B [--json]                    two sessions side by side, per job
  gputop-dl schema NAME | --list                    the JSON Schema of a JSON output
  gputop-dl models resnet50 vgg16                   parameters and forward GMac
  gputop-dl sweep --model resnet34 --batch 16,32,64 memory and time per batch size, the knee
  gputop-dl profile --model resnet18 --batch 32     top-10 operators and a Chrome trace
  gputop-dl simulate workloads/queue_trace.toml     scheduling policies x arrival rates, simulated
  gputop-dl queue workloads/queue_sleepers.toml     the workloads as a job queue, started by a policy
  gputop-dl machine [--quick] [--data DIR]          this box: cores, memory, disks, GPU links, measured
  gputop-dl plan workloads/mobilenet_trio.toml      how many of these jobs fit at once, and why

data: sessions are kept in $GPUTOP_DL_HOME (default: the user data dir, e.g.
~/.local/share/gputop-dl/sessions.db).

privileges: without root, other users' jobs are shown with their CPU and waits only (no data
stall, step time or disk reads: each job's `limited` says why); Yama's ptrace_scope=1 keeps
py-spy off your own jobs too; sudo gputop-dl sees everything (docs/privileges.md)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gputop-dl", description="Terminal monitor and profiler for deep-learning training.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"gputop-dl {__version__}")
    p.add_argument("--once", action="store_true",
                   help="print one snapshot and exit: two samples 1 s apart (each job's CPU "
                   "wait is read over that second) and the live verdict, estimated from them")
    p.add_argument("--json", action="store_true", help="with --once: print the snapshot as JSON")
    p.add_argument("--stall", type=float, default=0.0, metavar="S",
                   help="with --once: sample every training job's main thread with py-spy for "
                   "S seconds (e.g. 2) to measure its data stall %% (default: not measured)")
    p.add_argument("--interval", type=float, default=None, metavar="S",
                   help="monitor: seconds between samples (default 1); fleet view: seconds "
                   "between polls of the nodes (default 2; a slow poll delays the next)")
    p.add_argument("--nodes", metavar="HOST:PORT,...|FILE.toml",
                   help="the live fleet view (or with --once, one table): read several nodes' "
                   "gputop-dl /metrics (serve, or --metrics) and show them as one fleet, an "
                   "unreachable node as such; a .toml file lists [[node]] address = \"HOST:PORT\" "
                   "(and an optional name)")
    p.add_argument("--prometheus", metavar="URL",
                   help="the fleet view (or --once) read from a Prometheus server's HTTP API "
                   "(e.g. http://prometheus:9090) that scrapes the nodes, instead of --nodes")
    p.add_argument("--stall-budget", type=float, default=None, metavar="PCT",
                   help="monitor: %% of one core that py-spy may use to measure the data stall of "
                   "jobs gputop-dl did not start (default 0.25; its dumps of the loop counters "
                   "of those without loader workers take up to 0.2 more a job, 0.6 at most; 0: neither)")
    p.add_argument("--metrics", metavar="HOST:PORT",
                   help="monitor: also serve Prometheus metrics there (as `gputop-dl serve`)")
    add_stuck_args(p, "", alerts=False, bell=True)
    p.add_argument("--readonly", action="store_true",
                   help="monitor: watch only: no stop, no launch, and `d` observes without the "
                   "probe (which pauses jobs)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    lp = sub.add_parser("launch", help="start the workloads of a TOML file, live and recorded",
                        description="Start the workloads in FILE: solo baselines (per the file's "
                        "[session] baseline), then all together; live view; recorded session.")
    lp.add_argument("file", metavar="FILE.toml")
    lp.add_argument("--headless", action="store_true",
                    help="console output instead of the TUI (for ssh, nohup, CI)")
    lp.add_argument("--only", metavar="NAMES", help="comma-separated workload names to start")
    lp.add_argument("--baseline", choices=BASELINES,
                    help="override the file's [session] baseline (probe: each job measured "
                    "alone inside the co-run, the others paused)")
    lp.add_argument("--tensorboard", metavar="DIR", dest="launch_tensorboard",
                    help="at the end, write the session as TensorBoard runs under DIR (as "
                    "`export DIR --tensorboard` does)")
    lp.add_argument("--metrics", metavar="HOST:PORT", dest="launch_metrics",
                    help="also serve Prometheus metrics there while it runs (as `gputop-dl serve`)")
    add_stuck_args(lp, "launch_", alerts=True, bell=True)
    add_serve_parser(sub)
    ep = sub.add_parser("export", help="write a recorded session as a Markdown or JSON report",
                        description="Write the latest session (or --session ID) to OUT: "
                        "OUT.md is a GitHub-flavoured Markdown report, OUT.json the same content "
                        "as JSON (schema gputop-dl.session/1).")
    ep.add_argument("out", metavar="OUT.md|OUT.json|DIR")
    ep.add_argument("--tensorboard", action="store_true",
                    help="write TensorBoard event files into the folder DIR instead: one run per "
                    "job (step time, samples/s, data stall, loss, epoch time, CPU, GPU util and "
                    "memory) and a `_verdict` run of the verdict's changes; needs the "
                    "tensorboard package")
    ep.add_argument("--shared", action="store_true",
                    help="write OUT readable by others as your umask allows (usually 0644); "
                    "default: private to you (0600), since a report holds each job's command "
                    "line (secret-looking arguments and env values are redacted either way)")
    ep.add_argument("--session", metavar="ID", help="session id or a unique prefix of it "
                    "(default: the latest; see `gputop-dl sessions`)")
    ssp = sub.add_parser("sessions", help="list recorded sessions", description="List recorded "
                         "sessions, newest first: id, name, start, duration, jobs, verdict, state.")
    ssp.add_argument("--json", dest="sessions_json", action="store_true",
                     help="as JSON (schema gputop-dl.sessions/1), for scripts")
    scp = sub.add_parser("schema", help="print the JSON Schema of a JSON output, for your own tools",
                         description="Print the JSON Schema (draft 2020-12) of one of gputop-dl's "
                         "JSON outputs (docs/contracts.md); --list names them.")
    scp.add_argument("schema_name", nargs="?", metavar="NAME",
                     help="snapshot (--once --json), diagnosis, comparison, simulation, session "
                     "(export), sessions, fleet, sweep, verdict, machine, plan")
    scp.add_argument("--list", dest="schema_list", action="store_true", help="the names, one a line")
    cp = sub.add_parser("compare", help="two recorded sessions side by side (did my fix work?)",
                        description="Two recorded sessions side by side: per job (by name) step "
                        "time, samples/s, data wait, CPU wait, slowdown, epoch time and the step "
                        "phases where recorded, A → B with the change; the two verdicts.")
    cp.add_argument("a", metavar="A", help="session id or a unique prefix (see `gputop-dl sessions`)")
    cp.add_argument("b", metavar="B", help="the other session")
    cp.add_argument("--json", dest="compare_json", action="store_true",
                    help="as JSON (schema gputop-dl.comparison/1, docs/compare.md)")
    dp = sub.add_parser("diagnose", help="the verdict for training jobs already running",
                        description="Find the training jobs running on this machine (started by "
                        "anyone), measure each one's CPU and data stall (py-spy) together and, "
                        "unless --no-probe, alone: every other job is paused (ptrace stop, else SIGSTOP) for a few "
                        "seconds while it runs, then resumed (other processes run on: a solo "
                        "window they slowed says so, with its figure). Prints the verdict (parallel or "
                        "only concurrent, and why) with its evidence and fixes; recorded as a "
                        "session. Jobs you may not signal are measured passively. A job's "
                        "probe slowdown comes from py-spy's step times or, where those fail, "
                        "from its DataLoader workers' work rate alone against together. Each "
                        "job's slowdown is also estimated live from its CPU wait, beside the "
                        "probe's.")
    dp.add_argument("--seconds", type=float, default=30.0, metavar="S",
                    help="about how long the diagnosis takes (default 30, 3 to 3600), split "
                    "in three: a third observing CPU and host signals (longer until a job is "
                    "found); then py-spy on all jobs together for S/6 s (1 to 4 s); then the "
                    "rest shared among the jobs, each alone for as long (at least 1 s, at "
                    "most the py-spy time or S/10, whichever is longer) while the others are "
                    "paused. --seconds 10: 3 s observing, 1.7 s together, about 1.7 s alone "
                    "per job; --seconds 120 for jobs of a step a second or slower: 12 s alone")
    dp.add_argument("--no-probe", action="store_true",
                    help="never pause a job: the live estimate is the verdict (each job's "
                    "slowdown from its CPU wait and stall), in about 10 s")
    dp.add_argument("--pid", metavar="PID,...", dest="diag_pids",
                    help="only these jobs: a job's root PID (as the monitor lists it) or any PID of its tree")
    dp.add_argument("--json", action="store_true", dest="diag_json",
                    help="print the diagnosis as JSON (schema gputop-dl.diagnosis/1)")
    add_lab_parsers(sub)
    add_sched_parsers(sub)
    add_machine_parsers(sub)
    return p


def add_machine_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`machine` (what this box can give) and `plan` (how many of a file's jobs fit on it)."""
    mp = sub.add_parser("machine", help="profile this box: CPUs, memory, disks, GPU links, measured",
                        description="CPUs (cores, NUMA, cgroup quota), memory (and a measured copy "
                        "rate), the storage under the dataset paths (measured 128 KiB reads, page "
                        "cache bypassed with O_DIRECT where allowed), each GPU (PCIe link now and "
                        "max, NUMA, measured host<->device copies through a torch worker, never on "
                        "a GPU in use). Stored with the sessions (docs/machine.md).")
    mp.add_argument("--json", action="store_true", dest="machine_json",
                    help="print the profile as JSON (schema gputop-dl.machine/1)")
    mp.add_argument("--quick", action="store_true", help="short measurements (about 2 s in all), "
                    "no GPU copies")
    mp.add_argument("--out", metavar="REPORT.md", dest="machine_out", help="also write Markdown")
    mp.add_argument("--data", action="append", metavar="DIR", help="a dataset folder (or file) "
                    "whose filesystem to measure; repeatable (default: the working directory)")
    mp.add_argument("--show", action="store_true", help="print the newest stored profile, measure nothing")
    pl = sub.add_parser("plan", help="how many of a workload file's jobs fit at once, and why",
                        description="From each job's cached solo baseline (else an estimate from "
                        "the file) and this box's stored machine profile (else a --quick one, "
                        "measured now): how many of the jobs fit at once at solo speed, per "
                        "resource (cores, memory, disk read rate, PCIe, GPU memory), and which "
                        "resource runs out first.")
    pl.add_argument("plan_file", metavar="FILE.toml")
    pl.add_argument("--json", action="store_true", dest="plan_json", help="as JSON (gputop-dl.plan/1)")


def add_serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`serve`: the monitor without a UI, as a Prometheus exporter."""
    sv = sub.add_parser("serve", help="serve Prometheus metrics of this machine and its jobs",
                        description="Watch this machine as the monitor does (GPUs, host CPU, "
                        "training jobs, found or launched) and serve the latest sample on "
                        "/metrics in the Prometheus text format. Metrics start with gputop_dl_; "
                        "GPU series carry dcgm-exporter's labels (Hostname, gpu, UUID). Binds to "
                        "127.0.0.1 unless told otherwise. Nothing is recorded unless --record.")
    sv.add_argument("--listen", metavar="HOST:PORT", default=None,
                    help="address to listen on (default 127.0.0.1:9402; 0.0.0.0:9402 for all "
                    "interfaces, port 0 for any free port)")
    sv.add_argument("--interval", type=float, default=1.0, metavar="S", dest="serve_interval",
                    help="seconds between samples (default 1)")
    sv.add_argument("--stall-budget", type=float, default=None, metavar="PCT",
                    dest="serve_stall_budget", help="%% of one core that py-spy may use to "
                    "measure the data stall of jobs found running (default 0.25, and up to 0.2 "
                    "more for the loop counters of those without loader workers; 0: off)")
    sv.add_argument("--record", action="store_true", dest="serve_record",
                    help="also record the training jobs it sees as a session, as the monitor does")
    add_stuck_args(sv, "serve_", alerts=True, bell=False)


def add_stuck_args(p: argparse.ArgumentParser, prefix: str, *, alerts: bool, bell: bool) -> None:
    """The stuck threshold, and how a stuck or failed job is told (docs/stuck.md)."""
    p.add_argument("--stuck-after", type=float, default=None, metavar="S",
                   dest=f"{prefix}stuck_after",
                   help="a live job with no step progress for max(S, 10 x its step time) "
                   "seconds, its threads asleep and its main thread in one place, is called "
                   "stuck (default 60; 1 to 604800)")
    if bell:
        p.add_argument("--no-bell", action="store_true", dest=f"{prefix}no_bell",
                       help="no terminal bell with the notice of a stuck or failed job (key b "
                       "toggles it)")
    if alerts:
        p.add_argument("--alert-command", metavar="CMD", dest=f"{prefix}alert_command",
                       help="run CMD (split as a shell would, never run through one) when a job "
                       "becomes stuck or fails, with the event as JSON on its stdin and in "
                       "GPUTOP_DL_* variables; once per event, killed after 30 s")
        p.add_argument("--alert-webhook", metavar="URL", dest=f"{prefix}alert_webhook",
                       help="POST each such event as JSON to URL (its `text` field suits Slack "
                       "and Mattermost incoming webhooks); 3 tries, a failure is one log line")


def add_sched_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`simulate`: the queue policies on a trace of job profiles (no jobs run)."""
    sp = sub.add_parser("simulate", help="simulate a job queue under scheduling policies",
                        description="Simulate the jobs of FILE.toml queued on its machine under "
                        "each policy, at each arrival rate (Poisson arrivals, several seeds), with "
                        "CPU and shared-GPU interference. FILE is a trace (docs/scheduling.md) or "
                        "the workload file that `gputop-dl queue` runs: then each workload is a job "
                        "kind (duration from duration_s or its cached solo profile) on this "
                        "machine. Prints mean and p95 job completion time, makespan and mean wait "
                        "per policy and rate. A file whose workloads all have an `arrival` is "
                        "replayed as listed unless --rates is given. The interference figures are "
                        "calibrated from this machine's recorded co-runs where there are any "
                        "(the notes under the table, or stderr with --json, say which figure "
                        "came from where; --no-calibrate: the file's).")
    sp.add_argument("trace", metavar="FILE.toml")
    sp.add_argument("--policies", metavar="P1,P2,...",
                    help="comma-separated: fifo, fifo-backfill, sjf, priority, lyapunov "
                    "(default: the trace's, else fifo,sjf,priority,lyapunov; for a workload "
                    "file its [session] policy and those)")
    sp.add_argument("--rates", metavar="R1,R2,...", help="arrivals per second, comma-separated "
                    "(default: the trace's, else 0.25,0.5,1,2)")
    sp.add_argument("--seeds", type=int, metavar="N", help="seeds 1..N per rate (default: the "
                    "trace's, else 3)")
    sp.add_argument("--jobs", type=int, metavar="N", help="jobs per simulated run (default: the "
                    "trace's, else 1000)")
    sp.add_argument("--json", action="store_true", dest="sim_json",
                    help="print the results as JSON (schema gputop-dl.simulation/1)")
    sp.add_argument("--out", metavar="REPORT.md", help="also write a Markdown report with charts")
    sp.add_argument("--calibrate", nargs="?", const=True, metavar="SESSION",
                    help="take the CPU interference coefficient from a recorded co-run (the "
                    "newest one that measured it, or SESSION) instead of the trace's")
    sp.add_argument("--no-calibrate", action="store_true", help="use the file's interference "
                    "figures (or the defaults), not this machine's recorded co-runs")
    from gputop_dl.sched import POLICIES

    qp = sub.add_parser("queue", help="run the workloads of a TOML file as a job queue",
                        description="The workloads of FILE become jobs that arrive over time "
                        "(`arrival`), ask for GPUs (`gpus = N`; slots without CUDA) and are "
                        "started by a scheduling policy as GPUs free up; with CPU-aware admission "
                        "a job waits while the running jobs' solo CPU need plus its own exceeds "
                        "the cores. Live view and a recorded session with each job's wait and "
                        "completion time (docs/scheduling.md). Ctrl-C stops running and waiting "
                        "jobs and keeps the session.")
    qp.add_argument("file", metavar="FILE.toml")
    qp.add_argument("--policy", choices=POLICIES,
                    help="override the file's [session] policy (default fifo)")
    qp.add_argument("--headless", action="store_true",
                    help="console output instead of the TUI (for ssh, nohup, CI)")
    qp.add_argument("--sbatch", metavar="DIR", help="run nothing: write one Slurm batch script per "
                    "workload into DIR (--gres=gpu:N, --cpus-per-gpu from the measured solo CPU need, "
                    "the policy's order as --nice or dependencies) and DIR/submit.sh to submit them")


def add_lab_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The lab experiments: `models`, `sweep`, `profile` (they import torch, the monitor never)."""
    mp = sub.add_parser("models", help="parameters and forward GMac of torchvision models",
                        description="Parameters (M) and forward GMac for one image, counted with "
                        "torch's FlopCounterMode (GMac = FLOPs / 2 / 1e9). Training costs about "
                        "3 × forward. Default: the seven models of the lab notebooks' reference table, resnet34 and mobilenet_v2.")
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
