"""TUI behaviour through Textual's Pilot, fed by a fake source (no engine, no GPU, no torch)."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

pytest.importorskip("textual")

from textual import events  # noqa: E402

from gputop_dl.config import load_session  # noqa: E402
from gputop_dl.present.tui.app import GputopApp  # noqa: E402
from gputop_dl.present.tui.charts import BLOCKS, History, bar, block, fit  # noqa: E402
from gputop_dl.present.tui.epoch_panel import EpochPanel, nice_ceiling  # noqa: E402
from gputop_dl.present.tui.gpu_panel import GpuPanel  # noqa: E402
from gputop_dl.present.tui.host_panel import HostPanel  # noqa: E402
from gputop_dl.present.tui.jobs_table import JobsTable  # noqa: E402
from gputop_dl.present.tui.screens import (ConfirmScreen, HelpScreen, JobDetailScreen,  # noqa: E402
                                           LauncherScreen, VerdictScreen)
from gputop_dl.present.tui.source import Inbox  # noqa: E402

from tests.fakes.source import SPEC, T0, FakeSource, FixedClock, jobs, make_snapshot, monitor_snapshot

def aio(fn):
    """Run an async test with asyncio.run (no pytest-asyncio plugin needed)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return run


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = (160, 50)


def new_app(*, live=("bs32", "bs64"), mode="launch", **kw) -> tuple[GputopApp, FakeSource]:
    src = FakeSource(live=list(live), spec=SPEC if mode == "launch" else None,
                     session_id=kw.pop("session_id", "20251121-183320-abc123"))
    return GputopApp(src, clock=FixedClock(T0), mode=mode, **kw), src


async def feed(pilot, src: FakeSource, *snaps) -> None:
    for s in snaps:
        src.emit(s)
        await pilot.pause()
    # the first frame shows the header and the host; the rest of the layout follows it
    for _ in range(100):
        if not pilot.app.screen_stack[0].has_class("-starting"):
            break
        await pilot.pause()


def order(table: JobsTable) -> list[str]:
    return table.order()


def cell(table: JobsTable, key: str, col: str) -> str:
    return table.cell(key, col).text


def body_text(screen) -> str:
    return str(screen.query_one("#body").render())


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


async def wait_for(pilot, cond, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await pilot.pause(0.02)
    return cond()


# --- rendering ------------------------------------------------------------------------------------

@aio
async def test_first_snapshot_fills_every_panel():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        assert src.started and len(src.subscribers) == 1
        assert app.first_render_at is None
        await feed(pilot, src, make_snapshot(0))
        assert app.first_render_at is not None
        table = app.query_one(JobsTable)
        assert order(table) == ["job:0:bs32", "job:0:bs64", "job:0:bs128", "pid:777"]  # 4242 is bs32's
        assert cell(table, "job:0:bs32", "job") == "● bs32"
        assert cell(table, "job:0:bs128", "status") == "failed: CUDA out of memory"
        assert cell(table, "job:0:bs64", "slowdown") == "1.64×"
        assert cell(table, "pid:777", "job").strip() == "pid 777"
        gpu_text = app.query_one(GpuPanel).plain()
        assert gpu_text.count("H100 80GB HBM3") == 4
        assert "41.2/80 GiB" in gpu_text
        banner = str(app.query_one("#banner").render())
        assert "CPU-BOUND" in banner and "bs128 runs 2.61× slower together" in banner
        log = str(app.query_one("#log").render())
        assert "bs128 (co-run) failed: CUDA out of memory" in log


@aio
async def test_no_gpu_shows_one_line_why():
    app, src = new_app(mode="monitor", session_id=None, live=())
    src.env = {"gpu_status_detail": "No NVIDIA GPU: the NVIDIA driver is not loaded (libnvidia-ml.so.1 not found)"}
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, monitor_snapshot(0))
        text = app.query_one(GpuPanel).plain()
        assert text.splitlines()[0] == "No NVIDIA GPU: the NVIDIA driver is not loaded (libnvidia-ml.so.1 not found)"
        assert "H100" not in text
        host = app.query_one("#host").plain()
        assert "of 2 CPUs" in host and "62% 40%" in host and "some 42%" in host


@aio
async def test_gpu_history_is_fixed_scale_and_grows():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        for t in range(3):
            await feed(pilot, src, make_snapshot(t))
        panel = app.query_one(GpuPanel)
        assert len(panel.histories) == 4 and len(panel.histories[0].raw) == 3
        assert panel.span == 600  # 10 minutes at 1 Hz


@aio
async def test_history_goes_on_when_a_found_job_is_renamed():
    """A found job's name changes when another copy of its script ends ("train.py 09:30:12"
    becomes "train.py"): its history series and its table row keep its own samples under the new
    name, and do not take over the ended copy's (which stays, for the whole-session view)."""
    from gputop_dl.present.tui.history_panel import HistoryPanel
    from gputop_dl.snapshot import JobSample

    def found(*named):
        return tuple(JobSample(name=n, pid=pid, launched=False, pids=(pid,), status="running",
                               cpu_cores=1.0, cpu_wait_fraction=wait) for n, pid, wait in named)

    app, src = new_app(mode="monitor", session_id=None, live=())
    async with app.run_test(size=SIZE) as pilot:
        for t in range(3):
            await feed(pilot, src, monitor_snapshot(t, jobs=found(("train.py", 10, 0.9),
                                                                  ("train.py 09:30:12", 20, 0.25))))
        await feed(pilot, src, monitor_snapshot(3, jobs=found(("train.py", 20, 0.25))))
        panel = app.query_one(HistoryPanel)
        name, series = panel.jobs[20]
        assert name == "train.py" and [v for _t, v in series["cpuwait"].fine] == [0.25] * 4
        assert [v for _t, v in panel.jobs[10][1]["cpuwait"].fine] == [0.9] * 3  # the ended copy's own
        assert panel.builds >= 1 and "train.py" in panel.query_one("#legend").render().plain
        # the jobs table's row is the same row: its key, its sparkline's values, the cursor
        table = app.query_one(JobsTable)
        assert order(table) == ["job:0:found:20"] and cell(table, "job:0:found:20", "job") == "  train.py"
        assert len(app.trends.by_key["job:0:found:20"][2]) == 4


