"""The live fleet view driven by a fake source (no network): rows by key, a node going down
and coming back, a vanished job's row removed, details, sorting, polling now, quitting."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

pytest.importorskip("textual")

from gputop_dl.analyse.live.distributed import group_distributed  # noqa: E402
from gputop_dl.collect.fleet.nodes import Node  # noqa: E402
from gputop_dl.collect.fleet.poll import FleetSnapshot  # noqa: E402
from gputop_dl.present.tui.fleet_app import FleetApp  # noqa: E402
from gputop_dl.present.tui.screens import HelpScreen, JobDetailScreen  # noqa: E402
from tests.fakes.fleet import T0, FakeFleetSource, fleet_nodes, fleet_snapshot  # noqa: E402


def snap_of(nodes, t=0.0, last_ok=None):
    return FleetSnapshot(time=T0 + t, nodes=nodes, distributed=group_distributed(nodes),
                         poll_s=0.01, last_ok=last_ok or {})


def run(body):
    async def go():
        src = FakeFleetSource()
        app = FleetApp(src, clock=lambda: T0 + 1)
        async with app.run_test(size=(160, 50)) as pilot:
            await body(app, src, pilot)
        return app, src

    return asyncio.run(go())


def test_rows_by_key_a_node_down_and_back_and_a_vanished_job():
    async def body(app, src, pilot):
        assert src.started
        src.emit(fleet_snapshot())
        await pilot.pause()
        nodes, jobs, dist = app.nodes_table, app.jobs_table, app.dist_table
        assert nodes.order() == ["node:gpu-a:9402", "node:gpu-b:9402", "node:gpu-c:9402"]
        assert nodes.cell("node:gpu-b:9402", "state").text.startswith("unreachable for 12 s (Connection refused)")
        assert nodes.cell("node:gpu-c:9402", "state").text.strip() == "stale 14 s"
        assert nodes.cell("node:gpu-a:9402", "gpumem").text.strip() == "119.5/160 GiB"
        assert jobs.row_count == 3
        assert dist.cell("run:rdzv-7f3a", "seen").text.strip() == "3/4"
        assert dist.cell("run:rdzv-7f3a", "missing").text.startswith("3 (was on gpu-b:9402)")
        assert app.screen.has_class("-distributed")
        # the same fleet again: no row is rendered again
        await pilot.pause()
        renders = (nodes.row_renders, jobs.row_renders)
        src.emit(fleet_snapshot())
        await pilot.pause()
        assert (nodes.row_renders, jobs.row_renders) == renders
        # gpu-b comes back with the missing rank; eval.py on gpu-a has ended
        a, _b, c = fleet_nodes()
        a = replace(a, jobs=a.jobs[:1])
        b = replace(c, address="gpu-b:9402", hostname="gpu-b", age_s=0.5,
                    jobs=[replace(c.jobs[0], pid=8100, ranks=[{"rank": 3, "local_rank": 0, "rank_pid": 8101}])])
        src.emit(snap_of([a, b, c], 2))
        await pilot.pause()
        assert nodes.cell("node:gpu-b:9402", "state").text.strip() == "ok"
        assert "job:gpu-a:9402:eval.py:6100" not in jobs.order() and jobs.row_count == 3
        assert dist.cell("run:rdzv-7f3a", "seen").text.strip() == "4/4"
        assert dist.cell("run:rdzv-7f3a", "missing").text.strip() == "–"
        # no distributed job any more: its table goes away
        src.emit(snap_of([replace(a, jobs=[]), Node("gpu-b:9402", False, "unreachable (timed out)")], 4))
        await pilot.pause()
        assert not app.screen.has_class("-distributed") and jobs.row_count == 0
        assert nodes.order() == ["node:gpu-a:9402", "node:gpu-b:9402"]

    run(body)


def test_details_sort_poll_now_help_and_quit():
    async def body(app, src, pilot):
        src.emit(fleet_snapshot())
        await pilot.pause()
        await pilot.press("j", "enter")  # the unreachable node: its last error
        assert isinstance(app.screen, JobDetailScreen)
        text = str(app.screen.query_one("#body").content)
        assert "unreachable (Connection refused)" in text and "last error" in text
        await pilot.press("escape")
        await pilot.press("tab", "enter")  # the distributed job
        text = str(app.screen.query_one("#body").content)
        assert "rdzv-7f3a" in app.screen.TITLE_TEXT and "3 (last seen on gpu-b:9402)" in text
        await pilot.press("escape", "tab", "t")  # jobs by step time, slowest first
        assert app.jobs_table.order()[0] == "job:gpu-c:9402:torchrun train.py:7100"
        assert "sorted by step time" in app.jobs_table.border_subtitle
        await pilot.press("u")  # the jobs table has no GPU util sort: a notice, no change
        assert app.jobs_table.sort_by == "step"
        await pilot.press("r")
        assert src.polled_now == 1
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "q")

    app, src = run(body)
    assert src.stopped and app.return_code == 0


def test_a_prometheus_error_is_one_line_and_polls_going_stale_show_in_the_title():
    async def body(app, src, pilot):
        src.emit(FleetSnapshot(time=T0 - 30, nodes=[], source="http://p:9090",
                               error="http://p:9090 unreachable (Connection refused)"))
        await pilot.pause()
        assert "cannot read the fleet: http://p:9090 unreachable" in str(app.summary.content)
        assert app.summary.has_class("-error")
        assert "no poll finished for 31 s" in str(app.title_bar.content)

    run(body)


def test_a_runs_details_name_each_node_and_the_duplicates_counted_once():
    from gputop_dl.present.tui.fleet_app import FleetApp
    from gputop_dl.present.tui.job_detail import job_detail_lines

    run = {"run_id": "r1", "job": "ddp", "world_size": 2, "ranks_seen": [0, 1],
           "missing_ranks": [], "missing_last_seen": {}, "slowest_step_s": 0.024,
           "slowest_node": "127.0.0.1:19403",
           "nodes": [{"node": "127.0.0.1:19402", "ranks": [1], "pid": 7, "status": "running",
                      "step_time_s": 0.024}],
           "duplicates": [{"node": "127.0.0.1:19402", "same_as": "127.0.0.1:19403",
                           "job": "torchrun train.py"}]}
    text = job_detail_lines(None, None, FleetApp.run_details(run)).plain
    assert "\non 127.0.0.1:19402      ranks 1 · pid 7" in text  # labels padded to the longest
    assert "also on 127.0.0.1:19402 torchrun train.py: the ranks 127.0.0.1:19403 shows, counted once" in text
