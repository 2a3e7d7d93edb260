"""A job's step phases as values: mean seconds per phase, each rank's, and the late rank's cause.

Carried by a job's row (`JobSample.phases`, `ranks`, `straggler`: snapshot.py); made from the
steps' phase figures by analyse/stats/phases.py (docs/phases.md), drawn by
present/tui/phase_bar.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepPhases:
    """Mean seconds per step by phase (analyse/stats/phases.py; None: the phase was not seen), over
    the job's steps after warm-up (co-run: its window); `cls` input-bound | compute-bound, or
    None below the minimum number of steps; `solo`: the same from its solo baseline."""

    data_s: float | None
    h2d_s: float | None
    forward_s: float | None
    backward_s: float | None
    optimizer_s: float | None
    other_s: float | None
    steps: int = 0
    cls: str | None = None
    solo: StepPhases | None = None

    def parts(self) -> dict[str, float | None]:
        return {"data": self.data_s, "h2d": self.h2d_s, "forward": self.forward_s,
                "backward": self.backward_s, "optimizer": self.optimizer_s, "other": self.other_s}


@dataclass(frozen=True)
class RankPhases:
    """One rank of a distributed job: its median step and its phases."""

    rank: int
    step_time_s: float | None
    phases: StepPhases | None


@dataclass(frozen=True)
class Straggler:
    """The late rank of a distributed job and the phase that makes it late."""

    rank: int
    cause: str  # data | h2d | forward | backward
    excess_s: float  # its own work (data + h2d + forward) over the other ranks' median
