"""`diagnose`'s verdict from what it measured: py-spy's step times, the loader, the estimate.

The engine (engine/diagnose_plan.py) observes the found jobs, py-spies them together and
probes each alone; it hands this module what it read of each job (`Measured`) and the live
estimate over its observe phase. Here, without a process: the verdict (`verdict`) and the
jobs as `diagnose --json` has them (`jobs_json`).

A slowdown needs py-spy's step time of every job, together and alone (a verdict on some jobs'
slowdowns would say nothing of the others); where py-spy could not time a job, the probe's
loader work rate alone against together may measure it instead (analyse/slowdown/loader_rate.py); where
neither does, the verdict rests on the signals and says so. The live estimate stands beside
the probe's figures, and is the verdict where the probe could claim nothing or there was none.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gputop_dl.analyse.live import outside_load
from gputop_dl.analyse.live.box_peaks import Peaks, with_box_peaks
from gputop_dl.analyse.live.cpu_wait_model import DIAGNOSE_HINT, spin_fix
from gputop_dl.analyse.recorded.evidence import HostPoint
from gputop_dl.analyse.slowdown.loader_rate import CONTRADICT, LoaderSlowdown
from gputop_dl.analyse.live.passive import WAITS_ON, Estimate, slowdown_figure
from gputop_dl.analyse.live.wide_pools import wide, with_width_fix
from gputop_dl.analyse.slowdown.figure import FROM, SlowdownFigure, choose
from gputop_dl.analyse.verdict import judge
from gputop_dl.analyse.verdict_evidence import HostEvidence, JobEvidence
from gputop_dl.analyse.verdict_types import Fix, JobVerdict, Verdict
from gputop_dl.snapshot import GpuProcess, GpuSample, JobSample

JUDGED = ("parallel", "cpu-bound", "gpu-contended", "io-bound", "memory-bound", "outside-load",
          "alone")


class Burst(Protocol):
    """What py-spy read of a job's main thread in one burst (collect/pyspy/stall.py's
    `StallEstimate`): its data stall, the samples, its step time and the cycles behind it."""

    @property
    def fraction(self) -> float | None: ...
    @property
    def samples(self) -> int: ...
    @property
    def step_time_s(self) -> float | None: ...
    @property
    def cycles(self) -> int: ...
    @property
    def cv(self) -> float | None: ...


@dataclass(frozen=True)
class Measured:
    """What `diagnose` measured of one found job, as this module reads it."""

    name: str
    pid: int
    pids: tuple[int, ...] = ()
    command: str | None = None
    device: str | None = None
    cpu: tuple[float, ...] = ()  # its tree's CPU cores, one per observed tick
    cpu_wait: tuple[float, ...] = ()  # its CPU wait share, one per observed tick
    together: Burst | None = None  # the py-spy burst with the others
    alone: Burst | None = None  # its probe window, the others paused
    no_solo: str | None = None  # why it has no probe window
    solo_cpu_cores: float | None = None
    window: outside_load.SoloWindow | None = None  # what ran beside it in its probe window
    loader: LoaderSlowdown = LoaderSlowdown()  # by its loader's work, alone against together


@dataclass(frozen=True)
class Estimated:
    """The live estimate over the observe phase (analyse/live/passive.py): the set's verdict, each
    job's estimate, and the last observed tick's jobs, GPU processes and GPUs."""

    verdict: Verdict | None = None
    jobs: Mapping[str, Estimate] | None = None
    last: tuple[Sequence[JobSample], Sequence[GpuProcess], Sequence[GpuSample]] | None = None
    peaks: Peaks | None = None


def verdict(jobs: Sequence[Measured], hs: Sequence[HostPoint], gpu: Mapping[int, Sequence[float]],
            cpus: int, probe: bool, paused_job_s: float, est: Estimated) -> Verdict:
    """The diagnosis's verdict on `jobs` (see the module docstring); `hs` the host's points
    over the observe phase, `gpu` each GPU's utilisations, `paused_job_s` what the probe
    cost."""
    evs = []
    for j in jobs:
        tog, alone = j.together, j.alone
        gpus = tuple(int(g) for g in (j.device or "").removeprefix("gpu").split(",")
                     if g.isdigit())
        evs.append(JobEvidence(
            name=j.name, device=f"cuda:{gpus[0]}" if gpus else "cpu", gpus=gpus,
            steps=(tog.cycles or 0) if tog and tog.step_time_s else 0,
            step_time_s=tog.step_time_s if tog else None,
            stall=tog.fraction if tog and tog.samples else None,
            cpu_cores=statistics.fmean(j.cpu) if j.cpu else None,
            solo_step_time_s=alone.step_time_s if alone else None,
            solo_stall=alone.fraction if alone and alone.samples else None,
            solo_cpu_cores=j.solo_cpu_cores,
            solo_steps=(alone.cycles or None) if alone and alone.step_time_s else None,
            cv=tog.cv if tog else None, solo_cv=alone.cv if alone else None,
            source="py-spy"))
    host = HostEvidence(
        cpus=cpus, busy=_mean([h.busy for h in hs]),
        psi_some10=_mean([h.psi_some10 for h in hs]), load1=_mean([h.load1 for h in hs]),
        throttled=_mean([h.throttled for h in hs]),
        gpu_util={g: statistics.fmean(v) for g, v in gpu.items() if v})
    rated = {j.name: j.loader for j in jobs if probe and j.loader.slowdown is not None}
    # py-spy's ratio where the loader's contradicts it (analyse/slowdown/figure.py): its
    # cycles are read from 100 Hz samples of one thread, which alias steps of a few samples;
    # the loader counts every batch of the window, so its figure is kept
    contradicted = {e.name: s for e in evs if (s := e.slowdown) is not None and e.name in rated
                    and choose([by_steps(s), by_loader(rated[e.name])]) != by_steps(s)}
    evs = [JobEvidence(**{**e.__dict__, "steps": 0, "step_time_s": None,
                          "solo_step_time_s": None}) if e.name in contradicted else e
           for e in evs]
    untimed = [e.name for e in evs if not e.steps or (probe and not e.solo_step_time_s)]
    if not untimed:
        v = judge(evs, host, "probe" if probe else "none")
    elif all(n in rated for n in untimed):  # every untimed job measured by its loader
        v = _by_loader(evs, host, untimed, rated, contradicted)
    else:  # judge on the signals, and say so
        v = judge([JobEvidence(**{**e.__dict__, "solo_step_time_s": None}) for e in evs],
                  host, "none", need_steps=0)
        v = v.replace(
            reason=v.reason + (f" (py-spy could not read the step time of {', '.join(untimed)}"
                               + (" together and alone" if probe else "")
                               + ", so no slowdown is claimed)"),
            confidence=_signal_agreement(hs, host.cpus, bool(v.evidence["cpu_signals"])))
    by = {n: by_loader(rated[n]) for n in untimed if n in rated}
    v = v.replace(jobs=tuple(_provenance(jv, by.get(jv.name)) for jv in v.jobs))
    v = v.with_evidence(method={
        "step_times": "py-spy sample order of each job's main thread" + (
            "; where it could not time them, the loader workers' work rate"
            if rated else ""),
        "solo": "in-situ probe (the other jobs paused)" if probe else None,
        "paused_job_s": round(paused_job_s, 2)})
    if v.kind == "no-baseline":
        v = v.replace(recommendations=(
            "run without --no-probe so each job is measured alone" if not probe else
            "launch the scripts with `gputop-dl launch` (command workloads) for step-exact "
            "figures from the start-up hook",))
    v = v.with_lines(*(f"{j.name}: no slowdown from its loader: {j.loader.why}"
                       for j in jobs if probe
                       and j.loader.slowdown is None and j.loader.why and j.name in untimed
                       and not j.no_solo))
    v = v.with_lines(*(f"{j.name}: measured passively, {j.no_solo}" for j in jobs if j.no_solo))
    if probe and paused_job_s:
        v = v.with_lines(f"probe cost: {paused_job_s:.1f} job-seconds paused")
    v = outside_load.not_alone(v, [j.window for j in jobs if j.window is not None], cpus)
    return with_estimate(v, est, probe)


def with_estimate(v: Verdict, est: Estimated, probe: bool) -> Verdict:
    """Without the probe, the live estimate is the verdict; with it, the estimate stands
    beside the probe's figures (and is the verdict where the probe could claim nothing)."""
    pv = est.verdict
    if pv is None:
        return v
    ests = {name: e.slowdown for name, e in (est.jobs or {}).items()}
    if not probe:
        return pv.with_evidence(diagnose_method=v.evidence.get("method")).with_lines(
            "--no-probe: no job was paused or measured alone")
    probed = {j.name: j.slowdown for j in v.jobs}
    side = "; ".join(f"{n} {_x(ests.get(n))} estimated vs {_x(probed.get(n))} probe"
                     for n in dict.fromkeys([*probed, *ests]))
    v = v.with_evidence(estimated_slowdowns=ests, estimate_kind=pv.kind).with_lines(
        f"live estimate ({pv.kind}) beside the probe: {side}")
    if v.kind == "no-baseline" and pv.kind in JUDGED:
        return pv.replace(
            reason=f"{pv.reason} (the probe: {v.reason})",
            evidence={**v.evidence, **pv.evidence},
            evidence_lines=pv.evidence_lines + v.evidence_lines)
    spun = pv.evidence.get("spinning_pools")
    if spun and v.kind == "cpu-bound":  # the estimate's cheapest fix holds for the probe's
        v = v.with_evidence(spinning_pools=spun).with_fix_first(
            Fix("spinning-pools", tuple(spun), spin_fix(spun))).with_lines(
            *(ln.replace(DIAGNOSE_HINT, "") for ln in pv.evidence_lines
              if "they spin while they wait" in ln))
    # a pool wider than its cores, read live, whatever the probe's kind
    v = with_width_fix(v, wide((est.jobs or {}).values()))
    if est.last is not None:  # the probe's verdict against the box's measured peaks too
        jobs, gprocs, gpus = est.last
        v = with_box_peaks(v, jobs, gprocs, gpus, est.peaks)
    return v


