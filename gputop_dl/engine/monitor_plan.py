"""The monitor's plan: watch this machine; from the first training job found, record a session."""

from __future__ import annotations

from gputop_dl.engine.plan import Plan


class MonitorPlan(Plan):
    """`gputop-dl`: no jobs of its own; found jobs are sampled with py-spy and recorded."""

    kind = "monitor"
    stall_found = True

    def __init__(self, command: str = "gputop-dl"):
        self.command = command

    def run(self, engine) -> str:
        engine.loop(lambda: False)
        return "finished"  # quitting is how a monitor run ends

    def after_tick(self, engine, now: float, machine) -> None:
        rec = engine.recorder
        if machine.found and not rec.is_open and rec.failure is None:
            if rec.open_monitor(self.command, engine.env, engine.interval):
                engine.say(f"recording session {rec.session_id} (training jobs seen)")
        rec.found(now, machine.found)
