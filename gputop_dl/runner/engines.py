"""Building engines: a workload file loaded for this machine, and the engine each mode needs.

The only place engines are built: sampler, plan, recorder and settings go in as constructor
arguments. `run_file` runs a whole launch without a presenter (tests and benchmarks).
"""

from __future__ import annotations

import atexit
import dataclasses
import signal
import sys
import time
from types import FrameType
from typing import Any

from gputop_dl.collect.extras import require_train
from gputop_dl.collect.jobs.found import FoundJobs
from gputop_dl.collect.machine import MachineSampler
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.collect.pyspy.stall_sampler import STALL_BUDGET
from gputop_dl.analyse.live.stuck import StuckJudge
from gputop_dl.engine import Engine, MonitorPlan, Recorder
from gputop_dl.engine.stuck_watch import StuckWatch
from gputop_dl.quick_exit import exit_now
from gputop_dl.record.store_open import check_store as check_store  # runner's API
from gputop_dl.workload import SessionSpec


def open_spec(path: str, nvml: Nvml, only: list[str] | None = None,
              baseline: str | None = None, place: bool = True) -> SessionSpec:
    """Load a workload file for this machine: `only` some workloads, the baseline overridden,
    and without CUDA the file's cpu_fallback applied and the reason kept (raises ConfigError).
    With CUDA and `place`, `gpus = N` counts are placed on GPUs now (a queue places its own)."""
    from gputop_dl.config import load_session  # here: the monitor never parses a workload file

    spec = load_session(path, gpu_count=nvml.device_count(), only=only)
    if place and spec.cuda and any(w.gpu_count and not w.gpus for w in spec.workloads):
        spec = place_gpus(spec, nvml)
    builtin = [w.name for w in spec.workloads if not w.is_command]
    if builtin:
        require_train(f"{path}: the built-in trainer (workload {builtin[0]!r})")
    if baseline:
        spec = dataclasses.replace(spec, baseline=baseline)
    if not spec.cuda:
        spec = dataclasses.replace(spec, cpu_fallback_reason=nvml.status_detail)
    return spec


def place_gpus(spec: SessionSpec, nvml: Nvml) -> SessionSpec:
    """Each `gpus = N` of a launch on N GPUs, from one NVML reading (sched/placement.py); one
    line per choice on stderr, and the chosen indexes in the workload (so in the session)."""
    from gputop_dl.sched.placement import GpuState, place_counts

    others: dict[int, int] = {}
    for p in nvml.processes():
        others[p.gpu_index] = others.get(p.gpu_index, 0) + 1
    state = [GpuState(g.index, None if g.mem_total is None or g.mem_used is None
                      else g.mem_total - g.mem_used, others.get(g.index, 0), bool(g.error))
             for g in nvml.sample()]
    chosen, lines = place_counts([(w.name, w.gpu_count, w.gpus) for w in spec.workloads], state)
    for line in lines:
        print(f"gputop-dl: {line}", file=sys.stderr)
    return dataclasses.replace(spec, workloads=tuple(
        w.with_(gpus=chosen[w.name]) if w.name in chosen else w for w in spec.workloads))


def stuck_watch(stuck_after: float | None) -> StuckWatch:
    """The engine's watch for stuck jobs, its threshold's floor `stuck_after` s (None: 60)."""
    return StuckWatch(StuckJudge(min_s=stuck_after) if stuck_after is not None else None)


def monitor_engine(nvml: Nvml, *, interval: float = 1.0, stall_budget: float = STALL_BUDGET,
                   record: bool = True, store_path: str | None = None,
                   found: FoundJobs | None = None, command: str = "gputop-dl",
                   stuck_after: float | None = None) -> Engine:
    """`gputop-dl`: watch this machine; py-spy may use `stall_budget` of one core;
    `stuck_after`: the stuck threshold's floor, seconds (analyse/live/stuck.py; None: its default)."""
    plan = MonitorPlan(command)
    found = found or FoundJobs(stall=plan.stall_found, stall_budget=stall_budget)
    return Engine(plan, sampler=MachineSampler(nvml, found=found),
                  recorder=Recorder(store_path, enabled=record), interval=interval,
                  stuck=stuck_watch(stuck_after))


def launch_engine(spec: SessionSpec, nvml: Nvml, *, command: str = "",
                  store_path: str | None = None, record: bool = True,
                  stuck_after: float | None = None) -> Engine:
    """`gputop-dl launch`: the workloads of `spec`; jobs found running are shown, never
    py-spied (the co-run being measured is not disturbed) and not recorded."""
    from gputop_dl.engine.launch_plan import LaunchPlan  # here: not on the monitor's start-up

    plan = LaunchPlan(spec, command)
    return Engine(plan, sampler=MachineSampler(nvml, found=FoundJobs(stall=plan.stall_found)),
                  recorder=Recorder(store_path, enabled=record), interval=spec.interval,
                  stuck=stuck_watch(stuck_after))


