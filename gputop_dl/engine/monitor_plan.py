"""The monitor's plan: watch this machine; from the first training job found, record a session.

Every tick the found jobs are judged live (analyse/passive.py): each job's slowdown estimated
from its CPU and GPU waits, and the set's verdict, with no baseline and no job paused.
"""

from __future__ import annotations

from gputop_dl.analyse.passive import Estimate, PassiveJudge, annotate
from gputop_dl.engine.plan import Plan
from gputop_dl.snapshot import JobSample


class MonitorPlan(Plan):
    """`gputop-dl`: no jobs of its own; found jobs are sampled with py-spy and recorded."""

    kind = "monitor"
    stall_found = True

    def __init__(self, command: str = "gputop-dl"):
        self.command = command
        self.verdict: dict | None = None
        self.passive = PassiveJudge()
        self.estimates: dict[str, Estimate] = {}

    def run(self, engine) -> str:
        engine.loop(lambda: False)
        return "finished"  # quitting is how a monitor run ends

    def after_tick(self, engine, now: float, machine) -> None:
        rec = engine.recorder
        if machine.found and not rec.is_open and rec.failure is None:
            if rec.open_monitor(self.command, engine.env, engine.interval):
                engine.say(f"recording session {rec.session_id} (training jobs seen)")
        v, self.estimates = self.passive.verdict(machine.found, machine.host,
                                                 machine.gpu_processes, machine.gpus, now)
        self.verdict = v.to_json() if v is not None else None
        rec.found(now, tuple(self.found_rows(engine, list(machine.found))))
        if rec.is_open and self.verdict is not None:
            rec.verdict(self.verdict)

    def found_rows(self, engine, found: list[JobSample]) -> list[JobSample]:
        return annotate(found, self.estimates)