def jobs_json(jobs: Sequence[Measured], estimates: Mapping[str, Estimate], probe: bool,
              cpus: int) -> list[dict[str, Any]]:
    """The jobs as `diagnose --json` has them (schemas/diagnosis.json): one slowdown each, as
    in `--once --json`: the probe's where it timed the job both together and alone (or its
    loader measured it), else the live estimate's (analyse/live/passive.py)."""
    out: list[dict[str, Any]] = []
    for j in jobs:
        tog, alone = j.together, j.alone
        step = tog.step_time_s if tog else None
        solo = alone.step_time_s if alone else None
        got = j.loader if probe else LoaderSlowdown()
        loader, loader_why = got.slowdown, got.why
        fig = choose([by_steps(round(step / solo, 3)) if step and solo else None,
                      by_loader(got), slowdown_figure(estimates.get(j.name))])
        slowdown = None if fig is None else fig.value
        source = None if fig is None else fig.source
        by = None if fig is None or fig.kind != "probe" else FROM[fig.method]
        est = _est(estimates, j.name, "slowdown")
        waits = j.cpu_wait
        out.append({
            "pid": j.pid, "pids": list(j.pids), "name": j.name,
            "command": j.command, "device": j.device,
            "cpu_cores": round(statistics.fmean(j.cpu), 3) if j.cpu else None,
            "solo_cpu_cores": j.solo_cpu_cores,
            "stall_fraction": (round(tog.fraction, 3)
                               if tog and tog.samples and tog.fraction is not None else None),
            "solo_stall_fraction": (round(alone.fraction, 3) if alone and alone.samples
                                    and alone.fraction is not None else None),
            "step_time_s": step, "solo_step_time_s": solo,
            "slowdown": slowdown, "slowdown_source": source, "slowdown_from": by,
            "slowdown_method": None if fig is None else fig.method,
            "slowdown_reference": None if fig is None else fig.reference,
            "loader_slowdown": None if loader is None else round(loader, 3),
            "loader_why": loader_why,
            "cpu_wait_fraction": round(statistics.fmean(waits), 3) if waits else None,
            "autogroup": (estimates[j.name].last.autogroup if j.name in estimates else None),
            "measured_alone": alone is not None, "why_not_alone": j.no_solo,
            "solo_outside": (outside_load.window_json(j.window, cpus)
                             if j.window is not None else None),
            "estimated_slowdown": est,
            "estimate_confidence": _est(estimates, j.name, "confidence"),
            "slowdown_doubt": (estimates[j.name].doubt if source == "estimated" else None),
            **_waits(estimates.get(j.name),
                     round(statistics.fmean(waits), 3) if waits else None)})
    return out


