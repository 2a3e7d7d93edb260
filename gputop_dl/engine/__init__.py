"""The session engine: a tick loop (core.py) that runs a plan (monitor, launch) and records it."""

from gputop_dl.engine.core import Engine
from gputop_dl.engine.launch_plan import LaunchPlan
from gputop_dl.engine.monitor_plan import MonitorPlan
from gputop_dl.engine.recorder import Recorder

__all__ = ["Engine", "LaunchPlan", "MonitorPlan", "Recorder"]
