"""The live verdict with no baseline and no pause: each job's slowdown estimated from its waits.

Every tick, from what the samplers already read (no job is stopped, nothing runs alone):

- a job's CPU wait `f` (collect/proc/schedstat.py: the share of its threads' runnable time spent
  waiting for a CPU) and the cores it used `c`. Its threads were runnable `D = c / (1 - f)`
  cores' worth of the time, over `n = round(D)` threads each runnable `b = min(1, D / n)` of
  the wall time: each lost `f * b` of it waiting, a `share` of it behind the other jobs (the
  rest behind load from outside them, which alone would still be there: `set_share`). Its CPU
  work would run `s_cpu = min(1 / (1 - f * b * share), cpus / c)` times faster alone (>= 1);
  a CPU trainer with an intra-op pool (two or more busy threads) moves only while all of them
  run: its critical path is the product of their rates (`pool_speedup`), when that is larger;
- the job's critical path. Training on the CPU (no GPU seen), its CPU work is its step: the
  estimate is `s_cpu`. On a GPU, only the data wait can shrink when the loader's workers get
  their cores: with a known data-stall `σ`, `s = min(s_cpu(f_workers), 1 / (1 - σ))`; with
  the stall unknown the estimate is `s_cpu` and its confidence is lower;
- GPU sharing (NVML per-process SM samples): on a GPU that two or more jobs use and that is
  busy (their SM shares sum to GPU_BUSY or more), job i waits for the others' kernels:
  `s_gpu = min(1 / (1 - o_i), U / u_i)`, `o_i` the others' share, `U` the GPU's, `u_i` its own;
- each job's estimate is the larger of the two; the set is **cpu-bound** when a job's CPU
  estimate exceeds SLOW (1.10), **gpu-contended** when only GPU estimates do, **parallel**
  when none does.

One noisy tick does not flip it: each job's estimate is the median of its last WINDOW ticks,
and a verdict needs MIN_TICKS of them; a job the last verdict took for slowed stays so down to
SLOW_STAY (hysteresis: one that hovers about SLOW does not flip the verdict every few ticks).
A job whose CPU wait is unknown (a kernel without
schedstat, another user's hidden process) gets no estimate ("–", with the reason); when no job
has one, the verdict falls back to the host's CPU signals (`no-baseline`). The CPU model lives
in analyse/live/cpu_wait_model.py, the GPU one in analyse/live/gpu_share.py, the disk one in
analyse/live/io_share.py, load from outside the jobs in analyse/live/outside_load.py;
analyse/live/job_estimate.py makes each job's estimate, this module the set's verdict.
The model and its blind spots: docs/verdict.md.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from gputop_dl.analyse.live import outside_load
from gputop_dl.analyse.live.alone import alone_verdict
from gputop_dl.analyse.live.box_peaks import Peaks, with_box_peaks
from gputop_dl.analyse.live.cpu_wait_model import demand, pool_line, set_share, spin_fix, spins
from gputop_dl.analyse.live.gpu_clocks import with_gpu_findings
from gputop_dl.analyse.live.job_estimate import (MIN_TICKS, Estimate, Tick, outside_procs, smooth,
                                            tick_estimates)
from gputop_dl.analyse.live.outside_load import OutsideWindow
from gputop_dl.analyse.live.wide_pools import pool_width, wide, with_width_fix
from gputop_dl.analyse.slowdown.pace import Pace, pace_figure
from gputop_dl.analyse.slowdown.pace_tracks import OwnPace
from gputop_dl.analyse.slowdown.pace_words import at_least_line, earlier_line, pace_line
from gputop_dl.analyse.slowdown.pace_evidence import evidence as pace_evidence
from gputop_dl.analyse.live.resource_verdict import (io_bound, io_reason, memory_bound,
                                                memory_evidence, memory_reason, with_memory_lines)
from gputop_dl.analyse.slowdown.figure import SlowdownFigure, choose
from gputop_dl.analyse.thresholds import SLOW, SLOW_STAY
from gputop_dl.analyse.verdict import at_most, fit_at_once, judge
from gputop_dl.analyse.verdict_evidence import HostEvidence, JobEvidence
from gputop_dl.analyse.verdict_types import Evidence, Fix, JobVerdict, Verdict
from gputop_dl.snapshot import (GpuProcess, GpuSample, HostSample, JobSample, Snapshot, WaitsOn,
                                evolve)
from gputop_dl.text.fmt import num

__all__ = ["Estimate", "PassiveJudge", "Tick", "annotate", "judge_passive", "once", "set_share",
           "smooth", "tick_estimates"]

WINDOW = 5  # ticks per job whose median is its estimate
WAITS_ON: dict[str, WaitsOn] = {"cpu": "cpu", "gpu": "gpu", "io": "disk", "memory": "memory"}  # by an estimate's cause
# the host's runnable threads (HostSample.runnable) are averaged over this many ticks, and used
# in place of the load average (a minute's moving average, which lags a load that starts or
# stops) once RUNNABLE_MIN of them are known
RUNNABLE_WINDOW = 10
RUNNABLE_MIN = 3


@dataclass
class PassiveJudge:
    """The live verdict's memory: each job's last WINDOW ticks (no I/O; the plans feed it)."""

    window: int = WINDOW
    min_ticks: int = MIN_TICKS
    _hist: dict[tuple[str, int | None], deque[Tick]] = field(default_factory=dict)
    _runnable: deque[int] = field(default_factory=lambda: deque(maxlen=RUNNABLE_WINDOW))
    _outside: OutsideWindow = field(default_factory=OutsideWindow)
    # the stored machine profile's peaks (analyse/live/box_peaks.py); None: not looked up
    peaks: Peaks | None = None
    _slowed: frozenset[str] = frozenset()  # the jobs the last verdict took for slowed
    own_pace: OwnPace = field(default_factory=OwnPace)  # each job's own pace alone and now

    def runnable(self) -> float | None:
        """The host's mean runnable threads over the last ticks (None: too few readings)."""
        if len(self._runnable) < RUNNABLE_MIN:
            return None
        return sum(self._runnable) / len(self._runnable)

    def update(self, jobs: Sequence[JobSample], host: HostSample | None,
               gprocs: Sequence[GpuProcess] = (), gpus: Sequence[GpuSample] = (),
               t: float = 0.0) -> dict[str, Estimate]:
        """Add this tick; each job's smoothed estimate (jobs gone are forgotten)."""
        if host is not None and host.runnable is not None:
            self._runnable.append(host.runnable)
        self._outside.add(outside_procs(jobs, host))
        ticks = tick_estimates(jobs, host, gprocs, gpus, t, runnable=self.runnable())
        keys = {(j.name, j.pid): j.name for j in jobs}
        for key in [k for k in self._hist if k not in keys]:
            del self._hist[key]
        paces = self.own_pace.update(jobs, t)
        out = {}
        for key, name in keys.items():
            h = self._hist.setdefault(key, deque(maxlen=self.window))
            h.append(ticks[name])
            out[name] = with_pace(smooth(list(h), name, self.min_ticks), paces.get(name))
        return out

    def verdict(self, jobs: Sequence[JobSample], host: HostSample | None,
                gprocs: Sequence[GpuProcess] = (), gpus: Sequence[GpuSample] = (),
                t: float = 0.0) -> tuple[Verdict | None, dict[str, Estimate]]:
        """This tick's verdict for `jobs` (None when there is no job) and the estimates."""
        est = self.update(jobs, host, gprocs, gpus, t)
        if not jobs:
            return None, est
        self._slowed = frozenset(e.name for e in slowed(est.values(), self._slowed))
        v = judge_passive(list(est.values()), host, runnable=self.runnable(),
                          runnable_ticks=len(self._runnable), outside=self._outside,
                          slowed_names=self._slowed)
        # memory lines; GPU clocks, PCIe link, NUMA: evidence and fixes, kind unchanged
        v = with_memory_lines(v, jobs, host)
        v = with_box_peaks(v, jobs, gprocs, gpus, self.peaks)  # live rates vs measured peaks
        return with_gpu_findings(v, jobs, gprocs, gpus), est


