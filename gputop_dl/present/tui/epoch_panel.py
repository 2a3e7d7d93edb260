"""Epoch-time panel: the selected job's epoch times as bars beside its solo baseline, plus progress.

Solo epoch time ≈ solo_step_time_s × steps_per_epoch (the solo baseline measured the job alone).
Every bar in one view shares one fixed scale (a round number above the largest value), and a
┃ marks the solo epoch time on each bar. The running epoch is drawn from its estimated elapsed
time (step × step time) within its estimated length. With no job selected (or after `a`), one
line per job: its latest epoch time against its solo time. That ratio covers the whole epoch
(warm-up and any stretch a job ran alone included), so it is labelled "× solo epoch", apart
from the slowdown of the jobs table and the verdict (overlap window, step medians).
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from textual.content import Content

from gputop_dl.text.fmt import secs
from gputop_dl.present.tui.base import Panel, set_border
from gputop_dl.present.tui.charts import fit
from gputop_dl.statuses import LIVE_STATUSES
from gputop_dl.text.safe import clean, escape
from gputop_dl.present.verdict_text import slowdown_tone

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import JobSample

SOLO_MARK = "┃"


def solo_epoch_s(j: JobSample) -> float | None:
    if j.solo_step_time_s and j.steps_per_epoch:
        return j.solo_step_time_s * j.steps_per_epoch
    return None


def nice_ceiling(x: float) -> float:
    """A round number ≥ x (1, 2, 2.5, 5 × 10^k)."""
    if x <= 0:
        return 1.0
    e: float = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= x:
            return m * e
    return 10 * e


def current_epoch(j: JobSample) -> tuple[float, float] | None:
    """(estimated elapsed, estimated length) of the running epoch, in seconds."""
    if j.status not in LIVE_STATUSES or not j.step or not j.step_time_s or not j.steps_per_epoch:
        return None
    return j.step * j.step_time_s, j.steps_per_epoch * j.step_time_s


def _bar(value: float, scale: float, width: int, solo: float | None, fill_style: str,
         done: float | None = None) -> list[tuple[str, str]]:
    """A bar of `value` on `scale`; cells up to `done` solid, the rest of value light."""
    n = min(width, int(round(value / scale * width))) if scale > 0 else 0
    solid = n if done is None else min(n, int(round(done / scale * width)))
    cells = ["█"] * solid + ["▒"] * (n - solid) + [" "] * (width - n)
    styles = [fill_style] * n + ["$foreground-muted"] * (width - n)
    if solo is not None and scale > 0:
        k = min(width - 1, int(round(solo / scale * width)))
        cells[k] = SOLO_MARK
        styles[k] = "bold $text-accent"
    out: list[tuple[str, str]] = []
    for c, s in zip(cells, styles):  # merge runs
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0] + c, s)
        else:
            out.append((c, s))
    return out


def _ratio_style(r: float) -> str:
    return {"good": "$text-success", "warn": "$text-warning"}.get(slowdown_tone(r) or "",
                                                                  "$text-error")


class EpochPanel(Panel):
    """Epoch times of the selected job (or all jobs) against the solo baseline."""

    DEFAULT_CSS = """
    EpochPanel { height: 1fr; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(Content.styled("no jobs", "$text-muted"), **kw)
        self.border_title = "epoch times"
        self._args: tuple[list[JobSample], JobSample | None] | None = None

    def desired_lines(self, jobs: list[JobSample], sel: JobSample | None) -> int:
        """Content lines this panel would like: the selected job's chart plus the overview."""
        launched = [j for j in jobs if j.launched or j.epoch_times]
        n = 1 + len(launched)  # overview: header + one line per job
        if sel is not None:
            n += 2 + min(len(sel.epoch_times), 12) + (1 if solo_epoch_s(sel) else 0) + (
                1 if current_epoch(sel) else 0)
        return n

    def show(self, jobs: list[JobSample], selected: JobSample | None) -> None:
        self._args = (jobs, selected)
        self.set(self.render_content())

    def on_resize(self) -> None:
        if self._args is not None:
            self.set(self.render_content())

    def render_content(self) -> Content:
        if self._args is None:
            return Content.styled("no jobs", "$text-muted")
        jobs, sel = self._args
        width = max(30, self.content_size.width or 70)
        height = max(3, self.content_size.height or 8)
        if sel is not None:
            set_border(self, title=escape(f"epoch times · {sel.name}"))
            one = self._one(sel, width, height)
            others = [j for j in jobs if j.launched and j.name != sel.name]
            room = height - len(one.plain.splitlines()) - 1
            if others and room >= len(others) + 2:
                everyone = [j for j in jobs if j.launched]
                return Content("\n").join([one, Content(""), self._all(everyone, width, room, mark=sel.name)])
            return one
        set_border(self, title="epoch times · all jobs")
        return self._all([j for j in jobs if j.launched or j.epoch_times], width, height)

    def _one(self, j: JobSample, width: int, height: int) -> Content:
        solo = solo_epoch_s(j)
        cur = current_epoch(j)
        values = list(j.epoch_times) + ([solo] if solo else []) + ([cur[1]] if cur else [])
        if not values:
            msg = "no epoch finished yet" if j.launched else "not a launched job: no epoch events"
            return Content.styled(msg, "$text-muted")
        scale = nice_ceiling(max(values))
        label_w, tail_w = 7, 28
        bar_w = max(10, width - label_w - tail_w)
        lines: list[Content] = [Content.assemble(
            (fit("", label_w), ""), (fit("0 s", bar_w // 2), "$text-muted"),
            (f"{secs(scale):>{bar_w - bar_w // 2}}", "$text-muted"),
            ("  " + (f"{SOLO_MARK} solo ≈ {secs(solo)}" if solo else "no solo baseline"), "$text-muted"))]
        room = height - 1 - (1 if solo else 0) - (1 if cur else 0)
        epochs = list(enumerate(j.epoch_times, 1))
        if len(epochs) > room:
            skipped = len(epochs) - max(room - 1, 0)
            epochs = epochs[skipped:] if room > 1 else []
            lines.append(Content.styled(f"… {skipped} earlier epoch(s)", "$text-muted"))
        for i, t in epochs:
            tail: list[str | tuple[str, str]] = [f" {secs(t):>7}"]
            if solo:
                r = t / solo
                tail.append((f"  {r:.2f}× solo epoch", _ratio_style(r)))
            lines.append(Content.assemble((fit(f"ep {i}", label_w), "bold"),
                                          *_bar(t, scale, bar_w, solo, "$primary"), *tail))
        if cur:
            elapsed, length = cur
            lines.append(Content.assemble(
                (fit(f"ep {j.epoch}▸", label_w), "bold $text-accent"),
                *_bar(length, scale, bar_w, solo, "$accent", done=elapsed),
                f" {j.step}/{j.steps_per_epoch} steps"))
        if solo:
            lines.append(Content.assemble((fit("solo", label_w), "bold"),
                                          *_bar(solo, scale, bar_w, None, "$secondary"),
                                          f" {secs(solo):>7}"))
        return Content("\n").join(lines)

    def _all(self, jobs: list[JobSample], width: int, height: int, mark: str | None = None) -> Content:
        if not jobs:
            return Content.styled("no launched jobs (press l to launch workloads)", "$text-muted")
        label_w, tail_w = 12, 40
        bar_w = max(10, width - label_w - tail_w)
        vals = [v for j in jobs for v in ((j.epoch_times[-1] if j.epoch_times else None), solo_epoch_s(j)) if v]
        scale = nice_ceiling(max(vals)) if vals else 1.0
        lines: list[Content] = [Content.assemble(
            (fit("", label_w), ""), (fit("0 s", bar_w // 2), "$text-muted"),
            (f"{secs(scale):>{bar_w - bar_w // 2}}", "$text-muted"),
            (f"  all jobs: median epoch, {SOLO_MARK} solo"[:tail_w], "$text-muted"))]
        for j in jobs[: height - 1]:
            solo = solo_epoch_s(j)
            med = statistics.median(j.epoch_times) if j.epoch_times else None
            parts: list[str | tuple[str, str]] = [(fit(clean(("▸ " if j.name == mark else "  ") + j.name), label_w), "bold")]
            if med is None:
                parts.append((fit("no epoch finished yet", bar_w), "$text-muted"))
            else:
                parts += _bar(med, scale, bar_w, solo, "$primary")
            parts.append(f" {secs(med):>7}" + (f" ×{len(j.epoch_times)}" if j.epoch_times else "   "))
            if med and solo:
                r = med / solo
                parts.append((f"  {r:.2f}× solo epoch", _ratio_style(r)))
            lines.append(Content.assemble(*parts))
        return Content("\n").join(lines)