@aio
async def test_history_charts_build_once_per_bucket_and_only_when_shown():
    """The charts are built again when a bucket closes (not with every snapshot), `z` zooms out
    and back, and a launch (whose epoch panel hides the charts) never builds them."""
    from gputop_dl.present.tui.history_panel import HistoryPanel

    from tests.fakes.source import found_jobs_snapshot

    app, src = new_app(mode="monitor", session_id=None, live=())
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, *[found_jobs_snapshot(t) for t in range(60)])
        panel = app.query_one(HistoryPanel)
        bucket = float(panel.border_subtitle.split("redrawn every ")[1].split(" s")[0])
        assert bucket >= 15 and 1 <= panel.builds <= 60 / bucket + 2
        before = panel.builds
        await pilot.press("z")
        assert panel.whole and panel.builds == before + 1 and "whole session (z" in panel.border_subtitle
        before = panel.builds  # zoomed out, the charts are built once a bucket too
        await feed(pilot, src, *[found_jobs_snapshot(t) for t in range(60, 90)])
        assert panel.builds - before <= 30 / bucket + 2
        await pilot.press("z")
        assert not panel.whole and "last 5 min (z" in panel.border_subtitle
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, *[make_snapshot(t) for t in range(5)])
        assert app.query_one(HistoryPanel).builds == 0 and len(app.query_one(HistoryPanel).jobs) == 3


@aio
async def test_a_chart_read_from_plotexts_matrix_is_what_its_ansi_parse_gives():
    """Speed: the charts skip plotext's ANSI string and its parse (`matrix_text`);
    the Text is the same, character for character and style for style, in a dark and a light
    theme, with lines, a gap and a verdict mark."""
    from rich.text import Text

    from gputop_dl.present.tui.series_chart import SeriesChart

    from tests.fakes.source import found_jobs_snapshot

    def spans(t: Text) -> list:
        return [(s.start, s.end, s.style) for s in t.spans]

    app, src = new_app(mode="monitor", session_id=None, live=())
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, *[found_jobs_snapshot(t) for t in range(0, 300, 3)])
        for theme in ("textual-dark", "textual-light"):
            app.theme = theme
            await pilot.pause()
            charts = [c for c in app.query(SeriesChart) if c.size.width]
            assert len(charts) >= 4
            for chart in charts:
                mine = chart.render()
                plot = chart._plot
                ref = Text.from_ansi(plot.build())  # sized and themed by the render above
                assert "⠀" in mine.plain or any("\u2800" < ch <= "\u28ff" for ch in mine.plain)
                # plotext draws every vertical line "│"; a slowdown's end is made "╎" (dashed)
                assert (mine.plain.replace("╎", "│"), spans(mine), mine.end) == \
                    (ref.plain, spans(ref), ref.end)


def test_a_slowdowns_end_is_marked_dashed_and_its_start_solid():
    """The verdict's change back to parallel (a slowdown's end) is a dashed grey
    line, any other change (a slowdown's start, or its cause changing) a solid orange one."""
    from textual_plotext.plot import Plot

    from gputop_dl.present.tui.series_chart import matrix_text
    from gputop_dl.present.tui.timeline import CLEAR_COLOUR, MARK_COLOUR, mark_glyph

    assert mark_glyph("parallel") == ("╎", CLEAR_COLOUR)
    assert mark_glyph("cpu-bound") == mark_glyph("io-bound") == ("│", MARK_COLOUR)
    plot = Plot()
    plot.plot([-100.0, -10.0], [1.0, 2.0], marker="braille", color=(0, 130, 200))
    plot.vline(-70.0, MARK_COLOUR)  # slowed
    plot.vline(-30.0, CLEAR_COLOUR)  # back to parallel
    plot.xlim(-100.0, 0.0)
    plot.plotsize(60, 12)
    rows = matrix_text(plot).plain.split("\n")
    left, right = rows[0].index("┌"), rows[0].index("┐")  # the frame's own "│" columns

    def down(glyph):  # the columns inside the frame where `glyph` runs down 5 rows or more
        return [c for c in range(left + 1, right) if sum(r[c:c + 1] == glyph for r in rows) >= 5]

    assert len(down("│")) == 1 and len(down("╎")) == 1 and down("│")[0] < down("╎")[0]


@aio
async def test_rows_update_in_place_and_cursor_keeps_its_row():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        table = app.query_one(JobsTable)
        await pilot.press("j", "j")
        assert table.selected_key() == "job:0:bs128"
        # bs32 (above the cursor) vanishes, a new GPU process appears, values change
        snap = make_snapshot(5)
        snap = replace(snap, jobs=snap.jobs[1:], gpu_processes=snap.gpu_processes + (
            replace(snap.gpu_processes[1], pid=555),))
        await feed(pilot, src, snap)
        assert table.selected_key() == "job:0:bs128"
        assert order(table) == ["job:0:bs64", "job:0:bs128", "pid:555", "pid:777", "pid:4242"]
        assert cell(table, "job:0:bs64", "progress") == "2/3 · 45/100"