# the doubt an estimate of a job whose intra-op pool spins carries, where no pace replaces it
# (docs/validation.md, "Multi-threaded jobs": such estimates read 0.08-1.40 of the truth)
SPIN_DOUBT = ("its intra-op pool spins, which the CPU-wait estimate cannot follow: the true "
              "slowdown can be several times this (`gputop-dl diagnose` measures it)")


def with_pace(e: Estimate, p: Pace | None) -> Estimate:
    """The estimate with its own pace (analyse/slowdown/pace.py), and which of the two is its
    slowdown: the one `figure.choose` picks (analyse/slowdown/figure.py). A pace by its batches
    (its loader's write calls: its progress itself) or its loop counter always; one by its
    loader's CPU or py-spy's steps where the CPU-wait estimate is known to miss (its intra-op
    pool spins: the model reads 0.1-1.4 of such jobs' truth, docs/validation.md), where there
    is none, or where the two are more than CONTRADICT apart: a measured rate of its own over
    a model."""
    k = e.last
    spun = spins(k.pool, k.pool_slice_ms, k.pool_yields)
    doubt = SPIN_DOUBT if spun and e.slowdown is not None else None
    est = SlowdownFigure(e.slowdown, "estimate", "wait model", "no waits", e.confidence,
                         doubt=doubt, why=e.why)
    pace = pace_figure(p) if p is not None else None
    if pace is None or choose([pace, est]) is not pace:
        return evolve(e, pace=p, doubt=doubt)
    assert p is not None and p.slowdown is not None
    leans = e.leans or "cpu"
    return evolve(e, slowdown=p.slowdown, pace=p, pace_used=True, leans=leans,
                  cause=leans if p.slowdown > SLOW else None,
                  confidence=e.confidence if e.confidence is not None else 0.5)


