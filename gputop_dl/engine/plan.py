"""What a session starts and when: the plan the engine runs, one kind per mode.

The engine owns the tick (sample -> poll launched jobs -> record -> publish), its commands and
subscribers; a plan decides everything that differs between modes. `MonitorPlan`
(monitor_plan.py) only watches and records found jobs; `LaunchPlan` (launch_plan.py) runs solo
baselines, then the co-run behind a start barrier, and judges it. A new mode (an in-situ probe,
`diagnose`, a job queue) is a new plan, not a branch in the engine.

The engine calls, in its own thread:

    state = plan.run(engine)        # drives the session with engine.loop(done); returns its
                                    # final state ("finished" or "interrupted")
    plan.rows(engine, launched)     # each tick: the launched rows to show, in order (+ waiting)
    plan.found_rows(engine, found)  # each tick: the found jobs' rows (with their live estimate)
    plan.taken(engine)              # names a found job may not use
    plan.after_tick(engine, now, m) # each tick, after the launched jobs were polled
    plan.notes()                    # standing notes for the snapshot
    plan.queue_state()              # a job queue's jobs, times and reasons (None: no queue)
    plan.close(engine)              # at the end, before the jobs are stopped
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from gputop_dl.snapshot import JobSample


class Plan(ABC):
    """Base plan: no jobs of its own, nothing to judge."""

    kind = "plan"
    spec = None  # the SessionSpec a launch runs (the UI shows its name and workloads)
    stall_found = False  # py-spy bursts on found jobs (only the monitor: a co-run is not disturbed)
    verdict: dict | None = None

    def shown_verdict(self) -> dict | None:
        """The verdict the live view shows this tick (the recorded one is `verdict`)."""
        return self.verdict

    @abstractmethod
    def run(self, engine) -> str:
        """Drive the session (in the engine thread); return its final state."""

    def rows(self, engine, launched: list[JobSample]) -> list[JobSample]:
        return launched

    def found_rows(self, engine, found: list[JobSample]) -> list[JobSample]:
        return found

    def taken(self, engine) -> set[str]:
        return set(engine.runs)

    def after_tick(self, engine, now: float, machine) -> None:
        return None

    def notes(self) -> tuple[str, ...]:
        return ()

    def queue_state(self) -> dict | None:
        return None

    def close(self, engine) -> None:
        """The session ends (normally, interrupted or on an error): before the jobs are
        stopped, undo anything the plan holds (paused jobs)."""
        return None
