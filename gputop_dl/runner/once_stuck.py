"""`--once`'s stuck call: no history, so it judges over its own window and says how long.

A job whose readings over `--once`'s sampling second show it asleep (no CPU to speak of, no
process running or in D, no reads, no loader batches) has its stacks dumped twice, `DUMP_GAP_S`
apart (collect/pyspy/dump.py, non-blocking); the same main stack at both ends makes it stuck
over that window (analyse/live/stuck.py `judge_window`), with `window_s` saying how many seconds it
was watched. A job that moves, computes or reads is never dumped, so a busy box costs nothing.
"""

from __future__ import annotations

import dataclasses
import time

from gputop_dl.analyse.live.stuck import Dump, judge_window, look_of
from gputop_dl.collect.pyspy.dump import dump_stacks
from gputop_dl.engine.stuck_watch import dump_job, targets
from gputop_dl.snapshot import JobSample, Snapshot, evolve

DUMP_GAP_S = 2.0  # seconds between the two dumps of a job that looks asleep


def _dump(j: JobSample, t: float) -> Dump:
    return dump_job(dump_stacks, *targets(j), t)[0]


def stuck_once(snap: Snapshot, window_start: float, gap_s: float = DUMP_GAP_S) -> Snapshot:
    """`snap` with its asleep jobs judged over [window_start, now + gap_s]; `window_start`: the
    wall time `--once` began sampling."""
    looks = {j.pid: look_of(j, snap.time) for j in snap.jobs
             if j.pid is not None and j.status == "running"}
    asleep = [j for j in snap.jobs if j.pid in looks and looks[j.pid].idle()]
    if not asleep:
        return snap
    first = {j.pid: _dump(j, time.time()) for j in asleep}
    time.sleep(gap_s)
    out = []
    for j in snap.jobs:
        a = first.get(j.pid)
        if a is not None and j.pid is not None:
            b = _dump(j, time.time())
            lk = looks[j.pid]
            began = dataclasses.replace(lk, t=window_start)
            st = judge_window(began, lk, [lk], dataclasses.replace(a, t=window_start), b)
            if st is not None:
                j = evolve(j, status="stuck", stuck=st)
        out.append(j)
    return evolve(snap, jobs=tuple(out))
