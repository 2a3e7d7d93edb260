"""The launch's solo baselines: each job alone before the co-run, measured or from the cache.

`baseline = "measure"` or `"cache"`: each job alone, warm-up plus `baseline_steps` steps (a
built-in trainer stops by itself; a command is stopped once its start-up hook has seen them);
its step time, stall and CPU need are kept (and cached by a fingerprint of what they depend
on), with what ran beside it (engine/solo_beside.py). A cached baseline that was not taken
alone is measured again. A job across nodes gets none. With `baseline = "probe"` there is no
such phase: the in-situ probe (probe.py) measures each job alone inside the co-run.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gputop_dl.analyse.slowdown.solo import solo_baseline
from gputop_dl.collect.jobs.fingerprint import fingerprint
from gputop_dl.engine.jobrun import JobRun, SoloBaseline
from gputop_dl.engine.solo_beside import SoloRunWatch, slowed_by_outside
from gputop_dl.workload import SessionSpec, Workload

if TYPE_CHECKING:
    from gputop_dl.engine.core import Engine


class SoloRuns:
    """The solo baselines of a launch's jobs (`solo`), and why a job has none (`no_solo`),
    failed alone (`failed_solo`: not started again for the co-run) or spans nodes (`across`)."""

    def __init__(self, spec: SessionSpec):
        self.spec = spec
        self.solo: dict[str, SoloBaseline] = {}  # job name -> baseline stats
        self.no_solo: dict[str, str] = {}  # job name -> why it has no baseline
        self.failed_solo: dict[str, str] = {}  # job name -> how it failed alone: not restarted
        self.across: dict[str, str] = {}  # job -> why a job across nodes leaves it unmeasured

    def measure(self, engine: Engine) -> None:
        """Each job alone in turn (`baseline = "measure"`), or its cached baseline where one
        was taken alone (`"cache"`); a job that failed alone is kept in `failed_solo`."""
        spec, rec = self.spec, engine.recorder
        if spec.baseline == "none":
            engine.say("baseline = none: no solo runs; slowdowns are unknown")
            return
        todo = [w for w in spec.workloads if not self.spans_nodes(engine, w)]
        for i, w in enumerate(todo, 1):
            if engine.stopping:
                return
            fp = fingerprint(w, spec.cuda, engine.env)
            if spec.baseline == "cache":
                cached = rec.cached_baseline(fp)
                slowed = slowed_by_outside(w.name, cached, engine.env.get("cpus") or 1) if cached else None
                if slowed:
                    engine.say(f"{w.name}: the cached solo baseline was not alone (about "
                               f"{slowed:.2f}× slower than on an idle box): measuring it again")
                elif cached:
                    self.solo[w.name] = dict(cached, cached=True)
                    engine.say(f"{w.name}: cached solo baseline, step {cached['step_time_s']:.3f} s")
                    continue
            engine.phase = "baseline"
            engine.say(f"baseline {i}/{len(todo)}: {w.name} alone for "
                       f"{w.warmup_steps}+{spec.baseline_steps} steps")
            base = self._command(engine, w) if w.is_command else self._builtin(engine, w)
            if base is not None:
                self.solo[w.name] = base
                rec.baseline(fp, w.name, base)
                engine.say(f"{w.name} solo: step {base['step_time_s']:.3f} s, "
                           f"stall {base['stall_fraction']:.0%}"
                           + (f" ({base['note']})" if base.get("note") else ""))
            run = engine.runs.get(w.name)
            if run is not None and run.status == "failed" and not engine.stopping:
                self.failed_solo[w.name] = run.failure or "failed"  # kept: its row says so
            else:
                engine.forget_run(w.name)

    def spans_nodes(self, engine: Engine, w: Workload) -> bool:
        """A job across nodes gets no solo baseline, measured or probed: alone would need every
        node's share of it at once, and pausing one rank stalls them all at the next
        collective (its slowdown stays unknown, with this reason)."""
        if w.multinode and w.name not in self.across:
            self.no_solo[w.name] = self.across[w.name] = f"spans {w.nnodes} nodes: no solo baseline"
            engine.say(f"{w.name}: {self.no_solo[w.name]} (alone it would need every node at "
                       "once; a paused rank stalls the others)")
        return w.multinode

    def _builtin(self, engine: Engine, w: Workload) -> SoloBaseline | None:
        """The built-in trainer alone for warm-up + baseline_steps steps (it stops by itself)."""
        short = w.with_(epochs=1, steps_per_epoch=w.warmup_steps + self.spec.baseline_steps)
        run = engine.start_run(short, "baseline", self.spec.cuda, tag=".solo")
        watch = SoloRunWatch(run)
        engine.loop(watch.until(lambda: not run.alive))
        if run.status == "done":
            return _with_beside(_solo_stats(run, w.warmup_steps), watch)
        if run.status != "stopped":
            self.no_solo[w.name] = f"no solo baseline ({run.failure or run.status})"
            engine.say(f"{w.name}: {self.no_solo[w.name]}")
        return None

    def _command(self, engine: Engine, w: Workload) -> SoloBaseline | None:
        """A command alone until the start-up hook saw warm-up + baseline_steps steps, then
        stopped (TERM to its process group, KILL after the grace period). A script that ends
        earlier gives what was seen, and says so; one whose DataLoader the hook never saw in
        `baseline_timeout_s` gets no baseline, with that reason."""
        want = w.warmup_steps + self.spec.baseline_steps
        run = engine.start_run(w, "baseline", self.spec.cuda, tag=".solo")
        watch = SoloRunWatch(run)
        t0 = time.monotonic()
        timeout = self.spec.baseline_timeout_s
        engine.loop(watch.until(lambda: not run.alive or len(run.steps) >= want
                                or time.monotonic() - t0 > timeout))
        if engine.stopping:
            return None
        if run.alive:
            engine.stop_run(run)
            engine.loop(watch.until(lambda: not run.alive))  # its last ticks read too
        seen = len(run.steps)
        if seen == 0:
            why = (run.failure or "it could not start") if run.proc.pid is None else (
                "the start-up hook saw no DataLoader steps"
                + (f" in {timeout:.0f} s" if run.status == "stopped" else
                   f" before it ended ({run.status}" + (f": {run.failure})" if run.failure
                                                         else ")")))
            self.no_solo[w.name] = why
            engine.say(f"{w.name}: no solo baseline: {why}")
            return None
        warm = w.warmup_steps if seen > w.warmup_steps else max(0, seen - 1)
        base = _with_beside(_solo_stats(run, warm), watch)
        if base is None:
            return None
        if seen < want:
            base["note"] = (f"{'ended' if run.status != 'stopped' else 'stopped'} after "
                            f"{seen} of {want} solo steps: baseline from {base['steps']}")
        return base


def _with_beside(base: SoloBaseline | None, watch: SoloRunWatch) -> SoloBaseline | None:
    """The baseline with what ran beside its solo run (`beside`; engine/solo_beside.py)."""
    beside = watch.reading() if base is not None else None
    return base if base is None or beside is None else dict(base, beside=beside)


def _solo_stats(run: JobRun, warmup: int) -> SoloBaseline | None:
    """A finished solo run's baseline (analyse/slowdown/solo.py)."""
    return solo_baseline(run.steps, warmup, run.measured_cpu_cores(), run.info.get("device"))
