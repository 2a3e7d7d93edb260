"""Load a queue trace file (TOML) for `gputop-dl simulate`; every mistake is a one-line ConfigError.

A trace names a machine (`[machine]`), the settings of the simulation (`[trace]`) and the job
kinds (`[[workload]]`, each a profile: expected solo duration or steps x solo step time, GPUs
as a count, solo CPU need, GPU memory and busy fraction, priority, class, share of arrivals,
and optionally a fixed `arrival`). The format is in docs/scheduling.md. Errors read like the
workload file's: `<file>: <table> key '<key>' (line N): <problem>, expected <what>`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gputop_dl.config import usable_cpus
from gputop_dl.sched.model import GIB, Job, Machine
from gputop_dl.sched import POLICIES
from gputop_dl.sched.simulate import JobKind
from gputop_dl.errors import UsageError
from gputop_dl.tomlcheck import Bad, ConfigError, TableChecker, TableId, as_bool, as_float, as_int, as_name, as_str, as_title, \
    at_most, check, did_you_mean, list_of, read_toml, show

DEFAULT_RATES = (0.25, 0.5, 1.0, 2.0)
DEFAULT_POLICIES = ("fifo", "sjf", "priority", "lyapunov")
MAX_JOBS = 1_000_000  # jobs per simulated run
MAX_SEEDS = 1000
MAX_RATES = 64
MAX_SIMULATED = 5_000_000  # policies x rates x seeds x jobs: about 2 minutes on one core
MAX_MACHINE = 4096  # GPUs (or slots) of the simulated machine
MAX_GPU_MEM_GB = 1 << 20  # a GPU's memory (and a job's need) in GB: finite, as bytes in 64 bits
MAX_YEAR = 366 * 86400.0  # seconds: any duration or arrival


def _as_policy(key: str, v: Any) -> str:
    name = as_str(key, v)
    if name not in POLICIES:
        raise Bad(f"unknown policy {show(v)}", "one of " + ", ".join(POLICIES), did_you_mean(v, POLICIES))
    return name


_POS = check(as_int, lambda v: v > 0, "a positive integer")
_POS_F = check(as_float, lambda v: v > 0, "a number > 0")
_NONNEG_F = check(as_float, lambda v: v >= 0, "a number 0 or more")
_NONNEG = check(as_int, lambda v: v >= 0, "an integer 0 or more")
_SECS = at_most(_POS_F, MAX_YEAR, " seconds (a year)")


def _as_rates(key: str, v: Any) -> tuple[float, ...]:
    rates = list_of(key, v, _POS_F, "a list of arrival rates per second > 0, e.g. [0.5, 1]")
    if len(rates) > MAX_RATES:
        raise Bad(f"{key} has {len(rates)} rates", f"at most {MAX_RATES}")
    return rates

TRACE_FIELDS = {
    "name": as_title, "jobs": at_most(_POS, MAX_JOBS), "seeds": at_most(_POS, MAX_SEEDS),
    "rates": lambda k, v: _as_rates(k, v),
    "policies": lambda k, v: list_of(k, v, _as_policy, "a list of policies, e.g. [\"fifo\", \"sjf\"]"),
    "cpu_aware": as_bool, "cpu_interference": _NONNEG_F, "gpu_share": _POS_F, "ageing_s": _POS_F, "v": _NONNEG_F,
}
MACHINE_FIELDS = {"gpus": at_most(_POS, MAX_MACHINE), "cpus": at_most(_POS_F, MAX_MACHINE * 64),
                  "jobs_per_gpu": at_most(_POS, 64), "gpu_mem_gb": at_most(_NONNEG_F, MAX_GPU_MEM_GB)}
JOB_FIELDS = {
    "name": as_name, "share": _POS_F, "duration_s": _SECS, "steps": _POS, "step_time_s": _SECS,
    "gpus": _NONNEG, "cpu_cores": _NONNEG_F, "gpu_mem_gb": at_most(_NONNEG_F, MAX_GPU_MEM_GB),
    "gpu_util": check(as_float, lambda v: 0 <= v <= 1, "a fraction from 0 to 1"),
    "priority": as_int, "class": as_name, "arrival": at_most(_NONNEG_F, MAX_YEAR, " seconds (a year)"),
}
_TOP = ("trace", "machine", "workload")


@dataclass(frozen=True)
class Trace:
    """A loaded trace: the machine, the job kinds and the simulation settings."""

    path: str
    name: str
    machine: Machine
    kinds: tuple[JobKind, ...]
    listed: bool  # every workload has an `arrival`: it can be replayed as listed
    jobs: int = 1000
    seeds: int = 3
    rates: tuple[float, ...] = DEFAULT_RATES
    policies: tuple[str, ...] = DEFAULT_POLICIES
    cpu_aware: bool = True
    cpu_interference: float = 1.0
    gpu_share: float = 1.0  # a shared GPU's slowdown is gpu_share x the summed busy fractions
    ageing_s: float = 600.0
    v: float = 1.0

    def listed_jobs(self) -> list[Job]:
        """The workloads as jobs at their listed arrivals."""
        return [k.job for k in self.kinds]

    def offered_load(self, rate: float) -> float:
        """Arrivals x mean GPU-seconds per job / GPUs: above 1 the queue grows without end."""
        total = sum(k.share for k in self.kinds)
        gpu_s = sum(k.share * k.job.duration_s * max(k.job.gpus, 1) for k in self.kinds) / total
        return rate * gpu_s / self.machine.gpus


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and check the trace at `path`. Raises ConfigError (one line) on any mistake."""
    spath = os.fspath(path)
    text, data = read_toml(spath, "trace")
    ld = TableChecker(spath, text)
    for key in data:
        if key not in _TOP:
            raise ConfigError(spath, f"unknown table or key '{key}'", where="top level",
                              line=ld.lines.find((key,)) or ld.lines.find((), key),
                              expected="only [trace], [machine] and [[workload]]", hint=did_you_mean(key, _TOP))
    settings = ld.table(("trace",), data.get("trace", {}), TRACE_FIELDS)
    mach = ld.table(("machine",), data.get("machine", {}), MACHINE_FIELDS)
    if "gpus" not in mach:
        raise ld.fail(("machine",), None, Bad("missing key 'gpus'", "the GPUs (or slots) of the simulated "
                                                "machine, e.g. gpus = 4"))
    machine = Machine(gpus=mach["gpus"], cpus=mach.get("cpus", float(usable_cpus())),
                      jobs_per_gpu=mach.get("jobs_per_gpu", 1), gpu_mem=int(mach.get("gpu_mem_gb", 0) * GIB))
    tables = data.get("workload", [])
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(spath, "no [[workload]] tables", expected="at least one [[workload]] (double brackets)")
    kinds = []
    for i, t in enumerate(tables):
        tid = ("workload", i)
        if "name" not in t:
            raise ld.fail(tid, None, Bad("missing key 'name'", 'name = "..." matching [A-Za-z0-9_.-]+'))
        try:
            ld.names[i] = as_name("name", t["name"])
        except Bad as b:
            raise ld.fail(tid, "name", b) from None
        if list(ld.names.values()).count(ld.names[i]) > 1:
            raise ld.fail(tid, "name", Bad(f"duplicate workload name {show(t['name'])}", "unique names"))
        kinds.append(_kind(ld, tid, ld.table(tid, t, JOB_FIELDS), machine))
    listed = [("arrival" in t) for t in tables]
    if any(listed) and not all(listed):
        i = listed.index(False) if listed[0] else listed.index(True)
        raise ld.fail(("workload", i), "arrival" if listed[i] else None,
                      Bad("arrival on some workloads only", "arrival on every [[workload]] (a listed trace) "
                           "or on none (kinds for Poisson arrivals)"))
    return Trace(path=spath, name=settings.get("name", Path(spath).stem), machine=machine,
                 kinds=tuple(kinds), listed=all(listed),
                 **{k: v for k, v in settings.items() if k != "name"})


