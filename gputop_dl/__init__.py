"""gputop-dl: a terminal monitor and profiler for deep-learning training."""

__version__ = "0.1.0"
