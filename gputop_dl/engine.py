"""The session engine: one thread that ticks collect -> record -> analyse -> publish.

Every `interval` seconds it samples the host, the GPUs and each job's process tree, reads new
trainer events, writes all of it to the store, and publishes one immutable `Snapshot` to its
subscribers (headless console, TUI). A launch runs in phases: solo baselines (each job alone,
a short window after warm-up), then the co-run of all jobs. Other threads talk to the engine
only through `request_stop` / `stop_job`, which are queued and applied at the next tick.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import statistics
import sys
import threading
import time
from collections import deque
from typing import Callable

from gputop_dl.analyse.evidence import JobSeries, gather, overlap_window
from gputop_dl.analyse.jobstats import eta_s, step_stats
from gputop_dl.analyse.verdict import judge
from gputop_dl.collect import pyspy
from gputop_dl.channel import EventReader
from gputop_dl.collect.environment import environment
from gputop_dl.collect.host import HostSampler
from gputop_dl.collect.nvml import GpuUse
from gputop_dl.collect import discover
from gputop_dl.collect.foreign import ForeignJobs
from gputop_dl.collect.stall import STALL_BUDGET
from gputop_dl.collect.procs import TreeSampler, children_map
from gputop_dl.launch import JobProcess, describe_exit, start_job, stop_jobs
from gputop_dl.record.store import Store, session_work_dir
from gputop_dl.snapshot import JobSample, Snapshot
from gputop_dl.threadname import name_native_thread
from gputop_dl.workload import SessionSpec, Workload


class JobRun:
    """A launched job's live state; touched only by the engine thread."""

    def __init__(self, w: Workload, proc: JobProcess, phase: str):
        self.w, self.proc, self.phase = w, proc, phase
        self.reader = EventReader(proc.events_path)
        self.tree = TreeSampler(proc.pid)
        self.steps: list[dict] = []
        self.epochs: list[dict] = []
        self.info: dict = {}
        self.status = "starting"
        self.failure: str | None = None
        self.exit_code: int | None = None
        self.stopped_by_us = False
        self.ended: float | None = None
        self.tree_sample = None
        self.cpu_series: list[tuple[float, float]] = []  # (time, cores)
        self.stderr_tail: tuple[str, ...] = ()
        self.stored_row: tuple | None = None  # what the store's jobs row last got (engine)
        self._tail_t = 0.0  # last live refresh of a command job's log tail

    def _take(self, evs: list[dict]) -> None:
        for e in evs:
            kind = e.get("ev")
            if kind == "step":
                self.steps.append(e)
            elif kind == "epoch":
                self.epochs.append(e)
            elif kind == "started":
                self.info = e
                self.status = "running"
            elif kind == "failed" and self.failure is None:  # the first cause wins (rank 0, not
                # the torchrun launcher that reports the rank's failure after it)
                self.failure = f"{e.get('cause', 'exception')}: {e.get('message', '')}".strip()

    def poll(self, now: float, cmap: dict[int, list[int]] | None = None) -> list[dict]:
        """Read new events, notice an exit, sample the process tree. Returns the new events."""
        evs = self.reader.read_new()
        self._take(evs)
        if self.exit_code is None:
            code = self.proc.poll()
            if code is not None:
                late = self.reader.read_new()
                self._take(late)
                evs += late
                self.exit_code, self.ended = code, now
                self.stderr_tail = tuple(self.proc.log_tail())
                if self.stopped_by_us:
                    self.status = "stopped"
                elif code == 0:
                    self.status = "done"
                else:
                    self.status = "failed"
                    if self.failure is None:
                        self.failure = describe_exit(code, False)
                self.tree_sample = None
                self.tree.close()
            else:
                if self.status == "starting" and self.w.is_command:
                    self.status = "running"
                if self.w.is_command and now - self._tail_t >= 2.0:  # its log, live
                    self._tail_t = now
                    self.stderr_tail = tuple(self.proc.log_tail())
                ts = self.tree.sample(cmap)
                self.tree_sample = ts
                if ts is not None and ts.cpu_cores is not None:
                    self.cpu_series.append((now, ts.cpu_cores))
        return evs

    @property
    def alive(self) -> bool:
        return self.exit_code is None

    def measured_cpu_cores(self) -> float | None:
        """Mean CPU cores after warm-up (from the time the warm-up steps were done)."""
        if len(self.steps) > self.w.warmup_steps:
            t0 = self.steps[self.w.warmup_steps]["t"]
            vals = [c for t, c in self.cpu_series if t >= t0]
        else:
            vals = [c for _, c in self.cpu_series]
        return statistics.fmean(vals) if vals else None

    def sample(self, gpu: GpuUse, solo: dict | None) -> JobSample:
        w = self.w
        st = step_stats(self.steps, warmup=w.warmup_steps)
        ts = self.tree_sample
        pids = ts.pids if ts else ()
        mem, sm, _ = gpu.of_pids(pids)
        last = self.steps[-1] if self.steps else None
        cmd = w.is_command  # a command job's numbers come from the start-up hook, or nowhere
        spe = self.info.get("steps_per_epoch") or (None if cmd else w.steps_per_epoch)
        epochs = self.info.get("epochs") or (None if cmd else w.epochs)
        eta = None
        if last and spe and epochs and self.alive:
            done = (last["epoch"] - 1) * spe + last["step"]
            eta = eta_s(done, epochs * spe, st.step_time_s)
        solo_t = solo.get("step_time_s") if solo else None
        slowdown = None
        if solo_t and st.step_time_s and self.phase == "co-run":
            slowdown = round(st.step_time_s / solo_t, 3)
        return JobSample(
            name=w.name, pid=self.proc.pid, launched=True, pids=pids, status=self.status,
            failure=self.failure, device=self.info.get("device"),
            batch_size=self.info.get("batch_size") if cmd else w.batch_size,
            model=None if w.is_command else w.model,
            cpu_cores=ts.cpu_cores if ts else None, rss=ts.rss if ts else None,
            threads=ts.threads if ts else None, stall_fraction=st.stall_fraction,
            stall_source=("hook" if cmd else "trainer") if st.n else None,
            step_time_s=st.step_time_s,
            samples_per_s=st.samples_per_s,
            epoch=last["epoch"] if last else None,
            epochs=epochs, step=last["step"] if last else None, steps_per_epoch=spe, eta_s=eta,
            epoch_times=tuple(e["time_s"] for e in self.epochs), gpu_mem=mem, gpu_sm=sm,
            slowdown=slowdown, solo_step_time_s=solo_t, phase=self.phase,
            stderr_tail=self.stderr_tail)


