"""History panel: each found job's CPU, data wait and CPU wait over the last minutes, as wide
sparklines side by side (the monitor's bottom row when no launched job has epochs to chart).

One `History` (charts.py: 0..1 series, bucketed to the width) per job and figure, pushed once per
snapshot; CPU is scaled by the host's CPUs. Drawn as a `LinePanel`: only changed lines repaint.
"""

from __future__ import annotations

from gputop_dl.present.tui.base import LinePanel, Line, set_border
from gputop_dl.present.tui.charts import History, fit
from gputop_dl.snapshot import Snapshot
from gputop_dl.text.fmt import DASH, num, pct
from gputop_dl.text.safe import clean

SPAN = 300  # samples kept per series (5 minutes at 1 Hz)
NAME_W = 22
FIGURES = (("CPU", "cpu"), ("data-wait", "stall"), ("CPU wait", "cpuwait"))


class HistoryPanel(LinePanel):
    DEFAULT_CSS = """
    HistoryPanel { height: 1fr; }
    """

    def __init__(self, interval: float = 1.0, **kw):
        super().__init__(**kw)
        self.border_title = "history"
        self.interval = interval
        self.series: dict[str, tuple[History, History, History]] = {}
        self.last: dict[str, tuple] = {}  # job -> its latest figures (text)
        self._cpus = 1

    def push(self, snap: Snapshot) -> None:
        """A new snapshot of the primary source: one value per job and figure."""
        self._cpus = max(1, snap.host.cpus) if snap.host is not None else 1
        seen = set()
        for j in snap.jobs:
            seen.add(j.name)
            h = self.series.get(j.name)
            if h is None:
                h = self.series[j.name] = (History(SPAN), History(SPAN), History(SPAN))
            h[0].push(None if j.cpu_cores is None else min(1.0, j.cpu_cores / self._cpus))
            h[1].push(j.stall_fraction)
            h[2].push(j.cpu_wait_fraction)
            self.last[j.name] = (num(j.cpu_cores, ".2f"), pct(j.stall_fraction), pct(j.cpu_wait_fraction))
        for name in [n for n in self.series if n not in seen]:
            del self.series[name]
            del self.last[name]
        self.redraw()

    def redraw(self) -> None:
        width = self.content_size.width or 100
        if not self.series:
            self.set_lines([(("no job found yet", "$text-muted"),)])
            return
        shown = [i for i in range(len(FIGURES))  # a figure no job has is left out
                 if any(figs[i] != DASH for figs in self.last.values())] or [0]
        col = max(8, (width - NAME_W - 1) // len(shown) - 1)
        spark_w = max(4, col - 6)
        minutes = SPAN * self.interval / 60
        set_border(self, subtitle=f"last {minutes:.0f} min · CPU of {self._cpus} CPUs, waits 0–100 %")
        head: Line = ((fit("", NAME_W) + " ", ""),
                      *((fit(FIGURES[i][0], col) + " ", "bold") for i in shown))
        lines: list[Line] = [head]
        for name, hist in self.series.items():
            figs = self.last[name]
            line: list = [(fit(clean(name), NAME_W) + " ", "bold")]
            for i in shown:
                line += [(hist[i].strip(spark_w), "$accent on $boost"), (f"{figs[i]:>5} ", "")]
            lines.append(tuple(line))
        self.set_lines(lines)

    def on_resize(self) -> None:
        super().on_resize()
        self.redraw()
