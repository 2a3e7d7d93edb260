"""The co-run's start barrier: which jobs wait for the go file, and when it is created.

The built-in trainers build their model and data, say "started", and wait for the go file; a
script under the start-up hook says "ready" at its main loader's first pass and waits too. So
the co-run's first steps really run together (a job whose imports took 5 s longer would
otherwise run its first steps alone; seen in CI: one of three scripts ended before the others
were past their warm-up). A command without the hook (GPUTOP_DL_HOOK = "0", a program that is
not Python runs the same way) cannot wait and is not waited for; one job alone waits for nobody
(a script's own clock of its first epoch would count the wait: seen as a stall 0.05 below the
hook's). A script that has not reached a DataLoader pass after GO_WAIT_S is not waited for any
longer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gputop_dl.control.launch import hooked
from gputop_dl.engine.jobrun import JobRun
from gputop_dl.record.paths import create_private
from gputop_dl.workload import Workload

if TYPE_CHECKING:
    from gputop_dl.engine.core import Engine


GO_WAIT_S = 30.0  # the start barrier waits this long for a script to reach a DataLoader pass


def barrier_jobs(workloads: Sequence[Workload]) -> set[str]:
    """The co-run jobs that wait for the go file (built-in trainers and scripts under the
    start-up hook); none when fewer than two would."""
    waits = {w.name for w in workloads if not w.is_command or hooked(w)}
    return waits if len(waits) >= 2 else set()


def go_now(engine: Engine, go: str, t0: float, waits: set[str]) -> None:
    """Create the go file once every co-run job of `waits` (those that wait for it: built-in
    trainers and scripts under the start-up hook) is ready or ended, or once the only ones
    not ready are scripts that have not reached a DataLoader pass in GO_WAIT_S (one that does
    not iterate a DataLoader never will); say which."""
    waiting = [r for r in engine.runs.values()
               if r.name in waits and r.alive and not (r.info or r.ready)]
    took = time.time() - t0
    if waiting and (took < GO_WAIT_S or not all(r.w.is_command for r in waiting)):
        at_barrier(engine, waits, waiting)
        return
    create_private(go)
    for r in engine.runs.values():
        if r.status == "ready":
            r.status = "running"
    if not waiting:
        engine.say(f"co-run: all jobs ready after {took:.1f} s: go")
        return
    names = ", ".join(r.name for r in waiting)
    one = len(waiting) == 1
    engine.say(f"co-run: {names} {'has' if one else 'have'} not reached a DataLoader pass "
               f"after {took:.0f} s: go without waiting for {'it' if one else 'them'}")


def at_barrier(engine: Engine, waits: set[str], waiting: list[JobRun]) -> None:
    """Each job of `waits` that is ready (a trainer that said "started", a script that said
    "ready") and still held at the barrier gets status "ready", said once in the log with the
    jobs it waits for (`waiting`)."""
    names = ", ".join(w.name for w in waiting)
    for r in engine.runs.values():
        if r.name in waits and r.alive and r.status == "running" and (r.info or r.ready):
            r.status = "ready"
            engine.say(f"co-run: {r.name} is ready; it waits for {names} before its first step")