@aio
async def test_a_tick_repaints_only_the_rows_that_changed():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        snap = make_snapshot(0)
        await feed(pilot, src, snap)
        await pilot.pause()
        table = app.query_one(JobsTable)
        before = table.row_renders
        bs64 = replace(snap.jobs[1], cpu_cores=1.5)
        await feed(pilot, src, replace(snap, time=snap.time + 1, jobs=(snap.jobs[0], bs64, snap.jobs[2])))
        await pilot.pause()
        assert cell(table, "job:0:bs64", "cpu") == "1.50"
        assert table.row_renders - before == 1  # bs64's line only; the others come from the cache
        screen = app.export_screenshot()
        assert "1.50" in screen


@aio
async def test_narrow_terminal_leaves_out_the_least_useful_columns():
    app, src = new_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.pause()
        table = app.query_one(JobsTable)
        shown = table.visible_columns()
        assert {"job", "status", "step", "stall", "cpu"} <= set(shown)
        assert "eta" not in shown and "batch" not in shown
        lines = app.export_screenshot()
        text = "\n".join(str(table.render_line(y).text) for y in range(3))
        assert "data-wait" in text and "ETA" not in text and "running" in text
        assert all(len(table.render_line(y).text) == table.size.width for y in range(3))
        assert "bs32" in lines


@aio
async def test_many_rows_scroll_with_the_cursor_and_mouse():
    many = tuple(replace(jobs()[0], name=f"job{i:02d}", pid=9000 + i, pids=(9000 + i,)) for i in range(40))
    app, src = new_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await feed(pilot, src, make_snapshot(0, jobs=many, gpu_processes=()))
        table = app.query_one(JobsTable)
        # the subtitle's scroll position follows the table's Resize event, which its layout
        # (the size read here) precedes by a message: wait for it, not for a time
        for _ in range(100):
            if " · rows " in table.border_subtitle:
                break
            await pilot.pause()
        shown = table.size.height - 1
        assert 0 < shown < 40 and table.top == 0
        assert f"rows 1–{shown} of 40" in table.border_subtitle
        await pilot.press("end")
        assert table.selected_key() == "job:0:job39" and table.top == 40 - shown
        assert "job39" in str(table.render_line(shown).text)  # the cursor's row is on screen
        await pilot.press("home")
        assert table.selected_key() == "job:0:job00" and table.top == 0
        await pilot.press("pagedown")
        assert table.selected_key() == f"job:0:job{shown - 1:02d}"
        # mouse: the wheel scrolls without moving the cursor; a click selects; a second opens it
        await pilot.press("home")
        table.post_message(events.MouseScrollDown(table, 10, 5, 0, 1, 0, False, False, False))
        await pilot.pause()
        assert table.top == 3 and table.selected_key() == "job:0:job00"
        await pilot.click(JobsTable, offset=(10, 3))  # border, header, then the second row shown
        assert table.selected_key() == "job:0:job04"
        await pilot.click(JobsTable, offset=(10, 3))
        await pilot.pause()
        assert isinstance(app.screen, JobDetailScreen)
        # a new tick keeps the cursor's row and the scroll position
        await pilot.press("escape")
        await feed(pilot, src, make_snapshot(1, jobs=many, gpu_processes=()))
        assert table.selected_key() == "job:0:job04" and table.top == 3


@aio
async def test_j_k_and_arrows_select():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        table = app.query_one(JobsTable)
        assert table.selected_key() == "job:0:bs32"
        await pilot.press("j")
        assert table.selected_key() == "job:0:bs64"
        await pilot.press("j", "j")
        assert table.selected_key() == "pid:777"
        await pilot.press("k")
        assert table.selected_key() == "job:0:bs128"
        await pilot.press("up")
        assert table.selected_key() == "job:0:bs64"
        await pilot.press("down")
        assert table.selected_key() == "job:0:bs128"
        assert app.query_one(EpochPanel).border_title == "epoch times · bs128"


@aio
async def test_sort_keys_keep_the_selection():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        table = app.query_one(JobsTable)
        await pilot.press("j")  # bs64
        await pilot.press("c")  # CPU, most first; unknown last
        assert order(table) == ["job:0:bs64", "job:0:bs32", "job:0:bs128", "pid:777"]
        assert table.selected_key() == "job:0:bs64"
        assert table.header_label("cpu") == "CPU ▼"
        await pilot.press("c")  # again: reversed
        assert order(table)[:2] == ["job:0:bs32", "job:0:bs64"]
        await pilot.press("n")
        assert order(table) == ["job:0:bs128", "job:0:bs32", "job:0:bs64", "pid:777"]
        await pilot.press("t")
        assert order(table) == ["job:0:bs128", "job:0:bs64", "job:0:bs32", "pid:777"]
        await pilot.press("m")
        assert order(table) == ["job:0:bs64", "job:0:bs32", "pid:777", "job:0:bs128"]
        assert table.selected_key() == "job:0:bs64"
        # the sort holds through the next tick
        await feed(pilot, src, make_snapshot(1))
        assert order(table) == ["job:0:bs64", "job:0:bs32", "pid:777", "job:0:bs128"]
        await pilot.press("o")
        assert order(table) == ["job:0:bs32", "job:0:bs64", "job:0:bs128", "pid:777"]


# --- keys -----------------------------------------------------------------------------------------

@aio
async def test_q_with_running_jobs_asks_then_stops_and_waits():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        assert "bs32, bs64" in str(app.screen.query_one("#question").render())
        assert src.stop_reasons == []
        await pilot.press("y")
        assert await wait_for(pilot, lambda: src.joined >= 1)
        await pilot.pause()
    assert src.stop_reasons == ["interrupted"]
    assert app.return_value == 0


