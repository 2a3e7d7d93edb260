"""Safe actions on a shared box: `--readonly` turns off stop, launch and the
probe; the probe asks before pausing another user's jobs, naming whose; `d` shows its progress
at once (seconds left, each step as the diagnosis says it). Also the screen's identity columns,
hidden empty columns, the jobs panel's height and the one-line GPU panel."""

from __future__ import annotations

import asyncio
import getpass
import threading
from dataclasses import replace

import pytest

pytest.importorskip("textual")

from gputop_dl.present.tui import session_actions  # noqa: E402
from gputop_dl.present.tui.app import GputopApp  # noqa: E402
from gputop_dl.present.tui.jobs_table import JobsTable  # noqa: E402
from gputop_dl.present.tui.screens import ConfirmScreen, JobDetailScreen  # noqa: E402
from gputop_dl.snapshot import JobSample, ProcSample, SlurmJob  # noqa: E402
from tests.fakes.source import T0, FakeSource, FixedClock, monitor_snapshot  # noqa: E402

SIZE = (160, 50)
VERDICT = {"kind": "cpu-bound", "title": "concurrent: CPU-bound", "confidence": 0.9,
           "reason": "r", "evidence_lines": [], "recommendations": [], "jobs": [], "evidence": {}}
ME = getpass.getuser()


def found(name, user=ME, **kw):
    return JobSample(name=name, pid=hash(name) % 30000 + 100, launched=False, cpu_cores=0.5,
                     rss=1 << 28, user=user, elapsed_s=75, cmdline=f"python {name} --lr 0.1", **kw)


def run(body, **kw):
    async def go():
        src = FakeSource(session_id=None)
        app = GputopApp(src, clock=FixedClock(T0 + 1), mode="monitor", **kw)
        async with app.run_test(size=SIZE) as pilot:
            await body(app, src, pilot)
    asyncio.run(go())


def recording_diagnoser():
    """A diagnoser that records whether it was asked to probe."""
    calls = []

    def diagnoser(probe=True, progress=None, seconds=20.0):
        calls.append(probe)
        return {"verdict": VERDICT}

    return calls, diagnoser


async def until(pilot, cond, tries=200):
    for _ in range(tries):
        if cond():
            return True
        await pilot.pause(0.02)
    return cond()


def test_readonly_turns_off_stop_launch_and_the_probe():
    calls, diagnoser = recording_diagnoser()

    async def body(app, src, pilot):
        src.emit(monitor_snapshot(0, jobs=(found("a.py"), found("b.py"))))
        await pilot.pause()
        assert "read-only" in app.title_bar.render().plain
        assert app.check_action("stop_job", ()) is False and app.check_action("launcher", ()) is False
        await pilot.press("d")
        assert await until(pilot, lambda: calls)
        assert calls == [False]  # observe only

    run(body, diagnoser=diagnoser, launcher=object(), readonly=True)


def test_the_probe_asks_before_pausing_other_users_jobs_and_names_them(monkeypatch):
    monkeypatch.setattr(session_actions, "may_signal_others", lambda: True)
    calls, diagnoser = recording_diagnoser()

    async def body(app, src, pilot):
        src.emit(monitor_snapshot(0, jobs=(found("mine.py"), found("theirs.py", user="zz-bob"))))
        await pilot.pause()
        await pilot.press("d")
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        question = str(app.screen.query_one("#question").render())
        assert "zz-bob's theirs.py" in question and "mine.py" not in question
        assert not calls  # nothing runs before the answer
        await pilot.press("n")
        assert await until(pilot, lambda: calls)
        assert calls == [False]  # no: observe only, nothing paused

    run(body, diagnoser=diagnoser)


def test_no_question_where_gputop_dl_may_not_signal_them(monkeypatch):
    monkeypatch.setattr(session_actions, "may_signal_others", lambda: False)
    calls, diagnoser = recording_diagnoser()

    async def body(app, src, pilot):
        src.emit(monitor_snapshot(0, jobs=(found("mine.py"), found("theirs.py", user="zz-bob"))))
        await pilot.pause()
        await pilot.press("d")
        assert await until(pilot, lambda: calls)
        assert calls == [True]  # the plan itself leaves jobs it may not signal alone

    run(body, diagnoser=diagnoser)


