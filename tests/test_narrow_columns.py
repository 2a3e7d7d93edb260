"""At 80 columns the jobs table keeps what a user needs to act (job, slowdown,
waits on, CPU wait, data-wait, CPU, then the rest) and drops from the end; TUI and console."""

from __future__ import annotations

import asyncio
import io

import pytest

pytest.importorskip("textual")

from rich.console import Console  # noqa: E402

from gputop_dl.present.headless import jobs_table  # noqa: E402
from gputop_dl.present.job_columns import RANK, fit, ranked  # noqa: E402
from gputop_dl.present.tui.app import GputopApp  # noqa: E402
from gputop_dl.present.tui.jobs_table import COLUMN_KEYS, JobsTable  # noqa: E402
from gputop_dl.snapshot import JobSample, Snapshot  # noqa: E402

from tests.fakes.source import T0, FakeSource, FixedClock, make_snapshot  # noqa: E402


def found_jobs() -> tuple[JobSample, ...]:
    """Two found jobs with every figure the ranking names known, and more besides."""
    return tuple(JobSample(
        name=n, pid=pid, launched=False, pids=(pid,), status="running", cpu_cores=c,
        stall_fraction=0.31, stall_source="py-spy", step_time_s=0.154, cpu_wait_fraction=w,
        waits_on="cpu", slowdown=s, slowdown_source="estimated", slowdown_confidence=0.8,
        rss=2 ** 30, user="ada", elapsed_s=600.0, cmdline=f"python {n}",
        io_read_bytes_per_s=1000) for n, pid, c, w, s in (("a.py", 101, 1.5, 0.42, 1.6),
                                                           ("b.py", 102, 0.9, 0.3, 1.3)))


def test_the_ranking_drops_from_the_end():
    assert RANK[:6] == ("job", "slowdown", "waitson", "cpuwait", "stall", "cpu")
    assert COLUMN_KEYS == RANK  # the TUI shows its columns in the ranking's order
    assert ranked(["cpu", "job", "zzz", "slowdown"]) == ["job", "slowdown", "cpu", "zzz"]
    cols = [("job", 10), ("slowdown", 5), ("waitson", 5), ("cpu", 5)]
    assert fit(cols, 20) == ["job", "slowdown", "waitson"]
    assert fit(cols, 3) == ["job"]  # the job always stays


async def _settled(width: int, height: int, jobs: tuple[JobSample, ...], read):
    """The monitor at `width` x `height` fed one snapshot of `jobs`, once its jobs table has
    rows and the start-up screen is gone: what `read(table)` returns."""
    src = FakeSource(live=[], spec=None, session_id=None)
    app = GputopApp(src, clock=FixedClock(T0), mode="monitor")
    async with app.run_test(size=(width, height)) as pilot:
        src.emit(make_snapshot(0, jobs=jobs, gpu_processes=()))
        for _ in range(100):
            await pilot.pause()
            table = app.query_one(JobsTable)
            if table.row_count and not app.screen_stack[0].has_class("-starting"):
                break
        await pilot.pause()
        return read(app.query_one(JobsTable))


async def _shown(width: int) -> list[str]:
    return await _settled(width, 24, found_jobs(), lambda t: t.visible_columns())


@pytest.mark.parametrize("width, want", [
    (80, ["job", "slowdown", "waitson", "cpuwait", "stall"]),
    (120, ["job", "slowdown", "waitson", "cpuwait", "stall", "cpu", "step", "status"]),
])
def test_tui_jobs_table_at_80_and_120_columns(width, want):
    shown = asyncio.run(_shown(width))
    assert shown == want if width == 80 else shown[:len(want)] == want


