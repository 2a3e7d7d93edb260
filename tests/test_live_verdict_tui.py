"""The monitor's banner shows the live verdict of the jobs found running (Pilot, fake source)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("textual")

from gputop_dl.analyse.live.passive import PassiveJudge, annotate  # noqa: E402
from gputop_dl.snapshot import JobSample  # noqa: E402

from tests.fakes.source import monitor_app, monitor_snapshot  # noqa: E402


def found(name, pid, f):
    return JobSample(name=name, pid=pid, launched=False, pids=(pid,), cpu_cores=0.66,
                     cpu_wait_fraction=f)


def on_screen(snap, then):
    """The monitor app (fake source) showing `snap`: what `then(app, pilot)` returns."""
    async def go():
        app, src = monitor_app()
        async with app.run_test(size=(160, 50)) as pilot:
            src.emit(snap)
            await pilot.pause()
            return await then(app, pilot)

    return asyncio.run(go())


def test_monitor_banner_shows_the_live_verdict_and_the_estimates():
    jobs = [found("train_a.py", 501, 0.66), found("train_b.py", 502, 0.66)]
    snap = monitor_snapshot()
    judge = PassiveJudge()
    for t in range(3):
        v, est = judge.verdict(jobs, snap.host, t=float(t))
    snap = monitor_snapshot(jobs=tuple(annotate(jobs, est)), verdict=v.to_json())

    async def banner_text(app, pilot):
        return str(app.query_one("#banner").render())

    banner = on_screen(snap, banner_text)
    assert "CPU-BOUND" in banner and "live estimate, nothing paused" in banner
    assert "waits for a CPU" in banner


def test_v_opens_the_verdict_the_header_shows_and_follows_it():
    """The header said CONCURRENT · CPU-BOUND while `v` answered "no verdict yet
    (phase: monitor only)". The dialog now shows the monitor's live verdict and follows it."""
    from gputop_dl.present.tui.screens import VerdictScreen

    snap = monitor_snapshot()
    judge = PassiveJudge()
    starved = [found("train_a.py", 501, 0.66), found("train_b.py", 502, 0.66)]
    for t in range(3):
        v1, est = judge.verdict(starved, snap.host, t=float(t))
    first = monitor_snapshot(jobs=tuple(annotate(starved, est)), verdict=v1.to_json())
    calm = [found("train_a.py", 501, 0.0), found("train_b.py", 502, 0.0)]
    for t in range(3, 9):
        v2, est = judge.verdict(calm, snap.host, t=float(t))
    later = monitor_snapshot(jobs=tuple(annotate(calm, est)), verdict=v2.to_json())
    assert v1.kind == "cpu-bound" and v2.kind == "parallel"

    async def go():
        app, src = monitor_app()
        async with app.run_test(size=(160, 50)) as pilot:
            src.emit(first)
            await pilot.pause()
            await pilot.press("v")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, VerdictScreen)
            before = str(screen.query_one("#body").render())
            src.emit(later)
            await pilot.pause()
            screen.refresh_verdict()  # what its 1-second timer does
            await pilot.pause()
            return before, str(screen.query_one("#body").render())

    before, after = asyncio.run(go())
    assert "concurrent: CPU-bound" in before and "waits for a CPU" in before
    assert "truly parallel" in after and "Recommendations" in after


def test_monitor_banner_says_one_job_runs_alone():
    """One job found, nothing else training: no TRULY PARALLEL."""
    jobs = [found("train_a.py", 501, 0.05)]
    snap = monitor_snapshot()
    judge = PassiveJudge()
    for t in range(3):
        v, est = judge.verdict(jobs, snap.host, t=float(t))
    snap = monitor_snapshot(jobs=tuple(annotate(jobs, est)), verdict=v.to_json())

    async def banner_text(app, pilot):
        banner = app.query_one("#banner")
        return str(banner.render()), banner.has_class("-good")

    text, good = on_screen(snap, banner_text)
    assert "ONE JOB · ALONE" in text and "TRULY PARALLEL" not in text and not good
    assert "train_a.py runs alone" in text
    assert "a second job like it fits beside it" in text


def test_a_bound_without_a_slowdown_shows_in_the_table_and_the_details():
    """A found job with no slowdown but its pace's bound: its row's cell and its details say
    "≥36× pace" and what read it, not "–"."""
    from gputop_dl.present.tui.jobs_table import JobsTable
    from gputop_dl.present.tui.screens import JobDetailScreen
    from tests.test_own_pace import bound_without_an_estimate

    (v, est), jobs = bound_without_an_estimate()
    snap = monitor_snapshot(jobs=tuple(annotate(jobs, est)), verdict=v.to_json())

    async def row_and_details(app, pilot):
        table = app.query_one(JobsTable)
        cell = table.cell("job:0:found:100", "slowdown").text
        table.focus()
        for _ in range(len(jobs)):
            if table.selected_key() == "job:0:found:100":
                break
            await pilot.press("j")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, JobDetailScreen)
        return cell, str(app.screen.query_one("#body").render())

    cell, details = on_screen(snap, row_and_details)
    assert cell == "≥36× pace"
    assert "≥36× pace · py-spy steps · own" in details
