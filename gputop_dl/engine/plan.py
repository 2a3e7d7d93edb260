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
from typing import TYPE_CHECKING, Any

from gputop_dl.snapshot import JobSample
from gputop_dl.workload import SessionSpec

if TYPE_CHECKING:
    from gputop_dl.collect.machine import MachineSample
    from gputop_dl.engine.core import Engine

# A verdict as JSON (analyse's `Verdict.to_json()`): the document that is recorded, exported and
# shown; its shape is the schema gputop-dl.verdict/1 (gputop_dl/schemas), not a Python type
VerdictJson = dict[str, Any]
# a job queue's state for the live view (`QueuePlan.queue_state`, Snapshot.queue): JSON-shaped
QueueJson = dict[str, Any]


class Plan(ABC):
    """Base plan: no jobs of its own, nothing to judge."""

    kind = "plan"
    spec: SessionSpec | None = None  # the SessionSpec a launch runs (the UI shows its name and workloads)
    stall_found = False  # py-spy bursts on found jobs (only the monitor: a co-run is not disturbed)
    verdict: VerdictJson | None = None

    def shown_verdict(self) -> VerdictJson | None:
        """The verdict the live view shows this tick (the recorded one is `verdict`)."""
        return self.verdict

    @abstractmethod
    def run(self, engine: Engine) -> str:
        """Drive the session (in the engine thread); return its final state."""

    def rows(self, engine: Engine, launched: list[JobSample]) -> list[JobSample]:
        return launched

    def found_rows(self, engine: Engine, found: list[JobSample]) -> list[JobSample]:
        return found

    def taken(self, engine: Engine) -> set[str]:
        return set(engine.runs)

    def after_tick(self, engine: Engine, now: float, machine: MachineSample) -> None:
        return None

    def notes(self) -> tuple[str, ...]:
        return ()

    def queue_state(self) -> QueueJson | None:
        return None

    def close(self, engine: Engine) -> None:
        """The session ends (normally, interrupted or on an error): before the jobs are
        stopped, undo anything the plan holds (paused jobs)."""
        return None