def slowdown_figure(e: Estimate | None) -> SlowdownFigure | None:
    """A job's live slowdown and where it comes from: its own pace where `with_pace` took it,
    else the CPU-wait estimate (None: no estimate, or no value)."""
    if e is None or e.slowdown is None:
        return None
    if e.pace_used and e.pace is not None:
        return dataclasses.replace(pace_figure(e.pace), value=e.slowdown,
                                   confidence=e.confidence)
    return SlowdownFigure(e.slowdown, "estimate", "wait model", "no waits", e.confidence,
                          doubt=e.doubt, why=e.why)


def _host_load(load1: float | None, runnable: float | None, ticks: int) -> str:
    if runnable is not None:
        return f"host: {runnable:.1f} threads runnable, mean of the last {ticks} readings"
    return f"host load {num(load1, '.1f')}"


def slowed(est: Iterable[Estimate], before: frozenset[str] = frozenset()) -> list[Estimate]:
    """The judged jobs slowed: estimate above SLOW, or above SLOW_STAY for one that `before`
    (the last verdict) took for slowed already (hysteresis)."""
    return [e for e in est if e.slowdown is not None
            and e.slowdown > (SLOW_STAY if e.name in before else SLOW)]


def judge_passive(est: Sequence[Estimate], host: HostSample | None,
                  runnable: float | None = None, runnable_ticks: int = 0,
                  outside: OutsideWindow | None = None,
                  slowed_names: frozenset[str] | None = None) -> Verdict:
    """The set's verdict from its jobs' estimates (see the module docstring); `runnable`: the
    host's mean runnable threads over `runnable_ticks` ticks, when the judge had them;
    `outside`: the processes outside the jobs over the judge's window; `slowed_names`: the
    jobs taken for slowed (`slowed`, with the last verdict's hysteresis; None: those above
    SLOW). Whatever the kind, a judged job whose intra-op pool is wider than the cores it gets
    (analyse/live/wide_pools.py), behind the other jobs or behind load from outside them, gets
    the fix its owner can make first: fewer intra-op threads."""
    return with_width_fix(_judge(est, host, runnable, runnable_ticks, outside, slowed_names),
                          wide(est))


