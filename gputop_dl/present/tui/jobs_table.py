"""Jobs table: one row per training job (and per other GPU process), on the keyed table.

The columns, the rows built from `JobSample`s (`job_row`) and from NVML's other GPU processes
(`process_row`), and `JobsTable`, the monitor's `KeyedTable` (keyed_table.py: cached lines,
only changed lines repainted, the cursor kept by row key). Launched jobs are marked ●.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich.style import Style

from gputop_dl.present.tui.keyed_table import Cell, KeyedTable, Palette, Row
from gputop_dl.snapshot import GpuProcess, JobSample, Snapshot
from gputop_dl.text.fmt import DASH, num, pct, progress, secs, size
from gputop_dl.text.safe import clean

__all__ = ["COLUMNS", "COLUMN_KEYS", "SORTS", "Cell", "JobRow", "JobsTable", "Palette", "Row",
           "job_row", "process_row", "status_text", "table_rows"]

LAUNCHED_MARK = "●"

# key, label, width, right-justified
COLUMNS: tuple[tuple[str, str, int, bool], ...] = (
    ("job", "job", 26, False),
    ("status", "status", 14, False),
    ("device", "device", 8, False),
    ("batch", "batch", 5, True),
    ("progress", "epoch · step", 14, True),
    ("eta", "ETA", 7, True),
    ("step", "step", 7, True),
    ("sps", "samples/s", 9, True),
    ("stall", "data-wait", 9, True),
    ("cpu", "CPU", 5, True),
    ("rss", "RSS", 9, True),
    ("gpumem", "GPU mem", 9, True),
    ("slowdown", "slowdown", 8, True),
)
COLUMN_KEYS = tuple(c[0] for c in COLUMNS)
# narrow terminals: columns left out first to last; job, status, step, data-wait and CPU stay
DROP_ORDER = ("eta", "batch", "device", "slowdown", "gpumem", "rss", "progress", "sps")

# sort key -> (label, column, descending first)
SORTS: dict[str, tuple[str, str, bool]] = {
    "cpu": ("CPU", "cpu", True),
    "mem": ("memory", "gpumem", True),
    "name": ("name", "job", False),
    "step": ("step time", "step", True),
}


def status_text(j: JobSample) -> str:
    if j.status == "running" and j.phase == "baseline":
        return "solo baseline"
    if j.status == "failed":
        return f"failed: {j.failure}" if j.failure else "failed"
    return j.status


def _status_style(j: JobSample, p: Palette) -> Style:
    return {"running": p.ok, "failed": p.err, "stopped": p.warn, "paused": p.warn,
            "done": p.accent}.get(j.status, p.muted)


@dataclass
class JobRow(Row):
    """A row of the jobs table: a job (`job`, from source `source`) or another GPU process."""

    launched: bool = False
    source: int = 0
    job: JobSample | None = None

    def cell(self, column: str) -> Cell:
        return self.cells[COLUMN_KEYS.index(column)]


def job_row(j: JobSample, p: Palette, source: int = 0) -> JobRow:
    name = clean(f"{LAUNCHED_MARK} {j.name}" if j.launched else f"  {j.name}")
    stall_style = p.err if (j.stall_fraction or 0) >= 0.6 else p.warn if (j.stall_fraction or 0) >= 0.3 else p.plain
    sd = j.slowdown
    sd_style = p.plain if sd is None else p.ok if sd <= 1.10 else p.warn if sd <= 1.5 else p.err
    cells = (
        Cell(name, p.bold),
        Cell(clean(status_text(j)), _status_style(j, p)),
        Cell(clean(j.device or DASH)),
        Cell(DASH if j.batch_size is None else str(j.batch_size)),
        Cell(progress(j.epoch, j.epochs, j.step, j.steps_per_epoch)),
        Cell(secs(j.eta_s)),
        Cell(secs(j.step_time_s)),
        Cell(num(j.samples_per_s, ".1f")),
        Cell(pct(j.stall_fraction), stall_style),
        Cell(num(j.cpu_cores, ".2f")),
        Cell(size(j.rss)),
        Cell(size(j.gpu_mem)),
        Cell(num(sd, ".2f", "×"), sd_style),
    )
    sort = {"job": j.name.lower(), "cpu": j.cpu_cores, "gpumem": j.gpu_mem if j.gpu_mem is not None else j.rss,
            "step": j.step_time_s}
    alive = j.status in ("running", "starting", "paused")
    return JobRow(f"job:{source}:{j.name}", cells, sort, name=j.name, alive=alive, launched=j.launched,
                  source=source, job=j)


def process_row(pid: int, procs: list[GpuProcess], p: Palette) -> JobRow:
    gpus = sorted({q.gpu_index for q in procs})
    mems = [q.mem_used for q in procs if q.mem_used is not None]
    mem = sum(mems) if mems else None
    sms = [q.sm_util for q in procs if q.sm_util is not None]
    sm = sum(sms) if sms else None
    device = "gpu" + ",".join(str(g) for g in gpus)
    status = "GPU process" + (f" · SM {sm * 100:.0f}%" if sm is not None else "")
    dash = Cell(DASH, p.muted)
    cells = (Cell(f"  pid {pid}"), Cell(status, p.muted), Cell(device), dash, dash, dash, dash, dash, dash,
             dash, dash, Cell(size(mem)), dash)
    return JobRow(f"pid:{pid}", cells, {"job": f"~pid {pid:>10}", "cpu": None, "gpumem": mem, "step": None},
                  name=f"pid {pid}")


def table_rows(latest: dict[int, Snapshot], p: Palette) -> list[JobRow]:
    """The rows of every source's jobs (by source index), then the primary source's (index 0)
    GPU processes that belong to none of them."""
    rows: list[JobRow] = []
    job_pids: set[int] = set()
    for i in sorted(latest):
        for j in latest[i].jobs:
            rows.append(job_row(j, p, i))
            job_pids.update(j.pids)
            if j.pid is not None:
                job_pids.add(j.pid)
    procs: dict[int, list[GpuProcess]] = defaultdict(list)
    primary = latest.get(0)
    for g in (primary.gpu_processes if primary else ()):
        if g.pid not in job_pids:
            procs[g.pid].append(g)
    rows += [process_row(pid, procs[pid], p) for pid in sorted(procs)]
    return rows


class JobsTable(KeyedTable):
    """The monitor's jobs table (rows: `job_row`, `process_row`)."""

    COLUMNS = COLUMNS
    DROP_ORDER = DROP_ORDER
    SORTS = SORTS
    TABLE_TITLE = "jobs"
