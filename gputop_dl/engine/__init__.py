"""The session engine: a tick loop (core.py) that runs a plan (monitor, launch) and records it."""

from typing import TYPE_CHECKING

from gputop_dl.engine.core import Engine
from gputop_dl.engine.monitor_plan import MonitorPlan
from gputop_dl.engine.recorder import Recorder

if TYPE_CHECKING:
    from gputop_dl.engine.launch_plan import LaunchPlan

__all__ = ["Engine", "LaunchPlan", "MonitorPlan", "Recorder"]


def __getattr__(name: str) -> object:
    """`LaunchPlan` on first use: the monitor's start-up does not import a launch's analysis."""
    if name == "LaunchPlan":
        from gputop_dl.engine.launch_plan import LaunchPlan

        return LaunchPlan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
