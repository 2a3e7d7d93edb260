"""A stuck job in the TUI through Textual's Pilot, fed by a fake source: it stands out in the
jobs table, heads the banner before the verdict, is told once with the bell (off with b), and
its details say where, the evidence and the fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("textual")

from gputop_dl.present.tui.jobs_table import JobsTable  # noqa: E402
from gputop_dl.present.tui.screens import JobDetailScreen  # noqa: E402
from gputop_dl.stuck import Stuck  # noqa: E402
from tests.fakes.source import make_snapshot  # noqa: E402
from tests.test_tui import aio, body_text, cell, feed, messages, new_app, wait_for  # noqa: E402

SIZE = (200, 50)
ST = Stuck(since=0.0, for_s=245.0, threshold_s=60.0, where="dataloader", frame="train.py:42 train",
           stack=("dataloader.py:1295 _next_data", "train.py:42 train"), pid=4242,
           worker_pid=4343, worker_frame="ds.py:9 __getitem__ (time.sleep(3600))", quiet_s=30.0,
           cpu_cores_max=0.01, states="S S", dumps=3, stack_same_s=30.0, progress="steps")


def stuck(snap, name="bs32"):
    return replace(snap, jobs=tuple(replace(j, status="stuck", stuck=ST) if j.name == name else j
                                    for j in snap.jobs))


@aio
async def test_a_stuck_job_stands_out_heads_the_banner_and_is_told_once():
    app, src = new_app()
    bells = []
    app.bell = lambda: bells.append(1)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        table = app.query_one(JobsTable)
        await feed(pilot, src, stuck(make_snapshot(1)), stuck(make_snapshot(2)))
        assert await wait_for(pilot, lambda: cell(table, "job:0:bs32", "status").startswith("STUCK"))
        banner = str(app.query_one("#banner").render())
        assert banner.startswith("STUCK") and "bs32 is stuck" in banner and "DataLoader" in banner
        told = [m for m in messages(app) if "bs32 is stuck" in m]
        failed = [m for m in messages(app) if "bs128 failed" in m]  # the fake's failed job
        # two stuck snapshots, three with the failed job: one notice and one bell each
        assert len(told) == 1 and len(failed) == 1 and bells == [1, 1]
        await pilot.press("enter")  # the cursor's row: bs32
        assert isinstance(app.screen, JobDetailScreen)
        body = body_text(app.screen)
        assert "worker 4343" in body and "timeout=600" in body and "train.py:42 train" in body


@aio
async def test_the_bell_is_off_with_b():
    app, src = new_app()
    bells = []
    app.bell = lambda: bells.append(1)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("b")
        await feed(pilot, src, make_snapshot(0), stuck(make_snapshot(1)))
        assert await wait_for(pilot, lambda: any("bs32 is stuck" in m for m in messages(app)))
        assert bells == [] and not app.bell_on
