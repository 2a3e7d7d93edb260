"""The monitor's first screen: drawn before anything is read, every panel saying what it waits
for (its `waits_for`), then filled; and a jobs table that, with nothing found, says where the
search looked and what it could not read (`Snapshot.search`)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest

from gputop_dl.snapshot import GPU_STATUS_STARTING, JobSearch

from tests.fakes.source import T0, FakeSource, FixedClock, monitor_snapshot

pytest.importorskip("textual")

from gputop_dl.present.tui.app import GputopApp  # noqa: E402
from gputop_dl.present.tui.jobs_table import nothing_found  # noqa: E402

SIZE = (160, 50)
WAIT = 30.0  # bounds a broken app only: every wait below ends on an event


class FrameSource(FakeSource):
    """A fake source that hands the app nothing until told, and hears its first frame."""

    def __init__(self) -> None:
        super().__init__(session_id=None)
        self.shown = threading.Event()

    def first_frame(self) -> None:
        self.shown.set()


async def until(pilot, cond) -> None:
    for _ in range(int(WAIT / 0.02)):
        if cond():
            return
        await pilot.pause(0.02)
    raise AssertionError("not within the wait")


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, WAIT))


def first_frame_done(app: GputopApp) -> bool:
    return not app.screen_stack[0].has_class("-starting")


def monitor(src: FakeSource) -> GputopApp:
    return GputopApp(src, clock=FixedClock(T0), mode="monitor")


async def first_frame(pilot, app: GputopApp, src: FrameSource) -> None:
    """Until the app's first frame is on screen and it told its source so."""
    await until(pilot, lambda: src.shown.is_set() and first_frame_done(app))


def test_the_first_frame_comes_before_any_reading_and_every_panel_says_what_it_waits_for():
    src = FrameSource()

    async def go() -> None:
        app = monitor(src)
        async with app.run_test(size=SIZE) as pilot:
            await first_frame(pilot, app, src)
            assert app.primary is None and app.renders == 0  # no snapshot came: nothing read
            host, gpuline, table = app.query_one("#host"), app.query_one("#gpuline"), app.table
            assert host.waits_for == "host" and host.plain().strip()
            assert gpuline.waits_for == "gpus" and gpuline.display and str(gpuline.render()).strip()
            assert table.waits_for == "jobs" and table.display and table.row_count == 0
            assert any(line.strip() for line in table.empty_wrapped(table.size.width))
            assert str(app.query_one("#banner").render()).strip()

    run(go())


def test_the_hosts_first_reading_fills_its_panel_while_gpus_and_jobs_still_wait():
    src = FrameSource()

    async def go() -> None:
        app = monitor(src)
        async with app.run_test(size=SIZE) as pilot:
            await first_frame(pilot, app, src)
            src.emit(replace(monitor_snapshot(0), gpu_status=GPU_STATUS_STARTING))  # the preview
            await until(pilot, lambda: app.primary is not None)
            assert app.query_one("#host").waits_for is None
            assert app.query_one("#gpuline").waits_for == "gpus"
            assert app.table.waits_for == "jobs"
            src.emit(monitor_snapshot(1))  # the engine's first tick: GPUs read, no job
            await until(pilot, lambda: app.table.waits_for is None)
            assert app.query_one("#gpuline").waits_for is None

    run(go())


def test_nothing_found_says_where_the_search_looked_and_what_it_could_not_read():
    src = FrameSource()
    search = JobSearch(processes=412, unreadable=57, python_not_jobs=3)

    async def go() -> None:
        app = monitor(src)
        async with app.run_test(size=SIZE) as pilot:
            src.emit(monitor_snapshot(1, search=search))
            await until(pilot, lambda: app.primary is not None and first_frame_done(app))
            await pilot.pause()
            table = app.table
            assert table.row_count == 0 and table.waits_for is None
            assert table.looked_at == search
            said = table.empty_wrapped(table.size.width)
            text = " ".join(said)
            assert all(str(n) in text for n in (412, 57, 3))
            # every line of it fits in the table: header and borders around it
            assert table.size.height >= len(said) + 1

    run(go())


def test_nothing_found_as_root_or_without_a_search_claims_nothing_it_did_not_see():
    root = nothing_found(JobSearch(processes=300, unreadable=0, python_not_jobs=0))
    others = nothing_found(JobSearch(processes=300, unreadable=12, python_not_jobs=0))
    assert len(root) == 1 and "300" in root[0]
    assert len(others) == 2 and "12" in others[1]  # what it could not read, on a line of its own
    assert len(nothing_found(None)) == 1 and nothing_found(None)[0].strip()
    # root, beside a process no one may read: said apart, with no advice to use sudo
    init = nothing_found(JobSearch(processes=300, unreadable=0, python_not_jobs=0, protected=1))
    assert len(init) == 2 and "1" in init[1] and "sudo" not in " ".join(init)


def test_a_job_found_replaces_the_nothing_found_lines():
    from tests.fakes.source import found_jobs_snapshot

    src = FrameSource()

    async def go() -> None:
        app = monitor(src)
        async with app.run_test(size=SIZE) as pilot:
            src.emit(monitor_snapshot(1, search=JobSearch(200, 0, 0)))
            await until(pilot, lambda: app.table.looked_at is not None)
            src.emit(found_jobs_snapshot(2))
            table = app.table
            await until(pilot, lambda: table.row_count > 0)
            assert table.looked_at is None and table.waits_for is None

    run(go())
