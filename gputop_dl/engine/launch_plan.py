"""The launch's plan: solo baselines, then every job together behind a start barrier, then the verdict.

Phases, in the engine thread:

1. pre-launch check: cached solo baselines that need more cores than there are -> a warning;
2. solo baselines (`baseline = "measure"` or `"cache"`; solo_runs.py): each job alone, warm-up
   plus `baseline_steps` steps. With `baseline = "probe"` there is no such phase: the in-situ
   probe (probe.py) measures each job alone inside the co-run;
3. the co-run: every job starts; the built-in trainers (once their model and data are built)
   and the scripts under the start-up hook (at their main loader's first pass) wait for a go
   file that is created once all of them have said so ("started", "ready"), so the first
   co-run steps really run together (start_barrier.py);
4. the verdict, re-judged each co-run tick over the overlap window and frozen 2 s after the
   window closed (the first job ended), so the same run gives the same verdict.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from gputop_dl.analyse.recorded.evidence import (
    GpuPoint, HostPoint, JobSeries, gather, gpu_points, host_point, overlap_window)
from gputop_dl.analyse.recorded.energy_phases import energy_evidence
from gputop_dl.analyse.live.box_peaks import measured_when, with_box_peaks
from gputop_dl.analyse.live.passive import PassiveJudge, annotate
from gputop_dl.analyse.live.wide_pools import WidePools
from gputop_dl.analyse.stats.phases import add_phase_evidence
from gputop_dl.analyse.slowdown.figure import measured
from gputop_dl.analyse.recorded.summary import verdict_slowdowns
from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.jobs.fingerprint import fingerprint
from gputop_dl.engine.box_profile import box_capacity, load_peaks, load_profile
from gputop_dl.engine.jobrun import JobRun
from gputop_dl.engine.plan import Plan, VerdictJson
from gputop_dl.engine.probe import Probe
from gputop_dl.engine.solo_beside import windows
from gputop_dl.engine.solo_runs import SoloRuns
from gputop_dl.engine.start_barrier import barrier_jobs, go_now
from gputop_dl.record.paths import session_work_dir
from gputop_dl.sched.budget import budget_lines
from gputop_dl.sched.fit import job_demands
from gputop_dl.snapshot import JobSample, evolve
from gputop_dl.analyse.launch_verdict import JobEnd, ProbeRun, finish
from gputop_dl.analyse.verdict import judge
from gputop_dl.analyse.verdict_evidence import HostEvidence
from gputop_dl.threadname import name_native_thread
from gputop_dl.workload import SessionSpec

if TYPE_CHECKING:
    from gputop_dl.collect.machine import MachineSample
    from gputop_dl.engine.core import Engine


class LaunchPlan(Plan["Engine"]):
    """`gputop-dl launch FILE`: the workloads of `spec`, baselines first, judged together."""

    kind = "launch"
    spec: SessionSpec

    def __init__(self, spec: SessionSpec, command: str = ""):
        self.spec = spec
        self.command = command
        self.baselines = SoloRuns(spec)  # the solo baselines, and why a job has none
        self._probe_off = False  # baseline = probe beside a job across nodes: no probe at all
        self.verdict: VerdictJson | None = None
        self._frozen = False
        self._host_series: list[HostPoint] = []  # co-run, one per tick
        self._gpu_series: list[GpuPoint] = []  # co-run, one per GPU and tick
        self._hot: dict[str, list[tuple[str, float]]] = {}  # job -> hottest loader frames
        self.probe: Probe | None = None  # baseline = "probe": the in-situ solo probe
        self._spy_started: set[str] = set()
        self.passive = PassiveJudge()  # the live estimate, until the slowdowns are measured
        self.live_verdict: VerdictJson | None = None  # its verdict, shown until the measured one is
        # what only the live estimate reads (a pool wider than its cores), over the co-run: its
        # fix goes on the measured verdict
        self.wide_pools = WidePools()
        self._machine: MachineSample | None = None  # the co-run's latest machine sample
        self._corun_rows: list[JobSample] = []  # the co-run's rows at the latest tick

    def run(self, engine: Engine) -> str:
        engine.recorder.open_launch(self.spec, self.command, engine.env)
        self.passive.peaks = load_peaks(engine.recorder.store_path)  # the box's measured peaks
        if self.spec.cpu_fallback_reason:
            engine.say(self.spec.cpu_fallback_reason)
        self._prelaunch_check(engine)
        for w in self.spec.workloads:
            self.baselines.spans_nodes(engine, w)
        if self.spec.baseline == "probe":
            engine.say(f"baseline = probe: each job is measured alone inside the co-run, the "
                       f"others paused for up to {self.spec.probe_s:g} s each")
        else:
            self.baselines.measure(engine)
        if not engine.stopping:
            self._corun(engine)
        return "interrupted" if engine.stopping else "finished"

    # --- the engine's per-tick questions -----------------------------------------------------
    def rows(self, engine: Engine, launched: list[JobSample]) -> list[JobSample]:
        """The launched rows plus a "waiting" row per workload not started yet, in file order.

        A co-run row's slowdown is the verdict's (over the overlap window, live until it
        closes): one slowdown in every view; none before every job is past its warm-up."""
        slow = verdict_slowdowns(self.verdict)
        cur = self.probe.current if self.probe else None
        paused = set(cur.paused) if cur else set()
        probing = self.spec.baseline == "probe"
        jobs = []
        for j in launched:
            if j.phase == "co-run":
                fig = measured(slow.get(j.name), probing)  # analyse/slowdown/figure.py
                j = evolve(j, slowdown=slow.get(j.name),
                           slowdown_source=fig.source if fig else None,
                           slowdown_method=fig.method if fig else None,
                           slowdown_reference=fig.reference if fig else None,
                           status="paused" if j.name in paused and j.status == "running"
                           else j.status)
            jobs.append(j)
        jobs = self._estimate(jobs)
        for w in self.spec.workloads:
            if w.name not in engine.runs:
                jobs.append(JobSample(name=w.name, pid=None, launched=True, status="waiting",
                                      batch_size=w.batch_size, model=w.model,
                                      solo_step_time_s=(self.baselines.solo.get(w.name) or {}).get(
                                          "step_time_s")))
        order = {w.name: i for i, w in enumerate(self.spec.workloads)}
        jobs.sort(key=lambda j: order.get(j.name, 1 << 30))
        return jobs

    def _estimate(self, jobs: list[JobSample]) -> list[JobSample]:
        """The live estimate (analyse/live/passive.py) for co-run rows whose slowdown is not
        measured yet: from the first co-run tick, until the verdict's slowdown replaces it.
        Not while the probe has a job paused: its neighbours' waits would read low."""
        m = self._machine
        corun = [j for j in jobs if j.phase == "co-run" and j.status == "running"]
        if corun:
            self._corun_rows = corun
        if not corun:  # nothing runs together (yet, or any more): no live verdict to show
            self.live_verdict = None
        if m is None or not corun or (self.probe is not None and self.probe.current):
            return jobs
        live, est = self.passive.verdict(corun, m.host, m.gpu_processes, m.gpus, m.time)
        self.live_verdict = live.to_json() if live is not None else None
        self.wide_pools.add(est.values())
        return annotate(jobs, est)

    def shown_verdict(self) -> VerdictJson | None:
        """The measured verdict once it has the co-run steps it needs; until then the live
        estimate from the jobs' waits (marked as such in its evidence), so the banner and the
        rows tell one story. Only the measured verdict is recorded."""
        v = self.verdict
        if (v is None or v.get("kind") == "insufficient-data") and self.live_verdict is not None:
            return self.live_verdict
        return v

    def taken(self, engine: Engine) -> set[str]:
        return set(engine.runs) | {w.name for w in self.spec.workloads}

    def after_tick(self, engine: Engine, now: float, machine: MachineSample) -> None:
        if engine.phase != "co-run":
            return
        self._machine = machine
        host = machine.host
        self._host_series.append(host_point(now, host))
        self._gpu_series.extend(gpu_points(now, machine.gpus))
        self._maybe_spy(engine)
        if self.spec.baseline == "probe":
            self._probe(engine, now)
        self._update_verdict(engine, now)

    def close(self, engine: Engine) -> None:
        if self.probe is not None:
            self.probe.close()

    def notes(self) -> tuple[str, ...]:
        if self.spec.cuda:
            return ()
        return (self.spec.cpu_fallback_reason or "no CUDA: workloads train on the CPU",)

    # --- phases ------------------------------------------------------------------------------
    def _prelaunch_check(self, engine: Engine) -> None:
        """Warn when cached solo baselines say the jobs need more cores, memory, disk reads or
        GPU memory than there are (sched/budget.py, the figures `gputop-dl plan` uses)."""
        jobs = job_demands(self.spec, lambda w: engine.recorder.cached_solo_profile(
            fingerprint(w, self.spec.cuda, engine.env)))
        profile = load_profile(engine.recorder.store_path)
        capacity, pools = box_capacity(profile, engine.env.get("cpus") or 1)
        when = measured_when(profile["created"]) if profile and profile.get("created") else ""
        for line in budget_lines(jobs, capacity, pools, disk_when=when):
            engine.say(f"warning: {line}")

    def _corun(self, engine: Engine) -> None:
        engine.phase = "co-run"
        for name, why in self.baselines.failed_solo.items():
            engine.say(f"{name}: failed alone ({why}): not started again for the co-run")
        workloads = [w for w in self.spec.workloads if w.name not in self.baselines.failed_solo]
        names = ", ".join(w.name for w in workloads)
        if not workloads:
            self._none_ran(engine)
            return
        engine.say(f"co-run: starting {names}")
        # the start barrier (start_barrier.py): the jobs of `waits` wait for this file
        go = os.path.join(engine.recorder.work_dir or session_work_dir("unrecorded"), "co-run.go")
        waits = barrier_jobs(workloads)
        t0 = time.time()
        for w in workloads:
            if engine.stopping:  # a signal while starting many jobs: start no more
                break
            engine.start_run(w, "co-run", self.spec.cuda,
                             go_file=go if w.name in waits else None, solo=self.baselines.solo.get(w.name))

        def done() -> bool:
            if waits and not os.path.exists(go):
                go_now(engine, go, t0, waits)
            return all(not r.alive for r in engine.runs.values())

        engine.loop(done)
        self._update_verdict(engine, time.time(), final=True)

    def _none_ran(self, engine: Engine) -> None:
        """Every job failed its solo baseline: no co-run, and the verdict says why."""
        failed = self.baselines.failed_solo
        fails = "; ".join(f"{n}: {why}" for n, why in failed.items())
        engine.say(f"co-run: none started, every job failed alone ({fails})")
        v = judge([], HostEvidence(cpus=engine.env.get("cpus") or 1), self.spec.baseline, final=True)
        v = v.replace(reason="every job failed its solo baseline, so none was started for the "
                      "co-run").with_evidence(failed_baseline=dict(failed)).with_lines(fails)
        self.verdict, self._frozen = v.to_json(), True
        engine.recorder.verdict(self.verdict)

    # --- co-run evidence and verdict ---------------------------------------------------------
    def _spy(self, engine: Engine, name: str, pid: int) -> None:
        """Thread: one short py-spy burst on a data-loader worker of `name`."""
        name_native_thread("gdl-spy")
        stacks, err = pyspy.record(pid, duration_s=2.0, rate=25)
        if err:
            engine.say(f"{name}: no cause attribution ({err})")
            return
        self._hot[name] = pyspy.hot_frames(stacks)

    def _maybe_spy(self, engine: Engine) -> None:
        for name, run in engine.runs.items():
            if name in self._spy_started or not run.alive or run.w.num_workers == 0:
                continue
            if len(run.steps) <= run.w.warmup_steps + 1 or not run.tree_sample:
                continue
            workers = [p for p in run.tree_sample.pids if p != run.proc.pid]
            if not workers:
                continue
            self._spy_started.add(name)
            threading.Thread(target=self._spy, args=(engine, name, workers[0]), daemon=True,
                             name=f"py-spy-{name}").start()

    def _probe(self, engine: Engine, now: float) -> None:
        """Start the probe once every job is past its warm-up; adopt each solo it measured."""
        runs = {n: r for n, r in engine.runs.items() if r.phase == "co-run"}
        if self.probe is None:
            if self._probe_off or overlap_window(list(runs.values()), now) is None:
                return
            spans = [w for w in self.spec.workloads if self.baselines.spans_nodes(engine, w)]
            if spans:  # the probe pauses every other job: that would stall the whole run
                self._probe_off = True
                why = (f"probe off: {spans[0].name} spans {spans[0].nnodes} nodes, and pausing "
                       "its rank would stall its other nodes")
                for w in self.spec.workloads:
                    self.baselines.no_solo.setdefault(w.name, self.baselines.across.setdefault(w.name, why))
                engine.say(why)
                return
            self.probe = Probe([w.name for w in self.spec.workloads if w.name in runs],
                               seconds=self.spec.probe_s, steps=self.spec.baseline_steps)
        if not self.probe.done:
            self._probe_tick(engine, self.probe, runs, now)

    def _probe_tick(self, engine: Engine, probe: Probe, runs: dict[str, JobRun], now: float) -> None:
        """One tick of the running probe: adopt each solo it measured, note what it missed."""
        probe.tick(engine, runs, now)
        for name, base in probe.solo.items():
            if name not in self.baselines.solo:
                self.baselines.solo[name] = base
                runs[name].solo = base
                w = runs[name].w
                engine.recorder.baseline(fingerprint(w, self.spec.cuda, engine.env), name, base)
        for name, why in probe.missing.items():
            self.baselines.no_solo.setdefault(name, f"probe: {why}")
        if probe.done:
            engine.say(f"probe done: {probe.paused_job_s:.1f} job-seconds paused in all")

    def _update_verdict(self, engine: Engine, now: float, final: bool = False) -> None:
        if self._frozen:
            return
        runs, died = died_at_start(r for r in engine.runs.values() if r.phase == "co-run")
        if not runs:
            return
        series: list[JobSeries] = list(runs)  # what the evidence reads of them
        probe = self.probe
        jobs, host = gather(series, self._host_series, self._gpu_series,
                            engine.env.get("cpus") or 1, now, self._hot,
                            exclude=probe.excluded() if probe else ())
        v = self.wide_pools.on(judge(jobs, host, self.spec.baseline, final=final))
        m = self._machine
        if m is not None:  # the co-run's latest rates against the box's measured peaks
            v = with_box_peaks(v, self._corun_rows, m.gpu_processes, m.gpus, self.passive.peaks)
        # step phases: which phase grew, solo against the overlap window
        v = add_phase_evidence(v, series, now)
        # GPU energy per sample, together against alone, beside STP (docs/energy.md)
        v = energy_evidence(v, engine.energy.phases(), [r.name for r in runs])
        v = finish(v, [JobEnd(r.name, r.status, r.failure, len(r.steps)) for r in runs],
                   engine.env.get("cpus") or 1, final=final, died=died,
                   failed_solo=self.baselines.failed_solo, across=self.baselines.across,
                   solo=windows(self.baselines.solo, [r.name for r in runs]),
                   probe=None if probe is None else ProbeRun(
                       probe.paused_job_s,
                       tuple((w.job, (w.t1 or now) - w.t0, tuple(w.paused))
                             for w in probe.windows),
                       dict(probe.missing), probe.beside()))
        self.verdict = v.to_json()
        # once a job has ended the overlap window is closed: the verdict cannot change
        win = overlap_window(series, now)
        # (2 s after it closed, so the others' buffered step events have arrived)
        if final or (win is not None and now - win[1] > 2.0
                     and (probe is None or probe.done or not any(r.alive for r in runs))):
            self._frozen = True
        engine.recorder.verdict(self.verdict, now)


def died_at_start(given: Iterable[JobRun]) -> tuple[list[JobRun], dict[str, str]]:
    """The co-run jobs to judge, and those that failed before taking a step past their warm-up
    (name -> why): such a job never ran beside the others, so judging it (or waiting for its
    steps) would only blame the healthy ones. If every job died, all are judged."""
    runs = list(given)
    died = {r.name: r.failure or "failed" for r in runs if not r.alive and r.status == "failed"
            and len(r.steps) <= r.w.warmup_steps}
    ran = [r for r in runs if r.name not in died]
    return (ran, died) if ran else (runs, {})
