"""The session engine: one thread that ticks collect -> record -> analyse -> publish.

Every `interval` seconds it samples the machine (host, GPUs, found jobs: `MachineSampler`),
polls each launched job (new trainer events, exit, process tree), hands the writes to its
`Recorder`, and publishes one immutable `Snapshot` to its subscribers (headless console,
TUI). What starts when is the `Plan`'s business (monitor, launch, ...); the engine runs it in
its thread. Other threads talk to the engine only through `request_stop` / `stop_job`, which
are queued and applied at the next tick.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from gputop_dl.collect.jobs import discover
from gputop_dl.collect.proc.diskio import look_times
from gputop_dl.collect.environment import environment
from gputop_dl.analyse.live.energy import EnergyLedger, job_keys, with_energy
from gputop_dl.collect.machine import MachineSample, MachineSampler
from gputop_dl.collect.proc.procs import tree_rss
from gputop_dl.engine.jobrun import JobRun, SoloBaseline
from gputop_dl.engine.plan import Plan, VerdictJson
from gputop_dl.engine.recorder import Recorder
from gputop_dl.engine.stuck_watch import StuckWatch
from gputop_dl.control.launch import Job, JobProcess, StartError, start_job
from gputop_dl.control.stop import reap_orphans, stop_jobs
from gputop_dl.record.paths import session_work_dir
from gputop_dl.snapshot import JobSample, Snapshot, evolve
from gputop_dl.stuck import Stuck
from gputop_dl.text.fmt import size
from gputop_dl.threadname import name_native_thread
from gputop_dl.workload import SessionSpec, Workload


# looks at reading jobs' states a tick: the tick's own and 9 between. A job's I/O wait is a
# count of looks, and the disk and memory estimates 1 / (1 - w ...) are steep in it: 4 looks a
# tick over the 5-tick window left the memory estimate of a pair that waited 45 % of the time
# between 1.2x and 2.0x (benchmarks/verdict_memory.py); each look reads one stat file per process
PEEKS = 10

CAP_CHECK_S = 0.25  # how often a capped job's RSS is read between ticks
DUMP_JOIN_S = 15.0  # the longest wait, at the end, for a stuck job's stack dump in flight

class Engine:
    """Runs one session: a `Plan` over a `MachineSampler`, recorded by a `Recorder`."""

    def __init__(self, plan: Plan[Engine], *, sampler: MachineSampler, recorder: Recorder | None = None,
                 interval: float = 1.0, grace_s: float = 5.0, peeks: int = PEEKS,
                 stuck: StuckWatch | None = None):
        """`peeks`: looks a tick at the states of found jobs that read from storage (`loop`);
        `stuck`: the watch for stuck jobs (engine/stuck_watch.py; default thresholds)."""
        self.plan = plan
        self.energy = EnergyLedger()  # each job's joules (analyse/live/energy.py)
        self.stuck = stuck or StuckWatch()
        self.peeks = peeks
        self.sampler = sampler
        self.recorder = recorder or Recorder()
        self.interval = interval
        self.grace_s = grace_s
        self.phase: str | None = None
        self.state = "running"
        self.snapshot: Snapshot | None = None
        self.runs: dict[str, JobRun] = {}  # job name -> current run (baseline or co-run)
        self.procs: list[JobProcess] = []  # every job started, ended and forgotten ones too
        self._env: dict[str, Any] | None = None
        self.log: deque[tuple[float, str]] = deque(maxlen=50)  # recent messages, oldest first
        self.error: BaseException | None = None
        self._subs: list[Callable[[Snapshot], None]] = []
        self._cmds: queue.Queue[tuple[str, str]] = queue.Queue()
        self._stop = threading.Event()
        # INT, TERM or HUP reached gputop-dl (runner/engines.py stop_on_signals): exit 130 even
        # when it came as the session was finishing by itself (the jobs had all ended)
        self.signalled = False
        self._said_failure = False
        self._thread: threading.Thread | None = None

    # --- what other threads read --------------------------------------------------------------
    @property
    def env(self) -> dict[str, Any]:
        """The environment table (collect/environment.py), read on first use: a session records
        it, the first frame does not wait for it (package versions cost ~15 ms)."""
        if self._env is None:
            self._env = dict(environment(self.sampler.nvml))  # a JSON document from here on
        return self._env

    @property
    def spec(self) -> SessionSpec | None:
        return self.plan.spec

    @property
    def verdict(self) -> VerdictJson | None:
        return self.plan.verdict

    @property
    def session_id(self) -> str | None:
        return self.recorder.session_id

    @property
    def store_path(self) -> str | None:
        return self.recorder.store_path

    @property
    def work_dir(self) -> str | None:
        """The session's folder (job logs, event files, the co-run's go file)."""
        return self.recorder.work_dir

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def live_jobs(self) -> list[str]:
        return [n for n, r in list(self.runs.items()) if r.alive]

    def exit_code(self) -> int:
        """The session's exit code: 1 on an engine error, a failed job or a recording cut
        short, 130 if interrupted."""
        if self.error is not None:
            return 1
        if self.state == "interrupted" or self.signalled:
            return 130
        failed = any(r.status == "failed" for r in self.runs.values())
        return 1 if failed or self.recorder.failure else 0

    # --- API for other threads ---------------------------------------------------------------
    def subscribe(self, fn: Callable[[Snapshot], None]) -> None:
        self._subs.append(fn)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="gputop-dl-engine", daemon=True)
        self._thread.start()

    def request_stop(self, reason: str = "interrupted") -> None:
        self._stop.set()

    def stop_job(self, name: str) -> None:
        self._cmds.put(("stop", name))

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    # --- what plans use (engine thread) -------------------------------------------------------
    def say(self, text: str) -> None:
        self.log.append((time.time(), text))

    def loop(self, done: Callable[[], bool]) -> None:
        """Tick every `interval` until `done()` after a tick, or a stop request."""
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            if done():
                return
            next_t += self.interval
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind: book the next tick a full interval after this one
                next_t = time.monotonic()
                delay = 0.0
            # looks at the states of found jobs that read from storage, between the ticks: their
            # share of time blocked on I/O from one look a tick would be 0 or 1 (collect/proc/diskio.py);
            # while none reads, the thread sleeps until the next tick
            for frac in look_times(self.peeks - 1) if self._reading() else ():
                at = next_t - self.interval * (1 - frac)
                if self._stop.wait(max(0.0, at - time.monotonic())):
                    return
                self._peek()
            if self._wait_watching_caps(next_t):
                return

    def _wait_watching_caps(self, until: float) -> bool:
        """Sleep until `until` (monotonic); True on a stop request. Meanwhile every job with a
        memory cap has its processes' RSS read every CAP_CHECK_S, so a job that grows fast is
        stopped near its cap, not up to a whole interval later (at `interval = 5` one reached
        2.7x its cap between two ticks). Its processes are those of its last tree sample: a
        process forked since counts from the next tick."""
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return self._stop.is_set()
            capped = [r for r in self.runs.values()
                      if r.alive and r.mem_cap is not None and not r.capped]
            if self._stop.wait(min(left, CAP_CHECK_S) if capped else left):
                return True
            for run in capped:
                pids = run.tree_sample.pids if run.tree_sample is not None else (run.proc.pid,)
                rss = tree_rss(p for p in pids if p is not None)
                if run.mem_cap is not None and rss > run.mem_cap:
                    self._stop_over_cap(run, rss)

    def _reading(self) -> bool:
        found = getattr(self.sampler, "found", None)
        try:
            return found is not None and found.reading()
        except Exception:  # noqa: BLE001 - a look is never worth a failed tick
            return False

    def _peek(self) -> None:
        found = getattr(self.sampler, "found", None)
        if found is not None:
            try:
                found.peek_io(only_reading=True)
            except Exception:  # noqa: BLE001 - a look is never worth a failed tick
                pass

    def start_run(self, w: Workload, phase: str, cuda: bool, *, tag: str = "",
                  go_file: str | None = None, solo: SoloBaseline | None = None,
                  cpus: frozenset[int] | None = None) -> JobRun:
        """Start workload `w` as a job of this session; it is polled from the next tick on.
        `cpus`: the CPUs it may run on (None: this process's)."""
        proc: Job
        try:
            proc = start_job(w, self.recorder.work_dir or session_work_dir("unrecorded"), cuda,
                             tag, go_file, cpus=cpus)
        except StartError as exc:  # this job fails; the others go on
            proc = exc.job
            self.say(f"{w.name} ({phase}) failed: {exc}")
        else:
            self.procs.append(proc)
            discover.claim(proc.pid)  # no engine of ours lists it as found; freed at its end
        run = JobRun(w, proc, phase, solo)
        self.runs[w.name] = run
        self.recorder.job_started(w, phase, proc.pid, proc.started, proc.argv)
        return run

    def stop_run(self, run: JobRun, why: str | None = None) -> None:
        """Stop a live run now: TERM to its process group, KILL after the grace period."""
        if run.alive:  # so it started (a NotStarted one ended from the first)
            run.stopped_by_us = True
            if why:
                self.say(why)
            stop_jobs([run.proc], self.grace_s)

    def _stop_over_cap(self, run: JobRun, rss: int) -> None:
        """A job whose processes crossed its memory cap (`rss` bytes) is killed at once, alone,
        and fails with "memory cap" as its cause (before the kernel's OOM killer picks one)."""
        run.capped = run.stopped_by_us = True
        run.failure = (f"memory cap: its processes used {size(rss)} RSS, over its memory_limit "
                       f"of {size(run.mem_cap)}; stopped")
        self.say(f"{run.w.name} ({run.phase}) {run.failure}")
        stop_jobs([run.proc], 0.0)  # KILL right after TERM: it is still growing

    def forget_run(self, name: str) -> None:
        """Drop an ended run from the jobs shown (a finished solo baseline)."""
        run = self.runs.get(name)
        if run is not None and not run.alive:
            del self.runs[name]

    # --- engine thread -------------------------------------------------------------------------
    def _main(self) -> None:
        name_native_thread("gdl-engine")
        try:
            self.state = self.plan.run(self)
        except BaseException as exc:  # recorded, shown, and the children still get stopped
            self.error = exc
            self.state = "interrupted"
            self.say(f"engine error: {type(exc).__name__}: {exc}")
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        try:
            self.plan.close(self)
        except Exception as exc:
            self.say(f"plan close failed: {exc}")
        live = [r for r in self.runs.values() if r.alive]
        for r in live:
            r.stopped_by_us = True
        if live:
            self.say(f"stopping {', '.join(r.w.name for r in live)}")
        if self.procs:  # also what is left of jobs that ended (a `cmd &` in a shell job)
            stop_jobs(self.procs, self.grace_s)
        try:
            self.phase = self.state
            self.tick()
        except Exception as exc:
            self.say(f"final sample failed: {exc}")
        # a stack dump still running starts py-spy processes: none outlives the engine
        self.stuck.join(DUMP_JOIN_S)
        self.recorder.close(self.state, self.plan.verdict)

    def _apply_commands(self) -> None:
        while True:
            try:
                cmd, name = self._cmds.get_nowait()
            except queue.Empty:
                return
            run = self.runs.get(name)
            if cmd == "stop" and run is not None:
                self.stop_run(run, f"stopping {name} (asked)")

    def _note_stuck(self, now: float, j: JobSample, st: Stuck | None) -> None:
        """A job that became stuck, or moved again: a line in the log, an event in the store."""
        if st is not None:
            self.say(f"{j.name} is stuck: no progress for {st.for_s:.0f} s; its main thread "
                     f"waits ({st.where}) at {st.frame or '?'}")
            ev = {"ev": "stuck", "t": now, **st.to_json()}
        else:
            self.say(f"{j.name} moves again")
            ev = {"ev": "unstuck", "t": now}
        self.recorder.job_event(j, ev)

    def _energy_rows(self, now: float, m: MachineSample, launched: list[JobSample]
                     ) -> tuple[MachineSample, list[JobSample]]:
        """This tick's GPU joules to the jobs (analyse/live/energy.py): the sample with its found
        jobs' figures (the plan judges and records those), the launched rows with theirs."""
        self.energy.update(now, self.sampler.nvml.status, m.gpus, m.gpu_processes,
                           job_keys(launched + list(m.found)))
        found = tuple(with_energy(self.energy, j) for j in m.found)
        rows = [with_energy(self.energy, js) for js in launched]
        for js in rows:  # each phase's samples per joule, for a launch's verdict
            self.energy.note_phase(js)
        return evolve(m, found=found), rows

    def tick(self) -> None:
        """One pass: sample, poll the launched jobs, record, let the plan judge, publish."""
        self._apply_commands()
        plan, rec = self.plan, self.recorder
        m = self.sampler.sample(exclude={r.proc.pid for r in self.runs.values()
                                         if r.proc.pid is not None},
                                taken=plan.taken(self), cmap=bool(self.runs))
        now = m.time
        reap_orphans(self.procs, None if m.cmap is None else m.cmap.get(os.getpid(), []))
        for proc in self.procs:
            proc.bound_log()
        for text in m.log:
            self.say(text)
        ticked: list[tuple[JobRun, JobSample, bool]] = []
        for name, run in list(self.runs.items()):
            was_alive = run.alive
            rec.events(name, run.phase, run.poll(now, m.cmap))
            rss = run.rss_over_cap()
            if rss is not None:
                self._stop_over_cap(run, rss)
            if was_alive and not run.alive:
                if run.proc.pid is not None:
                    discover.unclaim(run.proc.pid)
                msg = f"{name} ({run.phase}) {run.status}"
                if run.failure:
                    msg += f": {run.failure}"
                self.say(msg)
            ticked.append((run, run.sample(m.gpu_use), was_alive))
        m, launched = self._energy_rows(now, m, [js for _, js, _ in ticked])
        for (run, _, was_alive), js in zip(ticked, launched):
            rec.launched(now, run, js, was_alive)
        plan.after_tick(self, now, m)  # judged first: the rows show this tick's verdict
        # found jobs after the launched ones
        jobs = plan.rows(self, launched) + plan.found_rows(self, list(m.found))
        jobs = [with_energy(self.energy, j) for j in jobs]  # rows a plan built anew
        jobs = self.stuck.annotate(now, jobs)
        for j, st in self.stuck.changes():
            self._note_stuck(now, j, st)
        rec.tick(now, m.host, m.gpus)
        if rec.failure and not self._said_failure:
            self._said_failure = True
            self.say(f"warning: {rec.failure}")
        snap = Snapshot(time=now, gpu_status=self.sampler.nvml.status, gpus=m.gpus, host=m.host,
                        jobs=tuple(jobs), gpu_processes=m.gpu_processes, verdict=plan.shown_verdict(),
                        notes=plan.notes() + m.notes, log=tuple(self.log), phase=self.phase,
                        session_id=rec.session_id, queue=plan.queue_state(), search=m.search)
        self.snapshot = snap
        for fn in self._subs:
            fn(snap)
