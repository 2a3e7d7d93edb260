"""Jobs table: one row per training job (and per other GPU process), updated in place by row key.

Rows are never cleared: each tick changes only the cells whose text changed (`update_cell`),
adds new keys, removes vanished ones, and keeps the cursor on the same row key through adds,
removes and re-sorts. Cells are Rich `Text` coloured from the theme's CSS variables (a DataTable
cannot resolve `$variables` itself); a theme change re-renders them. Launched jobs are marked ●.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from gputop_dl.present.fmt import DASH, num, pct, progress, secs, size
from gputop_dl.snapshot import GpuProcess, JobSample

LAUNCHED_MARK = "●"

# key, label, width, justify
COLUMNS: tuple[tuple[str, str, int, str], ...] = (
    ("job", "job", 26, "left"),
    ("status", "status", 14, "left"),
    ("device", "device", 8, "left"),
    ("batch", "batch", 5, "right"),
    ("progress", "epoch · step", 14, "right"),
    ("eta", "ETA", 7, "right"),
    ("step", "step", 7, "right"),
    ("sps", "samples/s", 9, "right"),
    ("stall", "data-wait", 9, "right"),
    ("cpu", "CPU", 5, "right"),
    ("rss", "RSS", 9, "right"),
    ("gpumem", "GPU mem", 9, "right"),
    ("slowdown", "slowdown", 8, "right"),
)
COLUMN_KEYS = tuple(c[0] for c in COLUMNS)

# sort key -> (label, column, descending first)
SORTS: dict[str, tuple[str, str, bool]] = {
    "cpu": ("CPU", "cpu", True),
    "mem": ("memory", "gpumem", True),
    "name": ("name", "job", False),
    "step": ("step time", "step", True),
}


class Palette:
    """Rich styles resolved from the app's theme variables ($text-success, ...)."""

    def __init__(self, variables: dict[str, str] | None = None):
        v = variables or {}

        def style(name: str, **kw: Any) -> Style:
            color = v.get(name)
            if color and not color.startswith("auto") and color[:1] == "#":
                return Style(color=color[:7], **kw)
            return Style(**kw)

        self.ok = style("text-success")
        self.warn = style("text-warning")
        self.err = style("text-error", bold=True)
        self.accent = style("text-accent", bold=True)
        self.muted = Style(dim=True)
        self.plain = Style()
        self.bold = Style(bold=True)


def _t(s: str, style: Style | None = None, justify: str = "left") -> Text:
    return Text(s, style=style or "", no_wrap=True, overflow="ellipsis", justify=justify)  # type: ignore[arg-type]


class KeyedText(Text):
    """The first cell of a row; carries its row key so `DataTable.sort` can map back to it."""

    def __init__(self, text: str, row_key: str, style: Style | None = None):
        super().__init__(text, style=style or "", no_wrap=True, overflow="ellipsis")
        self.row_key = row_key


def status_text(j: JobSample) -> str:
    if j.status == "running" and j.phase == "baseline":
        return "solo baseline"
    if j.status == "failed":
        return f"failed: {j.failure}" if j.failure else "failed"
    return j.status


def _status_style(j: JobSample, p: Palette) -> Style:
    return {"running": p.ok, "failed": p.err, "stopped": p.warn, "done": p.accent}.get(j.status, p.muted)


@dataclass
class Row:
    key: str
    cells: tuple[Text, ...]
    sort: dict[str, Any]  # column key -> raw value for sorting (None = unknown)
    launched: bool = False
    name: str = ""
    alive: bool = False
    source: int = 0
    job: JobSample | None = None


def job_row(j: JobSample, p: Palette, source: int = 0) -> Row:
    name = f"{LAUNCHED_MARK} {j.name}" if j.launched else f"  {j.name}"
    stall_style = p.err if (j.stall_fraction or 0) >= 0.6 else p.warn if (j.stall_fraction or 0) >= 0.3 else p.plain
    sd = j.slowdown
    sd_style = p.plain if sd is None else p.ok if sd <= 1.10 else p.warn if sd <= 1.5 else p.err
    key = f"job:{source}:{j.name}"
    cells = (
        KeyedText(name, key, p.bold),
        _t(status_text(j), _status_style(j, p)),
        _t(j.device or DASH),
        _t(DASH if j.batch_size is None else str(j.batch_size), justify="right"),
        _t(progress(j.epoch, j.epochs, j.step, j.steps_per_epoch), justify="right"),
        _t(secs(j.eta_s), justify="right"),
        _t(secs(j.step_time_s), justify="right"),
        _t(num(j.samples_per_s, ".1f"), justify="right"),
        _t(pct(j.stall_fraction), stall_style, justify="right"),
        _t(num(j.cpu_cores, ".2f"), justify="right"),
        _t(size(j.rss), justify="right"),
        _t(size(j.gpu_mem), justify="right"),
        _t(num(sd, ".2f", "×"), sd_style, justify="right"),
    )
    sort = {"job": j.name.lower(), "cpu": j.cpu_cores, "gpumem": j.gpu_mem if j.gpu_mem is not None else j.rss,
            "step": j.step_time_s}
    alive = j.status in ("running", "starting")
    return Row(key, cells, sort, j.launched, j.name, alive, source, j)


