"""History panel: each found job's CPU, data wait and CPU wait over the last minutes, as wide
sparklines side by side (the monitor's bottom row when no launched job has epochs to chart).

One `History` (charts.py: 0..1 series, bucketed to the width) per job and figure, pushed once per
snapshot; CPU is scaled by the host's CPUs. Drawn as a `LinePanel`: only changed lines repaint.
Each chart shows its closed buckets and, beside it, the window's mean, both taken again when a
bucket closes (every few seconds): the live figures are the jobs table's, and a history row
that changed every second would cost a repaint per job per tick (docs/benchmarks.md).
"""

from __future__ import annotations

from gputop_dl.present.tui.base import LinePanel, Line, set_border
from gputop_dl.present.tui.charts import History, fit
from gputop_dl.snapshot import Snapshot
from gputop_dl.text.fmt import num, pct
from gputop_dl.text.safe import clean

SPAN = 300  # samples kept per series (5 minutes at 1 Hz)
NAME_W = 26  # as the jobs table's job column
FIGURES = (("CPU", "cpu"), ("data-wait", "stall"), ("CPU wait", "cpuwait"))


class HistoryPanel(LinePanel):
    DEFAULT_CSS = """
    HistoryPanel { height: 1fr; }
    """

    def __init__(self, interval: float = 1.0, **kw):
        super().__init__(**kw)
        self.border_title = "history"
        self.interval = interval
        # by the job's PID (its name where it has none): a found job's name changes as copies of
        # its script come and go (collect/found.py), and its history goes on under the new name
        self.series: dict[int | str, tuple[History, History, History]] = {}
        self.names: dict[int | str, str] = {}
        self._cpus = 1

    def push(self, snap: Snapshot) -> None:
        """A new snapshot of the primary source: one value per job and figure."""
        self._cpus = max(1, snap.host.cpus) if snap.host is not None else 1
        seen: set[int | str] = set()
        for j in snap.jobs:
            key = j.pid if j.pid is not None else j.name
            seen.add(key)
            self.names[key] = j.name
            h = self.series.get(key)
            if h is None:
                h = self.series[key] = (History(SPAN), History(SPAN), History(SPAN))
            h[0].push(None if j.cpu_cores is None else min(1.0, j.cpu_cores / self._cpus))
            h[1].push(j.stall_fraction)
            h[2].push(j.cpu_wait_fraction)
        for key in [k for k in self.series if k not in seen]:
            del self.series[key]
            del self.names[key]
        self.redraw()

    def redraw(self) -> None:
        width = self.content_size.width or 100
        if not self.series:
            self.set_lines([(("no job found yet", "$text-muted"),)])
            return
        # the figures some job has a sample of (a figure none has would be a blank chart); the
        # charts are drawn first, as they set the buckets that `every` and the means use
        known = [i for i in range(len(FIGURES))
                 if any(h[i].known for h in self.series.values())] or [0]
        col = max(8, (width - NAME_W - 1) // len(known) - 1)
        spark_w = max(4, col - 6)
        charts = {key: [hist[i].settled_strip(spark_w) for i in known] for key, hist in self.series.items()}
        figs = {key: self._means(hist, known) for key, hist in self.series.items()}
        minutes = SPAN * self.interval / 60
        every = next(iter(self.series.values()))[known[0]].seconds_per_char * self.interval
        set_border(self, subtitle=f"last {minutes:.0f} min, a bar per {every:g} s · figures: the mean · "
                                  f"CPU of {self._cpus} CPUs, waits 0–100 %")
        head: Line = ((fit("", NAME_W) + " ", ""),
                      *((fit(FIGURES[i][0], col) + " ", "bold") for i in known))
        lines: list[Line] = [head]
        for key in self.series:
            line: list = [(fit(clean(self.names[key]), NAME_W) + " ", "bold")]
            for chart, fig in zip(charts[key], figs[key]):
                line += [(chart, "$accent on $boost"), (f"{fig:>5} ", "")]
            lines.append(tuple(line))
        self.set_lines(lines)

    def _means(self, hist: tuple[History, History, History], shown: list[int]) -> list[str]:
        """Each shown figure's mean over the window, as text ("–" when none is known)."""
        out = []
        for i in shown:
            m = hist[i].settled_mean()
            out.append(num(None if m is None else m * self._cpus, ".2f") if i == 0 else pct(m))
        return out

    def on_resize(self) -> None:
        super().on_resize()
        self.redraw()
