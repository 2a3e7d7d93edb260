"""The launch's plan: solo baselines, then every job together behind a start barrier, then the verdict.

Phases, in the engine thread:

1. pre-launch check: cached solo baselines that need more cores than there are -> a warning;
2. solo baselines (`baseline = "measure"` or `"cache"`): each built-in job alone, warm-up plus
   `baseline_steps` steps; its step time, stall and CPU need are kept (and cached by a
   fingerprint of what they depend on);
3. the co-run: every job starts; the built-in trainers wait for a go file that is created once
   all of them have reported "started", so the first co-run steps really run together;
4. the verdict, re-judged each co-run tick over the overlap window and frozen 2 s after the
   window closed (the first job ended), so the same run gives the same verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time

from gputop_dl.analyse.evidence import gather, overlap_window
from gputop_dl.analyse.jobstats import step_stats
from gputop_dl.collect import pyspy
from gputop_dl.engine.plan import Plan
from gputop_dl.record.store import session_work_dir
from gputop_dl.snapshot import JobSample
from gputop_dl.analyse.verdict import judge
from gputop_dl.threadname import name_native_thread
from gputop_dl.workload import SessionSpec, Workload


def fingerprint(w: Workload, cuda: bool, env: dict) -> str:
    """What a solo baseline depends on; a cached baseline is reused only on an exact match."""
    keys = ("model", "dataset", "root", "input_size", "source_size", "num_classes", "batch_size",
            "num_workers", "transforms", "threads", "nproc", "gpus", "optimizer", "sample_io_ms",
            "sample_cpu_ms", "step_device_ms", "step_cpu_ms")
    d = {k: getattr(w, k) for k in keys}
    d.update(cuda=cuda, cpus=env.get("cpus"), cpu_model=env.get("cpu_model"),
             gpus_hw=env.get("gpus"), torch=env.get("torch"), host=os.uname().nodename)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:24]


class LaunchPlan(Plan):
    """`gputop-dl launch FILE`: the workloads of `spec`, baselines first, judged together."""

    kind = "launch"

    def __init__(self, spec: SessionSpec, command: str = ""):
        self.spec = spec
        self.command = command
        self.solo: dict[str, dict] = {}  # job name -> baseline stats
        self.verdict: dict | None = None
        self._frozen = False
        self._host_series: list[tuple] = []  # co-run: (t, busy, psi, load1, throttled)
        self._gpu_series: list[tuple] = []  # co-run: (t, gpu, util, throttle reasons)
        self._hot: dict[str, list[tuple[str, float]]] = {}  # job -> hottest loader frames
        self._spy_started: set[str] = set()

    def run(self, engine) -> str:
        engine.recorder.open_launch(self.spec, self.command, engine.env)
        if self.spec.cpu_fallback_reason:
            engine.say(self.spec.cpu_fallback_reason)
        self._prelaunch_check(engine)
        self._baselines(engine)
        if not engine.stopping:
            self._corun(engine)
        return "interrupted" if engine.stopping else "finished"

    # --- the engine's per-tick questions -----------------------------------------------------
    def rows(self, engine, launched: list[JobSample]) -> list[JobSample]:
        """The launched rows plus a "waiting" row per workload not started yet, in file order."""
        jobs = list(launched)
        for w in self.spec.workloads:
            if w.name not in engine.runs:
                jobs.append(JobSample(name=w.name, pid=None, launched=True, status="waiting",
                                      batch_size=w.batch_size, model=w.model,
                                      solo_step_time_s=(self.solo.get(w.name) or {}).get(
                                          "step_time_s")))
        order = {w.name: i for i, w in enumerate(self.spec.workloads)}
        jobs.sort(key=lambda j: order.get(j.name, 1 << 30))
        return jobs

    def taken(self, engine) -> set[str]:
        return set(engine.runs) | {w.name for w in self.spec.workloads}

    def after_tick(self, engine, now: float, machine) -> None:
        if engine.phase != "co-run":
            return
        host = machine.host
        self._host_series.append((now, host.cpu_busy, host.cpu_pressure_some10, host.load1,
                                  host.cgroup_throttled_frac))
        self._gpu_series.extend((now, g.index, g.util, g.throttle_reasons) for g in machine.gpus)
        self._maybe_spy(engine)
        self._update_verdict(engine, now)

    def notes(self) -> tuple[str, ...]:
        if self.spec.cuda:
            return ()
        return (self.spec.cpu_fallback_reason or "no CUDA: workloads train on the CPU",)

    # --- phases ------------------------------------------------------------------------------
    def _prelaunch_check(self, engine) -> None:
        """Warn when cached solo baselines say the jobs need more cores than there are."""
        needs = []
        for w in self.spec.workloads:
            if w.is_command:
                continue
            base = engine.recorder.cached_baseline(fingerprint(w, self.spec.cuda, engine.env))
            if not base or base.get("cpu_cores") is None:
                return
            needs.append(base["cpu_cores"])
        cpus = engine.env.get("cpus") or 1
        if len(needs) > 1 and sum(needs) > cpus:
            engine.say(f"warning: cached solo baselines say these jobs need ≈ {sum(needs):.1f} "
                       f"cores at full speed; this machine allows {cpus}: expect a CPU-bound co-run")

    def _baselines(self, engine) -> None:
        spec, rec = self.spec, engine.recorder
        if spec.baseline == "none":
            engine.say("baseline = none: no solo runs; slowdowns are unknown")
            return
        todo = [w for w in spec.workloads if not w.is_command]
        for i, w in enumerate(todo, 1):
            if engine.stopping:
                return
            fp = fingerprint(w, spec.cuda, engine.env)
            if spec.baseline == "cache":
                cached = rec.cached_baseline(fp)
                if cached:
                    self.solo[w.name] = dict(cached, cached=True)
                    engine.say(f"{w.name}: cached solo baseline, step {cached['step_time_s']:.3f} s")
                    continue
            engine.phase = "baseline"
            engine.say(f"baseline {i}/{len(todo)}: {w.name} alone for "
                       f"{w.warmup_steps}+{spec.baseline_steps} steps")
            short = w.with_(epochs=1, steps_per_epoch=w.warmup_steps + spec.baseline_steps)
            run = engine.start_run(short, "baseline", spec.cuda, tag=".solo")
            engine.loop(lambda: not run.alive)
            st = step_stats(run.steps, warmup=w.warmup_steps, window=0)
            if run.status == "done" and st.n:
                base = {"step_time_s": st.step_time_s, "samples_per_s": st.samples_per_s,
                        "stall_fraction": st.stall_fraction, "steps": st.n,
                        "cpu_cores": run.measured_cpu_cores(), "cv": st.cv,
                        "device": run.info.get("device")}
                self.solo[w.name] = base
                rec.baseline(fp, w.name, base)
                engine.say(f"{w.name} solo: step {st.step_time_s:.3f} s, "
                           f"stall {st.stall_fraction:.0%}")
            elif run.status != "stopped":
                engine.say(f"{w.name}: no solo baseline ({run.failure or run.status})")
            engine.forget_run(w.name)

    def _corun(self, engine) -> None:
        engine.phase = "co-run"
        names = ", ".join(w.name for w in self.spec.workloads)
        engine.say(f"co-run: starting {names}")
        # Start barrier: the built-in trainers build their model and data, say "started", and
        # wait for this file, so the co-run's first steps really run together (a job whose
        # imports took 5 s longer would otherwise run its first steps alone).
        go = os.path.join(engine.recorder.work_dir or session_work_dir("unrecorded"), "co-run.go")
        t0 = time.time()
        for w in self.spec.workloads:
            engine.start_run(w, "co-run", self.spec.cuda, go_file=None if w.is_command else go,
                             solo=self.solo.get(w.name))

        def done() -> bool:
            if not os.path.exists(go) and all(r.info or not r.alive or r.w.is_command
                                               for r in engine.runs.values()):
                open(go, "w").close()
                engine.say(f"co-run: all jobs ready after {time.time() - t0:.1f} s: go")
            return all(not r.alive for r in engine.runs.values())

        engine.loop(done)
        self._update_verdict(engine, time.time(), final=True)

    # --- co-run evidence and verdict ---------------------------------------------------------
    def _spy(self, engine, name: str, pid: int) -> None:
        """Thread: one short py-spy burst on a data-loader worker of `name`."""
        name_native_thread("gdl-spy")
        stacks, err = pyspy.record(pid, duration_s=2.0, rate=25)
        if err:
            engine.say(f"{name}: no cause attribution ({err})")
            return
        self._hot[name] = pyspy.hot_frames(stacks)

    def _maybe_spy(self, engine) -> None:
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

    def _update_verdict(self, engine, now: float, final: bool = False) -> None:
        if self._frozen:
            return
        runs = [r for r in engine.runs.values() if r.phase == "co-run" and not r.w.is_command]
        if not runs:
            return
        jobs, host = gather(runs, self._host_series, self._gpu_series,
                            engine.env.get("cpus") or 1, now, self._hot)
        self.verdict = judge(jobs, host, self.spec.baseline)
        # once a job has ended the overlap window is closed: the verdict cannot change
        win = overlap_window(runs, now)
        # (2 s after it closed, so the others' buffered step events have arrived)
        if final or (win is not None and now - win[1] > 2.0):
            self._frozen = True
        engine.recorder.verdict(self.verdict)