@aio
async def test_q_confirm_no_keeps_running():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("q")
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen)
        assert src.stop_reasons == [] and src.joined == 0
        assert app.is_running


@aio
async def test_q_without_running_jobs_quits_at_once():
    """Nothing launched runs: the UI ends on the key, without waiting for the sources to finish
    their last sample and close their sessions (runner/monitor.py joins them after)."""
    app, src = new_app(live=())
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("q")
        assert await wait_for(pilot, lambda: not app.is_running)
        assert not isinstance(app.screen, ConfirmScreen)
    assert src.stop_reasons == ["interrupted"] and src.joined == 0
    assert app.return_value == 0


@aio
async def test_ctrl_c_without_running_jobs_quits_with_the_interrupt_code():
    app, src = new_app(live=())
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("ctrl+c")
        assert await wait_for(pilot, lambda: not app.is_running)
    assert app.return_value == 130


@aio
async def test_a_second_ctrl_c_answers_the_question_stop_and_quit():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmScreen) and src.stop_reasons == []
        await pilot.press("ctrl+c")
        assert await wait_for(pilot, lambda: src.joined >= 1)
        await pilot.pause()
    assert src.stop_reasons == ["interrupted"] and app.return_value == 130


@aio
async def test_the_quit_question_goes_once_the_jobs_it_names_have_ended():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        src.live.clear()  # the jobs end while the question is up
        await feed(pilot, src, make_snapshot(1))
        assert await wait_for(pilot, lambda: not app.is_running)
    assert app.return_value == 0


@aio
async def test_s_stops_selected_launched_job_after_confirmation():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("j", "s")  # bs64
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert src.stopped_jobs == []
        await pilot.press("s")
        await pilot.press("y")
        assert src.stopped_jobs == ["bs64"]
        assert any("stopping bs64" in m for m in messages(app))


@aio
async def test_s_refuses_finished_jobs_and_foreign_processes():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("j", "j", "s")  # bs128 has failed
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("j", "s")  # pid 777, not ours
        assert not isinstance(app.screen, ConfirmScreen)
        assert src.stopped_jobs == []
        assert any("not running" in m for m in messages(app))
        assert any("only jobs launched by gputop-dl" in m for m in messages(app))


@aio
async def test_e_exports_with_the_exporter_it_was_given(tmp_path):
    calls = []

    def export_session(session_id, path):
        calls.append((session_id, path))
        with open(path, "w") as f:
            f.write("# report\n")
        return path

    app, src = new_app(export_dir=str(tmp_path), exporter=export_session)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("e")
        assert await wait_for(pilot, lambda: bool(app.exported))
        want = str(tmp_path / "gputop-dl-20251121-183320-abc123.md")
        assert calls == [("20251121-183320-abc123", want)]
        assert any(want in m for m in messages(app))


@aio
async def test_e_without_an_exporter_says_not_available():
    app, src = new_app()  # no exporter given
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("e")
        await pilot.pause()
        assert "export not available" in messages(app)


@aio
async def test_e_in_plain_monitor_has_nothing_to_export():
    app, src = new_app(mode="monitor", session_id=None, live=())
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, monitor_snapshot(0))
        await pilot.press("e")
        assert any("nothing to export" in m for m in messages(app))


@aio
async def test_p_pauses_updates_and_resumes_with_the_latest():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        table = app.query_one(JobsTable)
        await pilot.press("p")
        assert app.paused and "PAUSED" in str(app.query_one("#title").render())
        await feed(pilot, src, make_snapshot(3), make_snapshot(7))
        assert cell(table, "job:0:bs32", "progress") == "3/3 · 40/100"
        await pilot.press("p")
        assert cell(table, "job:0:bs32", "progress") == "3/3 · 47/100"
        assert "PAUSED" not in str(app.query_one("#title").render())


@aio
async def test_help_screen():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "sort by CPU, memory, name, step time" in body_text(app.screen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@aio
async def test_snapshots_keep_coming_while_a_modal_is_open():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("question_mark")
        await feed(pilot, src, make_snapshot(4))
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert cell(app.query_one(JobsTable), "job:0:bs32", "progress") == "3/3 · 44/100"


@aio
async def test_v_opens_verdict_evidence():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("v")
        assert isinstance(app.screen, VerdictScreen)
        text = body_text(app.screen)
        assert "data-wait: bs32 4%→12%" in text and "Recommendations" in text
        assert "bs128: step 0.470 s vs solo 0.180 s (2.61×)" in text and "confidence: 85%" in text
        await pilot.press("v")
        assert not isinstance(app.screen, VerdictScreen)


@aio
async def test_v_without_verdict_shows_phase():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0, verdict=None, phase="baseline"))
        banner = str(app.query_one("#banner").render())
        assert "phase: baseline" in banner and "bs128 (co-run) failed" in banner
        await pilot.press("v")
        assert not isinstance(app.screen, VerdictScreen)
        assert "no verdict yet (phase: baseline)" in messages(app)


@aio
async def test_enter_opens_job_details():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("j", "j", "enter")
        assert isinstance(app.screen, JobDetailScreen)
        text = body_text(app.screen)
        assert "torch.OutOfMemoryError: CUDA out of memory" in text  # stderr tail
        assert "batch_size = 128" in text  # config
        assert "failed: CUDA out of memory" in text
        await pilot.press("escape")
        await pilot.press("k", "enter")
        text = body_text(app.screen)
        assert "epoch 1: 21.9 s" in text


