"""The monitor's banner shows the live verdict of the jobs found running (Pilot, fake source)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("textual")

from gputop_dl.analyse.passive import PassiveJudge, annotate  # noqa: E402
from gputop_dl.snapshot import JobSample  # noqa: E402

from tests.fakes.source import monitor_app, monitor_snapshot  # noqa: E402


def found(name, pid, f):
    return JobSample(name=name, pid=pid, launched=False, pids=(pid,), cpu_cores=0.66,
                     cpu_wait_fraction=f)


def test_monitor_banner_shows_the_live_verdict_and_the_estimates():
    jobs = [found("train_a.py", 501, 0.66), found("train_b.py", 502, 0.66)]
    snap = monitor_snapshot()
    judge = PassiveJudge()
    for t in range(3):
        v, est = judge.verdict(jobs, snap.host, t=float(t))
    snap = monitor_snapshot(jobs=tuple(annotate(jobs, est)), verdict=v.to_json())

    async def go():
        app, src = monitor_app()
        async with app.run_test(size=(160, 50)) as pilot:
            src.emit(snap)
            await pilot.pause()
            return str(app.query_one("#banner").render())

    banner = asyncio.run(go())
    assert "CPU-BOUND" in banner and "live estimate, nothing paused" in banner
    assert "waits for a CPU" in banner
