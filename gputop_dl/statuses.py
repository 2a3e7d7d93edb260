"""The status words a snapshot carries that the monitor's first frame needs: no dataclass here.

`gputop_dl.snapshot` builds a dozen dataclasses when imported (~15 ms), after the first frame
(runner/deferred.py); the TUI's modules compare against these words before that, so they live
here and `snapshot` re-exports them.
"""

from __future__ import annotations

# `gpu_status` of the monitor's first frame (runner/deferred.py): only the host was read yet;
# never recorded, served or printed
GPU_STATUS_STARTING = "starting"
# a job's statuses while it lives: "ready" is a launched job at the co-run's start barrier
# (it said ready and waits for the others), "waiting" a queued job not started yet, "stuck" a
# live job that stopped making progress and sleeps in one place (analyse/live/stuck.py)
LIVE_STATUSES = ("running", "starting", "ready", "waiting", "paused", "stuck")