@aio
async def test_epoch_panel_selected_and_all():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        panel = app.query_one(EpochPanel)
        text = panel.render_content().plain
        assert "solo ≈ 8.0 s" in text  # 0.08 s × 100 steps
        assert "ep 1" in text and "9.8 s" in text and "1.23× solo" in text
        assert "40/100 steps" in text
        await pilot.press("a")
        text = panel.render_content().plain
        assert panel.border_title == "epoch times · all jobs"
        assert all(n in text for n in ("bs32", "bs64", "bs128"))


# --- threading ------------------------------------------------------------------------------------

@aio
async def test_snapshots_from_another_thread_keep_only_the_latest():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        before = app.renders
        t = threading.Thread(target=lambda: [src.emit(make_snapshot(i)) for i in range(1, 41)])
        t.start()
        t.join()
        assert await wait_for(pilot, lambda: cell(app.query_one(JobsTable), "job:0:bs32", "progress")
                              == "3/3 · 80/100")
        await pilot.pause()
        assert app.inbox.received == 41
        assert app.renders - before < 40  # stale snapshots were dropped, not queued
        assert app.inbox.dropped >= 1


def test_inbox_wakes_once_until_taken():
    box = Inbox()
    assert box.put(0, make_snapshot(0)) is True
    assert box.put(0, make_snapshot(1)) is False
    assert box.put(1, make_snapshot(2)) is False
    got = box.take()
    assert got[0].time == T0 + 1 and got[1].time == T0 + 2 and box.dropped == 1
    assert box.put(0, make_snapshot(3)) is True


@aio
async def test_stale_source_is_flagged_by_the_clock():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        assert "no new sample" not in str(app.query_one("#title").render())
        app.clock.now = T0 + 30  # no snapshot since: the stale timer (1 s) redraws the title
        assert await wait_for(pilot, lambda: "no new sample for 30 s" in str(app.query_one("#title").render()))


@aio
async def test_theme_change_restyles_the_line_panels():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        host = app.query_one(HostPanel)
        dark = [seg.style for seg in host.render_line(0)]
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        assert [seg.style for seg in host.render_line(0)] != dark


@aio
async def test_theme_change_recolours_table_cells():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        table = app.query_one(JobsTable)
        dark = table.cell("job:0:bs128", "status").style
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        assert table.cell("job:0:bs128", "status").style != dark


@aio
async def test_no_color_is_respected(monkeypatch):
    """NO_COLOR: Textual filters every colour on output; ours all come from theme variables."""
    from textual.filter import Monochrome, NoColor

    monkeypatch.setenv("NO_COLOR", "1")
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        assert app.no_color
        assert any(isinstance(f, (Monochrome, NoColor)) for f in app._filters)
        assert "CPU-BOUND" in str(app.query_one("#banner").render())


# --- launcher -------------------------------------------------------------------------------------

TINY = """
[session]
name = "tiny"
baseline = "none"

[defaults]
model = "synthetic"
dataset = "synthetic"
input_size = 4
num_classes = 4
num_workers = 0
batch_size = 4
epochs = 1
steps_per_epoch = 5

[[workload]]
name = "alpha"

[[workload]]
name = "beta"
"""


class FakeLauncher:
    def __init__(self):
        self.started: list = []
        self.sources: list[FakeSource] = []

    def load(self, path, only=None):
        return load_session(path, gpu_count=0, only=only)

    def start(self, spec):
        self.started.append(spec)
        src = FakeSource(live=[w.name for w in spec.workloads], spec=spec, session_id="launched-1")
        self.sources.append(src)
        return src


@aio
async def test_launcher_starts_ticked_workloads_and_shows_their_jobs(tmp_path):
    wdir = tmp_path / "workloads"
    wdir.mkdir()
    (wdir / "tiny.toml").write_text(TINY)
    launcher = FakeLauncher()
    app, src = new_app(mode="monitor", session_id=None, live=(), launcher=launcher, workloads_dir=str(wdir))
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, monitor_snapshot(0))
        await pilot.press("l")
        assert isinstance(app.screen, LauncherScreen)
        await pilot.pause()
        wl = app.screen.query_one("#workloads")
        assert wl.option_count == 2 and set(wl.selected) == {"alpha", "beta"}
        await pilot.press("space")  # untick the highlighted one (alpha)
        assert wl.selected == ["beta"]
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, LauncherScreen)
        assert [w.name for w in launcher.started[0].workloads] == ["beta"]
        new = launcher.sources[0]
        assert new.started
        await feed(pilot, new, replace(make_snapshot(0), jobs=(replace(jobs()[0], name="beta"),),
                                       session_id="launched-1"))
        table = app.query_one(JobsTable)
        assert "job:1:beta" in order(table)
        assert cell(table, "job:1:beta", "job") == "● beta"
        # quitting now asks, and stops both sources
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        assert await wait_for(pilot, lambda: new.joined >= 1 and src.joined >= 1)
    assert new.stop_reasons == ["interrupted"] and src.stop_reasons == ["interrupted"]


@aio
async def test_launcher_shows_config_errors(tmp_path):
    wdir = tmp_path / "workloads"
    wdir.mkdir()
    (wdir / "bad.toml").write_text("[[workload]]\nname = \"a\"\nbatch_size = 0\n")
    app, src = new_app(mode="monitor", session_id=None, live=(), launcher=FakeLauncher(),
                       workloads_dir=str(wdir))
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, monitor_snapshot(0))
        await pilot.press("l")
        await pilot.pause()
        msg = str(app.screen.query_one("#message").render())
        assert "bad.toml" in msg and "batch_size" in msg
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, LauncherScreen)  # nothing to start
        await pilot.press("escape")
        assert not isinstance(app.screen, LauncherScreen)


@aio
async def test_launch_key_only_in_monitor_mode():
    app, src = new_app()  # launch mode, no launcher
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("l")
        assert not isinstance(app.screen, LauncherScreen)


