"""Host panel: overall and per-core CPU, load average, CPU pressure (PSI), throttling, memory.

Per-core CPU is one block character per core on the fixed 0-100 % scale (so 128 cores still fit
in a few lines); with up to 8 cores each core's percentage is printed too. CPU pressure and cgroup
throttling appear only where the kernel provides them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop_dl.text.fmt import DASH, num, pct, size
from gputop_dl.present.tui.base import Line, LinePanel, Run
from gputop_dl.present.tui.charts import History, bar, block, level, text_level

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import HostSample

LABEL_W = 6
HISTORY_S = 600.0


def _mem_pair(used: int, total: int | None) -> str:
    """"41.5/125.7 GiB" (one unit, the total's)."""
    if total is None:
        return size(used)
    if total >= 1024**3:
        return f"{used / 1024**3:.1f}/{total / 1024**3:.1f} GiB"
    return f"{used / 1024**2:.0f}/{total / 1024**2:.0f} MiB"


class HostPanel(LinePanel):
    """The machine's CPU and memory."""

    DEFAULT_CSS = """
    HostPanel { height: auto; min-height: 3; }
    """

    def __init__(self, *, interval: float = 1.0, waiting: str = "waiting for the first sample…",
                 **kw: Any) -> None:
        """`waiting`: what it says until the first reading of the host comes."""
        super().__init__(((waiting, "$text-muted"),), **kw)
        self.waits_for = "host"
        self.border_title = "host"
        self.history = History(max(10, int(HISTORY_S / max(interval, 0.05))))
        self._host: HostSample | None = None

    def lines_needed(self) -> int:
        h = self._host
        if h is None:
            return 1
        width = max(20, self.content_size.width or 48)
        per_line = max(8, width - LABEL_W)
        return 5 + max(1, -(-len(h.per_cpu) // per_line)) if h.per_cpu else 5

    def show(self, host: HostSample | None) -> None:
        if host is not None:
            self.history.push(host.cpu_busy)
        self._host = host
        self.waits_for = None
        self.set_lines(self.render_content())

    def on_resize(self) -> None:
        if self._host is not None:
            self.set_lines(self.render_content())

    def render_content(self) -> list[Line]:
        h = self._host
        if h is None:
            return [(("no host sample", "$text-muted"),)]
        width = max(20, self.content_size.width or 48)
        bar_w = max(6, min(width - LABEL_W - 16, 40))  # a full-width panel (no GPU) keeps short bars
        lines: list[Line] = []

        fill, empty = bar(h.cpu_busy, bar_w)
        lines.append((
            (f"{'CPU':<{LABEL_W}}", "bold"), (fill, level(h.cpu_busy)), (empty, "$foreground-muted"),
            (f" {pct(h.cpu_busy):>4}", text_level(h.cpu_busy)), f" of {h.cpus} CPU{'s' if h.cpus != 1 else ''}"))

        if h.per_cpu:
            per_line = max(8, width - LABEL_W)
            cores = list(h.per_cpu)
            first = True
            for i in range(0, len(cores), per_line):
                chunk = cores[i:i + per_line]
                parts: list[Run] = [(f"{'cores' if first else '':<{LABEL_W}}", "bold")]
                parts += [(block(c), f"{level(c)} on $boost") for c in chunk]
                if first and len(cores) <= 8:
                    parts.append("  " + " ".join(f"{c * 100:.0f}%" for c in cores))
                lines.append(tuple(parts))
                first = False

        cpus = h.cpus or 1
        per = None if h.load1 is None else h.load1 / cpus
        lines.append((
            (f"{'load':<{LABEL_W}}", "bold"),
            f"{num(h.load1, '.2f')} {num(h.load5, '.2f')} {num(h.load15, '.2f')}  ",
            (f"{num(per, '.2f')} per CPU", text_level(per, 0.9, 1.0))))

        psi = []
        if h.cpu_pressure_some10 is not None:
            psi.append(("some ", ""))
            psi.append((pct(h.cpu_pressure_some10), text_level(h.cpu_pressure_some10, 0.1, 0.3)))
        else:
            psi.append(("PSI n/a", "$text-muted"))
        if h.cgroup_throttled_frac is not None:
            psi.append(("  throttled ", ""))
            psi.append((pct(h.cgroup_throttled_frac), text_level(h.cgroup_throttled_frac, 0.05, 0.2)))
        lines.append(((f"{'press':<{LABEL_W}}", "bold"), *psi))

        mfrac = h.mem_used / h.mem_total if h.mem_used is not None and h.mem_total else None
        fill, empty = bar(mfrac, bar_w)
        mem = DASH if h.mem_used is None else _mem_pair(h.mem_used, h.mem_total)
        lines.append((
            (f"{'mem':<{LABEL_W}}", "bold"), (fill, level(mfrac, 0.8, 0.95)), (empty, "$foreground-muted"),
            (f" {mem}", text_level(mfrac, 0.8, 0.95))))

        lines.append(((f"{'busy':<{LABEL_W}}", "bold"), (self.history.strip(width - LABEL_W), "$accent on $boost")))
        return lines
