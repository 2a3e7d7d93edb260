"""The TUI's energy column and details line through Textual's Pilot, fed by a fake source."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("textual")

from gputop_dl.present.tui.jobs_table import JobsTable  # noqa: E402
from gputop_dl.present.tui.screens import JobDetailScreen  # noqa: E402
from gputop_dl.text.fmt import DASH, joules  # noqa: E402
from tests.fakes.source import make_snapshot  # noqa: E402
from tests.test_tui import aio, body_text, cell, feed, new_app, wait_for  # noqa: E402

# wide enough for the launch view's columns up to energy (ranked after GPU memory: a narrower
# terminal leaves it out first, present/job_columns.py)
SIZE = (220, 50)


def _with_energy(snap):
    a, b, c = snap.jobs
    a = replace(a, energy_j=12_345.0, energy_w=310.0, energy_per_step_j=29.1,
                samples_per_joule=1.1, energy_estimate=False, energy_source="counter")
    b = replace(b, energy_j=4_000.0, energy_w=150.0, energy_estimate=True,
                energy_source="counter", energy_note="a GPU it shares split by time share")
    c = replace(c, energy_note="not on a GPU: NVML lists none of its processes")
    return replace(snap, jobs=(a, b, c))


@aio
async def test_jobs_table_energy_column_and_the_details_line():
    app, src = new_app()
    async with app.run_test(size=SIZE) as pilot:
        await feed(pilot, src, make_snapshot(0))
        table = app.query_one(JobsTable)
        assert await wait_for(pilot, lambda: "rss" in table.visible_columns())  # laid out
        assert "energy" not in table.visible_columns()  # nobody has energy: the column waits
        await feed(pilot, src, _with_energy(make_snapshot(1)))
        assert await wait_for(pilot, lambda: "energy" in table.visible_columns())
        assert cell(table, "job:0:bs32", "energy") == joules(12_345.0)
        assert cell(table, "job:0:bs64", "energy") == "~" + joules(4_000.0)
        assert cell(table, "job:0:bs128", "energy") == DASH
        await pilot.press("enter")  # the cursor's row: bs32
        assert isinstance(app.screen, JobDetailScreen)
        line = next(x for x in body_text(app.screen).splitlines() if x.startswith("energy"))
        assert joules(12_345.0) in line and joules(29.1) in line and "310 W" in line