# --- pure helpers ---------------------------------------------------------------------------------

def test_fit_cuts_and_pads_in_terminal_cells():
    assert fit("abc", 5) == "abc  " and fit("abc", 5, right=True) == "  abc"
    assert fit("abcdef", 4) == "abc…" and fit("x", 0) == ""
    assert fit("日本語", 5) == "日本…"  # wide characters count two cells


def test_history_strip_fixed_scale_newest_right():
    h = History(span=10)
    for v in (0.0, 1.0):
        h.push(v)
    s = h.strip(10)
    assert len(s) == 10 and s.endswith(" █") and s[:8] == " " * 8
    h.push(None)
    assert h.strip(10)[-1] == "·"
    assert block(0.5) == BLOCKS[4] and block(0.001) == BLOCKS[1] and block(1.7) == "█"
    assert bar(0.5, 10) == ("█" * 5, "░" * 5) and bar(None, 4) == ("", "····")


def test_timeline_bucket_means_gaps_and_whole_session():
    """The history charts' series (timeline.py): bucket means on a relative axis, None where no
    sample is known (a gap, not a zero); the whole session from buckets that merge past CAP."""
    from gputop_dl.present.tui import timeline

    tl = timeline.Timeline(interval=1.0)
    for t in range(10):
        tl.push(float(t), None if 4 <= t < 6 else float(t))
    assert tl.points(10.0, 10.0, 5) == [0.5, 2.5, None, 6.5, 8.5]
    assert tl.known == 8 and tl.first_t() == 0.0
    long = timeline.Timeline(interval=1.0)
    for t in range(3 * timeline.CAP):  # past the fine window and past CAP: buckets merge
        long.push(float(t), 1.0 if t < timeline.CAP else 3.0)
    assert len(long.coarse) <= timeline.CAP and long.width == 4.0
    whole = long.points(3.0 * timeline.CAP, 3.0 * timeline.CAP, 3)
    assert whole == [pytest.approx(1.0), pytest.approx(3.0), pytest.approx(3.0)]
    assert long.points(3.0 * timeline.CAP, 300.0, 2) == [3.0, 3.0]  # the last 5 min: sample by sample


def test_verdict_marks_and_axis_labels():
    from gputop_dl.present.tui.timeline import Marks, ago, ticks

    m = Marks()
    for t, kind in ((0, None), (1, "parallel"), (2, "parallel"), (3, None), (4, "parallel"), (5, "cpu-bound")):
        m.push(float(t), kind)
    assert list(m.changes) == [(5.0, "parallel", "cpu-bound")] and m.within(0, 4) == []
    assert ago(0) == "now" and ago(-75) == "-1:15" and ago(-3725) == "-1:02:05"
    assert ticks(300.0) == [-300.0, -240.0, -180.0, -120.0, -60.0, 0.0]
    assert ticks(595.0) == [-480.0, -360.0, -240.0, -120.0, 0.0]


def test_recorded_verdict_changes_replace_the_snapshots_marks_up_to_the_last_one():
    """The store's changes (the first verdict, `from` None, is no mark) stand for everything up
    to the last of them; a snapshot's change after it stays; a snapshot older than it is no news."""
    from gputop_dl.present.tui.timeline import Marks

    m = Marks()
    m.push(5.0, "parallel")
    m.push(30.0, "cpu-bound")  # seen late: recorded at 22
    m.push(50.0, "parallel")  # not recorded yet when the store was read
    m.load([(4.0, None, "parallel"), (12.0, "parallel", "io-bound"), (22.0, "io-bound", "cpu-bound")])
    assert list(m.changes) == [(12.0, "parallel", "io-bound"), (22.0, "io-bound", "cpu-bound"),
                               (50.0, "cpu-bound", "parallel")]
    assert m.kind == "parallel"
    m.load([(4.0, None, "parallel"), (12.0, "parallel", "io-bound"), (22.0, "io-bound", "cpu-bound"),
            (50.0, "cpu-bound", "parallel"), (60.0, "parallel", "io-bound")])
    assert m.kind == "io-bound" and len(m.changes) == 4
    m.push(55.0, "parallel")  # a snapshot from before the last recorded change
    m.push(61.0, "io-bound")
    assert len(m.changes) == 4 and m.loaded_until == 60.0
    m.load([])  # nothing recorded (yet): the marks stand
    assert len(m.changes) == 4
    # the live verdict's first seconds are "insufficient-data": the first verdict after them is
    # no change (else every session would start with a mark); later, a change to it and back is
    m = Marks()
    for t, kind in ((0, "insufficient-data"), (2, "parallel"), (9, "insufficient-data"), (12, "cpu-bound")):
        m.push(float(t), kind)
    assert list(m.changes) == [(9.0, "parallel", "insufficient-data"), (12.0, "insufficient-data", "cpu-bound")]
    m = Marks()
    m.load([(0.0, None, "insufficient-data"), (2.0, "insufficient-data", "parallel"),
            (5.0, "parallel", "cpu-bound")])
    assert list(m.changes) == [(5.0, "parallel", "cpu-bound")] and m.judged


