"""The in-situ solo probe: each job measured alone inside the co-run, the others paused.

No separate baseline phase: once every job is past its warm-up, the probe pauses every job
but one (SIGSTOP to each whole process tree: trainer, loader workers, all ranks), lets that
one run alone until it has made `steps` steps (and at least `min_s` passed) or `seconds` have
passed, resumes the others
(SIGCONT) and moves to the next job. A `Pauser` (control/pause.py) guarantees that nothing stays
stopped, even if gputop-dl is killed in the middle.

Solo figures of job J come from its steps that began and ended inside J's window; its CPU need
from its process-tree samples in the window. The co-run evidence leaves out every step and
sample that touches a probe window or the `settle_s` after it (`excluded()`), so the
pauses do not leak into the slowdowns. The cost is reported: job-seconds paused.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputop_dl.analyse.stats.jobstats import step_stats
from gputop_dl.analyse.live.outside_load import SoloWindow
from gputop_dl.collect.jobs.solo_window import SoloReading, SoloWatch
from gputop_dl.engine.jobrun import Event, JobRun, SoloBaseline
from gputop_dl.control.pause import Pauser

if TYPE_CHECKING:
    from gputop_dl.engine.core import Engine


@dataclass
class Window:
    job: str
    t0: float
    t1: float | None = None
    paused: list[str] = field(default_factory=list)  # the jobs stopped meanwhile
    watch: SoloWatch | None = None  # reading what runs beside the job, while the window is open
    exclude: list[int] = field(default_factory=list)  # the paused jobs' processes: not outside load
    reading: SoloReading | None = None  # what ran beside it, once the window closed


class Probe:
    """One probe pass over `order` (job names); driven by `tick()` from the plan each tick."""

    def __init__(self, order: list[str], seconds: float = 5.0, steps: int = 8,
                 settle_s: float = 1.0, min_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.todo = list(order)
        self.clock = clock  # times the pause: the window opens after it (a test's is fake)
        self.seconds, self.steps, self.settle_s = seconds, steps, settle_s
        self.min_s = min(min_s, seconds)  # a window at least this long: one tick is too noisy
        self.windows: list[Window] = []
        self.solo: dict[str, SoloBaseline] = {}
        self.missing: dict[str, str] = {}  # job -> why the probe got no solo figure
        self.pauser = Pauser()

    @property
    def current(self) -> Window | None:
        return self.windows[-1] if self.windows and self.windows[-1].t1 is None else None

    @property
    def done(self) -> bool:
        return not self.todo and self.current is None

    @property
    def paused_job_s(self) -> float:
        """The probe's cost: seconds each paused job spent stopped, summed."""
        return sum(((w.t1 or time.time()) - w.t0) * len(w.paused) for w in self.windows)

    def excluded(self) -> list[tuple[float, float]]:
        """Spans the co-run evidence must leave out: each window plus its settling time."""
        now = time.time()
        return [(w.t0, (w.t1 or now) + self.settle_s) for w in self.windows]

    def tick(self, engine: Engine, runs: dict[str, JobRun], now: float) -> None:
        """Advance: open the next window, or close the current one when it has enough."""
        cur = self.current
        if cur is not None:
            run = runs.get(cur.job)
            inside = _inside(run.steps, cur.t0) if run is not None else []
            took = now - cur.t0
            enough = len(inside) >= self.steps and took >= self.min_s
            if run is None or not run.alive or enough or took >= self.seconds:
                self._close(engine, cur, run, now)
            elif cur.watch is not None:
                cur.watch.mark()
            return
        while self.todo:
            name = self.todo.pop(0)
            run = runs.get(name)
            if run is None or not run.alive:
                self.missing[name] = "ended before its probe"
                continue
            others = [r for n, r in runs.items() if n != name and r.alive]
            t = self.clock()
            self.pauser.pause([r.proc.pid for r in others if r.proc.pid is not None])  # alive: started
            # what else runs beside it meanwhile (a busy loop, a compile): the window's reading
            watch, exclude = SoloWatch(), [p for r in others for p in _tree(r)]
            watch.start(_tree(run))
            # the window opens once the others are stopped, not at the tick: the pause starts
            # its guard (a Python process) and attaches to every thread, which took about a
            # second on 2 cores under three CPU-bound jobs; its steps meanwhile ran beside them
            win = Window(name, now + (self.clock() - t), paused=[r.name for r in others],
                         watch=watch, exclude=exclude)
            self.windows.append(win)
            engine.say(f"probe: {name} alone for up to {self.seconds:g} s / {self.steps} "
                       f"steps; paused {', '.join(r.name for r in others) or 'nothing'}")
            return

    def _close(self, engine: Engine, win: Window, run: JobRun | None, now: float) -> None:
        if win.watch is not None:  # read before the others run again (an ended job: to its end)
            ended = run is None or not run.alive
            win.reading, win.watch = win.watch.stop(exclude=win.exclude, ended=ended), None
        self.pauser.resume()
        win.t1 = now
        inside = _inside(run.steps, win.t0) if run is not None else []
        st = step_stats(inside, warmup=0, window=0)
        if run is None or not st.n:
            self.missing[win.job] = f"no whole step in its {now - win.t0:.1f} s probe window"
            engine.say(f"probe: {win.job}: {self.missing[win.job]}")
            return
        cores = [c for t, c in run.cpu_series if win.t0 < t <= now]
        self.solo[win.job] = {
            "step_time_s": st.step_time_s, "samples_per_s": st.samples_per_s,
            "stall_fraction": st.stall_fraction, "steps": st.n, "cv": st.cv,
            "mean_step_time_s": st.mean_step_s,
            "cpu_cores": statistics.fmean(cores[1:] or cores) if cores else None,
            "device": run.info.get("device"), "method": "probe",
            "window_s": round(now - win.t0, 2)}
        engine.say(f"probe: {win.job} solo step {st.step_time_s:.3f} s over {st.n} steps "
                   f"({now - win.t0:.1f} s; {', '.join(win.paused) or 'nothing'} resumed)")

    def beside(self) -> list[SoloWindow]:
        """The closed windows that gave a solo figure, with what ran beside each job."""
        out = []
        for w in self.windows:
            base, r = self.solo.get(w.job), w.reading
            if base is None or r is None or base.get("method") != "probe":
                continue
            device = str(base.get("device") or "")
            on_gpu = bool(device) and not device.startswith("cpu")
            out.append(SoloWindow(w.job, r.seconds, r.wait, r.cores, r.outside,
                                  step_s=base.get("step_time_s"),
                                  stall=base.get("stall_fraction") if on_gpu else None))
        return out

    def close(self) -> None:
        """Resume anything still paused (the session ends, or an error)."""
        cur = self.current
        if cur is not None:
            cur.t1 = time.time()
        self.pauser.close()


def _tree(run: JobRun) -> tuple[int, ...]:
    """The job's processes as last sampled (its trainer alone before the first sample)."""
    if run.tree_sample is not None:
        return run.tree_sample.pids
    return (run.proc.pid,) if run.proc.pid is not None else ()


def _inside(steps: list[Event], t0: float) -> list[Event]:
    """Steps that began at or after t0 (a step that straddles the pause is co-run time)."""
    return [s for s in steps if s["t"] - s["t_step"] >= t0]