def _judge(est: Sequence[Estimate], host: HostSample | None, runnable: float | None,
           runnable_ticks: int, outside: OutsideWindow | None,
           slowed_names: frozenset[str] | None) -> Verdict:
    cpus = host.cpus if host is not None else 1
    hev = HostEvidence(cpus=cpus, busy=host.cpu_busy if host else None,
                       psi_some10=host.cpu_pressure_some10 if host else None,
                       load1=host.load1 if host else None,
                       throttled=host.cgroup_throttled_frac if host else None)
    signals = hev.cpu_signals()
    judged = [e for e in est if e.slowdown is not None]
    rows = tuple(outside_load.job_row(e, _job_verdict(e)) for e in est)
    win = outside if outside is not None else OutsideWindow()
    evidence = {"method": "passive: CPU wait (schedstat), NVML per-process GPU shares, "
                          "disk reads (/proc/PID/io, D state, PSI io) and page-cache refaults "
                          "(vmstat, memory cgroup); no baseline, no job paused",
                "io_pressure_some10": host.io_pressure_some10 if host else None,
                "io_wait": {e.name: e.io_wait for e in est},
                **memory_evidence(est, host),
                "io_read_bytes_per_s": {e.name: e.last.io_read_bps for e in est},
                "cpus": cpus, "cpu_signals": signals, "host_busy": hev.busy,
                "cpu_pressure_some10": hev.psi_some10, "load1": hev.load1,
                "runnable_mean": None if runnable is None else round(runnable, 2),
                "cpu_wait": {e.name: e.last.cpu_wait for e in est},
                "estimated_slowdowns": {e.name: e.slowdown for e in judged},
                "own_pace": {e.name: pace_evidence(e.pace, e.pace_used) for e in est
                             if e.pace is not None} or None,
                "co_cpu_cores": round(sum(e.last.cpu_cores or 0.0 for e in est), 2),
                "set_share": {e.name: round(e.last.set_share, 3) for e in est},
                "outside_load": outside_load.evidence(est, win)}
    if not judged:
        if any(e.last.note is None for e in est):  # readings under way (a first reading)
            return Verdict(kind="insufficient-data", confidence=0.0, evidence=evidence, jobs=rows,
                           reason=f"the CPU wait needs {MIN_TICKS} readings of each job's "
                                  "threads; judged in a moment")
        # no CPU wait anywhere: today's signals (a kernel without schedstat, hidden processes)
        why = "; ".join(sorted({e.why for e in est if e.why}))
        evs = [JobEvidence(name=e.name, device="cpu" if e.last.on_cpu else None, gpus=(),
                           steps=0, step_time_s=None, stall=None, cpu_cores=e.last.cpu_cores)
               for e in est]
        v = judge(evs, hev, "none", need_steps=0)
        return v.replace(reason=v.reason + f" ({why}: no slowdown is estimated)", jobs=rows,
                         recommendations=(), evidence={**v.evidence, **evidence},
                         confidence=1.0 if signals else 0.5)
    slow = (slowed(judged) if slowed_names is None
            else [e for e in judged if e.name in slowed_names])
    cpu_slowed = [e for e in slow if e.leans == "cpu"]
    gpu_slowed = [e for e in slow if e.leans == "gpu"]
    io_slowed = [e for e in slow if e.leans == "io"]
    mem_slowed = [e for e in slow if e.leans == "memory"]
    stp = sum(1.0 / _s(e) for e in judged)
    evidence.update(stp=round(stp, 3), efficiency=round(stp / len(judged), 3))
    unknown = [e for e in est if e.slowdown is None]
    lines = ["estimated alone-speed: " + ", ".join(
        f"{e.name} {_s(e):.2f}×" + (" (its own pace)" if e.pace_used else "") for e in judged)
             + f" (STP {stp:.2f} of {len(judged)}), from each job's waits (CPU, shared GPU, disk, memory); nothing paused"]
    if unknown:
        lines.append("not estimated: " + "; ".join(f"{e.name} ({e.why})" for e in unknown))
    if signals:
        lines.append("CPU signals: " + "; ".join(signals))
    lines += [pool_line(e.name, e.last.pool, s, e.last.pool_slice_ms, e.last.pool_yields)
              for e in judged if (s := e.last.pool_speedup) is not None]
    lines += [pace_line(e.name, e.pace, e.pace_used) for e in judged
              if e.pace is not None and e.pace.slowdown is not None]
    lines += [at_least_line(e.name, e.pace) for e in est  # (a job without an estimate too)
              if e.pace is not None and e.pace.at_least is not None]
    consumers = win.consumers()
    out_slowed = outside_load.slowed(judged)
    if any(e.last.set_share < 0.9 for e in judged):
        lines.append("load from outside these jobs: of what " + ", ".join(
            f"{e.name} waits behind, the other jobs are {e.last.set_share:.0%}" for e in judged
            if e.last.set_share < 0.9)
            + f" ({_host_load(hev.load1, runnable, runnable_ticks)}); alone, the rest would "
              "still be there")
        if consumers is not None:
            lines.append(f"outside the jobs, the busiest: {outside_load.named(consumers)}")
    want = sum(d for e in judged if (d := demand(e.last.cpu_wait, e.last.cpu_cores)) is not None)
    evidence["cpu_demand_cores"] = round(want, 2)
    if len(est) == 1:  # nothing to be parallel with: its own waits, and what a second would meet
        e = est[0]
        if e.pace is not None and e.pace.earlier is not None:  # how it ran beside the others
            lines.append(earlier_line(e.name, e.pace))
        v = alone_verdict(e.name, cpus=cpus, cores=e.last.cpu_cores, cpu_wait=e.last.cpu_wait,
                          stall=e.last.stall, io_wait=e.io_wait, evidence=evidence,
                          lines=tuple(lines[1:]), jobs=rows,
                          gpu=None if e.last.on_cpu else "its GPU")
        if out_slowed:  # alone among the jobs, but not on the box: say what slows it
            v = v.replace(reason=f"{v.reason}; {outside_load.clause(out_slowed, consumers)}",
                          recommendations=v.recommendations + outside_load.fixes(
                              consumers, cpus, outside_load.job_groups(est)))
        return v
    if not slow and out_slowed and len(judged) > 1:
        return outside_load.outside_verdict(judged, out_slowed, consumers, cpus, evidence,
                                            lines, rows)
    if not slow:
        conf = min(_c(e) for e in judged)
        return Verdict(kind="parallel", confidence=conf, evidence=evidence,
                       evidence_lines=tuple(lines), jobs=rows,
                       reason=f"no job waits for a CPU, a shared GPU, the disk or memory on its "
                              f"critical path "
                              f"(worst estimate {max(_s(e) for e in judged):.2f}×; estimated "
                              "live, nothing paused)",
                       recommendations=(f"headroom: the jobs used {evidence['co_cpu_cores']:.1f}"
                                        f" of {cpus} cores",))
    conf = max(_c(e) for e in slow)
    v = _jobs_own(cpu_slowed, gpu_slowed, io_slowed, mem_slowed, judged, host, evidence, lines,
                  conf, rows)
    if out_slowed:  # the jobs' own contention first, then the load from outside them
        at = v.reason.rfind(" (")  # before "(estimated live, nothing paused)"
        v = v.replace(reason=f"{v.reason[:at]}; {outside_load.clause(out_slowed, consumers)}"
                             + v.reason[at:],
                      recommendations=v.recommendations + outside_load.fixes(
                          consumers, cpus, outside_load.job_groups(judged)))
    return v


