"""Headless console: live job table (Rich) on a terminal, plain progress lines otherwise, then a summary."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gputop_dl.text.fmt import DASH, duration, epochs_done, joules, num, pct, progress, rate, secs, size
from gputop_dl.snapshot import LIVE_STATUSES, JobSample, Snapshot
from gputop_dl.text.console import console as text_console
from gputop_dl.text.safe import clean, text
from gputop_dl.present.job_columns import fit, ranked
from gputop_dl.present.stuck_text import stuck_details, stuck_line, stuck_lines
from gputop_dl.present.verdict_text import job_line, row_slowdown

if TYPE_CHECKING:
    from gputop_dl.analyse.recorded.energy_phases import PhaseEnergy
    from gputop_dl.analyse.recorded.summary import JobResult
    from gputop_dl.workload import SessionSpec

JOB_WIDTH = 28  # the job column's width (`--once`: at least; a longer name takes what is left)
JOB_WIDTH_MAX = 48  # ... up to this (then it is cut with …)
PLAIN_EVERY_S = 10.0  # a progress line per job this often when stdout is not a terminal

Justify = Literal["left", "right"]


class Running(Protocol):
    """What the console reads of the engine it renders (present never imports engine)."""

    @property
    def running(self) -> bool: ...


def header_lines(spec: SessionSpec, session_id: str | None, gpu_status_detail: str | None) -> list[Text]:
    out = [Text.assemble(("gputop-dl", "bold"), clean(
        f" · {spec.name} · {len(spec.workloads)} workload(s) · {spec.path}"
        + (f" · session {session_id}" if session_id else "")))]
    if not spec.cuda:
        applied = sorted({k for w in spec.workloads for k in w.cpu_fallback_applied})
        msg = "NO CUDA: workloads train on the CPU. " + (gpu_status_detail or "")
        if applied:
            msg += f" cpu_fallback applied from the file: {', '.join(applied)}."
        out.append(text(msg, style="bold yellow"))
    return out


def jobs_table(snap: Snapshot, width: int | None = None, *, fit_names: bool = False) -> Table:
    """The jobs as a Rich table; columns with nothing known for any job are left out, so a
    monitor's jobs found running (no epochs, steps or slowdown) fit in 80 columns. Widths are
    fixed (the job's name is cut with …), so a long name never shifts the other columns of the
    live table; printed once (`fit_names`, `--once`), the job's column takes its longest name
    where the columns that fit leave the room (up to JOB_WIDTH_MAX: a name that tells two
    copies of a script apart by its last argument is read whole). The columns come in the
    order of present/job_columns.py's RANK; with `width` (the terminal's), those that do not
    fit are left out from the end."""
    cols: dict[str, tuple[str, Justify, int]] = {"job": ("job", "left", JOB_WIDTH), "status": ("status", "left", 13),
            "device": ("device", "left", 6), "progress": ("epoch · step", "right", 12),
            "step": ("step", "right", 7), "sps": ("samples/s", "right", 9),
            "stall": ("data-wait", "right", 9), "cpuwait": ("CPU wait", "right", 8),
            "cpu": ("CPU cores", "right", 9), "disk": ("disk read", "right", 10),
            "waitson": ("waits on", "left", 8), "rss": ("RSS", "right", 9),
            "gpumem": ("GPU mem", "right", 9), "slowdown": ("slowdown", "right", 10),
            "energy": ("energy", "right", 9),
            "eta": ("ETA", "right", 7), "user": ("user", "left", 10),
            "elapsed": ("elapsed", "right", 8), "command": ("launched by", "left", 30)}
    rows = []
    for j in snap.jobs:
        status = j.status if j.phase != "baseline" or j.status != "running" else "solo baseline"
        if j.stuck is not None:
            status = f"STUCK {duration(j.stuck.for_s)}"
        rows.append({"job": j.name, "status": status, "device": j.device or DASH,
                     "progress": progress(j.epoch, j.epochs, j.step, j.steps_per_epoch),
                     "step": secs(j.step_time_s), "sps": num(j.samples_per_s, ".1f"),
                     "stall": pct(j.stall_fraction), "cpuwait": pct(j.cpu_wait_fraction),
                     "cpu": num(j.cpu_cores, ".2f"), "disk": rate(j.io_read_bytes_per_s),
                     "waitson": j.waits_on or DASH, "rss": size(j.rss), "gpumem": size(j.gpu_mem),
                     "energy": joules(j.energy_j, j.energy_estimate),
                     "slowdown": row_slowdown(j.slowdown, j.slowdown_source, j.slowdown_doubt,
                                              j.slowdown_at_least, j.outside_slowdown)[0],
                     "eta": secs(j.eta_s), "user": j.user or DASH,
                     "elapsed": duration(j.elapsed_s),
                     "command": f"session {j.launched_by}" if j.launched_by else DASH})
    keep = [k for k in ranked(list(cols))
            if k in ("job", "status") or any(r[k] != DASH for r in rows)]
    longest = min(JOB_WIDTH_MAX, max((cell_len(r["job"]) for r in rows), default=0)) if fit_names else 0
    if width is not None:  # two blanks between columns (Rich's padding, none at the edges)
        keep = fit([(k, max(cols[k][2], len(cols[k][0])) + 2) for k in keep], width + 2)
        spare = width + 2 - sum(max(cols[k][2], len(cols[k][0])) + 2 for k in keep)
        longest = min(longest, JOB_WIDTH + max(0, spare))
    cols["job"] = ("job", "left", max(JOB_WIDTH, longest))
    t = Table(box=None, pad_edge=False, header_style="bold")
    for k in keep:
        label, justify, w = cols[k]
        t.add_column(label, justify=justify, no_wrap=True, width=max(w, len(label)),
                     overflow="ellipsis")
    for r in rows:
        t.add_row(*(text(r[k]) for k in keep))
    return t


def host_line(snap: Snapshot) -> Text:
    h = snap.host
    if h is None:
        return Text("")
    parts = [f"host: {h.cpus} CPUs {pct(h.cpu_busy)} busy", f"load {num(h.load1, '.1f')}"]
    if h.cpu_pressure_some10 is not None:
        parts.append(f"CPU pressure {pct(h.cpu_pressure_some10)}")
    if h.io_pressure_some10 is not None:
        parts.append(f"I/O pressure {pct(h.io_pressure_some10)}")
    if h.memory_pressure_some10 is not None:
        parts.append(f"memory pressure {pct(h.memory_pressure_some10)}")
    if snap.gpus:
        parts.append("GPUs: " + "  ".join(
            f"{g.index}:{pct(g.util)} {size(g.mem_used)}" for g in snap.gpus))
    return Text(" · ".join(parts), style="dim")


class Headless:
    """Consumes snapshots from the engine (any thread) and renders them on the main thread."""

    def __init__(self, console: Console | None = None):
        self.console = console or text_console()
        self.q: queue.Queue[Snapshot] = queue.Queue()
        self._seen_log = 0.0
        self._last_plain = 0.0
        self._last_kind: str | None = None

    def feed(self, snap: Snapshot) -> None:  # engine thread
        self.q.put(snap)

    def _print_log(self, snap: Snapshot, printer: Callable[[Text], object]) -> None:
        for t, msg in snap.log:
            if t > self._seen_log:
                printer(Text.assemble((time.strftime("%H:%M:%S ", time.localtime(t)), "dim"),
                                      clean(msg)))
                self._seen_log = t

    def _plain(self, snap: Snapshot) -> None:
        self._print_log(snap, self.console.print)
        v = snap.verdict or {}
        kind = v.get("kind")
        if kind != self._last_kind and kind not in (None, "insufficient-data"):
            self._last_kind = kind
            self.console.print(text(f"verdict so far: {v['title']} — {v['reason']}"))
        if snap.time - self._last_plain < PLAIN_EVERY_S:
            return
        self._last_plain = snap.time
        for j in snap.jobs:
            if j.status in LIVE_STATUSES:
                prog = progress(j.epoch, j.epochs, j.step, j.steps_per_epoch)
                self.console.print(text(
                    f"  {j.name:<12} {j.phase or '':<8} {prog:<14} step {secs(j.step_time_s):>7}"
                    f"  {num(j.samples_per_s, '.1f'):>7} samples/s"
                    f"  data-wait {pct(j.stall_fraction):>4}  CPU {num(j.cpu_cores, '.2f')} cores"
                    f"  GPU mem {size(j.gpu_mem)}"), soft_wrap=True)
        self.console.print(host_line(snap))

    def run(self, engine: Running) -> Snapshot | None:
        """Render until the engine thread ends; returns the last snapshot."""
        last = None
        if self.console.is_terminal:
            with Live(console=self.console, auto_refresh=False, transient=False) as live:
                while engine.running or not self.q.empty():
                    try:
                        snap = self.q.get(timeout=0.2)
                    except queue.Empty:
                        continue
                    last = snap
                    self._print_log(snap, live.console.print)
                    parts: list[RenderableType] = [jobs_table(snap, live.console.width), host_line(snap)]
                    parts += [Text(line, style="bold red") for line in stuck_lines(snap.jobs)]
                    if snap.verdict and snap.verdict["kind"] != "insufficient-data":
                        parts.append(verdict_lines(snap.verdict)[0])
                    live.update(Group(*parts), refresh=True)
        else:
            while engine.running or not self.q.empty():
                try:
                    snap = self.q.get(timeout=0.2)
                except queue.Empty:
                    continue
                last = snap
                self._plain(snap)
        return last


def _run_energy(phases: "tuple[PhaseEnergy, ...]") -> str:
    """A job's GPU joules in its co-run (or the one run it had); "–": none recorded."""
    from gputop_dl.analyse.recorded.energy_phases import main_phase

    p = main_phase(phases)
    return joules(p["joules"], p["estimate"]) if p else DASH