def queue_engine(spec: SessionSpec, nvml: Nvml, *, policy: str | None = None, command: str = "",
                 store_path: str | None = None, record: bool = True) -> Engine:
    """`gputop-dl queue`: the workloads of `spec` as jobs arriving over time, started by a
    scheduling policy (`policy` overrides the file's) on the GPUs, or on `slots` without CUDA."""
    from gputop_dl.collect.boxprofile.cpus import read_cpus
    from gputop_dl.engine.queue_plan import QueuePlan
    from gputop_dl.sched.model import Machine
    from gputop_dl.sched.numa import NumaPlacer, nodes_from
    from gputop_dl.sched.policies import Policy
    from gputop_dl.text.cpulist import parse_cpulist

    # the machine profile's CPU part, read now: usable = the allowed CPUs (affinity, cpuset)
    # or the cgroup quota, the smaller; the NUMA nodes cut to the allowed CPUs
    box = read_cpus()
    cpus = float(box["usable_cpus"]) or 1.0
    if spec.cuda:
        machine = Machine(gpus=nvml.device_count(), cpus=cpus, unit="GPU")
    else:
        machine = Machine(gpus=spec.slots or max(1, int(cpus)), cpus=cpus, unit="slot")
    numa = NumaPlacer(nodes_from(box["numa"], parse_cpulist(box["allowed"])))
    plan = QueuePlan(spec, None, Policy(policy or spec.policy, ageing_s=spec.ageing_s, v=spec.v),
                     machine, cpu_aware=spec.cpu_aware, command=command, numa=numa)
    return Engine(plan, sampler=MachineSampler(nvml, found=FoundJobs(stall=False)),
                  recorder=Recorder(store_path, enabled=record), interval=spec.interval)


# `diagnose` looks at reading jobs' states this often a tick: a one-shot command, so its wakeups
# cost nothing a user keeps paying, and the I/O wait share it judges on is a count of looks
# (60 looks over its 6 judged ticks left the memory pair's w 7 points either way: 1 / (1 - w)
# moved 15-30 %, docs/benchmarks.md)
DIAGNOSE_PEEKS = 50


def diagnose_engine(nvml: Nvml, *, seconds: float = 30.0, probe: bool = True,
                    interval: float = 1.0, store_path: str | None = None,
                    record: bool = True, pids: set[int] | None = None) -> Engine:
    """`gputop-dl diagnose`: the found jobs observed, py-spied together and probed alone."""
    from gputop_dl.engine.diagnose_plan import DiagnosePlan  # here: not on the monitor's start-up

    return Engine(DiagnosePlan(seconds, probe, command="gputop-dl " + " ".join(sys.argv[1:]),
                               pids=pids),
                  sampler=MachineSampler(nvml, found=FoundJobs(stall=False)),
                  recorder=Recorder(store_path, enabled=record), interval=interval,
                  peeks=DIAGNOSE_PEEKS)


class Launcher:
    """What the monitor's launcher screen calls: load a workload file, start an engine for it."""

    def __init__(self, nvml: Nvml):
        self.nvml = nvml

    def load(self, path: str, only: list[str] | None = None) -> SessionSpec:
        return open_spec(path, self.nvml, only=only)

    def start(self, spec: SessionSpec) -> Engine:
        return launch_engine(spec, Nvml(), command=f"gputop-dl (monitor launcher) {spec.path}")


def run_file(path: str, *, nvml: Nvml | None = None, store_path: str | None = None,
             **overrides: Any) -> Engine:
    """Load a workload file, run the whole session without a presenter, return the engine
    (tests and benchmarks)."""
    nvml = nvml or Nvml()
    spec = dataclasses.replace(open_spec(path, nvml), **overrides)
    engine = launch_engine(spec, nvml, store_path=store_path, command=f"run_file {path}")
    engine.start()
    engine.join()
    return engine


SIGNAL_DEADLINE_S = 1.3  # after a signal, the summary or an export gets this long at most
STOP_DEADLINE_S = 1.3  # ... and stopping the jobs this long; the watchdog stops what is left


def stop_on_signals(engine: Engine) -> None:
    """INT, TERM and HUP stop the engine (its jobs are stopped, the session is kept as
    interrupted), and gputop-dl exits within 2 s in every phase (KeyboardInterrupt, exit 130):
    a signal after the engine ended (the summary, an export) at once; whatever follows the
    engine SIGNAL_DEADLINE_S after the first signal; and if stopping the jobs takes longer
    than STOP_DEADLINE_S (thousands of jobs), gputop-dl says so and leaves them to its
    watchdog, which stops every one once gputop-dl is gone (the store then reads the session
    and its live jobs as interrupted)."""
    first: list[float] = []

    def cut_short(_signum: int | None = None, _frame: FrameType | None = None) -> None:
        if engine.running:  # still stopping the jobs
            left = first[0] + STOP_DEADLINE_S - time.monotonic() if first else 0.2
            if left > 0:
                signal.setitimer(signal.ITIMER_REAL, min(0.2, left))
                return
            print("gputop-dl: interrupted; stopping the jobs takes longer than "
                  f"{STOP_DEADLINE_S:g} s: the watchdog stops what is left", file=sys.stderr)
            exit_now(130)  # not a normal exit: tearing down thousands of jobs' objects took
            # seconds, and the engine thread is mid-write (its transaction is rolled back)
        raise KeyboardInterrupt

    def handler(signum: int, _frame: FrameType | None) -> None:
        engine.signalled = True
        if not engine.running:
            cut_short()
        engine.request_stop("interrupted")
        if not first:
            first.append(time.monotonic())
            signal.signal(signal.SIGALRM, cut_short)
            signal.setitimer(signal.ITIMER_REAL, SIGNAL_DEADLINE_S)
            atexit.register(signal.setitimer, signal.ITIMER_REAL, 0)  # no SIGALRM at exit

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
