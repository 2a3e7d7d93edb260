"""The TUI with jobs it did not launch (Pilot, fake source): rows render, unknowns show "—"."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

pytest.importorskip("textual")

from gputop_dl.present.tui.app import GputopApp  # noqa: E402
from gputop_dl.present.tui.jobs_table import JobsTable  # noqa: E402
from gputop_dl.present.tui.screens import JobDetailScreen  # noqa: E402
from gputop_dl.text.fmt import DASH  # noqa: E402
from gputop_dl.snapshot import GpuProcess, JobSample  # noqa: E402

from tests.fakes.source import T0, FakeSource, FixedClock, monitor_snapshot

GiB = 1 << 30


def test_unlaunched_jobs_render_with_dashes_for_unknowns():
    fresh = JobSample(name="train.py", pid=5100, launched=False, pids=(5100,), status="running",
                      command="python train.py --bs 64")  # first tick: nothing known yet
    spied = JobSample(name="torchrun ddp.py", pid=5200, launched=False, pids=(5200, 5201, 5202),
                      status="running", device="gpu0", cpu_cores=1.93, rss=3 * GiB, threads=40,
                      stall_fraction=0.42, stall_source="py-spy", stall_samples=297,
                      gpu_mem=5 * GiB, command="torchrun --nproc-per-node 2 ddp.py")
    snap = replace(monitor_snapshot(0), jobs=(fresh, spied),
                   gpu_processes=(GpuProcess(0, 5201, 5 * GiB, 0.5),),
                   notes=("GPU memory used by 2 processes outside this container's PID namespace: 7.0 GiB",))

    async def go():
        src = FakeSource(live=[], spec=None, session_id=None)
        app = GputopApp(src, clock=FixedClock(T0), mode="monitor")
        async with app.run_test(size=(160, 50)) as pilot:
            src.emit(snap)
            await pilot.pause()
            table = app.query_one(JobsTable)
            keys = table.order()
            # found jobs' rows are keyed by PID (jobs_table.job_key); GPU pid 5201 is in a job
            assert keys == [f"job:0:found:{fresh.pid}", "job:0:found:5200"]
            row = {c: table.cell(f"job:0:found:{fresh.pid}", c).text.strip() for c in
                   ("job", "status", "device", "batch", "progress", "eta", "step", "sps", "stall",
                    "cpu", "rss", "gpumem", "slowdown")}
            assert row["job"] == "train.py" and row["status"] == "running"  # no ● mark
            assert {row[c] for c in ("device", "batch", "eta", "step", "sps", "stall", "cpu", "rss",
                                     "gpumem", "slowdown")} == {DASH}
            assert table.cell("job:0:found:5200", "stall").text.strip() == "42%"
            assert table.cell("job:0:found:5200", "gpumem").text.strip() == "5.0 GiB"
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, JobDetailScreen)
            await pilot.press("escape")
            await pilot.press("s")  # stop: only launched jobs
            await pilot.pause()
            assert any("only jobs launched" in n.message for n in app._notifications)
            # the next tick: the job is gone; the row goes, nothing crashes
            src.emit(replace(snap, time=T0 + 1, jobs=(spied,)))
            await pilot.pause()
            assert table.row_count == 1

    asyncio.run(go())