def _jobs_own(cpu_slowed: Sequence[Estimate], gpu_slowed: Sequence[Estimate],
              io_slowed: Sequence[Estimate], mem_slowed: Sequence[Estimate],
              judged: Sequence[Estimate], host: HostSample | None, evidence: Evidence, lines: list[str],
              conf: float, rows: tuple[JobVerdict, ...]) -> Verdict:
    """The verdict when the jobs slow each other: memory-, io- or cpu-bound, or gpu-contended."""
    cpus = host.cpus if host is not None else 1
    want = evidence["cpu_demand_cores"]
    worst = {c: max(map(_s, g), default=0.0)
             for c, g in (("memory", mem_slowed), ("io", io_slowed), ("cpu", cpu_slowed))}
    if mem_slowed and worst["memory"] >= max(worst["io"], worst["cpu"]):
        return memory_bound(mem_slowed, [*io_slowed, *cpu_slowed], host, evidence, lines, conf,
                            rows)
    if io_slowed and worst["io"] >= worst["cpu"]:
        return io_bound(io_slowed, [*cpu_slowed, *mem_slowed], host, evidence, lines, conf, rows)
    if cpu_slowed:
        names = ", ".join(f"{e.name} (waits {e.last.critical_wait or 0:.0%})" for e in cpu_slowed)
        slowed = tuple(e.name for e in cpu_slowed)
        fixes = [Fix("cores", slowed, f"these jobs' threads want ≈ {want:.1f} cores (CPU time "
                                      f"plus run-queue wait); this machine allows {cpus}")]
        fit = fit_at_once([demand(e.last.cpu_wait, e.last.cpu_cores) or 0.0 for e in judged],
                          cpus)
        if fit < len(judged):
            fixes.append(Fix("queue", tuple(e.name for e in judged), at_most(fit, cpus)))
        loaders = tuple(e.name for e in cpu_slowed if e.last.workers)
        if loaders:  # a job without DataLoader workers has no transforms to lighten
            fixes.append(Fix("loader", loaders, f"{', '.join(loaders)}: fewer or lighter "
                             "data-loader transforms (pre-computed), or more cores"))
        spun = [e.name for e in cpu_slowed  # (a pool wider than its cores: judge_passive)
                if spins(e.last.pool, e.last.pool_slice_ms, e.last.pool_yields)
                and pool_width(e.last.pool) is None]
        if spun:  # the cheapest fix first: 2-14x a pair's throughput, measured (validation.md)
            fixes.insert(0, Fix("spinning-pools", tuple(spun), spin_fix(spun)))
            evidence["spinning_pools"] = spun
        return Verdict.fixed(fixes, kind="cpu-bound", confidence=conf, evidence=evidence,
                             evidence_lines=tuple(lines), jobs=rows,
                             reason=f"the critical path of {names} waits for a CPU: the jobs "
                                    f"need more cores than the {cpus} allowed"
                                    + (f"; {io_reason(io_slowed, host)}" if io_slowed else "")
                                    + (f"; {memory_reason(mem_slowed, host)}" if mem_slowed
                                       else "")
                                    + " (estimated live, nothing paused)")
    names = ", ".join(f"{e.name} (others hold its GPU {e.last.gpu_wait or 0:.0%})"
                      for e in gpu_slowed)
    fix = Fix("gpu-placement", tuple(e.name for e in gpu_slowed),
              "place these jobs on separate GPUs, or run them one after another")
    return Verdict.fixed([fix], kind="gpu-contended", confidence=conf, evidence=evidence,
                         evidence_lines=tuple(lines), jobs=rows,
                         reason=f"{names} share a busy GPU and queue for it (NVML per-process "
                                "samples; estimated live, nothing paused)")