def process_row(pid: int, procs: list[GpuProcess], p: Palette) -> Row:
    gpus = sorted({q.gpu_index for q in procs})
    mems = [q.mem_used for q in procs if q.mem_used is not None]
    mem = sum(mems) if mems else None
    sms = [q.sm_util for q in procs if q.sm_util is not None]
    sm = sum(sms) if sms else None
    device = "gpu" + ",".join(str(g) for g in gpus)
    status = "GPU process" + (f" · SM {sm * 100:.0f}%" if sm is not None else "")
    dash = _t(DASH, p.muted, justify="right")
    key = f"pid:{pid}"
    cells = (KeyedText(f"  pid {pid}", key), _t(status, p.muted), _t(device), dash, dash, dash, dash, dash, dash,
             dash, dash, _t(size(mem), justify="right"), dash)
    return Row(key, cells, {"job": f"~pid {pid:>10}", "cpu": None, "gpumem": mem, "step": None},
               name=f"pid {pid}")


class JobsTable(DataTable):
    """The jobs table; `show(rows)` applies a new set of rows in place."""

    DEFAULT_CSS = """
    JobsTable { height: 1fr; min-height: 7; }
    """
    BINDINGS = [Binding("enter", "select_cursor", "Details")]

    def __init__(self, **kw):
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self.border_title = "jobs"
        self.rows_by_key: dict[str, Row] = {}
        self.sort_by: str | None = None
        self.sort_reverse = False
        self._order: list[str] = []
        self._default_order: list[str] = []

    def on_mount(self) -> None:
        for key, label, width, justify in COLUMNS:
            self.add_column(Text(label, justify=justify), key=key, width=width)  # type: ignore[arg-type]

    # --- selection ---------------------------------------------------------------------------
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    def selected(self) -> Row | None:
        k = self.selected_key()
        return self.rows_by_key.get(k) if k else None

    # --- updates -------------------------------------------------------------------------------
    def show(self, rows: list[Row]) -> None:
        """Apply rows (given in default order): update changed cells, add, remove, re-sort.

        The cursor stays on the same row key whatever moves around it.
        """
        selected = self.selected_key()
        new = {r.key: r for r in rows}
        structure = False
        for key in [k for k in self.rows_by_key if k not in new]:
            self.remove_row(key)
            structure = True
        for r in rows:
            old = self.rows_by_key.get(r.key)
            if old is None:
                self.add_row(*r.cells, key=r.key)
                structure = True
                continue
            for col, o, n in zip(COLUMN_KEYS, old.cells, r.cells):
                if o != n or o.style != n.style:
                    self.update_cell(r.key, col, n)
        self.rows_by_key = new
        self._default_order = [r.key for r in rows]
        order = self._sorted_keys(rows)
        if structure or order != self._order:
            index = {k: i for i, k in enumerate(order)}
            self.sort("job", key=lambda cell: index.get(getattr(cell, "row_key", ""), 1 << 30))
            self._order = order
            if selected in new:
                self.move_cursor(row=self.get_row_index(selected), animate=False)

    def _sorted_keys(self, rows: list[Row]) -> list[str]:
        if self.sort_by is None:
            return [r.key for r in rows]
        col = SORTS[self.sort_by][1]
        known = [r for r in rows if r.sort.get(col) is not None]
        unknown = [r for r in rows if r.sort.get(col) is None]
        known.sort(key=lambda r: r.sort[col], reverse=self.sort_reverse)
        return [r.key for r in known + unknown]

    def set_sort(self, which: str | None) -> None:
        """Sort by `which` (a key of SORTS); the same key again reverses; None = default order."""
        if which is None:
            self.sort_by, self.sort_reverse = None, False
        elif which == self.sort_by:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_by, self.sort_reverse = which, SORTS[which][2]
        self._label_columns()
        self.show([self.rows_by_key[k] for k in self._default_order if k in self.rows_by_key])

    def _label_columns(self) -> None:
        sort_col = SORTS[self.sort_by][1] if self.sort_by else None
        for key, label, _w, justify in COLUMNS:
            if key == sort_col:
                label = f"{label} {'▼' if self.sort_reverse else '▲'}"
            self.columns[key].label = Text(label, justify=justify)  # type: ignore[arg-type]
        self._update_count += 1
        self.refresh()
