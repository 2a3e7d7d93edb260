"""The monitor's plan: watch this machine; from the first training job found, record a session.

Every tick the found jobs are judged live (analyse/live/passive.py): each job's slowdown estimated
from its CPU and GPU waits, or its own pace against its pace alone, and the set's verdict, with
no baseline and no job paused. A recording monitor keeps the paces alone it reads and lends
them to later copies of a job (engine/pace_refs.py).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gputop_dl.analyse.live.passive import Estimate, PassiveJudge, annotate
from gputop_dl.engine.box_profile import load_peaks
from gputop_dl.engine.pace_refs import PaceRefs, machine_ident
from gputop_dl.engine.plan import Plan, VerdictJson
from gputop_dl.snapshot import JobSample

if TYPE_CHECKING:
    from gputop_dl.collect.machine import MachineSample
    from gputop_dl.engine.core import Engine


class MonitorPlan(Plan["Engine"]):
    """`gputop-dl`: no jobs of its own; found jobs are sampled with py-spy and recorded."""

    kind = "monitor"
    stall_found = True

    def __init__(self, command: str = "gputop-dl"):
        self.command = command
        self.verdict: VerdictJson | None = None
        self.passive = PassiveJudge()
        self.estimates: dict[str, Estimate] = {}
        self._rows: tuple[tuple[JobSample, ...], list[JobSample]] = ((), [])  # this tick's
        self.refs: PaceRefs | None = None  # stored paces alone (a recording monitor's only)

    def run(self, engine: Engine) -> str:
        self.prepare(engine)
        engine.loop(lambda: False)
        return "finished"  # quitting is how a monitor run ends

    def prepare(self, engine: Engine) -> None:
        """What the judge reads from the store before the first tick: the box's measured peaks,
        and where the monitor records, the stored paces alone."""
        self.passive.peaks = load_peaks(engine.recorder.store_path)
        if engine.recorder.enabled:
            self.refs = PaceRefs(engine.recorder.store_path, lambda: machine_ident(engine.env))

    def close(self, engine: Engine) -> None:
        if self.refs is not None:  # the paces alone read since the last save
            self.refs.save(self.passive.own_pace, engine.recorder, time.time(), force=True)

    def after_tick(self, engine: Engine, now: float, machine: MachineSample) -> None:
        rec = engine.recorder
        if machine.found and not rec.is_open and rec.failure is None:
            if rec.open_monitor(self.command, engine.env, engine.interval):
                engine.say(f"recording session {rec.session_id} (training jobs seen)")
        if self.refs is not None:
            self.refs.lend(self.passive.own_pace, machine.found, now)
        v, self.estimates = self.passive.verdict(machine.found, machine.host,
                                                 machine.gpu_processes, machine.gpus, now)
        if self.refs is not None:
            self.refs.save(self.passive.own_pace, rec, now)
        self.verdict = v.to_json() if v is not None else None
        rows = annotate(machine.found, self.estimates)
        self._rows = (tuple(machine.found), rows)
        rec.found(now, tuple(rows))
        if rec.is_open and self.verdict is not None:
            rec.verdict(self.verdict, now)

    def found_rows(self, engine: Engine, found: list[JobSample]) -> list[JobSample]:
        """The rows with their estimates; the ones after_tick annotated this tick are reused
        (a JobSample copy is ~30 µs, twice per job per tick otherwise)."""
        seen, rows = self._rows
        if len(seen) == len(found) and all(a is b for a, b in zip(seen, found)):
            return list(rows)
        return annotate(found, self.estimates)