def _provenance(jv: JobVerdict, loader: SlowdownFigure | None) -> JobVerdict:
    """A judged job with its loader's figure's provenance where the verdict took it (py-spy's
    step times say theirs in analyse/verdict.py)."""
    if jv.slowdown is None or loader is None:
        return jv
    return jv.replace(source=loader.source, method=loader.method, reference=loader.reference)


def by_steps(s: float) -> SlowdownFigure:
    """The probe's slowdown by py-spy's step times, together over alone."""
    return SlowdownFigure(s, "probe", "py-spy steps", "probe window")


def by_loader(r: LoaderSlowdown) -> SlowdownFigure | None:
    """The probe's slowdown by the loader's batches (write calls), else its CPU (None: no
    loader figure)."""
    if r.slowdown is None:
        return None
    return SlowdownFigure(round(r.slowdown, 3), "probe",
                          "loader writes" if r.by_writes is not None else "loader CPU",
                          "probe window", confidence=r.agreement)


def _x(s: float | None) -> str:
    return "–" if s is None else f"{s:.2f}×"


def _waits(e: Estimate | None, cpu: float | None) -> dict[str, Any]:
    """What the live estimate finds the job waits on: `waits_on` as the monitor's column has
    it, and `waits` as `--once --json` has them (each a share 0..1, null: unknown)."""
    if e is None:
        return {"waits_on": None, "waits": {"cpu": cpu, "io": None, "memory": None, "gpu": None}}
    io = e.io_wait if e.io_wait is None or e.mem_wait is None else round(e.io_wait - e.mem_wait, 3)
    return {"waits_on": WAITS_ON.get(e.cause or ""),
            "waits": {"cpu": cpu, "io": io, "memory": e.mem_wait, "gpu": e.last.gpu_wait}}


