"""GPU panel: one row per GPU (utilisation and memory bars, temperature, power, PCIe link and
rates, what held its clocks down, 10-minute history).

With no NVIDIA GPU (no library, no driver, no devices) the panel shows one line saying why,
taken from the snapshot's notes or the NVML status detail. Bars and the history strip are on a
fixed 0-100 % scale; each GPU's history is a `charts.History` (O(1) per sample).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop_dl.analyse.live.gpu_clocks import link_below_max, pcie_text, throttle_text
from gputop_dl.text.fmt import DASH
from gputop_dl.present.tui.base import Line, LinePanel, set_border
from gputop_dl.present.tui.charts import History, bar, fit, level, text_level
from gputop_dl.text.safe import clean

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import GpuSample, Snapshot

GiB = 1024**3
HISTORY_S = 600.0  # seconds of utilisation history per GPU

STATUS_TEXT = {
    "no-library": "the NVIDIA driver library (libnvidia-ml.so.1) is not installed",
    "no-driver": "the NVIDIA driver is not loaded",
    "no-devices": "NVML works but reports no GPUs",
}

NAME_W = 18
BAR_W = 10
FIXED_W = 3 + (NAME_W + 2) + (BAR_W + 7) + (BAR_W + 15) + 6 + 7  # everything but the history
PCIE_W = 18  # at most, for "G5x16 ↓12.3 ↑0.45"; the column is as wide as its widest cell
THROTTLE_W = 32  # at most, for "throttled: power 34%, thermal 5%"; none: no column


def gpu_status_line(snap: Snapshot, detail: str | None = None) -> str:
    """Why there are no GPU rows, in one line."""
    if snap.gpu_status == "ok" and not snap.gpus:
        return "No GPUs: NVML reports none."
    why = detail or STATUS_TEXT.get(snap.gpu_status) or snap.gpu_status
    for note in snap.notes:
        if "GPU" in note or "CUDA" in note or "NVIDIA" in note:
            return note
    if why.lower().startswith("no nvidia gpu"):
        return why
    return f"No NVIDIA GPU: {why}"


def short_name(name: str | None) -> str:
    """The GPU name without the vendor prefix ("NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3")."""
    if not name:
        return DASH
    for prefix in ("NVIDIA GeForce ", "NVIDIA ", "Tesla "):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _mem_text(g: GpuSample) -> str:
    if g.mem_used is None or not g.mem_total:
        return DASH
    return f"{g.mem_used / GiB:.1f}/{g.mem_total / GiB:.0f} GiB"


class GpuPanel(LinePanel):
    """Per-GPU rows, or the reason there are none."""

    DEFAULT_CSS = """
    GpuPanel { height: auto; min-height: 3; }
    """

    def __init__(self, *, interval: float = 1.0, **kw: Any) -> None:
        super().__init__((("waiting for the first sample…", "$text-muted"),), **kw)
        self.border_title = "GPUs"
        self.histories: dict[int, History] = {}
        self.span = max(10, int(HISTORY_S / max(interval, 0.05)))
        self._snap: Snapshot | None = None
        self._detail: str | None = None

    def lines_needed(self) -> int:
        snap = self._snap
        if snap is None:
            return 1
        if not snap.gpus:
            return 2
        return len(snap.gpus) + 1

    def show(self, snap: Snapshot, detail: str | None = None) -> None:
        """Take a new snapshot: extend the histories and redraw."""
        for g in snap.gpus:
            h = self.histories.get(g.index)
            if h is None:
                h = self.histories[g.index] = History(self.span)
            h.push(None if g.error else g.util)
        self._snap, self._detail = snap, detail
        self.set_lines(self.render_content())

    def on_resize(self) -> None:
        if self._snap is not None:
            self.set_lines(self.render_content())

    def render_content(self) -> list[Line]:
        snap = self._snap
        if snap is None:
            return [(("waiting for the first sample…", "$text-muted"),)]
        if not snap.gpus:
            set_border(self, subtitle="")
            return [((gpu_status_line(snap, self._detail), "bold $text-warning"),),
                    (("No GPU rows to show: workloads launched here train on the CPU.", "$text-muted"),)]
        width = self.content_size.width or 110
        ok = [g for g in snap.gpus if not g.error]
        self._layout(ok, width - FIXED_W - 8)
        extra = (self._pcie_w + 2 if self._pcie_w else 0) + (self._thr_w + 2 if self._thr_w else 0)
        hist_w = max(8, min(60, width - FIXED_W - extra))
        set_border(self, subtitle=f"util history: last {HISTORY_S / 60:.0f} min, 0–100 %")
        head = ((f"{'#':>2} {fit('name', NAME_W)}  {fit('util', BAR_W + 5)}  "
                 f"{fit('memory', BAR_W + 14)}  {'temp':>4} {'power':>5}  "
                 + (f"{fit('PCIe GB/s', self._pcie_w)}  " if self._pcie_w else "")
                 + (f"{fit(self._thr_head, self._thr_w)}  " if self._thr_w else "")
                 + "util history", "$text-muted"),)
        return [head] + [self._row(g, hist_w) for g in snap.gpus]

    _pcie_w = 0
    _thr_w = 0
    _thr_limit = 2
    _thr_short = False
    _thr_head = "clocks"

    def _layout(self, ok: list[GpuSample], room: int) -> None:
        """The widths of the PCIe and throttle columns in `room` cells (the history keeps 8):
        what held the clocks down first (the long words, else "power 34%" under "throttled"),
        then the PCIe link and rates where room is left; a column nothing needs is left out."""
        self._pcie_w = self._thr_w = 0
        for limit, short, head in ((2, False, "clocks"), (1, False, "clocks"), (1, True, "throttled")):
            w = min(THROTTLE_W, max((len(throttle_text(g, limit, short)) for g in ok), default=0))
            if w and max(w, len(head)) + 2 <= room:
                self._thr_w, self._thr_limit, self._thr_short, self._thr_head = (
                    max(w, len(head)), limit, short, head)
                room -= self._thr_w + 2
                break
        w = min(PCIE_W, max((len(pcie_text(g, compact=True)) for g in ok), default=0))
        if w and max(w, 9) + 2 <= room:
            self._pcie_w = max(w, 9)

    def _row(self, g: GpuSample, hist_w: int) -> Line:
        parts: list[tuple[str, str] | str] = [f"{g.index:>2} ", (fit(clean(short_name(g.name)), NAME_W), "bold"), "  "]
        extra = (self._pcie_w + 2 if self._pcie_w else 0) + (self._thr_w + 2 if self._thr_w else 0)
        if g.error:
            parts.append((fit(clean(f"lost: {g.error}"), FIXED_W - 3 - NAME_W - 2 + extra), "$text-error"))
        else:
            fill, empty = bar(g.util, BAR_W)
            util = DASH if g.util is None else f"{g.util * 100:.0f}%"
            parts += [(fill, "$accent"), (empty, "$foreground-muted"), (f"{util:>4}", "bold"), "  "]
            mfrac = g.mem_used / g.mem_total if g.mem_used is not None and g.mem_total else None
            fill, empty = bar(mfrac, BAR_W)
            parts += [(fill, level(mfrac, 0.8, 0.95)), (empty, "$foreground-muted"),
                      (f" {_mem_text(g):>13}", text_level(mfrac, 0.8, 0.95)), "  "]
            temp = DASH if g.temp_c is None else f"{g.temp_c:.0f}°C"
            tfrac = None if g.temp_c is None else g.temp_c / 100.0
            parts.append((f"{temp:>4}", text_level(tfrac, 0.75, 0.85)))
            power = DASH if g.power_w is None else f"{g.power_w:.0f}W"
            pfrac = g.power_w / g.power_limit_w if g.power_w is not None and g.power_limit_w else None
            parts += [(f" {power:>5}", text_level(pfrac, 0.9, 0.98)), "  "]
            if self._pcie_w:
                style = "$text-warning" if link_below_max(g) else "$text-muted"
                parts += [(fit(pcie_text(g, compact=True), self._pcie_w), style), "  "]
            if self._thr_w:
                held = throttle_text(g, self._thr_limit, self._thr_short)
                parts += [(fit(held, self._thr_w), "$text-warning"), "  "]
        h = self.histories.get(g.index)
        parts.append((h.strip(hist_w) if h else " " * hist_w, "$accent on $boost"))
        return tuple(parts)