def _kind(ld: TableChecker, tid: TableId, w: dict[str, Any], machine: Machine) -> JobKind:
    """One [[workload]] as a job kind; checks what needs more than one key, or the machine."""
    if "duration_s" in w and ("steps" in w or "step_time_s" in w):
        raise ld.fail(tid, "duration_s", Bad("duration_s with steps/step_time_s",
                                              "either duration_s or steps and step_time_s"))
    if ("steps" in w) != ("step_time_s" in w):
        key = "steps" if "steps" in w else "step_time_s"
        raise ld.fail(tid, key, Bad(f"{key} without {'step_time_s' if key == 'steps' else 'steps'}",
                                     "both: the duration is steps x solo step time"))
    if "duration_s" not in w and "steps" not in w:
        raise ld.fail(tid, None, Bad("no expected duration", "duration_s = SECONDS, or steps and step_time_s"))
    gpus = w.get("gpus", 1)
    if gpus > machine.gpus:
        n = machine.gpus
        raise ld.fail(tid, "gpus", Bad(f"gpus = {gpus} but the machine has {n} GPU{'s' if n > 1 else ''}",
                                        f"at most {n} (see [machine] gpus)"))
    mem = int(w.get("gpu_mem_gb", 0) * GIB)
    if machine.gpu_mem and mem > machine.gpu_mem:
        raise ld.fail(tid, "gpu_mem_gb", Bad(f"gpu_mem_gb = {w['gpu_mem_gb']:g} but a GPU has "
                                              f"{machine.gpu_mem / GIB:g}", "at most [machine] gpu_mem_gb"))
    job = Job(name=w["name"], arrival_s=w.get("arrival", 0.0),
              duration_s=w.get("duration_s") or w["steps"] * w["step_time_s"], gpus=gpus,
              cpu_cores=w.get("cpu_cores", 0.0), gpu_mem=mem, gpu_util=w.get("gpu_util", 1.0),
              priority=w.get("priority", 0), klass=w.get("class", w["name"]))
    return JobKind(job, w.get("share", 1.0))


def with_overrides(trace: Trace, **changes: Any) -> Trace:
    """The trace with command-line settings (None = keep the file's); UsageError (one line)
    past a bound: --jobs, --seeds, --rates, or all the runs together (policies x rates x seeds
    x jobs) more than MAX_SIMULATED simulated jobs."""
    for key, most in (("jobs", MAX_JOBS), ("seeds", MAX_SEEDS)):
        if changes.get(key) is not None and not 1 <= changes[key] <= most:
            raise UsageError(f"--{key} {changes[key]}: expected 1 to {most}")
    if changes.get("rates") is not None and len(changes["rates"]) > MAX_RATES:
        raise UsageError(f"--rates: {len(changes['rates'])} rates, expected at most {MAX_RATES}")
    t = replace(trace, **{k: v for k, v in changes.items() if v is not None})
    runs = len(t.policies) * len(t.rates) * t.seeds
    if runs * t.jobs > MAX_SIMULATED:
        raise UsageError(f"{t.path}: {len(t.policies)} policies x {len(t.rates)} rates x {t.seeds} seeds "
                         f"x {t.jobs} jobs = {runs * t.jobs} simulated jobs, expected at most "
                         f"{MAX_SIMULATED} (fewer --jobs, --seeds or --rates)")
    return t