def fingerprint(w: Workload, cuda: bool, env: dict) -> str:
    """What a solo baseline depends on; a cached baseline is reused only on an exact match."""
    keys = ("model", "dataset", "root", "input_size", "source_size", "num_classes", "batch_size",
            "num_workers", "transforms", "threads", "nproc", "gpus", "optimizer", "sample_io_ms",
            "sample_cpu_ms", "step_device_ms", "step_cpu_ms")
    d = {k: getattr(w, k) for k in keys}
    d.update(cuda=cuda, cpus=env.get("cpus"), cpu_model=env.get("cpu_model"),
             gpus_hw=env.get("gpus"), torch=env.get("torch"), host=os.uname().nodename)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:24]


class Engine:
    """Runs one session (a launch, or the plain monitor when `spec` is None)."""

    def __init__(self, spec: SessionSpec | None, *, nvml, command: str = "",
                 store_path: str | None = None, record: bool = True, grace_s: float = 5.0):
        self.spec = spec
        self.nvml = nvml
        self.command = command
        self.store_path = store_path
        self.record = record  # a launch from the start; the monitor once it sees a training job
        self.grace_s = grace_s
        self.interval = spec.interval if spec else 1.0
        self.stall_budget = STALL_BUDGET  # monitor: py-spy's share of one core for found jobs
        self.session_id: str | None = None
        self.work_dir: str | None = None
        self.phase: str | None = None
        self.state = "running"
        self.snapshot: Snapshot | None = None
        self.solo: dict[str, dict] = {}  # job name -> baseline stats
        self.runs: dict[str, JobRun] = {}  # job name -> current run (baseline or co-run)
        self.env = environment(nvml)
        self.verdict: dict | None = None
        self._subs: list[Callable[[Snapshot], None]] = []
        self._cmds: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._stop_reason = "interrupted"
        self._log: deque[tuple[float, str]] = deque(maxlen=50)
        self._thread: threading.Thread | None = None
        self._host: HostSampler | None = None
        self._store: Store | None = None
        self.error: BaseException | None = None
        self._host_series: list[tuple] = []  # co-run: (t, busy, psi, load1, throttled)
        self._gpu_series: list[tuple] = []  # co-run: (t, gpu, util, throttle reasons)
        self._hot: dict[str, list[tuple[str, float]]] = {}  # job -> hottest loader frames
        self._spy_started: set[str] = set()
        self._foreign: ForeignJobs | bool | None = None  # jobs not launched here; False: stopped
        self._rec_live: dict[int, tuple[str, str | None]] = {}  # monitor: pid -> (row, device)
        self._rec_names: set[str] = set()  # the monitor session's job rows
        self._verdict_frozen = False

    # --- API for other threads ---------------------------------------------------------------
    def subscribe(self, fn: Callable[[Snapshot], None]) -> None:
        self._subs.append(fn)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="gputop-dl-engine", daemon=True)
        self._thread.start()

    def request_stop(self, reason: str = "interrupted") -> None:
        self._stop_reason = reason
        self._stop.set()

    def stop_job(self, name: str) -> None:
        self._cmds.put(("stop", name))

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def exit_code(self) -> int:
        """The launch's exit code: 1 on an engine error or a failed job, 130 if interrupted."""
        if self.error is not None:
            print(f"gputop-dl: engine error: {self.error}", file=sys.stderr)
            return 1
        if self.state == "interrupted":
            return 130
        return 1 if any(r.status == "failed" for r in self.runs.values()) else 0

    def live_jobs(self) -> list[str]:
        return [n for n, r in list(self.runs.items()) if r.alive]

    # --- engine thread -------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self._log.append((time.time(), text))

    def _main(self) -> None:
        name_native_thread("gdl-engine")
        try:
            self._host = HostSampler()
            if self.record and self.spec is not None:
                self._store = Store(self.store_path)
                self.session_id = self._store.create_session(
                    self.spec.name, file=self.spec.path, command=self.command, kind="launch",
                    environment=self.env, spec={"workloads": [w.to_dict() for w in self.spec.workloads],
                                                "baseline": self.spec.baseline,
                                                "interval": self.spec.interval,
                                                "cuda": self.spec.cuda})
                self.work_dir = session_work_dir(self.session_id)
                for w in self.spec.workloads:
                    self._store.upsert_job(self.session_id, w.name, launched=True,
                                           config=w.to_dict(), status="waiting")
                self._store.commit()
            if self.spec is None:
                self.phase = None
                self._loop(lambda: False)
                self.state = "finished"  # quitting is how a monitor run ends
            else:
                if self.spec.cpu_fallback_reason:
                    self.say(self.spec.cpu_fallback_reason)
                self._prelaunch_check()
                self._baselines()
                if not self._stop.is_set():
                    self._corun()
            if self.spec is not None:
                self.state = "interrupted" if self._stop.is_set() else "finished"
        except BaseException as exc:  # recorded, shown, and the children still get stopped
            self.error = exc
            self.state = "interrupted"
            self.say(f"engine error: {type(exc).__name__}: {exc}")
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        live = [r for r in self.runs.values() if r.alive]
        for r in live:
            r.stopped_by_us = True
        if live:
            self.say(f"stopping {', '.join(r.w.name for r in live)}")
            stop_jobs([r.proc for r in live], self.grace_s)
        try:
            self.phase = self.state
            self._tick()
        except Exception as exc:
            self.say(f"final sample failed: {exc}")
        if self._store is not None:
            self._store.end_session(self.session_id, self.state, self.verdict)
            self._store.close()

    def _loop(self, done: Callable[[], bool]) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self._tick()
            if done():
                return
            next_t += self.interval
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind: book the next tick a full interval after this one
                next_t = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)

    def _start(self, w: Workload, phase: str, tag: str = "", go_file: str | None = None) -> JobRun:
        proc = start_job(w, self.work_dir or session_work_dir("unrecorded"), self.spec.cuda, tag,
                         go_file)
        run = JobRun(w, proc, phase)
        self.runs[w.name] = run
        discover.claim(proc.pid)  # no engine of this process lists it as found; freed at its end
        if self._store is not None:
            self._store.upsert_job(self.session_id, w.name, launched=True, config=w.to_dict(),
                                   status="starting", pid=proc.pid, started=proc.started,
                                   info={"phase": phase, "argv": proc.argv})
        return run

    def _baselines(self) -> None:
        spec = self.spec
        if spec.baseline == "none":
            self.say("baseline = none: no solo runs; slowdowns are unknown")
            return
        todo = [w for w in spec.workloads if not w.is_command]
        for i, w in enumerate(todo, 1):
            if self._stop.is_set():
                return
            fp = fingerprint(w, spec.cuda, self.env)
            if spec.baseline == "cache" and self._store is not None:
                cached = self._store.baseline(fp)
                if cached:
                    self.solo[w.name] = dict(cached, cached=True)
                    self.say(f"{w.name}: cached solo baseline, step {cached['step_time_s']:.3f} s")
                    continue
            self.phase = "baseline"
            self.say(f"baseline {i}/{len(todo)}: {w.name} alone for "
                     f"{w.warmup_steps}+{spec.baseline_steps} steps")
            short = w.with_(epochs=1, steps_per_epoch=w.warmup_steps + spec.baseline_steps)
            run = self._start(short, "baseline", ".solo")
            self._loop(lambda: not run.alive)
            st = step_stats(run.steps, warmup=w.warmup_steps, window=0)
            if run.status == "done" and st.n:
                base = {"step_time_s": st.step_time_s, "samples_per_s": st.samples_per_s,
                        "stall_fraction": st.stall_fraction, "steps": st.n,
                        "cpu_cores": run.measured_cpu_cores(), "cv": st.cv,
                        "device": run.info.get("device")}
                self.solo[w.name] = base
                if self._store is not None:
                    self._store.save_baseline(fp, self.session_id, w.name, base)
                    self._store.add_events(self.session_id, w.name, "baseline",
                                           [{"ev": "baseline", "t": time.time(), **base}])
                self.say(f"{w.name} solo: step {st.step_time_s:.3f} s, "
                         f"stall {st.stall_fraction:.0%}")
            elif run.status != "stopped":
                self.say(f"{w.name}: no solo baseline ({run.failure or run.status})")
            del self.runs[w.name]

    def _prelaunch_check(self) -> None:
        """Warn when cached solo baselines say the jobs need more cores than there are."""
        if self._store is None:
            return
        needs = []
        for w in self.spec.workloads:
            if w.is_command:
                continue
            base = self._store.baseline(fingerprint(w, self.spec.cuda, self.env))
            if not base or base.get("cpu_cores") is None:
                return
            needs.append(base["cpu_cores"])
        cpus = self.env.get("cpus") or 1
        if len(needs) > 1 and sum(needs) > cpus:
            self.say(f"warning: cached solo baselines say these jobs need ≈ {sum(needs):.1f} "
                     f"cores at full speed; this machine allows {cpus}: expect a CPU-bound co-run")

    def _corun(self) -> None:
        self.phase = "co-run"
        names = ", ".join(w.name for w in self.spec.workloads)
        self.say(f"co-run: starting {names}")
        # Start barrier: the built-in trainers build their model and data, say "started", and
        # wait for this file, so the co-run's first steps really run together (a job whose
        # imports took 5 s longer would otherwise run its first steps alone).
        go = os.path.join(self.work_dir or session_work_dir("unrecorded"), "co-run.go")
        t0 = time.time()
        for w in self.spec.workloads:
            self._start(w, "co-run", go_file=None if w.is_command else go)

        def done() -> bool:
            if not os.path.exists(go) and all(r.info or not r.alive or r.w.is_command
                                               for r in self.runs.values()):
                open(go, "w").close()
                self.say(f"co-run: all jobs ready after {time.time() - t0:.1f} s: go")
            return all(not r.alive for r in self.runs.values())

        self._loop(done)
        self._update_verdict(time.time(), final=True)

    def _spy(self, name: str, pid: int) -> None:
        """Thread: one short py-spy burst on a data-loader worker of `name`."""
        name_native_thread("gdl-spy")
        stacks, err = pyspy.record(pid, duration_s=2.0, rate=25)
        if err:
            self.say(f"{name}: no cause attribution ({err})")
            return
        self._hot[name] = pyspy.hot_frames(stacks)

    def _maybe_spy(self, now: float) -> None:
        for name, run in self.runs.items():
            if name in self._spy_started or not run.alive or run.w.num_workers == 0:
                continue
            if len(run.steps) <= run.w.warmup_steps + 1 or not run.tree_sample:
                continue
            workers = [p for p in run.tree_sample.pids if p != run.proc.pid]
            if not workers:
                continue
            self._spy_started.add(name)
            threading.Thread(target=self._spy, args=(name, workers[0]), daemon=True,
                             name=f"py-spy-{name}").start()

    def _update_verdict(self, now: float, final: bool = False) -> None:
        if self._verdict_frozen or self.spec is None:
            return
        runs = [r for r in self.runs.values() if r.phase == "co-run" and not r.w.is_command]
        if not runs:
            return
        series = [JobSeries(r.w.name, r.w.to_dict(), r.info.get("device"), r.steps,
                            r.cpu_series, r.ended, self.solo.get(r.w.name)) for r in runs]
        jobs, host = gather(series, self._host_series, self._gpu_series,
                            self.env.get("cpus") or 1, now, self._hot)
        self.verdict = judge(jobs, host, self.spec.baseline)
        # once a job has ended the overlap window is closed: the verdict cannot change
        win = overlap_window(series, now)
        # (2 s after it closed, so the others' buffered step events have arrived)
        if final or (win is not None and now - win[1] > 2.0):
            self._verdict_frozen = True
        if self._store is not None:
            self._store.set_verdict(self.session_id, self.verdict)

    def _apply_commands(self) -> None:
        while True:
            try:
                cmd, name = self._cmds.get_nowait()
            except queue.Empty:
                return
            run = self.runs.get(name)
            if cmd == "stop" and run is not None and run.alive:
                run.stopped_by_us = True
                self.say(f"stopping {name} (asked)")
                stop_jobs([run.proc], self.grace_s)

    # --- jobs not launched here (see "Jobs not launched by gputop-dl" in docs/architecture.md)
    def _foreign_refresh(self) -> dict[int, list[int]] | None:
        """Helper of `_tick`: list /proc for discovery; returns the tick's PPID map (or None).

        Monitor mode samples discovered jobs with py-spy bursts; launch mode shows them too
        (they compete for the same CPUs and GPUs) but never attaches py-spy to them, so the
        co-run being measured is not disturbed, and does not record them."""
        fj = self._foreign
        if fj is None:
            fj = self._foreign = ForeignJobs(stall=self.spec is None, stall_budget=self.stall_budget)
        if fj is False:
            return None
        try:
            return fj.refresh()
        except Exception as exc:  # noqa: BLE001 - discovery must never stop the engine
            self._foreign = False
            self.say(f"discovery of other jobs stopped: {type(exc).__name__}: {exc}")
            return None

    def _foreign_jobs(self, gpu: GpuUse, taken: set[str]) -> tuple[list[JobSample], list[str]]:
        """Helper of `_tick`: the discovered jobs' rows and notes (after `_foreign_refresh`)."""
        fj = self._foreign
        if not fj:
            return [], []
        try:
            exclude = {r.proc.pid for r in self.runs.values()}
            jobs, notes = fj.sample(gpu, exclude, taken)
            for f in fj.new_since_last():
                self.say(f"found {f.name} (pid {f.pid}), not launched by gputop-dl")
            return jobs, notes
        except Exception as exc:  # noqa: BLE001
            self._foreign = False
            self.say(f"discovery of other jobs stopped: {type(exc).__name__}: {exc}")
            return [], []

    def _record_monitor(self, now: float, foreign: list[JobSample]) -> None:
        """Monitor mode: from the first training job seen, the run is a recorded session (kind
        "monitor"): each job's CPU, memory and py-spy stall here; `_tick` adds host and GPU
        samples and commits."""
        st = self._store
        if st is None:
            if not foreign:
                return
            st = self._store = Store(self.store_path)
            self.session_id = st.create_session(
                f"monitor {os.uname().nodename}", file=None, command=self.command or "gputop-dl",
                kind="monitor", environment=self.env, spec={"interval": self.interval})
            self.say(f"recording session {self.session_id} (training jobs seen)")
        sid, seen = self.session_id, {}
        for j in foreign:
            name, device = self._rec_live.get(j.pid, (None, "?"))
            if name is None:  # a new job: its own row, even if an earlier one had its name
                name = j.name if j.name not in self._rec_names else f"{j.name} ({j.pid})"
                self._rec_names.add(name)
            if device != j.device:  # new, or now seen on a GPU
                st.upsert_job(sid, name, launched=False, config=None, status="running",
                              device=j.device, pid=j.pid, started=now,
                              info={"command": j.command})
            seen[j.pid] = (name, j.device)
            st.add_job_sample(sid, now, j, "monitor")
        for pid, (name, _) in self._rec_live.items():
            if pid not in seen:  # gone since the last tick
                st.upsert_job(sid, name, launched=False, config=None, status="ended",
                              pid=pid, ended=now)
        self._rec_live = seen

    def _tick(self) -> None:
        now = time.time()
        self._apply_commands()
        host = self._host.sample()
        gpus = self.nvml.sample()
        gprocs = self.nvml.processes()
        gpu = GpuUse.of(gprocs)
        jobs = []
        store = self._store
        cmap = self._foreign_refresh()  # the tick's one /proc pass, shared with launched jobs
        if cmap is None:
            cmap = children_map() if self.runs else None
        for name, run in list(self.runs.items()):
            was_alive = run.alive
            evs = run.poll(now, cmap)
            if store is not None and evs:
                store.add_events(self.session_id, name, run.phase, evs)
            if was_alive and not run.alive:
                discover.unclaim(run.proc.pid)
                msg = f"{name} ({run.phase}) {run.status}"
                if run.failure:
                    msg += f": {run.failure}"
                self.say(msg)
            js = run.sample(gpu, self.solo.get(name))
            jobs.append(js)
            if store is not None:
                row = (js.status, js.failure, js.device, run.ended, run.stderr_tail,
                       self.solo.get(name))
                if row != run.stored_row:  # the job's row changes rarely; samples every tick
                    run.stored_row = row
                    store.upsert_job(self.session_id, name, launched=True, config=None,
                                     status=js.status, failure=js.failure, device=js.device,
                                     pid=js.pid, ended=run.ended,
                                     info={"phase": run.phase,
                                           "stderr_tail": list(run.stderr_tail),
                                           "solo": self.solo.get(name), "argv": run.proc.argv})
                if run.alive or was_alive:
                    store.add_job_sample(self.session_id, now, js, run.phase)
        if self.spec is not None:
            for w in self.spec.workloads:
                if w.name not in self.runs:
                    jobs.append(JobSample(name=w.name, pid=None, launched=True, status="waiting",
                                          batch_size=w.batch_size, model=w.model,
                                          solo_step_time_s=(self.solo.get(w.name) or {}).get(
                                              "step_time_s")))
            order = {w.name: i for i, w in enumerate(self.spec.workloads)}
            jobs.sort(key=lambda j: order.get(j.name, 1 << 30))
        foreign, foreign_notes = self._foreign_jobs(gpu, {j.name for j in jobs})
        jobs.extend(foreign)  # after the launched ones
        if self.spec is None and self.record:
            self._record_monitor(now, foreign)
            store = self._store  # from the first job seen
        if self.phase == "co-run":
            self._host_series.append((now, host.cpu_busy, host.cpu_pressure_some10, host.load1,
                                      host.cgroup_throttled_frac))
            self._gpu_series.extend((now, g.index, g.util, g.throttle_reasons) for g in gpus)
            self._maybe_spy(now)
            self._update_verdict(now)
        if store is not None:
            store.add_host_sample(self.session_id, now, host)
            if gpus:
                store.add_gpu_samples(self.session_id, now, gpus)
            store.heartbeat(self.session_id, now)
            store.commit()
        notes = []
        if self.spec is not None and not self.spec.cuda:
            notes.append(self.spec.cpu_fallback_reason or "no CUDA: workloads train on the CPU")
        notes.extend(foreign_notes)
        snap = Snapshot(time=now, gpu_status=self.nvml.status, gpus=gpus, host=host,
                        jobs=tuple(jobs), gpu_processes=gprocs, verdict=self.verdict,
                        notes=tuple(notes), log=tuple(self._log), phase=self.phase,
                        session_id=self.session_id)
        self.snapshot = snap
        for fn in self._subs:
            fn(snap)


def run_file(path: str, *, nvml=None, store_path: str | None = None, **overrides) -> Engine:
    """Load a workload file, run the whole session without a presenter, return the engine."""
    import dataclasses

    from gputop_dl.collect.nvml import Nvml
    from gputop_dl.config import load_session

    nvml = nvml or Nvml()
    spec = load_session(path, gpu_count=nvml.device_count())
    if not spec.cuda:
        overrides.setdefault("cpu_fallback_reason", nvml.status_detail)
    spec = dataclasses.replace(spec, **overrides)
    engine = Engine(spec, nvml=nvml, store_path=store_path, command=f"run_file {path}")
    engine.start()
    engine.join()
    return engine
