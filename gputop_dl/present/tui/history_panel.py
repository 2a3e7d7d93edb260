"""History panel: the session as time-series charts that fill the panel (the monitor's bottom row
when no launched job has epochs to chart).

Per job: step time, estimated slowdown, CPU wait and data wait; per GPU: utilisation and memory
used; one braille line per job or GPU (colours in the legend line), drawn by `textual-plotext`.
The last 5 minutes by default; `z` zooms out to the whole session and back. The moments the
verdict's kind changed are vertical lines on the time axis (and the newest is named in the
legend): those the session recorded, read from the store before each build (recorded_marks.py),
then those of the snapshots since. A chart whose figure no job has a sample of is not shown; an
unknown stretch is a gap.

Cost: a snapshot only appends to each series (timeline.py, O(1)); the charts are built again
when a bucket closed (the window over the plot's width: 5 min over ~30 columns is 10 s) and
`REDRAW_S` passed since the last build, on a bucket boundary, so between two builds nothing on
screen moves; a resize, a zoom or a chart appearing builds them at once; only while the panel
is on screen (a modal, a launch's epoch panel or the first frame's layout skip it; it is drawn
when it shows again). One build of all six charts is ~30 ms (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.content import Content

from gputop_dl.present.tui.base import Panel, set_border
from gputop_dl.present.tui.recorded_marks import RecordedChanges
from gputop_dl.present.tui.timeline import (CLEAR_COLOUR, FINE_S, MARK_COLOUR, Figure, Marks, Timeline,
                                            ago, mark_glyph)
from gputop_dl.text.safe import clean

if TYPE_CHECKING:
    from gputop_dl.snapshot import GpuSample, Snapshot
    from gputop_dl.present.tui.series_chart import SeriesChart

# mid-tone colours that read on dark and light themes alike; jobs and GPUs have their own
JOB_COLOURS = ((0, 130, 200), (230, 25, 75), (60, 160, 75), (245, 130, 48), (145, 30, 180),
               (0, 128, 128), (154, 99, 36), (128, 128, 0))
GPU_COLOURS = ((240, 50, 230), (0, 170, 200), (128, 128, 128), (250, 120, 160), (150, 200, 40),
               (150, 40, 40), (90, 100, 170), (110, 160, 120))
MAX_LINES = 8  # jobs (and GPUs) charted at most; the legend says how many are left out
# the charts are built again at most this often (and only when a bucket closed): a build of six
# charts is ~30 ms of the UI thread (docs/benchmarks.md), 5 % of the 5-minute view's width
REDRAW_S = 15.0


def _gpu_mem(g: GpuSample) -> float | None:
    return g.mem_used / g.mem_total if g.mem_used is not None and g.mem_total else None


FIGURES = (
    Figure("step", "step time (s)", "job", lambda j: j.step_time_s),
    Figure("slowdown", "slowdown (× alone)", "job", lambda j: j.slowdown, floor=None, least_top=1.5),
    Figure("cpuwait", "CPU wait (%)", "job", lambda j: j.cpu_wait_fraction, percent=True),
    Figure("stall", "data wait (%)", "job", lambda j: j.stall_fraction, percent=True),
    Figure("gpu", "GPU util (%)", "gpu", lambda g: g.util, percent=True),
    Figure("gpumem", "GPU memory used (%)", "gpu", _gpu_mem, percent=True),
)


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


class HistoryPanel(Vertical):
    """The charts of the session's jobs and GPUs; `push(snapshot)` each tick, `zoom()` on `z`."""

    DEFAULT_CSS = """
    HistoryPanel { height: 1fr; }
    HistoryPanel #legend { height: auto; max-height: 2; }
    HistoryPanel #charts { layout: grid; grid-size: 3; grid-gutter: 0 2; height: 1fr; }
    """

    def __init__(self, interval: float = 1.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.border_title = "history"
        self.interval = interval
        # by the job's PID (its name where it has none): its latest name and a series per figure;
        # a found job's name changes as copies of its script come and go (collect/jobs/found.py), and
        # its history goes on under the new name. Jobs that ended stay (the whole-session view)
        self.jobs: dict[int | str, tuple[str, dict[str, Timeline]]] = {}
        self.gpus: dict[int, dict[str, Timeline]] = {}
        self.marks = Marks()
        self.whole = False  # zoomed out to the whole session
        self.now: float | None = None
        self.started: float | None = None
        self.drawn_at: float | None = None  # the bucket end the charts were last built for
        self.drawn_shape: tuple[object, ...] = ()
        self.built_at = -math.inf  # the snapshot time of the last build
        self.builds = 0  # chart builds (for tests and benchmarks)
        self._mounted_charts: dict[str, SeriesChart] | None = None
        self.colour: dict[int | str, int] = {}  # a job's index into JOB_COLOURS
        # the recorded session's (store path, session id), set by the app: its verdict changes
        # are read from the store before each build (None: the snapshots' marks alone)
        self.session: Callable[[], tuple[str | None, str | None]] | None = None
        self.recorded = RecordedChanges()

    def compose(self) -> ComposeResult:
        yield Panel(Content.styled("no job found yet", "$text-muted"), id="legend")
        yield Container(id="charts")  # the charts: mounted when first shown (`_charts`)

    def _charts(self) -> dict[str, SeriesChart] | None:
        """The charts by figure, mounted the first time the panel is on screen: plotext's
        import (~17 ms) stays off the monitor's first frame. None until they are laid out."""
        if self._mounted_charts is None:
            from gputop_dl.present.tui.series_chart import SeriesChart

            self._mounted_charts = {f.key: SeriesChart(id=f"chart-{f.key}") for f in FIGURES}
            self.query_one("#charts").mount(*self._mounted_charts.values())
            self.call_after_refresh(self.redraw)
            return None
        return self._mounted_charts

    # --- data ------------------------------------------------------------------------------------
    def push(self, snap: Snapshot) -> None:
        """A new snapshot of the primary source: one sample per job/GPU and figure."""
        t = snap.time
        self.now = t
        if self.started is None:
            self.started = t
        seen: set[int | str] = set()
        for j in snap.jobs:
            key = j.pid if j.pid is not None else j.name
            seen.add(key)
            if key not in self.colour:  # a job keeps its colour while it is charted
                self.colour[key] = len(self.colour)
            series = self.jobs[key][1] if key in self.jobs else {
                f.key: Timeline(self.interval) for f in FIGURES if f.of == "job"}
            self.jobs[key] = (j.name, series)
            for f in FIGURES:
                if f.of == "job":
                    series[f.key].push(t, f.value(j))
        for g in snap.gpus:
            gs = self.gpus.setdefault(g.index, {f.key: Timeline(self.interval) for f in FIGURES if f.of == "gpu"})
            for f in FIGURES:
                if f.of == "gpu":
                    gs[f.key].push(t, None if g.error else f.value(g))
        self._forget_ended(seen)
        self.marks.push(t, (snap.verdict or {}).get("kind"))
        self.redraw()

    def _forget_ended(self, seen: set[int | str]) -> None:
        """Ended jobs stay for the whole-session view; at most 2 × MAX_LINES of them (oldest out)."""
        ended = [k for k in self.jobs if k not in seen]
        for k in ended[:max(0, len(ended) - 2 * MAX_LINES)]:
            del self.jobs[k]
            self.colour.pop(k, None)

    # --- drawing ---------------------------------------------------------------------------------
    def window(self) -> float:
        """The view's span: 5 minutes, or the whole session rounded up to a minute (so that the
        zoomed-out charts are built again once a bucket, not with every sample)."""
        if self.whole and self.now is not None and self.started is not None:
            return max(FINE_S, 60.0 * math.ceil((self.now - self.started) / 60.0))
        return FINE_S

    def toggle_zoom(self) -> None:
        self.whole = not self.whole
        self.drawn_at, self.drawn_shape = None, ()  # built again at once
        self.redraw()

    def _visible(self) -> bool:
        """On the screen shown (not before it is mounted: the monitor mounts it after its first
        frame, and keeps what came meanwhile)."""
        return (self.is_mounted and bool(self.display) and self.screen is self.app.screen
                and self.region.area > 0)

    def redraw(self) -> None:
        """Build the charts again if a bucket closed since the last build and they are on screen."""
        if self.now is None or not self._visible():
            return
        mounted = self._charts()
        if mounted is None:
            return
        charts = self.query_one("#charts")
        shown = [f for f in FIGURES if self._known(f)]
        ncols = 3 if len(shown) > 4 or len(shown) == 3 else min(2, max(1, len(shown)))
        width = max(10, (charts.size.width or 90) // ncols - 8)  # the plot area, less its y labels
        window = self.window()
        bucket = max(self.interval, window / width)
        end = math.floor(self.now / bucket) * bucket  # the last closed bucket's end
        shape = (tuple(f.key for f in shown), width, window)  # a change: built again at once
        if shape == self.drawn_shape and (end == self.drawn_at or self.now - self.built_at < REDRAW_S):
            return
        self.drawn_at, self.drawn_shape, self.built_at = end, shape, self.now
        if charts.styles.grid_size_columns != ncols:
            charts.styles.grid_size_columns = ncols
        n = max(1, round(window / bucket))
        if self.session is not None:
            rows = self.recorded.read(*self.session())
            if rows is not None:
                self.marks.load(rows)
        marks = [(t - end, new) for t, _old, new in self.marks.within(end - window, end)]
        # the jobs with a sample in the view, in the order they came (ended ones too)
        in_view = [(k, v) for k, v in self.jobs.items() if v[1]["cpuwait"].last_t >= end - window]
        jobs = [(JOB_COLOURS[self.colour[k] % len(JOB_COLOURS)], name, s) for k, (name, s) in in_view[:MAX_LINES]]
        gpus = sorted(self.gpus.items())[:MAX_LINES]
        for f in FIGURES:
            chart = mounted[f.key]
            on = f in shown
            if chart.display != on:
                chart.display = on
            if not on:
                continue
            if f.of == "job":
                lines = [(colour, s[f.key].points(end, window, n)) for colour, _name, s in jobs]
            else:
                lines = [(GPU_COLOURS[i % len(GPU_COLOURS)], gs[f.key].points(end, window, n))
                         for i, (_idx, gs) in enumerate(gpus)]
            chart.draw(f, lines, window, marks)
        self.builds += 1
        self._legend(jobs, len(in_view), gpus, end, window, bucket)

    def _known(self, f: Figure) -> bool:
        """Whether some job or GPU has a sample of this figure in the session."""
        group = (s for _n, s in self.jobs.values()) if f.of == "job" else iter(self.gpus.values())
        return any(s[f.key].coarse for s in group)

    def _legend(self, jobs: Sequence[tuple[tuple[int, int, int], str, object]], n_in_view: int,
                gpus: Sequence[tuple[int, object]], end: float, window: float, bucket: float) -> None:
        parts: list[tuple[str, str]] = []
        for colour, name, _s in jobs:
            parts += [("━━ ", _hex(colour)), (clean(name) + "  ", "bold")]
        if n_in_view > len(jobs):
            parts.append((f"(+{n_in_view - len(jobs)} more not charted)  ", "$text-muted"))
        if gpus:
            parts.append(("GPUs ", "$text-muted"))
            for i, (idx, _g) in enumerate(gpus):
                parts += [("━━ ", _hex(GPU_COLOURS[i % len(GPU_COLOURS)])), (f"{idx}  ", "bold")]
        if not parts:
            parts.append(("no job found yet", "$text-muted"))
        self.query_one("#legend", Panel).set(Content.assemble(*parts))
        # the newest change in view, in the border's title: the legend's second line may be cut
        newest = self.marks.within(end - window, end)
        if newest:
            t, old, new = newest[-1]
            more = f" · {len(newest) - 1} earlier" if len(newest) > 1 else ""
            glyph, colour = mark_glyph(new)
            title = f"history · [{_hex(colour)}]{glyph}[/] verdict {old} → {new} at {ago(t - end)}{more}"
        else:
            title = "history"
        set_border(self, title=title)
        span = "whole session" if self.whole else f"last {FINE_S / 60:.0f} min"
        set_border(self, subtitle=f"{span} (z: {'last 5 min' if self.whole else 'whole session'})"
                                  f" · a point (mean) per {bucket:.3g} s, redrawn every "
                                  f"{math.ceil(REDRAW_S / bucket) * bucket:.3g} s · "
                                  f"[{_hex(MARK_COLOUR)}]│[/] verdict changed "
                                  f"[{_hex(CLEAR_COLOUR)}]╎[/] parallel again")

    def on_resize(self) -> None:
        self.redraw()

    def on_unmount(self) -> None:
        self.recorded.close()