@aio
async def test_history_marks_the_verdict_changes_the_session_recorded_before_the_screen_saw_them(tmp_path):
    """A session that changed its verdict before the screen's first snapshot (or while the
    screen was busy): the charts mark those changes from the store's `verdict_changes`."""
    from gputop_dl.present.tui.history_panel import HistoryPanel
    from gputop_dl.record.store import Store

    from tests.fakes.source import found_jobs_snapshot

    db = str(tmp_path / "sessions.db")
    store = Store(db)
    sid = store.create_session("monitor box", file=None, command="gputop-dl", kind="monitor",
                               environment={})
    store.add_verdict_change(sid, T0 - 150, None, "parallel", "fine", 1.0)
    store.add_verdict_change(sid, T0 - 100, "parallel", "cpu-bound", "CPU saturated", 2.3)
    store.add_verdict_change(sid, T0 - 40, "cpu-bound", "parallel", "recovered", 1.1)
    store.commit()
    app, src = new_app(mode="monitor", session_id=sid, live=())
    src.store_path = db
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, *[found_jobs_snapshot(t) for t in range(10, 30)])
        panel = app.query_one(HistoryPanel)
        assert panel.builds >= 1 and panel.recorded.reads >= 1
        assert [(t - T0, a, b) for t, a, b in panel.marks.changes] == [
            (-100, "parallel", "cpu-bound"), (-40, "cpu-bound", "parallel")]
        # the newest change in view is named in the border's title (the legend may be cut)
        assert "verdict cpu-bound → parallel at -1:00 · 1 earlier" in panel.border_title  # 20 s ago
        # a change recorded later (the screen missed its snapshot) shows at the next build
        store.add_verdict_change(sid, T0 + 31, "parallel", "io-bound", "disk", 1.4)
        store.commit()
        await feed(pilot, src, *[found_jobs_snapshot(t) for t in range(30, 80)])
        assert (T0 + 31, "parallel", "io-bound") in panel.marks.changes
    store.close()


def test_history_buckets_and_draws_from_its_buckets(monkeypatch):
    """A strip is drawn from the kept buckets: the samples are bucketed once, when the width is
    first set or changes, not on every draw (the GPU panel draws 8 of them every tick)."""
    h = History(span=600)
    for i in range(600):
        h.push((i % 100) / 100)
    assert len(h.strip(30)) == 30 and h.seconds_per_char == 20
    rebuilds = []
    real = History._rebuild
    monkeypatch.setattr(History, "_rebuild", lambda self, w: rebuilds.append(w) or real(self, w))
    for _ in range(600):  # 10 minutes of pushes and draws at one width
        h.push(0.5)
        h.strip(30)
    assert rebuilds == [] and h.strip(30) == block(0.5) * 30
    assert len(h.strip(45)) == 45 and rebuilds == [45]  # a resize re-buckets, once


def test_nice_ceiling():
    assert [nice_ceiling(x) for x in (0.7, 9.8, 21.9, 250, 0)] == [1, 10, 25, 250, 1]


def test_tui_never_imports_torch():
    code = ("import sys, gputop_dl.present.tui.app, gputop_dl.engine; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_only_the_tui_package_imports_textual():
    pkg = os.path.join(ROOT, "gputop_dl")
    tui = os.path.join(pkg, "present", "tui")
    offenders = []
    pat = re.compile(r"^\s*(from|import)\s+textual\b", re.M)
    for d, _, files in os.walk(pkg):
        if d.startswith(tui):
            continue
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    if pat.search(fh.read()):
                        offenders.append(os.path.join(d, f))
    assert offenders == []


@aio
async def test_d_diagnoses_the_found_jobs_and_shows_their_verdict():
    verdict = {"kind": "cpu-bound", "title": "concurrent: CPU-bound", "confidence": 0.9,
               "reason": "found jobs need 5.7 cores alone; 2 allowed",
               "evidence_lines": ["CPU alone: 5.7 cores needed"], "recommendations": ["queue"],
               "jobs": [], "evidence": {}}
    calls = []

    def diagnoser():
        calls.append(threading.current_thread().name)
        return {"schema": "gputop-dl.diagnosis/1", "verdict": verdict, "jobs": [], "notes": []}

    app, src = new_app(mode="monitor", diagnoser=diagnoser)
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, monitor_snapshot(0))
        assert "d: diagnose the jobs found running" in str(app.query_one("#banner").render())
        await pilot.press("d")
        for _ in range(50):
            await pilot.pause(0.02)
            if isinstance(app.screen, VerdictScreen):
                break
        assert isinstance(app.screen, VerdictScreen) and "5.7 cores" in body_text(app.screen)
        assert calls and calls[0] != threading.main_thread().name  # off the UI thread
        await pilot.press("escape")
        await feed(pilot, src, monitor_snapshot(1))
        banner = str(app.query_one("#banner").render())
        assert "CPU-BOUND" in banner and "found jobs need 5.7 cores" in banner


@aio
async def test_d_in_a_launch_points_to_its_own_verdict():
    app, src = new_app(diagnoser=lambda: pytest.fail("must not diagnose a launch"))
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        await pilot.press("d")
        await pilot.pause()
        assert not isinstance(app.screen, VerdictScreen)


@aio
async def test_every_key_the_screen_answers_is_in_the_key_bar_and_the_help():
    """Each binding of the main screen (the app's and the focused table's) is
    in `?` help, and in the key bar unless it is an alias (`show=False`) or not answered here."""
    from gputop_dl.present.tui.key_bar import KeyBar
    from gputop_dl.present.tui.screens import HELP_KEYS

    help_text = " ".join(k for k, _d in HELP_KEYS)
    names = {"question_mark": "?", "up": "↑", "down": "↓", "pageup": "pgup", "pagedown": "pgdn"}
    app, src = new_app(mode="monitor", session_id=None, live=(), launcher=object(), diagnoser=lambda **kw: {})
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, monitor_snapshot(0))
        text = app.query_one(KeyBar).render().plain
        for _node, binding, enabled, _tip in app.screen.active_bindings.values():
            for key in binding.key.split(","):
                assert names.get(key, key) in help_text.split(), key
            if binding.show and enabled:
                assert app.get_key_display(binding) in text, (binding.key, text)
        assert "z Zoom" in text and "All epochs" not in text  # the monitor: charts, no epochs


