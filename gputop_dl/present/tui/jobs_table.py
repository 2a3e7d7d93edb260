"""Jobs table: one row per training job (and per other GPU process), on the keyed table.

The columns, the rows built from `JobSample`s (`job_row`) and from NVML's other GPU processes
(`process_row`), and `JobsTable`, the monitor's `KeyedTable` (keyed_table.py: cached lines,
only changed lines repainted, the cursor kept by row key). Launched jobs are marked ●.

Each job's recent step time (or samples/s where no step time is known), data wait and CPU wait
are kept by `Trends` (one value per snapshot) and drawn as sparklines in front of the figure.
Columns that no job has a value for are left out (`HIDE_EMPTY`); the command takes the width the
others leave.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections import defaultdict, deque
from dataclasses import dataclass

from rich.style import Style

from gputop_dl.present.job_columns import RANK
from gputop_dl.text.spark import spark
from gputop_dl.present.tui.keyed_table import KeyedTable
from gputop_dl.present.tui.table_cells import Cell, Palette, Row
from gputop_dl.text.fmt import DASH, duration, joules, num, pct, progress, rate, secs, size
from gputop_dl.text.safe import clean
from gputop_dl.present.verdict_text import row_slowdown, slowdown_tone

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import GpuProcess, JobSample, JobSearch, Snapshot

__all__ = ["COLUMNS", "COLUMN_KEYS", "SORTS", "Cell", "JobRow", "JobsTable", "Palette", "Row",
           "Trends", "job_row", "process_row", "status_text", "table_rows"]

LAUNCHED_MARK = "●"

# key, label, width, right-justified; shown in the order of present/job_columns.py's RANK
_COLUMNS: dict[str, tuple[str, str, int, bool]] = {c[0]: c for c in (
    ("job", "job", 26, False),
    ("user", "user", 8, False),
    ("status", "status", 14, False),
    ("device", "device", 8, False),
    ("batch", "batch", 5, True),
    ("progress", "epoch · step", 14, True),
    ("eta", "ETA", 7, True),
    ("elapsed", "time", 6, True),
    ("step", "step", 15, True),
    ("sps", "samples/s", 9, True),
    ("stall", "data-wait", 11, True),
    ("cpuwait", "CPU wait", 11, True),
    ("cpu", "CPU", 5, True),
    ("disk", "disk read", 10, True),
    ("waitson", "waits on", 8, False),
    ("rss", "RSS", 9, True),
    ("gpumem", "GPU mem", 9, True),
    ("energy", "energy", 9, True),
    ("slowdown", "slowdown", 11, True),
    ("slurm", "slurm", 8, False),
    ("command", "command", 12, False),
)}
COLUMNS: tuple[tuple[str, str, int, bool], ...] = tuple(_COLUMNS[k] for k in RANK)
COLUMN_KEYS = tuple(c[0] for c in COLUMNS)
# narrow terminals: columns left out from the end of the ranking (the job always stays)
DROP_ORDER = tuple(reversed(RANK[1:]))
# left out while no job has a value in them (the table's subtitle says what would fill them)
HIDE_EMPTY = ("user", "device", "batch", "progress", "eta", "elapsed", "step", "sps", "stall",
              "cpuwait", "disk", "waitson", "gpumem", "slowdown", "slurm", "command",
              "energy")
FILLED_BY = {  # what would fill a hidden column, said once under the table
    "step": "step: launched jobs, or py-spy on found ones (--stall-budget)",
    "stall": "data-wait: launched jobs, or py-spy (--stall-budget)",
    "cpuwait": "CPU wait: not measured",
    "slowdown": "slowdown: a launch's baselines, or d (diagnose)",
}
SPARK_W = 6  # sparkline cells in front of a figure
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
    if j.status == "ready":
        return "ready: waits for the others"
    if j.stuck is not None:
        return f"STUCK {duration(j.stuck.for_s)}"
    return j.status


def _status_style(j: JobSample, p: Palette) -> Style:
    return {"running": p.ok, "failed": p.err, "stuck": p.err, "stopped": p.warn, "paused": p.warn,
            "done": p.accent}.get(j.status, p.muted)


@dataclass
class JobRow(Row):
    """A row of the jobs table: a job (`job`, from source `source`) or another GPU process."""

    launched: bool = False
    source: int = 0
    job: JobSample | None = None

    def cell(self, column: str) -> Cell:
        return self.cells[COLUMN_KEYS.index(column)]


class Trends:
    """Per job (row key): its recent step time or samples/s, data wait and CPU wait, one value
    per snapshot (`push`), for the rows' sparklines."""

    def __init__(self, span: int = SPARK_W):
        self.span = span
        # (step time or samples/s, data wait, CPU wait), None: unknown at that snapshot
        self.by_key: dict[str, tuple[deque[float | None], deque[float | None], deque[float | None]]] = {}

    def push(self, key: str, j: JobSample) -> None:
        t = self.by_key.get(key)
        if t is None:
            t = self.by_key[key] = (deque(maxlen=self.span), deque(maxlen=self.span),
                                    deque(maxlen=self.span))
        t[0].append(j.step_time_s if j.step_time_s is not None else j.samples_per_s)
        t[1].append(j.stall_fraction)
        t[2].append(j.cpu_wait_fraction)

    def keep_only(self, keys: set[str]) -> None:
        for k in [k for k in self.by_key if k not in keys]:
            del self.by_key[k]

    def sparks(self, key: str) -> tuple[str, str, str]:
        """The sparklines, once `span` values are in (a growing line would repaint every row)."""
        t = self.by_key.get(key)
        if t is None or len(t[0]) < self.span:
            return "", "", ""
        return spark(t[0], self.span), spark(t[1], self.span, 1.0), spark(t[2], self.span, 1.0)