def _header(width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(jobs_table(Snapshot(time=0.0, gpu_status="ok", jobs=found_jobs()), width))
    return console.file.getvalue().splitlines()[0]


def test_once_table_at_80_and_120_columns_keeps_the_ranked_columns():
    narrow, wide = _header(80), _header(120)
    assert len(narrow) <= 80 and len(wide) <= 120
    labels = ["job", "slowdown", "waits on", "CPU wait", "data-wait", "CPU cores"]
    for head in (narrow, wide):
        pos = [head.find(x) for x in labels if x in head]
        assert pos == sorted(pos)  # in the ranking's order
    assert all(x in narrow for x in labels[:5]) and "elapsed" not in narrow
    assert all(x in wide for x in labels) and "step" in wide and "status" in wide


def _long_named() -> tuple[JobSample, ...]:
    """Three copies of one script told apart by their last argument (collect/jobs/found.py)."""
    return tuple(JobSample(name=f"calibrated.py {arg}", pid=pid, launched=False, pids=(pid,),
                           status="running", cpu_cores=0.5, cpu_wait_fraction=0.1,
                           slowdown=1.0, slowdown_source="estimated", user="ada",
                           cmdline=f"/opt/venv/bin/python /home/ada/exp/calibrated.py {arg}")
                 for arg, pid in (("--compute-ms 60", 101), ("--compute-ms 50", 102),
                                  ("--sample-io-ms 2", 103)))


async def _lines(width: int) -> tuple[list[str], list[str]]:
    return await _settled(width, 30, _long_named(), lambda t: (
        [t.render_line(y).text for y in range(1, 4)], t.visible_columns()))


@pytest.mark.parametrize("width", [160, 100])
def test_names_that_differ_at_their_end_are_shown_whole(width):
    """The job column takes the spare width its longest name needs, before the command; where
    the screen has not got it, the command (its cell cut to nothing useful) gives it up."""
    rows, shown = asyncio.run(_lines(width))
    for row, job in zip(rows, _long_named()):
        assert f"  {job.name} " in row
    assert ("command" in shown) == (width == 160)


@pytest.mark.parametrize("width", [None, 120])
def test_once_table_shows_names_that_differ_at_their_end_whole(width):
    """`--once` prints its table once: the job column takes the room its names need (the live
    headless table keeps its widths, so that a name that comes does not shift the columns)."""
    console = Console(width=width or 200, file=io.StringIO(), color_system=None)
    console.print(jobs_table(Snapshot(time=0.0, gpu_status="ok", jobs=_long_named()), width,
                             fit_names=True))
    lines = console.file.getvalue().splitlines()
    for line, job in zip(lines[1:], _long_named()):
        assert line.startswith(job.name + " ")
    assert max(len(x) for x in lines) <= (width or 200)


def test_the_job_column_narrows_only_after_its_long_name_is_gone_a_while():
    """A long-named job that comes and goes widens the column at once; it narrows again only
    once no row has needed the width for GROW_HOLD_S (each change lays the table out again)."""
    now = [1000.0]
    long = _long_named()[:1]
    short = (JobSample(name="a.py", pid=7, launched=False, pids=(7,), status="running", cpu_cores=0.5),)

    async def go() -> list[int]:
        src = FakeSource(live=[], spec=None, session_id=None)
        app = GputopApp(src, clock=FixedClock(T0), mode="monitor")
        widths = []
        async with app.run_test(size=(160, 30)) as pilot:
            table = app.query_one(JobsTable)
            table.clock = lambda: now[0]
            for dt, jobs in ((0, short + long), (5, short), (20, short), (31, short)):
                now[0] = 1000.0 + dt
                src.emit(make_snapshot(dt, jobs=jobs, gpu_processes=()))
                for _ in range(20):
                    await pilot.pause()
                table.render_line(0)
                widths.append(table._widths[0])
        return widths

    widths = asyncio.run(go())
    assert widths[0] == widths[1] == widths[2] > widths[3] == 26  # held 30 s, then the default


def test_a_column_a_row_filled_stays_when_its_value_is_gone():
    """A found job's step time (py-spy) read once, then not read by a later burst: the column
    stays with "–" in it (it came and went with each burst before); it is left out again only
    when no row is shown."""
    def job(step: float | None) -> tuple[JobSample, ...]:
        return (JobSample(name="a.py", pid=7, launched=False, pids=(7,), status="running",
                          cpu_cores=0.5, step_time_s=step,
                          step_time_note=None if step else "its step phases are too short"),)

    async def go() -> list[bool]:
        src = FakeSource(live=[], spec=None, session_id=None)
        app = GputopApp(src, clock=FixedClock(T0), mode="monitor")
        shown = []
        async with app.run_test(size=(160, 30)) as pilot:
            for dt, jobs in ((0, job(None)), (1, job(1.1)), (2, job(None)), (3, ())):
                src.emit(make_snapshot(dt, jobs=jobs, gpu_processes=()))
                for _ in range(20):
                    await pilot.pause()
                table = app.query_one(JobsTable)
                table.render_line(0)
                shown.append("step" in table.visible_columns())
        return shown

    assert asyncio.run(go()) == [False, True, True, False]