def _est(estimates: Mapping[str, Estimate], name: str, attr: str) -> float | None:
    e = estimates.get(name)
    return getattr(e, attr) if e is not None else None


def _signal_agreement(hs: Sequence[HostPoint], cpus: int, fired: bool) -> float:
    """A signals-only verdict's confidence: the share of the host samples that agree with it
    (a CPU saturation signal fired in that sample, or did not)."""
    if not hs:
        return 0.0
    agree = sum(bool(HostEvidence(cpus=cpus, busy=h.busy, psi_some10=h.psi_some10, load1=h.load1,
                                  throttled=h.throttled).cpu_signals()) == fired for h in hs)
    return round(agree / len(hs), 2)


def _mean(vals: Sequence[float | None]) -> float | None:
    known = [v for v in vals if v is not None]
    return statistics.fmean(known) if known else None


def _loader_why(r: LoaderSlowdown) -> str:
    """What a loader slowdown is made of: its batches (write calls) with its CPU beside them, or
    its CPU with its switches."""
    if r.by_writes is not None:
        return f"its workers' batches {r.by_writes:.2f}× (write calls), CPU {_x(r.by_cpu)}"
    return f"its workers' CPU {_x(r.by_cpu)}, switches {_x(r.by_switches)}"


def _by_loader(evs: list[JobEvidence], host: HostEvidence, untimed: list[str],
               rated: dict[str, LoaderSlowdown], contradicted: dict[str, float]) -> Verdict:
    """The verdict on the slowdowns the loader measured for the jobs py-spy could not time
    (or timed against the loader's figure, `contradicted`: py-spy's ratio); its confidence is
    how closely the loader's two ratios agree, the weakest job's."""
    v = judge([JobEvidence(**{**e.__dict__, "rate_slowdown": rated[e.name].slowdown})
               if e.name in untimed else e for e in evs], host, "probe", need_steps=0)
    v = v.replace(confidence=min(rated[n].agreement or 0.0 for n in untimed))
    v = v.with_evidence(loader_slowdowns={n: round(rated[n].slowdown or 0.0, 3) for n in untimed})
    v = v.with_lines(
        "slowdowns from each job's data-loader workers, their work rate alone (the others "
        "paused) against together (py-spy could not time the steps of "
        + ", ".join(n for n in untimed if n not in contradicted)
        + (", and contradicted by the loader for " + ", ".join(contradicted)
           if contradicted else "") + "): " + ", ".join(
            f"{n} {rated[n].slowdown:.2f}× ({_loader_why(rated[n])})" for n in untimed))
    return v.with_lines(*(
        f"{n}: py-spy's step times gave {s:.2f}×, its loader {rated[n].slowdown:.2f}×: more "
        f"than {CONTRADICT:g}× apart, so the loader's is kept (py-spy's step cycles are read from "
        "100 Hz samples, which alias short steps; the loader counts every batch)"
        for n, s in contradicted.items()))

