"""The queue panel in the TUI (Pilot, fake source): counts, each waiting job's wait and reason, hidden without a queue."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("textual")

from gputop_dl.present.tui.app import GputopApp  # noqa: E402
from gputop_dl.present.tui.queue_panel import QueuePanel  # noqa: E402

from tests.fakes.source import SPEC, T0, FakeSource, FixedClock, make_snapshot, queue_snapshot


def run(snaps, check):
    async def go():
        src = FakeSource(spec=SPEC)
        app = GputopApp(src, clock=FixedClock(T0), mode="launch")
        async with app.run_test(size=(160, 50)) as pilot:
            for s in snaps:
                src.emit(s)
                await pilot.pause()
            await pilot.pause()
            check(app)

    asyncio.run(go())


def test_queue_panel_shows_waiting_jobs_with_wait_and_reason():
    def check(app):
        panel = app.query_one(QueuePanel)
        assert panel.display and app.screen.has_class("-queue")
        text = str(panel.render())
        lines = text.splitlines()
        assert lines[0] == "2 running · 2 waiting · 1 to arrive · 1 ended"
        assert lines[1].split() == ["bs128", "39.0", "s", "GPUs", "2,", "3", "free,", "but", "1.8", "cores",
                                    "short"]
        assert lines[2].startswith("resnet50") and "24.0 s" in lines[2] and "behind bs128" in lines[2]
        assert lines[3].split() == ["late", "arrives", "in", "76.0", "s"]
        assert panel.border_subtitle == "fifo · 4 GPUs · CPU-aware, 16 cores"

    run([queue_snapshot(0), queue_snapshot(2)], check)


def test_no_queue_panel_in_a_plain_launch():
    def check(app):
        assert not app.screen.has_class("-queue")
        assert not app.query_one(QueuePanel).display

    run([make_snapshot(0)], check)
