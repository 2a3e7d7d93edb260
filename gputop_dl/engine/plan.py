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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from gputop_dl.analyse.verdict_types import VerdictJson as VerdictJson  # the plans' name for it
from gputop_dl.snapshot import JobSample
from gputop_dl.workload import SessionSpec

if TYPE_CHECKING:
    from gputop_dl.collect.machine import MachineSample
# a job queue's state for the live view (`QueuePlan.queue_state`, Snapshot.queue): JSON-shaped
QueueJson = dict[str, Any]


class Runs(Protocol):
    """What the base plan reads of the engine that drives it."""

    @property
    def runs(self) -> Mapping[str, Any]: ...


E = TypeVar("E", bound=Runs)


class Plan(ABC, Generic[E]):
    """Base plan: no jobs of its own, nothing to judge. Generic in the engine that drives it
    (`Plan[Engine]`), so that this module needs no import of the engine's (engine/core.py
    imports this one)."""

    kind = "plan"
    spec: SessionSpec | None = None  # the SessionSpec a launch runs (the UI shows its name and workloads)
    stall_found = False  # py-spy bursts on found jobs (only the monitor: a co-run is not disturbed)
    verdict: VerdictJson | None = None

    def shown_verdict(self) -> VerdictJson | None:
        """The verdict the live view shows this tick (the recorded one is `verdict`)."""
        return self.verdict

    @abstractmethod
    def run(self, engine: E) -> str:
        """Drive the session (in the engine thread); return its final state."""

    def rows(self, engine: E, launched: list[JobSample]) -> list[JobSample]:
        return launched

    def found_rows(self, engine: E, found: list[JobSample]) -> list[JobSample]:
        return found

    def taken(self, engine: E) -> set[str]:
        return set(engine.runs)

    def after_tick(self, engine: E, now: float, machine: MachineSample) -> None:
        return None

    def notes(self) -> tuple[str, ...]:
        return ()

    def queue_state(self) -> QueueJson | None:
        return None

    def close(self, engine: E) -> None:
        """The session ends (normally, interrupted or on an error): before the jobs are
        stopped, undo anything the plan holds (paused jobs)."""
        return None