def _s(e: Estimate) -> float:
    """A judged job's estimate (1 where there is none: only judged jobs are asked)."""
    return e.slowdown if e.slowdown is not None else 1.0


def _c(e: Estimate) -> float:
    return e.confidence if e.confidence is not None else 0.0


def _job_verdict(e: Estimate) -> JobVerdict:
    k = e.last
    fig = slowdown_figure(e) or bound_figure(e)
    return JobVerdict(name=e.name, slowdown=e.slowdown, cpu_cores=k.cpu_cores,
                      source=fig.source if fig else None,
                      method=fig.method if fig else None,
                      reference=fig.reference if fig else None, slowdown_doubt=e.doubt,
                      slowdown_confidence=e.confidence, cpu_wait=k.cpu_wait,
                      critical_wait=k.critical_wait, gpu_wait=k.gpu_wait, why=e.why,
                      slowdown_at_least=fig.at_least if fig and fig.value is None else None)


def bound_figure(e: Estimate | None) -> SlowdownFigure | None:
    """A job's live bound where it has no slowdown: its own pace has no value but says it is
    at least N× slower (analyse/slowdown/pace.py); None: a slowdown, or no bound."""
    if e is None or e.slowdown is not None or e.pace is None or e.pace.at_least is None:
        return None
    return pace_figure(e.pace)


def annotate(jobs: Sequence[JobSample], est: dict[str, Estimate]) -> list[JobSample]:
    """The rows with their live slowdown (`slowdown_figure`: its value, source, method,
    reference and confidence), for each job that has none yet: a row's own is launch's
    measured or probe figure, which ranks above every live one (analyse/slowdown/figure.py).
    A job with neither a row's own nor a live slowdown gets its pace's bound, where it has one
    (`bound_figure`: `slowdown_at_least`, with its source, method and reference)."""
    out = []
    for j in jobs:
        e = est.get(j.name)
        fig = slowdown_figure(e)
        if j.slowdown is None and e is not None and fig is not None:
            j = evolve(j, slowdown=e.slowdown, slowdown_source=fig.source,
                       slowdown_method=fig.method, slowdown_reference=fig.reference,
                       slowdown_confidence=e.confidence, slowdown_doubt=e.doubt)
        elif j.slowdown is None and (bound := bound_figure(e)) is not None:
            j = evolve(j, slowdown_at_least=bound.at_least, slowdown_source=bound.source,
                       slowdown_method=bound.method, slowdown_reference=bound.reference)
        if e is not None:
            j = evolve(j, waits_on=WAITS_ON.get(e.cause or ""), io_wait_fraction=e.io_wait,
                       memory_wait_fraction=e.mem_wait,
                       gpu_wait_fraction=e.last.gpu_wait, outside_slowdown=e.outside)
        out.append(j)
    return out


def once(snap: Snapshot, peaks: Peaks | None = None) -> Snapshot:
    """`--once`: the live verdict of one snapshot (its CPU wait read over the interval between
    its two samples), judged from that one reading; `peaks`: the stored machine profile's."""
    judge = PassiveJudge(min_ticks=1, peaks=peaks)
    v, est = judge.verdict(snap.jobs, snap.host, snap.gpu_processes, snap.gpus, snap.time)
    return dataclasses.replace(snap, jobs=tuple(annotate(snap.jobs, est)),
                               verdict=v.to_json() if v is not None else snap.verdict)