def _with_spark(sp: str, figure: str) -> str:
    return figure if figure == DASH or not sp else f"{sp} {figure}"


def command_text(j: JobSample) -> str:
    cmd = j.cmdline or j.command
    if j.launched_by:
        return f"launched by session {j.launched_by}" + (f": {cmd}" if cmd else "")
    return cmd or DASH


def job_key(source: int, j: JobSample) -> str:
    """A job's row key: a launched job's name; a found job's PID, as its name changes when
    copies of its script come and go (collect/jobs/found.py), and its row, cursor and sparklines
    stay with it."""
    if not j.launched and j.pid is not None:
        return f"job:{source}:found:{j.pid}"
    return f"job:{source}:{j.name}"


def job_row(j: JobSample, p: Palette, source: int = 0, trends: Trends | None = None) -> JobRow:
    name = clean(f"{LAUNCHED_MARK} {j.name}" if j.launched else f"  {j.name}")
    key = job_key(source, j)
    stall_style = p.err if (j.stall_fraction or 0) >= 0.6 else p.warn if (j.stall_fraction or 0) >= 0.3 else p.plain
    cw = j.cpu_wait_fraction
    cw_style = p.err if (cw or 0) >= 0.5 else p.warn if (cw or 0) >= 0.2 else p.plain
    sd_text, sd_figure = row_slowdown(j.slowdown, j.slowdown_source, j.slowdown_doubt,
                                      j.slowdown_at_least, j.outside_slowdown)
    sd_style = p.tone(slowdown_tone(sd_figure, j.slowdown_at_least))
    sp_step, sp_stall, sp_cw = trends.sparks(key) if trends is not None else ("", "", "")
    step = (secs(j.step_time_s) if j.step_time_s is not None  # py-spy: longer than a burst counts
            else f">{secs(j.step_time_over_s)}" if j.step_time_over_s is not None else DASH)
    by_key = {
        "job": Cell(name, p.bold),
        "user": Cell(clean(j.user or DASH), p.muted),
        "status": Cell(clean(status_text(j)), _status_style(j, p)),
        "device": Cell(clean(j.device or DASH)),
        "batch": Cell(DASH if j.batch_size is None else str(j.batch_size)),
        "progress": Cell(progress(j.epoch, j.epochs, j.step, j.steps_per_epoch)),
        "eta": Cell(secs(j.eta_s)),
        "elapsed": Cell(duration(j.elapsed_s)),
        "step": Cell(_with_spark(sp_step if j.step_time_s is not None else "", step)),
        "sps": Cell(_with_spark(sp_step if j.step_time_s is None else "", num(j.samples_per_s, ".1f"))),
        "stall": Cell(_with_spark(sp_stall, pct(j.stall_fraction)), stall_style),
        "cpuwait": Cell(_with_spark(sp_cw, pct(cw)), cw_style),
        "cpu": Cell(num(j.cpu_cores, ".2f")),
        "disk": Cell(rate(j.io_read_bytes_per_s)),
        "waitson": Cell(j.waits_on or DASH, p.err if j.waits_on else p.plain),
        "rss": Cell(size(j.rss)),
        "gpumem": Cell(size(j.gpu_mem)),
        "energy": Cell(joules(j.energy_j, j.energy_estimate)),
        "slowdown": Cell(sd_text, sd_style),
        "slurm": Cell(clean(j.slurm.job_id) if j.slurm else DASH),
        "command": Cell(clean(command_text(j)), p.muted),
    }
    cells = tuple(by_key[k] for k in COLUMN_KEYS)
    sort = {"job": j.name.lower(), "cpu": j.cpu_cores, "gpumem": j.gpu_mem if j.gpu_mem is not None else j.rss,
            "step": j.step_time_s}
    return JobRow(key, cells, sort, name=j.name, launched=j.launched,
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
    known = {"job": Cell(f"  pid {pid}"), "status": Cell(status, p.muted), "device": Cell(device),
             "gpumem": Cell(size(mem))}
    cells = tuple(known.get(k, dash) for k in COLUMN_KEYS)
    return JobRow(f"pid:{pid}", cells, {"job": f"~pid {pid:>10}", "cpu": None, "gpumem": mem, "step": None},
                  name=f"pid {pid}")


def table_rows(latest: dict[int, Snapshot], p: Palette, trends: Trends | None = None) -> list[JobRow]:
    """The rows of every source's jobs (by source index), then the primary source's (index 0)
    GPU processes that belong to none of them."""
    rows: list[JobRow] = []
    job_pids: set[int] = set()
    for i in sorted(latest):
        for j in latest[i].jobs:
            rows.append(job_row(j, p, i, trends))
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


def nothing_found(search: JobSearch | None) -> tuple[str, ...]:
    """What the jobs table says when no training job was found: where the search looked, and
    what it could not read and why (docs/privileges.md)."""
    if search is None:
        return ("no training job found",)
    lines = [f"No training job found among {search.processes} processes: none has torch loaded, "
             "uses a GPU, or runs a Python training script that works like one (forked "
             "data-loader workers, busy threads)."]
    if search.unreadable:
        hidden = (f"; {search.python_not_jobs} Python script{'s' if search.python_not_jobs != 1 else ''} "
                  "among them not shown: no forked workers, no busy threads"
                  if search.python_not_jobs else "")
        lines.append(f"{search.unreadable} of them are other users' processes whose memory only "
                     "root may read: judged by their command line, threads and CPU instead"
                     f"{hidden}. `sudo gputop-dl` reads them whole.")
    if search.protected:
        n = search.protected
        lines.append(f"{n} process{'es' if n != 1 else ''} whose memory could not be read even "
                     "so (not dumpable, or held by a security module: a VM's or container's "
                     "init) left out.")
    return tuple(lines)


class JobsTable(KeyedTable[JobRow]):
    """The monitor's jobs table (rows: `job_row`, `process_row`)."""

    COLUMNS = COLUMNS
    DROP_ORDER = DROP_ORDER
    SORTS = SORTS
    TABLE_TITLE = "jobs"
    HIDE_EMPTY = HIDE_EMPTY
    FLEX = "command"
    GROW = "job"  # a found job's name carries what tells it apart ("train.py --lr 0.1")
    GROW_YIELDS = frozenset(RANK[6:])  # what a user needs to act on stays (present/job_columns.py)

    looked_at: JobSearch | None = None  # with no row: where the search looked (nothing_found)

    def filled_by_note(self) -> str:
        """What would fill the hidden columns, once (for the subtitle)."""
        notes = {c: FILLED_BY[c] for c in ("step", "stall", "cpuwait", "slowdown") if c in self.hidden_empty()}
        if "cpuwait" in notes:  # the collector's own reason, where it gave one
            why = next((r.job.cpu_wait_note for r in self.rows_by_key.values()
                        if isinstance(r, JobRow) and r.job is not None and r.job.cpu_wait_note), None)
            if why:
                notes["cpuwait"] = f"CPU wait: {why}"
        return " · ".join(notes.values())
