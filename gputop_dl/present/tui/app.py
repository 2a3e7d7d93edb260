"""The Textual app: assembles the panels and feeds them the snapshots of its sources.

    GputopApp(source, mode="monitor", launcher=..., exporter=...)   (built by gputop_dl.runner;
                                                                    tests feed it a fake source)

Sources tick in their own threads; the intake (newest snapshot per source, one wake-up) and the
staleness check are the base app's (live_app.py), the keys on a row are row_actions.py's, on
sessions session_actions.py's, quitting and signals are shutdown.py's, the layout's CSS is
app.tcss. Nothing here samples the machine or imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING, Any, Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen

from gputop_dl.present.alert_events import AlertEvents
from gputop_dl.present.limited_text import limited_summary
from gputop_dl.present.tui.base import Panel
from gputop_dl.present.tui.epoch_panel import EpochPanel
from gputop_dl.present.tui.gpu_panel import GpuPanel, gpu_status_line
from gputop_dl.present.tui.history_panel import HistoryPanel
from gputop_dl.present.tui.host_panel import HostPanel
from gputop_dl.present.tui.jobs_table import (SORTS, JobRow, JobsTable, Trends, job_key, nothing_found,
                                              table_rows)
from gputop_dl.present.tui.key_bar import KeyBar
from gputop_dl.present.tui.live_app import QUIT_BINDINGS, ROW_BINDINGS, LiveApp, TitleBar
from gputop_dl.present.tui.log_panel import LogPanel
from gputop_dl.present.tui.queue_panel import QueuePanel
from gputop_dl.present.tui.row_actions import RowActions
from gputop_dl.present.tui.session_actions import SessionActions
from gputop_dl.present.tui.shutdown import Shutdown
from gputop_dl.present.tui.source import Launcher, Source, source_attr
from gputop_dl.present.tui.verdict_banner import VerdictBanner
from gputop_dl.statuses import GPU_STATUS_STARTING
from gputop_dl.text.safe import clean

if TYPE_CHECKING:
    from gputop_dl.snapshot import Snapshot
    from gputop_dl.workload import SessionSpec

BOTTOM_MIN = 10  # rows the epoch/history/log row keeps at least (#bottom's min-height)
# the jobs table keeps its height this long after its rows became fewer: jobs that come and go
# (a test suite's short runs beside the jobs) would resize the table and the charts below it
# each time, a new layout of the whole screen and six chart builds (docs/benchmarks.md)
TABLE_HOLD_S = 30.0
# what a panel says while it waits for its first reading (its `waits_for`): the first frame is
# drawn before anything is read (runner/deferred.py), and no panel is empty without words
WAITING = {"host": "reading the host…", "gpus": "GPUs: reading NVML…",
           "jobs": "looking for training jobs…"}


class GputopApp(RowActions, SessionActions, Shutdown, LiveApp["Snapshot"]):
    """gputop-dl's live screen. `source` is an Engine or anything with its thread-facing API."""

    TITLE = "gputop-dl"
    CSS_PATH = "app.tcss"

    BINDINGS = [
        *QUIT_BINDINGS,
        Binding("v", "verdict", "Verdict"),
        Binding("enter", "details", "Details"),
        Binding("s", "stop_job", "Stop job"),
        Binding("e", "export", "Export"),
        Binding("p", "pause", "Pause"),
        Binding("l", "launcher", "Launch"),
        Binding("d", "diagnose", "Diagnose"),
        Binding("z", "zoom", "Zoom"),
        *ROW_BINDINGS,
        Binding("a", "epochs_all", "All epochs"),
        Binding("b", "toggle_bell", "Bell", show=False),
    ]

    def __init__(self, source: Source, *, clock: Callable[[], float] = time.time,
                 mode: str = "monitor", spec: SessionSpec | None = None,
                 launcher: Launcher | None = None, workloads_dir: str = "workloads",
                 export_dir: str | None = None, handle_signals: bool = False,
                 exporter: Callable[..., str] | None = None,
                 diagnoser: Callable[..., dict[str, Any]] | None = None, readonly: bool = False,
                 bell: bool = True):
        """`launcher`: loads workload files and starts sources for the `l` screen (None: no
        launcher); `exporter(session_id, path, store_path=...)`: writes a report for `e`;
        `diagnoser()`: runs `gputop-dl diagnose` on the found jobs and returns its result (the
        JSON contract's dict) for `d` (with `probe`, `progress(message)` and `seconds` where it
        takes them); `readonly`: no stop, no launch, and `d` observes only (no probe); `bell`:
        ring the terminal's bell with the notice of a job that became stuck or failed (key b)."""
        super().__init__(clock)
        self.bell_on = bell
        self.alert_events: dict[int, AlertEvents] = {}  # per source: what was told already
        self.sources: list[Source] = [source]
        self.specs: dict[int, SessionSpec | None] = {0: spec if spec is not None else source_attr(source, "spec")}
        self.mode = mode
        self.launcher = launcher
        self.exporter = exporter
        self.diagnoser = diagnoser
        self.diagnosis: dict[str, Any] | None = None  # the last `d` result
        self.diagnosing = False
        self.diag_t0, self.diag_status = 0.0, ""
        self.readonly = readonly
        self.workloads_dir = workloads_dir
        self.export_dir = export_dir
        self.handle_signals = handle_signals
        self.latest: dict[int, Snapshot] = {}
        self.first_time: dict[int, float] = {}
        self.stopping = False
        self.epochs_all = False
        self.first_render_at: float | None = None  # time.perf_counter() of the first rendered snapshot
        self.exported: list[str] = []
        self.trends = Trends()  # each job's recent figures, for the rows' sparklines
        self.table_rows_held, self.table_held_at = 0, -float("inf")  # _fit_table's hold
        self.rest_mounted = False  # the bottom row and the key bar (_mount_rest)

    # --- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        interval = float(source_attr(self.sources[0], "interval", 1.0) or 1.0)
        # Small widgets sit in containers (#head, #foot): Textual's compositor asks every child of
        # the screen for its lines on each frame, but a container's children only when the
        # frame's changed region reaches the container.
        with Vertical(id="head"):
            yield TitleBar(self._title_content(), id="title")
            yield VerdictBanner(Content.styled("waiting for the first sample…", "$text-muted"), id="banner")
            # without a GPU: its one line, instead of the panel; until NVML is read, that it is
            gpuline = Panel(Content.styled(WAITING["gpus"], "$text-muted"), id="gpuline")
            gpuline.waits_for = "gpus"
            yield gpuline
        with Horizontal(id="top"):
            yield GpuPanel(interval=interval, id="gpus", classes="panel")
            yield HostPanel(interval=interval, id="host", classes="panel", waiting=WAITING["host"])
        self.table = JobsTable(id="jobs")
        self.table.wait_for("jobs", WAITING["jobs"])
        yield self.table
        # the bottom row and the key bar: built here, mounted once the first frame is shown
        # (`_mount_rest`): styling their 9 widgets was a good part of the first frame's CPU
        self.epoch_panel = EpochPanel(id="epochs", classes="panel")
        self.history_panel = HistoryPanel(interval=interval, id="history", classes="panel")
        self.history_panel.session = self._recorded_session
        self.queue_panel = QueuePanel(id="queue", classes="panel")
        self.log_panel = LogPanel(id="log", classes="panel")
        self.bottom = Horizontal(self.epoch_panel, self.history_panel, self.queue_panel,
                                 self.log_panel, id="bottom")
        self.foot = Vertical(self.bottom, KeyBar(), id="foot")

    def get_default_screen(self) -> Screen[Any]:
        """The main screen, with the classes the first snapshot most likely sets (no GPU rows
        until NVML is read; in the monitor, no launched job): each class change after the
        first styling restyles every widget, three times on the first frame otherwise.
        `-starting`: the first frame is the header, the host panel and the jobs table, each
        saying what it waits for; the bottom row and the key bar are mounted after it
        (`_mount_rest`)."""
        return Screen(id="_default", classes="-starting -no-gpu" + (" -no-epochs" if self.mode == "monitor" else ""))

    def on_load(self) -> None:
        # start sampling before the screen is built, so the first tick overlaps start-up
        for i, src in enumerate(self.sources):
            self._attach_source(i, src)

    def on_mount(self) -> None:
        # widget handles: `query_one` searches the *active* screen, which is a modal at times
        self.gpu_panel = self.query_one(GpuPanel)
        self.host_panel = self.query_one(HostPanel)
        self.table.focus()
        self.banner = self.query_one(VerdictBanner)
        self.gpuline = self.query_one("#gpuline", Panel)
        self.head, self.top = self.query_one("#head"), self.query_one("#top")
        self.ready(self.query_one(TitleBar))
        if self.handle_signals:
            self.install_signal_handlers()
        # the first frame is the layout, with or without a snapshot: once it is on screen the
        # rest is mounted, then the sources that wait for it may take the CPU (deferred.py)
        self.call_after_refresh(self._first_frame_shown)

    def _recorded_session(self) -> tuple[str | None, str | None]:
        """The store and session the monitor's source records (None until it opened one)."""
        src = self.sources[0]
        return source_attr(src, "store_path"), src.session_id

    def _attach_source(self, index: int, src: Source) -> None:
        src.subscribe(functools.partial(self._receive, index))
        src.start()

    def take(self, snaps: dict[int, Snapshot]) -> None:
        for i, s in snaps.items():
            self.first_time.setdefault(i, s.time)
            for j in s.jobs:
                self.trends.push(job_key(i, j), j)
            for ev in self.alert_events.setdefault(i, AlertEvents()).update(s):
                self.notify(ev["line"], severity="error", timeout=30)
                if self.bell_on:
                    self.bell()
        self.latest.update(snaps)
        self.trends.keep_only({job_key(i, j) for i, s in self.latest.items() for j in s.jobs})
        self.render_snapshots(set(snaps))
        self.quit_if_asked_and_ended()

    def action_toggle_bell(self) -> None:
        self.bell_on = not self.bell_on
        self.notify("bell on for stuck and failed jobs" if self.bell_on else "bell off", timeout=2)

    # --- rendering -----------------------------------------------------------------------------
    @property
    def primary(self) -> Snapshot | None:
        return self.latest.get(0)

    def launch_index(self) -> int | None:
        """The source whose verdict/phase/log the banner shows: the newest launch."""
        launched = [i for i in self.latest if i > 0]
        if launched:
            return max(launched)
        return 0 if self.mode == "launch" and 0 in self.latest else None

    def render_snapshots(self, updated: set[int] | None = None) -> None:
        updated = set(self.latest) if updated is None else updated
        primary = self.primary
        if primary is not None and 0 in updated:
            gpu_panel, host_panel = self.gpu_panel, self.host_panel
            detail = (source_attr(self.sources[0], "env", None) or {}).get("gpu_status_detail")
            gpu_panel.show(primary, detail)
            host_panel.show(primary.host)
            self.history_panel.push(primary)
            main = self.screen_stack[0]
            if main.has_class("-no-gpu") != (not primary.gpus):
                main.set_class(not primary.gpus, "-no-gpu")
            starting = primary.gpu_status == GPU_STATUS_STARTING  # the host alone, GPUs unread
            self.gpuline.waits_for = "gpus" if starting else None
            if starting:
                self.gpuline.set(Content.styled(WAITING["gpus"], "$text-muted"))
            elif not primary.gpus:  # one line says why, instead of a panel a third of the screen high
                self.gpuline.set(Content.styled(clean(gpu_status_line(primary, detail)), "$text-warning"))
            height = max(gpu_panel.lines_needed() if primary.gpus else 0, host_panel.lines_needed()) + 2
            if gpu_panel.styles.height is None or gpu_panel.styles.height.value != height:
                gpu_panel.styles.height = height
                host_panel.styles.height = height
        self._render_jobs()
        self._render_banner_and_log()
        self._update_title()
        self._arm_stale_check()
        self.renders += 1
        if self.first_render_at is None:
            self.first_render_at = time.perf_counter()

    def _first_frame_shown(self) -> None:
        """The first frame (the header, the host panel and the jobs table, each saying what it
        waits for) is on screen: mount the rest of the layout."""
        self.call_later(self._mount_rest)

    async def _mount_rest(self) -> None:
        """Mount the bottom row and the key bar, draw them from what came meanwhile, then tell
        the sources that wait for the first frames (runner/deferred.py)."""
        main = self.screen_stack[0]
        await main.mount(self.foot)
        self.rest_mounted = True
        main.remove_class("-starting")
        if self.screen is main and self.focused is None:  # not under a key's modal screen
            self.table.focus()
        if self.latest:  # what came meanwhile (the panels above took it already)
            self._render_epochs()
            self._render_banner_and_log()
        self.refresh_bindings()
        for src in self.sources:
            shown = source_attr(src, "first_frame")
            if shown is not None:
                shown()

    def job_rows(self) -> list[JobRow]:
        return table_rows(self.latest, self.palette, self.trends)

    def _render_jobs(self) -> None:
        table = self.table
        rows = self.job_rows()
        table.show(rows)
        n_jobs = sum(1 for r in rows if r.job is not None)
        n_proc = len(rows) - n_jobs
        if n_jobs:
            sub = f"{n_jobs} job(s)" + (f" · {n_proc} other GPU process(es)" if n_proc else "")
        elif self.primary is not None and self.primary.gpu_status == GPU_STATUS_STARTING:
            sub = WAITING["jobs"]
        else:
            sub = f"{n_proc} GPU process(es)" if n_proc else "no jobs"
        if table.sort_by:
            sub += f" · sorted by {SORTS[table.sort_by][0]}"
        note = table.filled_by_note() if n_jobs else ""
        limited = limited_summary(r.job for r in rows if r.job is not None)  # privileges.md
        sub = f"{limited} · {sub}" if limited else sub
        table.set_subtitle(f"{note} · {sub}" if note else sub)
        primary = self.primary
        table.looked_at = None
        if rows:
            table.waits_for = None
        elif primary is None or primary.gpu_status == GPU_STATUS_STARTING:
            table.wait_for("jobs", WAITING["jobs"])
        else:  # nothing found: where the search looked, what it could not read and why
            table.waits_for = None
            table.looked_at = primary.search
            table.set_empty(nothing_found(primary.search))
        self._fit_table(len(rows) or len(table.empty_wrapped(table.size.width or self.size.width)))
        has_launched = any(r.launched for r in rows)
        main = self.screen_stack[0]
        if main.has_class("-no-epochs") == has_launched:
            main.set_class(not has_launched, "-no-epochs")
            self.refresh_bindings()  # z (the charts) or a (the epochs)
        self._render_epochs()

    def _render_epochs(self) -> None:
        if not self.rest_mounted or self.screen_stack[0].has_class("-no-epochs"):
            return  # hidden (no launched job): drawn when it shows again
        table = self.table
        row = table.selected()
        jobs = [r.job for r in table.rows_by_key.values() if r.job is not None]
        sel = None if self.epochs_all or row is None else row.job
        if row is not None and row.job is None and not self.epochs_all:
            sel = None
        panel = self.epoch_panel
        panel.show(jobs, sel)  # the bottom row fills what the jobs table leaves (at least 10 lines)

    def _fit_table(self, rows: int) -> None:
        """The jobs table as high as its rows (+ header and border), no higher than what the
        panels above and the bottom row's least height leave: no empty lines under 3 rows.
        With fewer rows it keeps its height for TABLE_HOLD_S since it last had as many."""
        now = self.clock()
        if rows >= self.table_rows_held or now - self.table_held_at >= TABLE_HOLD_S:
            self.table_rows_held, self.table_held_at = rows, now
        rows = self.table_rows_held
        spare = (self.screen_stack[0].size.height - self.head.outer_size.height
                 - self.top.outer_size.height - 1 - BOTTOM_MIN)
        height = max(4, min(max(rows, 1) + 3, spare))
        table = self.table
        if table.styles.height is None or table.styles.height.value != height:
            table.styles.height = height

    def _render_banner_and_log(self) -> None:
        li = self.launch_index()
        snap = self.latest.get(li) if li is not None else self.primary
        extra = ""
        if self.mode == "monitor" and li is None and self.primary is not None:
            n = len({p.pid for p in self.primary.gpu_processes})
            extra = f"{n} GPU process(es)" + (" · l: launch workloads" if self.launcher else "")
            if self.primary.gpu_status == GPU_STATUS_STARTING:
                extra = "reading GPUs and processes…"
        if self.diagnosing:
            extra = self.diagnose_progress()
        if self.stopping:
            extra = "stopping jobs, then quitting…"
        if li is None and snap is not None and self.diagnosis and self.diagnosis.get("verdict"):
            snap = dataclasses.replace(snap, verdict=self.diagnosis["verdict"])  # found jobs
        self.banner.show(snap, mode="launch" if li is not None else self.mode, extra=extra)
        queue = snap.queue if snap is not None else None
        main = self.screen_stack[0]
        if main.has_class("-queue") != (queue is not None):
            main.set_class(queue is not None, "-queue")
            self.refresh_bindings()
        if not self.rest_mounted:
            return
        if queue is not None:
            self.queue_panel.show(queue)
        log: list[tuple[float, str]] = []
        for i in sorted(self.latest):
            log.extend(self.latest[i].log)
        log.sort(key=lambda e: e[0])
        self.log_panel.show(tuple(log[-50:]))

    def _title_content(self) -> Content:
        parts: list[str | tuple[str, str]] = [("gputop-dl", "bold")]
        li = self.launch_index() if self.latest else None
        spec = self.specs.get(li if li is not None else 0)
        if self.mode == "launch" or li is not None:
            kind = "queue" if li is not None and getattr(self.latest.get(li), "queue", None) else "launch"
            parts.append(clean(f" · {kind} · {spec.name}") if spec is not None else f" · {kind}")
        else:
            parts.append(" · monitor")
        if self.readonly:
            parts.append(" · read-only")
        snap = self.latest.get(li) if li is not None else None
        if snap is not None and snap.session_id:
            parts.append(f" · session {snap.session_id}")
        if snap is not None and snap.phase:
            parts.append(f" · {snap.phase}")
        if snap is not None and li in self.first_time:
            el = int(snap.time - self.first_time[li])
            parts.append(f" · {el // 60}:{el % 60:02d} elapsed")
        if self.paused:
            parts.append(("  ⏸ PAUSED (p resumes)", "bold $text-warning"))
        if self.stopping:
            parts.append(("  stopping…", "bold $text-warning"))
        primary = self.primary
        if primary is not None and not self.paused:
            interval = float(source_attr(self.sources[0], "interval", 1.0) or 1.0)
            age = self.clock() - primary.time
            if age > max(3 * interval, 3.0) and source_attr(self.sources[0], "running", True):
                parts.append((f"  no new sample for {age:.0f} s", "bold $text-error"))
        return Content.assemble(*parts)

    def stale_after(self) -> float:
        """The title's staleness is checked two intervals after each snapshot."""
        return 2 * float(source_attr(self.sources[0], "interval", 1.0) or 1.0)

    def palette_changed(self) -> None:
        if self.latest:
            self._render_jobs()

    # --- events --------------------------------------------------------------------------------
    def on_keyed_table_highlighted(self, _event: JobsTable.Highlighted) -> None:
        self._render_epochs()

    def on_keyed_table_selected(self, _event: JobsTable.Selected) -> None:
        self.action_details()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.rest_mounted and action in ("zoom", "epochs_all"):
            return False  # the first frame: no bottom row yet to act on
        if action in ("stop_job", "launcher") and self.readonly:
            return False
        if action == "launcher":
            return self.launcher is not None
        if action == "diagnose":
            return self.diagnoser is not None
        if action in ("zoom", "epochs_all"):  # the bottom row shows the charts, or the epochs
            main = self.screen_stack[0]
            charts = main.has_class("-no-epochs") and not main.has_class("-queue")
            return charts if action == "zoom" else not main.has_class("-no-epochs")
        return True

    # --- sources -------------------------------------------------------------------------------
    def live_jobs(self) -> list[tuple[int, str]]:
        out = []
        for i, src in enumerate(self.sources):
            try:
                out += [(i, n) for n in src.live_jobs()]
            except Exception:
                pass
        return out