def summary_table(results: Iterable[JobResult]) -> Table:
    t = Table(title="Summary (co-run)", header_style="bold", title_justify="left",
              caption="median step: of all the job's co-run steps after warm-up; slowdown: the "
                      "verdict's, its median step while all jobs ran / its solo step",
              caption_justify="left")
    for col in ("job", "status", "device", "epochs", "median epoch", "median step", "samples/s",
                "data-wait", "CPU cores", "peak mem", "solo step", "slowdown", "energy"):
        t.add_column(col, justify="left" if col in ("job", "status", "device") else "right")
    for r in results:
        status = r.status if not r.failure else f"{r.status}: {r.failure}"
        mem, _ = r.peak_mem()  # the figure the export shows too
        cells = (r.name, status, r.device or DASH, epochs_done(len(r.epochs), steps=r.steps),
                 secs(r.median_epoch_s),
                 secs(r.step_time_s), num(r.samples_per_s, ".1f"), pct(r.stall_fraction),
                 num(r.cpu_cores, ".2f"), size(mem),
                 secs((r.solo or {}).get("step_time_s")), num(r.slowdown, ".2f", "×"),
                 _run_energy(r.energy))
        t.add_row(*(text(c) for c in cells))
    return t


def stuck_text_lines(jobs: Iterable[JobSample]) -> list[Text]:
    """Each stuck job: its line (bold), then where, evidence, main stack and fix."""
    out = []
    for j in jobs:
        line = stuck_line(j)
        if line and j.stuck is not None:
            out.append(Text(clean(line), style="bold red"))
            out += [text(f"  {d}") for d in stuck_details(j.stuck)[1:]]
    return out


def verdict_lines(verdict: Mapping[str, Any] | None) -> list[Text]:
    """The verdict as the console shows it: title and reason, evidence, per-job lines, fixes."""
    if not verdict:
        return [Text("verdict: none recorded", style="dim")]
    style = {"parallel": "bold green", "cpu-bound": "bold red", "gpu-contended": "bold red",
             "io-bound": "bold red", "memory-bound": "bold red", "outside-load": "bold red",
             "alone": "bold cyan",
             "other": "bold yellow"}.get(verdict["kind"], "bold")
    out = [Text.assemble(("verdict: ", "bold"), (clean(verdict["title"]), style),
                         clean(f" — {verdict['reason']}"),
                         (f"  (confidence {verdict.get('confidence', 0):.0%})", "dim"))]
    out += [text(f"  · {line}") for line in verdict.get("evidence_lines", [])]
    out += [text(f"  {job_line(j) or j.get('name')}", style="dim") for j in verdict.get("jobs", [])]
    out += [Text.assemble(("  fix: ", "bold"), clean(r)) for r in verdict.get("recommendations", [])]
    return out
