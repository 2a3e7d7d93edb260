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
        # by the job's PID (its name where it has none): its latest name and its figures' series.
        # A found job's name changes as copies of its script come and go (collect/found.py), and
        # its history goes on under the new name
        self.series: dict[int | str, tuple[str, tuple[History, History, History]]] = {}
        self._cpus = 1

    def push(self, snap: Snapshot) -> None:
        """A new snapshot of the primary source: one value per job and figure."""
        self._cpus = max(1, snap.host.cpus) if snap.host is not None else 1
        seen: set[int | str] = set()
        for j in snap.jobs:
            key = j.pid if j.pid is not None else j.name
            seen.add(key)
            h = self.series[key][1] if key in self.series else (History(SPAN), History(SPAN), History(SPAN))
            self.series[key] = (j.name, h)
            h[0].push(None if j.cpu_cores is None else min(1.0, j.cpu_cores / self._cpus))
            h[1].push(j.stall_fraction)
            h[2].push(j.cpu_wait_fraction)
        for key in [k for k in self.series if k not in seen]:
            del self.series[key]
        self.redraw()

    def redraw(self) -> None:
        width = self.content_size.width or 100
        if not self.series:
            self.set_lines([(("no job found yet", "$text-muted"),)])
            return
        # the figures some job has a sample of (a figure none has would be a blank chart)
        known = [i for i in range(len(FIGURES))
                 if any(h[i].known for _, h in self.series.values())] or [0]
        col = max(8, (width - NAME_W - 1) // len(known) - 1)
        spark_w = max(4, col - 6)
        head: Line = ((fit("", NAME_W) + " ", ""),
                      *((fit(FIGURES[i][0], col) + " ", "bold") for i in known))
        lines: list[Line] = [head]
        for name, hist in self.series.values():
            line: list = [(fit(clean(name), NAME_W) + " ", "bold")]
            for i in known:
                chart = hist[i].settled_strip(spark_w)  # first: it sets the buckets the mean uses
                line += [(chart, "$accent on $boost"), (f"{self._mean_text(hist[i], i):>5} ", "")]
            lines.append(tuple(line))
        every = hist[known[0]].seconds_per_char * self.interval  # the charts set their buckets
        set_border(self, subtitle=f"last {SPAN * self.interval / 60:.0f} min, a bar per {every:g} s"
                                  f" · figures: the mean · CPU of {self._cpus} CPUs, waits 0–100 %")
        self.set_lines(lines)

    def _mean_text(self, h: History, figure: int) -> str:
        """A figure's mean over the window, as text ("–" when none is known)."""
        m = h.settled_mean()
        if figure == 0:  # CPU: kept as a share of the host's CPUs, shown in cores
            return num(None if m is None else m * self._cpus, ".2f")
        return pct(m)

    def on_resize(self) -> None:
        super().on_resize()
        self.redraw()