@aio
async def test_a_narrow_key_bar_keeps_every_key_and_drops_descriptions_from_the_end():
    """At 80 and 100 columns the bar was cut at the screen's edge (the palette, the sort keys,
    zoom...); now each key stays, the descriptions going from the last key back."""
    from gputop_dl.present.tui.key_bar import KeyBar

    for width in (80, 100):
        app, src = new_app(mode="monitor", session_id=None, live=(), launcher=object(),
                           diagnoser=lambda **kw: {})
        async with app.run_test(size=(width, 40)) as pilot:
            await feed(pilot, src, monitor_snapshot(0))
            bar = app.query_one(KeyBar)
            text = bar.render().plain
            assert len(text) == width and text.startswith(" ⏎ Details  q Quit  ? Help  v")
            shown = [app.get_key_display(b) for _n, b, en, _t in app.screen.active_bindings.values()
                     if b.show and en]
            tokens = set(text.replace("/", " ").split())
            for key in shown:
                assert key in tokens, (key, text)
            assert "c/m/n/t/o" in text and text.endswith("▏^p palette ")
            assert ("Zoom" in text) == (width > 100) and ("Verdict" in text) == (width >= 100)
            x0 = next(x for x, _x1, key in bar._spans if key == "z")
            assert text[x0] == "z"  # a click on it presses it


@aio
async def test_key_bar_shows_the_screens_keys_and_a_click_presses_one():
    from gputop_dl.present.tui.key_bar import KeyBar

    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        bar = app.query_one(KeyBar)
        text = bar.render().plain
        assert text.startswith(" ⏎ Details  q Quit  ? Help  v Verdict") and text.endswith("▏^p palette ")
        assert len(text) == SIZE[0]
        assert "j/k Move" in text and "c/m/n/t/o Sort" in text and "a All epochs" in text
        assert "z Zoom" not in text  # a launch: the bottom row shows epochs, not the charts
        x0 = next(x for x, _x1, key in bar._spans if key == "question_mark")
        await pilot.click(KeyBar, offset=(x0 + 1, 0))
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))


def test_tone_text_colours_read_on_the_panels_under_every_light_theme():
    """`$text-success/-warning/-error/-accent` at 4.5:1 or better on the
    surface, the panel and the tone's muted background (the banner's) of Textual's own themes
    (textual-light's warning was 3.0:1, atom-one-light's success 2.5:1); one that reads is kept."""
    from textual.color import Color
    from textual.theme import BUILTIN_THEMES

    from gputop_dl.present.tui.contrast import MIN_CONTRAST, TEXT_TONES, contrast, readable

    light = [n for n, t in BUILTIN_THEMES.items() if not t.dark and not n.startswith("ansi")]
    assert len(light) >= 4
    before = []
    for name in light:
        theme = BUILTIN_THEMES[name]
        v = {**theme.to_color_system().generate(), **theme.variables}
        out = readable(v, dark=False)
        base = Color.parse(v["background"])
        for var, tone in TEXT_TONES:
            for back in ("surface", "panel", f"{tone}-muted"):
                bg = base + Color.parse(v[back])
                before.append(contrast(Color.parse(v[var]), bg))
                assert contrast(Color.parse(out[var]), bg) >= MIN_CONTRAST, (name, var, back)
    assert min(before) < 3.0  # the themes as they come: some did not read
    dark = BUILTIN_THEMES["textual-dark"]
    v = {**dark.to_color_system().generate(), **dark.variables}
    assert readable(v, dark=True) == v  # already readable: as the theme has it
    for name in ("ansi-light", "ansi-dark"):  # the terminal's palette: left as it is
        theme = BUILTIN_THEMES[name]
        v = {**theme.to_color_system().generate(), **theme.variables}
        assert readable(v, dark=theme.dark) == v


@aio
async def test_the_verdict_title_reads_under_an_ansi_theme():
    """ansi-light's tone text and tone background are one ANSI colour (the terminal cannot
    blend them): the title was red on red; it is in the text colour there, the tone elsewhere."""
    from gputop_dl.present.tui.verdict_banner import VerdictBanner

    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        banner = app.query_one(VerdictBanner)
        styles = {str(s.style) for s in banner.render_content(app.latest[0], mode="launch").spans}
        assert "bold $text-warning" in styles
        app.theme = "ansi-light"
        await pilot.pause()
        styles = {str(s.style) for s in banner.render_content(app.latest[0], mode="launch").spans}
        assert "bold $text-warning" not in styles and "bold" in styles


@aio
async def test_a_longer_verdict_reason_wraps_onto_a_line_more_and_is_shown_whole():
    """The banner was laid out by its newlines only: a reason that became longer than the
    screen (the live verdict names each waiting job) wrapped, and its end was cut off."""
    from gputop_dl.present.tui.verdict_banner import VerdictBanner

    def verdict(reason: str) -> dict:
        return {"kind": "cpu-bound", "title": "concurrent: CPU-bound", "reason": reason,
                "confidence": 0.8}

    long = ", ".join(f"calibrated.py --compute-ms {n} (waits {n}%)" for n in range(40, 50)) + " END"
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0, verdict=verdict("short")))
        banner = app.query_one(VerdictBanner)
        short_height = banner.size.height
        await feed(pilot, src, make_snapshot(1, verdict=verdict(long)))
        await pilot.pause()
        assert banner.size.height >= short_height + 2  # 400-odd cells on 158: three lines
        shown = "".join(banner.render_line(y).text for y in range(banner.size.height))
        assert "END" in shown