def test_d_shows_its_progress_at_once_and_each_probe_window():
    said = threading.Event()
    go_on = threading.Event()

    def diagnoser(probe=True, progress=None, seconds=20.0):
        progress("probe: a.py alone for 3.0 s; paused b.py")
        said.set()
        go_on.wait(10)
        return {"verdict": VERDICT}

    async def body(app, src, pilot):
        src.emit(monitor_snapshot(0, jobs=(found("a.py"), found("b.py"))))
        await pilot.pause()
        await pilot.press("d")
        banner = lambda: str(app.query_one("#banner").render())  # noqa: E731
        assert "diagnosing:" in banner() and "s left" in banner()  # at once, before any message
        assert await until(pilot, lambda: "probe: a.py alone for 3.0 s" in banner())
        go_on.set()
        assert await until(pilot, lambda: not app.diagnosing)

    run(body, diagnoser=diagnoser)
    assert said.is_set()


def test_the_table_keeps_its_height_a_while_after_a_job_leaves():
    from gputop_dl.present.tui.app import TABLE_HOLD_S

    jobs = tuple(found(f"j{i}.py") for i in range(3))

    async def body(app, src, pilot):
        table = app.query_one(JobsTable)
        src.emit(monitor_snapshot(0, jobs=jobs))
        assert await until(pilot, lambda: table.outer_size.height == 3 + 3)
        src.emit(monitor_snapshot(1, jobs=jobs[:2]))  # a job left: no new layout yet
        await pilot.pause()
        assert len(table.rows_by_key) == 2 and table.outer_size.height == 3 + 3
        app.clock.now += TABLE_HOLD_S  # fewer rows for the whole hold: the table fits them
        src.emit(monitor_snapshot(2, jobs=jobs[:2]))
        assert await until(pilot, lambda: table.outer_size.height == 2 + 3)
        src.emit(monitor_snapshot(3, jobs=jobs))  # a new row shows at once
        assert await until(pilot, lambda: table.outer_size.height == 3 + 3)

    run(body)


def test_identity_columns_empty_columns_hidden_and_a_table_as_high_as_its_rows():
    slurm = found("a.py", slurm=SlurmJob("4711", ME, "gpu", "lab"),
                  procs=(ProcSample(1, None, 0, "main", 0.4, 1 << 28, "R"),
                         ProcSample(2, 1, 1, "worker", 0.1, 1 << 26, "S")))
    other = found("b.py", launched_by="20261124-101500-ab12")

    async def body(app, src, pilot):
        src.emit(monitor_snapshot(0, jobs=(slurm, other)))
        await pilot.pause()
        table = app.query_one(JobsTable)
        cols = table.visible_columns()
        assert {"user", "elapsed", "slurm", "command"} <= set(cols)
        assert not {"step", "slowdown", "progress", "batch", "eta"} & set(cols)  # no job has them
        assert "step: launched jobs" in table.border_subtitle
        assert table.size.height == 1 + 2 and table.outer_size.height == 5  # no empty lines
        key = f"job:0:found:{other.pid}"  # found jobs' rows are keyed by PID (jobs_table.job_key)
        assert table.cell(key, "command").text.startswith("launched by session 20261124-101500-ab12")
        assert table.cell(f"job:0:found:{slurm.pid}", "elapsed").text == "1:15"
        assert app.screen.has_class("-no-gpu") and app.query_one("#gpuline").size.height == 1
        await pilot.press("enter")
        assert isinstance(app.screen, JobDetailScreen)
        body_text = str(app.screen.body())
        assert "job 4711 · user" in body_text and "processes (2)" in body_text and "└ 2" in body_text
        await pilot.press("escape")
        src.emit(monitor_snapshot(1, jobs=(replace(slurm, step_time_s=0.2), other)))
        await pilot.pause()
        assert "step" in table.visible_columns()

    run(body)
