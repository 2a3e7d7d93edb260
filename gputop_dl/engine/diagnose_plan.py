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
time both together and alone; otherwise it rests on the signals and says that it does. This
plan measures; what it makes of the readings (the verdict, the jobs' JSON) is pure and lives
in analyse/slowdown/diagnosis.py.

Beside it, the live estimate (analyse/live/passive.py) over the observe phase, each job's stall from
the burst: with `probe=False` it is the verdict (observe about 6 s, burst 3 s: an answer in about
10 s, nothing paused); with the probe it stands beside the probe's figures, and is the verdict
where the probe could claim no slowdown.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import psutil

from gputop_dl.analyse.live import outside_load
from gputop_dl.analyse.live.box_peaks import Peaks
from gputop_dl.analyse.recorded.evidence import HostPoint, host_point
from gputop_dl.analyse.slowdown.loader_rate import LoaderSlowdown, loader_slowdown
from gputop_dl.analyse.live.passive import Estimate, PassiveJudge, annotate
from gputop_dl.analyse.slowdown import diagnosis
from gputop_dl.analyse.verdict_types import Verdict
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
        # the live estimate (analyse/live/passive.py), over the observe phase only: once the probe
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
        burst together (its critical path: analyse/live/passive.py)."""
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
        """The verdict on the live jobs (analyse/slowdown/diagnosis.py)."""
        return diagnosis.verdict(
            [self._measured(self.jobs[pid]) for pid in live], self._host, self._gpu,
            engine.env.get("cpus") or 1, self.probe, self.paused_job_s,
            self._estimated()).to_json()

    def _estimated(self) -> diagnosis.Estimated:
        last = self._observed[-1] if self._observed else None
        return diagnosis.Estimated(self.estimate, self.estimates,
                                   None if last is None else (last[1], last[3], last[4]),
                                   self.peaks)

    def _measured(self, j: Diagnosed) -> diagnosis.Measured:
        """What was read of a job, as the pure verdict reads it."""
        return diagnosis.Measured(
            name=j["name"], pid=j["pid"], pids=tuple(j.get("pids") or ()),
            command=j.get("command"), device=j.get("device"), cpu=tuple(j["cpu"]),
            cpu_wait=tuple(j.get("cpu_wait") or ()), together=j.get("together"),
            alone=j.get("alone"), no_solo=j.get("no_solo"),
            solo_cpu_cores=j.get("solo_cpu_cores"), window=self._window(j),
            loader=self._loader(j) if self.probe else LoaderSlowdown())

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
        return diagnosis.with_estimate(v, self._estimated(), self.probe)

    def result(self) -> dict[str, Any]:
        """The diagnosis as the JSON contract's parts (`present.diagnosis` renders it)."""
        jobs = diagnosis.jobs_json([self._measured(j) for j in self.jobs.values()
                                    if "together" in j], self.estimates, self.probe, self._cpus)
        return {"schema": SCHEMA, "verdict": self.verdict, "jobs": jobs,
                "notes": list(self.notes_)}


def _spy_all(targets: dict[int, int], seconds: float) -> dict[int, pyspy.StallEstimate]:
    """py-spy every job's main thread at once for `seconds`; root pid -> estimate. A job py-spy
    may not attach to (another user's, without root; collect/jobs/privilege.py) is left out."""
    access = Access.read()
    keyed: dict[Hashable, int] = {pid: target for pid, target in targets.items()
                                  if access.refusal(owner(pid)) is None}
    return {k: e for k, e in pyspy.spy_all(keyed, seconds, RATE)[0].items() if isinstance(k, int)}


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
