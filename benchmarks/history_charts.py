#!/usr/bin/env python3
"""What the history charts cost the monitor's UI thread.

    .venv/bin/python benchmarks/history_charts.py            # 3 and 12 found jobs, 2 GPUs

The monitor app in a headless 160×50 Textual session, fed 10 minutes of fake found-job
snapshots (tests/fakes/source.py; 3 or 12 jobs, 2 GPUs, 6 charts shown); then the charts are
built again `--rounds` times (as a closed bucket does) and each build is timed: the panel's
series → chart data (`HistoryPanel.redraw`) and each chart's plotext build and ANSI parse
(`SeriesChart.render`), thread CPU. Prints the median build, the bucket (how often a build
happens in the 5-minute view) and what that is per second, % of one core.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


async def measure(n_jobs: int, rounds: int) -> dict:
    from gputop_dl.present.tui.app import GputopApp
    from gputop_dl.present.tui.history_panel import HistoryPanel
    from gputop_dl.present.tui.series_chart import SeriesChart
    from tests.fakes.source import T0, FakeSource, FixedClock, found_jobs_snapshot

    def snap(t: int):
        s = found_jobs_snapshot(t)
        jobs = tuple(replace(s.jobs[i % 3], name=f"job{i}", pid=6000 + i) for i in range(n_jobs))
        return replace(s, jobs=jobs)

    src = FakeSource(live=[], spec=None, session_id=None)
    app = GputopApp(src, clock=FixedClock(T0), mode="monitor")
    async with app.run_test(size=(160, 50)) as pilot:
        for t in range(0, 600, 5):
            src.emit(snap(t))
            await pilot.pause()
        panel = app.query_one(HistoryPanel)
        charts = [c for c in panel.query(SeriesChart) if c.display]
        builds = []
        for _ in range(rounds):
            panel.drawn_at, panel.drawn_shape = None, ()
            c0 = time.thread_time()
            panel.redraw()
            for c in charts:
                c.render()
            builds.append(time.thread_time() - c0)
            await pilot.pause()
        bucket = float(panel.border_subtitle.split("redrawn every ")[1].split(" s")[0])
    return {"jobs": n_jobs, "charts": len(charts), "build_ms": 1e3 * statistics.median(builds),
            "min_ms": 1e3 * min(builds), "max_ms": 1e3 * max(builds), "bucket_s": bucket}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    print(f"history charts: one build of all charts, thread CPU, median of {rounds}; load "
          f"{os.getloadavg()[0]:.2f}")
    for n in (3, 12):
        r = asyncio.run(measure(n, rounds))
        print(f"  {r['jobs']:>2} jobs, {r['charts']} charts: {r['build_ms']:.1f} ms "
              f"(min {r['min_ms']:.1f}, max {r['max_ms']:.1f}); a build every {r['bucket_s']:g} s "
              f"(5-min view) = {r['build_ms'] / 10 / r['bucket_s']:.3f} % of one core")


if __name__ == "__main__":
    main()
