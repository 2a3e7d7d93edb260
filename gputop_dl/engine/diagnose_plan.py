"""`gputop-dl diagnose`: the verdict for training jobs that are already running, started by anyone.

The jobs are the monitor's found jobs (torch processes grouped with their loader workers). Three
phases, bounded by `seconds`:

1. observe: tick for about a third of the time (longer while no job has been found yet);
   each job's CPU (cores, its whole tree), the host's CPU signals and the GPUs are sampled;
2. co-run burst: py-spy on every job's main thread at once, for its data stall fraction and,
   where the sample order shows it unambiguously, its step time and the steps it covered;
3. probe (unless `probe=False`): for each job in turn, every *other* job is paused (SIGSTOP to
   its tree; `pause.Pauser` resumes them even if gputop-dl is killed), the job runs alone for
   `probe_s` seconds while py-spy measures it and its tree's CPU time is read: its solo step
   time, stall and CPU need. A job whose neighbours we may not signal (another user's) gets
   no solo window, and the verdict says so. The rest of the box runs on: the job's CPU wait
   and the busiest processes outside it are read over its window (collect/jobs/solo_window.py); a
   window slowed from outside by more than 10 % says so, with its figure (`solo_outside`), and
   a probe that finds the jobs at their solo speed then says `outside-load`, not parallel.

The verdict is the launch's (`analyse.verdict.judge`): a slowdown only where py-spy read a step
time both together and alone; otherwise it rests on the signals and says that it does.

Beside it, the live estimate (analyse/passive.py) over the observe phase, each job's stall from
the burst: with `probe=False` it is the verdict (observe about 6 s, burst 3 s: an answer in about
10 s, nothing paused); with the probe it stands beside the probe's figures, and is the verdict
where the probe could claim no slowdown.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import time
from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import psutil

from gputop_dl.analyse import outside_load
from gputop_dl.analyse.box_peaks import Peaks, with_box_peaks
from gputop_dl.analyse.cpu_wait_model import DIAGNOSE_HINT, spin_fix
from gputop_dl.analyse.passive import WAITS_ON, Estimate, PassiveJudge, annotate
from gputop_dl.analyse.evidence import HostPoint, host_point
from gputop_dl.analyse.verdict import HostEvidence, JobEvidence, judge
from gputop_dl.analyse.verdict_types import Fix, Verdict
from gputop_dl.analyse.loader_rate import CONTRADICT, LoaderSlowdown, loader_slowdown
from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.jobs.found import owner
from gputop_dl.collect.jobs.privilege import Access
from gputop_dl.collect.jobs.loader_work import (LoaderWork, WorkRate, WorkWatch, chain_rate,
                                           read_work, workers_of)
from gputop_dl.collect.jobs.solo_window import SoloReading, SoloWatch
from gputop_dl.engine.box_profile import load_peaks
from gputop_dl.engine.plan import Plan, VerdictJson
from gputop_dl.control.pause import Pauser, may_signal
from gputop_dl.snapshot import GpuProcess, GpuSample, HostSample, JobSample

if TYPE_CHECKING:
    from gputop_dl.collect.jobs.discover import Found
    from gputop_dl.collect.machine import MachineSample
    from gputop_dl.engine.core import Engine

SCHEMA = "gputop-dl.diagnosis/1"
RATE = 100  # py-spy samples per second: a 40 ms data wait must span several samples
NO_PROBE_OBSERVE_S = 6.0  # --no-probe: observe at most this long (the live estimate needs a few ticks)
NO_PROBE_BURST_S = 3.0  # --no-probe: the py-spy burst (data stall) at most this long
JUDGED = ("parallel", "cpu-bound", "gpu-contended", "io-bound", "memory-bound", "outside-load",
          "alone")


class Diagnosed(TypedDict):
    """What `diagnose` measured of one found job (`DiagnosePlan.jobs`, by root PID)."""

    name: str
    pid: int
    cpu: list[float]  # its tree's CPU cores, one per observed tick
    pids: NotRequired[list[int]]
    command: NotRequired[str | None]
    device: NotRequired[str | None]
    gpu_mem: NotRequired[int | None]
    cpu_wait: NotRequired[list[float]]  # its CPU wait share, one per observed tick
    frozen: NotRequired[bool]  # the observe phase is over: no more CPU figures
    together: NotRequired[pyspy.StallEstimate | None]  # the py-spy burst with the others
    alone: NotRequired[pyspy.StallEstimate | None]  # its probe window, the others paused
    no_solo: NotRequired[str]  # why it has no probe window
    window: NotRequired[SoloReading]  # what ran beside it in its probe window
    solo_cpu_cores: NotRequired[float]
    not_workers: NotRequired[list[int]]  # its other processes (trainer, ranks)
    loader: NotRequired[list[LoaderWork]]  # their work, each observed tick and after the burst
    loader_alone: NotRequired[tuple[WorkRate | None, str | None]]  # in its probe window


# one observed tick: (time, the jobs asked for, host, GPU processes, GPUs)
_Observed = tuple[float, list[JobSample], HostSample, tuple[GpuProcess, ...], tuple[GpuSample, ...]]


class DiagnosePlan(Plan["Engine"]):
    """Observe the found jobs, py-spy them together, probe each alone, judge."""

    kind = "diagnose"

    def __init__(self, seconds: float = 30.0, probe: bool = True, command: str = "gputop-dl diagnose",
                 burst_s: float | None = None, pids: set[int] | None = None):
        self.seconds = seconds
        self.only = pids  # diagnose only the jobs with these root PIDs (None: every job found)
        self.probe = probe
        self.command = command
        self.burst_s = burst_s or max(1.0, min(4.0 if probe else NO_PROBE_BURST_S, seconds / 6))
        self.verdict: VerdictJson | None = None
        self.jobs: dict[int, Diagnosed] = {}  # root pid -> what was measured
        self.notes_: list[str] = []
        self.paused_job_s = 0.0
        self._cpus = 1  # the cores allowed (the engine's environment, read in `run`)
        self._host: list[HostPoint] = []
        self._gpu: dict[int, list[float]] = {}
        self._pauser = Pauser(sigstop_fallback=False)  # jobs we did not start: guarded or not at all
        self._t0 = time.monotonic()
        # the live estimate (analyse/passive.py), over the observe phase only: once the probe
        # pauses jobs, their neighbours' waits no longer say how they run together
        self.passive = PassiveJudge()
        self.peaks: Peaks | None = None  # the stored machine profile's (read when it runs)
        self.estimates: dict[str, Estimate] = {}
        self._observed: list[_Observed] = []  # (t, jobs, host, gpu processes, gpus) per tick
        self._observing = True
        self.estimate: Verdict | None = None

    # --- the engine's questions ----------------------------------------------------------------
    def after_tick(self, engine: Engine, now: float, machine: MachineSample) -> None:
        h = machine.host
        self._host.append(host_point(now, h))
        for g in machine.gpus:
            if g.util is not None:
                self._gpu.setdefault(g.index, []).append(g.util)
        for j in self._mine(machine.found):
            if j.pid is None:  # a found job always has its root PID
                continue
            rec = self.jobs.setdefault(j.pid, {"name": j.name, "pid": j.pid, "cpu": []})
            rec["pids"], rec["command"], rec["device"] = list(j.pids), j.command, j.device
            rec["gpu_mem"] = j.gpu_mem
            if j.cpu_cores is not None and not rec.get("frozen"):
                rec["cpu"].append(j.cpu_cores)
            if j.cpu_wait_fraction is not None and not rec.get("frozen"):
                rec.setdefault("cpu_wait", []).append(j.cpu_wait_fraction)
            if self.probe and not rec.get("frozen"):  # the loader's work together
                rec["not_workers"] = [p.pid for p in j.procs if p.role != "worker"]
                if (w := read_work(workers_of(j.pid, rec["not_workers"]))) is not None:
                    rec.setdefault("loader", []).append(w)
        if self._observing:
            mine = self._mine(machine.found)
            self._observed.append((now, mine, machine.host, machine.gpu_processes, machine.gpus))
            _, self.estimates = self.passive.verdict(mine, machine.host, machine.gpu_processes,
                                                     machine.gpus, now)
        if engine.recorder.is_open:
            engine.recorder.found(now, tuple(self.found_rows(engine, self._mine(machine.found))))

    def found_rows(self, engine: Engine, found: list[JobSample]) -> list[JobSample]:
        return annotate(found, self.estimates)

    def _mine(self, found: Iterable[JobSample]) -> list[JobSample]:
        """The found jobs asked for: `--pid` names a job's root or any process of its tree."""
        only = self.only
        return [j for j in found if only is None or j.pid in only or only.intersection(j.pids)]

    def notes(self) -> tuple[str, ...]:
        return tuple(self.notes_)

    def close(self, engine: Engine) -> None:
        self._pauser.close()

    # --- the session ---------------------------------------------------------------------------
    def run(self, engine: Engine) -> str:
        rec = engine.recorder
        self.passive.peaks = self.peaks = load_peaks(rec.store_path)  # the box's measured peaks
        rec.open_monitor(self.command, engine.env, engine.interval, kind="diagnose")
        self._cpus = engine.env.get("cpus") or 1
        t0 = self._t0 = time.monotonic()
        observe = max(2 * engine.interval, self.seconds / 3 if self.probe
                      else min(self.seconds / 3, NO_PROBE_OBSERVE_S))
        engine.say(f"diagnose: observing for {observe:.0f} s")
        # (no job seen yet: keep looking until one is, or the time is up)
        engine.loop(lambda: time.monotonic() - t0 >= observe
                    and (bool(self.jobs) or time.monotonic() - t0 >= self.seconds))
        if engine.stopping:
            return "interrupted"
        found = {f.pid: f for f in (engine.sampler.found.found if engine.sampler.found else [])}
        live = [pid for pid in self.jobs if pid in found]
        if not live:
            engine.say("diagnose: no training job found")
            self.verdict = None
            return "finished"
        for pid in live:
            self.jobs[pid]["frozen"] = True  # co-run CPU: the observe phase only
        engine.say(f"diagnose: py-spy on {len(live)} job(s) together for {self.burst_s:g} s")
        together = _spy_all({pid: found[pid].target for pid in live}, self.burst_s)
        for pid in live:
            self.jobs[pid]["together"] = together.get(pid)
            if self.probe:  # the loader's work together runs until the probe
                w = read_work(workers_of(pid, self.jobs[pid].get("not_workers") or ()))
                if w is not None:
                    self.jobs[pid].setdefault("loader", []).append(w)
        self._observing = False
        self.estimate, self.estimates = self._estimate(together)
        if self.probe and len(live) > 1:
            self._probe(engine, live, found)
        elif self.probe:
            self.notes_.append("one training job: nothing to pause, no probe")
        else:
            self.notes_.append("--no-probe: no job was measured alone")
        self.verdict = self._judge(engine, live)
        rec.verdict(self.verdict)
        engine.tick()
        return "finished"

    def _probe(self, engine: Engine, live: list[int], found: dict[int, Found]) -> None:
        left = max(1.0, self.seconds - (time.monotonic() - self._t0))
        # a window of at least the burst, longer in a longer diagnosis: a loader whose job
        # makes a step a second needs more than a few seconds alone to be rated
        per = max(1.0, min(max(self.burst_s, self.seconds / 10), left / len(live) - 0.5))
        for pid in live:
            if engine.stopping:
                return
            others = [p for p in live if p != pid]
            barred = [self.jobs[p]["name"] for p in others if not may_signal(p)]
            if barred:
                self.jobs[pid]["no_solo"] = (f"may not pause {', '.join(barred)} (another "
                                             "user's: needs root); the live estimate stands")
                continue
            self._pauser.pause(others)
            unheld = [p for p in others if p in self._pauser.ptrace_refused]
            if unheld:  # a pause nothing could undo if gputop-dl died: none at all
                self._pauser.resume()
                why = self._pauser.ptrace_refused[unheld[0]]
                self._pauser.ptrace_refused.clear()
                self.jobs[pid]["no_solo"] = (
                    f"may not pause {', '.join(self.jobs[p]['name'] for p in unheld)} safely "
                    f"(ptrace refused: {why}; a SIGSTOP would stay if gputop-dl were killed); "
                    "the live estimate stands")
                continue
            t_pause = time.time()
            engine.say(f"probe: {self.jobs[pid]['name']} alone for {per:.1f} s; paused "
                       + ", ".join(self.jobs[p]["name"] for p in others))
            try:
                time.sleep(0.3)  # the others are stopped; let the pipeline settle
                watch = SoloWatch()
                watch.start(self.jobs[pid]["pids"])
                cpu0 = _tree_cpu_s(self.jobs[pid]["pids"])
                skip = self.jobs[pid].get("not_workers") or ()
                work = WorkWatch(functools.partial(workers_of, pid, skip)).start()
                t0 = time.monotonic()
                try:
                    alone = _spy_all({pid: found[pid].target}, per).get(pid)
                finally:
                    self.jobs[pid]["loader_alone"] = chain_rate(work.stop())
                cpu1 = _tree_cpu_s(self.jobs[pid]["pids"])
                dt = time.monotonic() - t0
                self.jobs[pid]["window"] = watch.stop(
                    exclude=[q for p in others for q in self.jobs[p]["pids"]])
            finally:
                self._pauser.resume()
                self.paused_job_s += (time.time() - t_pause) * len(others)
            self.jobs[pid]["alone"] = alone
            if cpu0 is not None and cpu1 is not None and dt > 0:
                self.jobs[pid]["solo_cpu_cores"] = round((cpu1 - cpu0) / dt, 3)
            engine.tick()

    def _estimate(self, together: dict[int, pyspy.StallEstimate]) -> tuple[Verdict | None, dict[str, Estimate]]:
        """The live estimate over the observe phase, each job's data stall from the py-spy
        burst together (its critical path: analyse/passive.py)."""
        stall = {pid: est.fraction for pid, est in together.items() if est and est.samples}
        judge = PassiveJudge(peaks=self.peaks)
        v: Verdict | None = None
        est: dict[str, Estimate] = {}
        for now, jobs, host, gprocs, gpus in self._observed:
            jobs = [dataclasses.replace(j, stall_fraction=stall[j.pid]) if j.pid in stall
                    and j.stall_fraction is None else j for j in jobs]
            v, est = judge.verdict(jobs, host, gprocs, gpus, now)
        return v, est

    def _judge(self, engine: Engine, live: list[int]) -> VerdictJson:
        evs = []
        for pid in live:
            j = self.jobs[pid]
            tog, alone = j.get("together"), j.get("alone")
            gpus = tuple(int(g) for g in (j.get("device") or "").removeprefix("gpu").split(",")
                         if g.isdigit())
            evs.append(JobEvidence(
                name=j["name"], device=f"cuda:{gpus[0]}" if gpus else "cpu", gpus=gpus,
                steps=(tog.cycles or 0) if tog and tog.step_time_s else 0,
                step_time_s=tog.step_time_s if tog else None,
                stall=tog.fraction if tog and tog.samples else None,
                cpu_cores=statistics.fmean(j["cpu"]) if j["cpu"] else None,
                solo_step_time_s=alone.step_time_s if alone else None,
                solo_stall=alone.fraction if alone and alone.samples else None,
                solo_cpu_cores=j.get("solo_cpu_cores"),
                solo_steps=(alone.cycles or None) if alone and alone.step_time_s else None,
                cv=tog.cv if tog else None, solo_cv=alone.cv if alone else None,
                source="py-spy"))
        hs = self._host
        host = HostEvidence(
            cpus=engine.env.get("cpus") or 1, busy=_mean([h.busy for h in hs]),
            psi_some10=_mean([h.psi_some10 for h in hs]), load1=_mean([h.load1 for h in hs]),
            throttled=_mean([h.throttled for h in hs]),
            gpu_util={g: statistics.fmean(v) for g, v in self._gpu.items() if v})
        # a slowdown needs py-spy's step time of every job, together and alone (a verdict on
        # some jobs' slowdowns would say nothing of the others); where py-spy could not time a
        # job, the probe's loader work rate alone against together may measure it instead
        by_loader = {pid: self._loader(self.jobs[pid]) for pid in live} if self.probe else {}
        rated = {self.jobs[pid]["name"]: got for pid, got in by_loader.items()
                 if got.slowdown is not None}
        # py-spy's ratio where the loader's contradicts it: its cycles are read from 100 Hz
        # samples of one thread, which alias steps of a few samples; the loader counts every
        # batch of the window, so its figure is kept
        contradicted = {e.name: s for e in evs if (s := e.slowdown) is not None
                        and e.name in rated and _apart(s, rated[e.name].slowdown)}
        evs = [JobEvidence(**{**e.__dict__, "steps": 0, "step_time_s": None,
                              "solo_step_time_s": None}) if e.name in contradicted else e
               for e in evs]
        untimed = [e.name for e in evs if not e.steps or (self.probe and not e.solo_step_time_s)]
        if not untimed:
            v = judge(evs, host, "probe" if self.probe else "none")
        elif all(n in rated for n in untimed):  # every untimed job measured by its loader
            v = _by_loader(evs, host, untimed, rated, contradicted)
        else:  # judge on the signals, and say so
            v = judge([JobEvidence(**{**e.__dict__, "solo_step_time_s": None}) for e in evs],
                      host, "none", need_steps=0)
            v = v.replace(
                reason=v.reason + (f" (py-spy could not read the step time of {', '.join(untimed)}"
                                   + (" together and alone" if self.probe else "")
                                   + ", so no slowdown is claimed)"),
                confidence=_signal_agreement(hs, host.cpus, bool(v.evidence["cpu_signals"])))
        v = v.with_evidence(method={
            "step_times": "py-spy sample order of each job's main thread" + (
                "; where it could not time them, the loader workers' work rate"
                if self.probe and any(g.slowdown is not None for g in by_loader.values())
                else ""),
            "solo": "in-situ probe (the other jobs paused)" if self.probe else None,
            "paused_job_s": round(self.paused_job_s, 2)})
        if v.kind == "no-baseline":
            v = v.replace(recommendations=(
                "run without --no-probe so each job is measured alone" if not self.probe else
                "launch the scripts with `gputop-dl launch` (command workloads) for step-exact "
                "figures from the start-up hook",))
        v = v.with_lines(*(f"{self.jobs[pid]['name']}: no slowdown from its loader: {g.why}"
                           for pid, g in by_loader.items()
                           if g.slowdown is None and g.why and self.jobs[pid]["name"] in untimed
                           and not self.jobs[pid].get("no_solo")))
        v = v.with_lines(*(f"{self.jobs[pid]['name']}: measured passively, "
                           f"{self.jobs[pid]['no_solo']}" for pid in live
                           if self.jobs[pid].get("no_solo")))
        if self.probe and self.paused_job_s:
            v = v.with_lines(f"probe cost: {self.paused_job_s:.1f} job-seconds paused")
        return self._with_estimate(self._not_alone(v, live)).to_json()

    def _loader(self, j: Diagnosed) -> LoaderSlowdown:
        """The job's slowdown from its loader workers' work rate, alone (its probe window)
        against together (the observe phase and the py-spy burst after it)."""
        if "loader_alone" not in j:
            return LoaderSlowdown(why=j.get("no_solo") or "it was not measured alone")
        tog, why = chain_rate(j.get("loader") or [])
        alone, why_alone = j["loader_alone"]
        if tog is None or alone is None:
            return LoaderSlowdown(why=why or why_alone)
        return loader_slowdown((tog.seconds, tog.cpu_s, tog.switches),
                               (alone.seconds, alone.cpu_s, alone.switches),
                               (tog.writes, alone.writes))

    def _not_alone(self, v: Verdict, live: list[int]) -> Verdict:
        """The solo windows that load outside the jobs slowed (analyse/outside_load.py)."""
        return outside_load.not_alone(
            v, [w for w in (self._window(self.jobs[pid]) for pid in live) if w is not None],
            self._cpus)

    def _window(self, j: Diagnosed) -> outside_load.SoloWindow | None:
        """What ran beside the job in its solo window (None: no window read)."""
        r: SoloReading | None = j.get("window")
        if r is None:
            return None
        alone = j.get("alone")
        on_gpu = bool(j.get("device")) and not str(j.get("device")).startswith("cpu")
        return outside_load.SoloWindow(
            j["name"], r.seconds, r.wait, r.cores, r.outside,
            step_s=alone.step_time_s if alone else None,
            stall=alone.fraction if on_gpu and alone is not None and alone.samples else None)

    def _with_estimate(self, v: Verdict) -> Verdict:
        """Without the probe, the live estimate is the verdict; with it, the estimate stands
        beside the probe's figures (and is the verdict where the probe could claim nothing)."""
        pv = self.estimate
        if pv is None:
            return v
        est = {name: e.slowdown for name, e in self.estimates.items()}
        if not self.probe:
            return pv.with_evidence(diagnose_method=v.evidence.get("method")).with_lines(
                "--no-probe: no job was paused or measured alone")
        probed = {j.name: j.slowdown for j in v.jobs}
        side = "; ".join(f"{n} {_x(est.get(n))} estimated vs {_x(probed.get(n))} probe"
                         for n in dict.fromkeys([*probed, *est]))
        v = v.with_evidence(estimated_slowdowns=est, estimate_kind=pv.kind).with_lines(
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
        if self._observed:  # the probe's verdict against the box's measured peaks too
            _, jobs, _, gprocs, gpus = self._observed[-1]
            v = with_box_peaks(v, jobs, gprocs, gpus, self.peaks)
        return v

    def result(self) -> dict[str, Any]:
        """The diagnosis as the JSON contract's parts (`present.diagnosis` renders it)."""
        jobs: list[dict[str, Any]] = []  # the schema's job objects (gputop-dl.diagnosis/1)
        for j in self.jobs.values():
            if "together" not in j:
                continue
            tog, alone = j.get("together"), j.get("alone")
            step = tog.step_time_s if tog else None
            solo = alone.step_time_s if alone else None
            # one slowdown, as in `--once --json`: the probe's where it timed the job both
            # together and alone, else the live estimate's (analyse/passive.py)
            slowdown, source = (round(step / solo, 3), "probe") if step and solo else (None, None)
            by = "py-spy step times" if slowdown is not None else None
            got = self._loader(j) if self.probe else LoaderSlowdown()
            loader, loader_why = got.slowdown, got.why
            if loader is not None and (slowdown is None or _apart(slowdown, loader)):
                slowdown, source = round(loader, 3), "probe"
                by = "loader batches" if got.by_writes is not None else "loader work rate"
            est = _est(self.estimates, j["name"], "slowdown")
            if slowdown is None and est is not None:
                slowdown, source = est, ("own pace" if _est(self.estimates, j["name"], "pace_used")
                                         else "estimated")
            waits = j.get("cpu_wait") or []
            jobs.append({
                "pid": j["pid"], "pids": j.get("pids") or [], "name": j["name"],
                "command": j.get("command"), "device": j.get("device"),
                "cpu_cores": round(statistics.fmean(j["cpu"]), 3) if j["cpu"] else None,
                "solo_cpu_cores": j.get("solo_cpu_cores"),
                "stall_fraction": (round(tog.fraction, 3)
                                   if tog and tog.samples and tog.fraction is not None else None),
                "solo_stall_fraction": (round(alone.fraction, 3) if alone and alone.samples
                                        and alone.fraction is not None else None),
                "step_time_s": step, "solo_step_time_s": solo,
                "slowdown": slowdown, "slowdown_source": source, "slowdown_from": by,
                "loader_slowdown": None if loader is None else round(loader, 3),
                "loader_why": loader_why,
                "cpu_wait_fraction": round(statistics.fmean(waits), 3) if waits else None,
                "measured_alone": alone is not None, "why_not_alone": j.get("no_solo"),
                "solo_outside": (outside_load.window_json(win, self._cpus)
                                 if (win := self._window(j)) is not None else None),
                "estimated_slowdown": est,
                "estimate_confidence": _est(self.estimates, j["name"], "confidence"),
                "slowdown_doubt": (self.estimates[j["name"]].doubt
                                   if source == "estimated" else None),
                **_waits(self.estimates.get(j["name"]),
                         round(statistics.fmean(waits), 3) if waits else None)})
        return {"schema": SCHEMA, "verdict": self.verdict, "jobs": jobs,
                "notes": list(self.notes_)}


def _x(s: float | None) -> str:
    return "–" if s is None else f"{s:.2f}×"


def _waits(e: Estimate | None, cpu: float | None) -> dict[str, Any]:
    """What the live estimate finds the job waits on (issue 32): `waits_on` as the monitor's
    column has it, and `waits` as `--once --json` has them (each a share 0..1, null: unknown)."""
    if e is None:
        return {"waits_on": None, "waits": {"cpu": cpu, "io": None, "memory": None, "gpu": None}}
    io = e.io_wait if e.io_wait is None or e.mem_wait is None else round(e.io_wait - e.mem_wait, 3)
    return {"waits_on": WAITS_ON.get(e.cause or ""),
            "waits": {"cpu": cpu, "io": io, "memory": e.mem_wait, "gpu": e.last.gpu_wait}}


def _est(estimates: dict[str, Estimate], name: str, attr: str) -> float | None:
    e = estimates.get(name)
    return getattr(e, attr) if e is not None else None


def _signal_agreement(hs: list[HostPoint], cpus: int, fired: bool) -> float:
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


def _spy_all(targets: dict[int, int], seconds: float) -> dict[int, pyspy.StallEstimate]:
    """py-spy every job's main thread at once for `seconds`; root pid -> estimate. A job py-spy
    may not attach to (another user's, without root; collect/jobs/privilege.py) is left out."""
    access = Access.read()
    keyed: dict[Hashable, int] = {pid: target for pid, target in targets.items()
                                  if access.refusal(owner(pid)) is None}
    return {k: e for k, e in pyspy.spy_all(keyed, seconds, RATE)[0].items() if isinstance(k, int)}


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


def _apart(a: float, b: float | None) -> bool:
    """Whether two slowdowns of one job disagree: more than `CONTRADICT` times apart."""
    return b is not None and a > 0 and b > 0 and abs(math.log(a / b)) > math.log(CONTRADICT)


def _tree_cpu_s(pids: list[int]) -> float | None:
    """CPU seconds (user + system) used so far by these processes."""
    total, any_ = 0.0, False
    for pid in pids:
        try:
            c = psutil.Process(pid).cpu_times()
            total += c.user + c.system
            any_ = True
        except psutil.Error:
            continue
    return total if any_ else None
