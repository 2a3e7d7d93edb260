"""The workload file that `gputop-dl queue` runs, read as a simulator trace (one job kind per workload).

    kind = file_kind(path)                       # "trace" or "workload" (ConfigError if mixed)
    trace, sources = workload_trace(path, nvml)  # sources: job -> where its duration came from

Each workload becomes a job kind as the live queue would see it (`engine.queue_plan.job_for`):
its expected duration from `duration_s`, else the planned steps x the cached solo step time;
its solo CPU need from the cached solo baseline. The machine is this one: the GPUs NVML sees
(the slots of `[session] slots`, else the usable cores, without CUDA) and the usable cores.
The `[session]` policy, `cpu_aware`, `ageing_s` and `v` carry over; with `arrival` on every
workload the listed arrivals can be replayed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputop_dl.collect.boxprofile.cpus import read_cpus
from gputop_dl.collect.jobs.fingerprint import fingerprint
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.config import ConfigError, load_session
from gputop_dl.config.fields import FIELDS
from gputop_dl.engine.jobrun import SoloBaseline
from gputop_dl.engine.queue_plan import job_for
from gputop_dl.sched.model import Machine
from gputop_dl.sched.simulate import JobKind
from gputop_dl.tomlcheck import Lines, read_toml
from gputop_dl.config.trace import DEFAULT_POLICIES, JOB_FIELDS, Trace

_TRACE_ONLY_KEYS = sorted(set(JOB_FIELDS) - set(FIELDS))  # share, steps, step_time_s, cpu_cores, ...
_WORKLOAD_ONLY_KEYS = sorted(set(FIELDS) - set(JOB_FIELDS))  # command, model, epochs, ...


def file_kind(path: str) -> str:
    """"trace" or "workload": which of the two formats the TOML at `path` is. The top-level
    tables decide ([trace], [machine] against [session], [defaults]); without any, the jobs'
    keys do (a trace's `share`, `steps`, `cpu_cores`... against a workload file's `command`,
    `model`, `epochs`...). Marks of both kinds are a ConfigError: a trace and a workload file
    mixed in one file."""
    _, data = read_toml(path, "trace or workload")
    trace_marks = [f"[{k}]" for k in ("trace", "machine") if k in data]
    work_marks = [f"[{k}]" for k in ("session", "defaults") if k in data]
    if not trace_marks and not work_marks:
        tables = data.get("workload")
        for t in tables if isinstance(tables, list) else ():
            if isinstance(t, dict):
                trace_marks += [f"key '{k}'" for k in _TRACE_ONLY_KEYS if k in t]
                work_marks += [f"key '{k}'" for k in _WORKLOAD_ONLY_KEYS if k in t]
    if trace_marks and work_marks:
        raise ConfigError(path, f"a trace and a workload file mixed in one file ({trace_marks[0]} is a "
                          f"trace's, {work_marks[0]} a workload file's)", where="top level",
                          expected="either a trace ([trace], [machine], [[workload]] job kinds) or the "
                          "workload file that `gputop-dl queue` runs ([session], [[workload]] jobs)")
    return "workload" if work_marks else "trace"


def workload_trace(path: str, nvml: Nvml, cached: Callable[[str], SoloBaseline | None] | None = None,
                   env: dict[str, Any] | None = None) -> tuple[Trace, dict[str, str]]:
    """The workload file at `path` as a Trace on this machine, and per job where its expected
    duration and CPU need came from. `cached(fingerprint)` looks up a solo baseline (None: no
    store). A job with neither `duration_s` nor a cached solo profile is a ConfigError."""
    gpus = nvml.device_count()
    spec = load_session(path, gpu_count=gpus)
    text, data = read_toml(path, "workload")
    lines = Lines(text)
    tables = data.get("workload") or []
    listed = bool(tables) and all("arrival" in t for t in tables) or "arrival" in (data.get("defaults") or {})
    env = env or {}
    cpus = float(read_cpus()["usable_cpus"]) or 1.0  # as the queue: affinity or quota
    machine = (Machine(gpus=gpus, cpus=cpus, unit="GPU") if spec.cuda else
               Machine(gpus=spec.slots or max(1, int(cpus)), cpus=cpus, unit="slot"))
    kinds: list[JobKind] = []
    sources: dict[str, str] = {}
    for i, w in enumerate(spec.workloads):
        base = cached(fingerprint(w, spec.cuda, env)) if cached else None
        job, src = job_for(w, base, spec.cuda)
        if src.startswith("unknown"):
            hint = ("a command's step count is unknown, so only duration_s can give it" if w.is_command else
                    f"or run `gputop-dl launch {path} --only {w.name}` once to cache its solo profile")
            raise ConfigError(path, f"no expected duration for job '{w.name}' and no cached solo profile",
                              where=f"[[workload]] '{w.name}'", line=lines.find(("workload", i)),
                              expected="duration_s = SECONDS in its [[workload]]", hint=hint)
        cpu_src = "cached solo baseline" if job.cpu_cores else "unknown (0: no cached solo baseline)"
        sources[w.name] = f"{job.duration_s:.1f} s from {src}; CPU {job.cpu_cores:.1f} cores from {cpu_src}"
        kinds.append(JobKind(job))
    policies = tuple(dict.fromkeys((spec.policy, *DEFAULT_POLICIES)))
    cpu_aware = spec.cpu_aware if spec.cpu_aware is not None else any(k.job.cpu_cores > 0 for k in kinds)
    trace = Trace(path=path, name=spec.name or Path(path).stem, machine=machine, kinds=tuple(kinds),
                  listed=listed, policies=policies, cpu_aware=cpu_aware, ageing_s=spec.ageing_s, v=spec.v)
    return trace, sources
