"""The Textual app: assembles the panels, feeds them snapshots from sources, and handles keys.

    GputopApp(source, mode="monitor", launcher=..., exporter=...)   (built by gputop_dl.runner;
                                                                    tests feed it a fake source)

Sources tick in their own threads and call the app's subscriber with immutable snapshots. The
subscriber only drops the snapshot into an `Inbox` (newest per source) and posts one wake-up
message when none is pending; the UI thread then renders the newest state. Nothing here samples
the machine or imports torch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import threading
import time
from collections import defaultdict
from typing import Any, Callable

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Footer

from gputop_dl.present.tui.base import Panel
from gputop_dl.present.tui.epoch_panel import EpochPanel
from gputop_dl.present.tui.gpu_panel import GpuPanel
from gputop_dl.present.tui.host_panel import HostPanel
from gputop_dl.present.tui.jobs_table import SORTS, JobsTable, Palette, Row, job_row, process_row
from gputop_dl.present.tui.log_panel import LogPanel
from gputop_dl.present.tui.queue_panel import QueuePanel
from gputop_dl.present.tui.screens import (ConfirmScreen, HelpScreen, JobDetailScreen, LauncherScreen,
                                           VerdictScreen)
from gputop_dl.present.tui.source import Inbox, source_attr
from gputop_dl.present.tui.verdict_banner import VerdictBanner
from gputop_dl.snapshot import GpuProcess, Snapshot
from gputop_dl.text.safe import clean, escape

JOIN_TIMEOUT_S = 60.0  # how long quitting waits for a source to stop its jobs
WATCHDOG_S = 5.0  # after a signal: exit this long after the sources stopped, if the UI has not
BOTTOM_MAX = 24  # rows for the epoch/log row at most


class SnapshotsArrived(Message):
    """Wake-up: the inbox holds new snapshots (carries none itself)."""


class TitleBar(Panel):
    """One line: mode, session, phase, elapsed, pause and staleness."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $primary-muted; color: $text; padding: 0 1; }
    """


QUIT_BINDINGS = [
    Binding("q", "quit_app", "Quit"),
    Binding("ctrl+c,ctrl+q", "quit_app", "Quit", show=False, priority=True),
    Binding("question_mark", "help", "Help", key_display="?"),
]
ROW_BINDINGS = [  # the apps' action_cursor and action_sort
    Binding("j", "cursor(1)", "Down", show=False),
    Binding("k", "cursor(-1)", "Up", show=False),
    Binding("c", "sort('cpu')", "Sort CPU", show=False),
    Binding("m", "sort('mem')", "Sort memory", show=False),
    Binding("n", "sort('name')", "Sort name", show=False),
    Binding("t", "sort('step')", "Sort step time", show=False),
    Binding("o", "sort('')", "Default order", show=False),
]


class QuietApp(App[int]):
    """What the live apps (the monitor's, the fleet's) share: the quiet terminal driver and
    pausing (`paused`; they define `_drain` and `_update_title`)."""

    paused = False

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.notify("updates paused (p resumes)" if self.paused else "updates resumed", timeout=2)
        if not self.paused:
            self._drain()
        self._update_title()

    def get_driver_class(self):
        """Textual's choice, except that its Linux driver is swapped for one whose input thread
        sleeps until a key arrives (driver.py) instead of waking ten times a second."""
        from textual.drivers.linux_driver import LinuxDriver

        from gputop_dl.present.tui.driver import QuietLinuxDriver

        chosen = super().get_driver_class()
        return QuietLinuxDriver if chosen is LinuxDriver else chosen


class GputopApp(QuietApp):
    """gputop-dl's live screen. `source` is an Engine or anything with its thread-facing API."""

    TITLE = "gputop-dl"
    CSS = """
    Screen { layout: vertical; }
    .panel { border: round $primary 50%; border-title-color: $text-accent; border-title-style: bold;
             border-subtitle-color: $text-muted; padding: 0 1; }
    #head, #top, #foot { height: auto; }
    GpuPanel { width: 1fr; }
    HostPanel { width: 54; }
    JobsTable { border: round $primary 50%; border-title-color: $text-accent;
                border-title-style: bold; border-subtitle-color: $text-muted; }
    JobsTable:focus { border: round $accent; }
    #bottom { height: 12; }
    Screen.-no-epochs #bottom { height: 10; }
    Screen.-no-epochs EpochPanel { display: none; }
    EpochPanel { width: 3fr; }
    LogPanel { width: 2fr; text-wrap: nowrap; text-overflow: ellipsis; }
    QueuePanel { width: 3fr; display: none; text-wrap: nowrap; text-overflow: ellipsis; }
    Screen.-queue QueuePanel { display: block; }
    """

    BINDINGS = [
        *QUIT_BINDINGS,
        Binding("v", "verdict", "Verdict"),
        Binding("enter", "details", "Details"),
        Binding("s", "stop_job", "Stop job"),
        Binding("e", "export", "Export"),
        Binding("p", "pause", "Pause"),
        Binding("l", "launcher", "Launch"),
        Binding("d", "diagnose", "Diagnose"),
        *ROW_BINDINGS,
        Binding("a", "epochs_all", "Epochs: all", show=False),
    ]

    def __init__(self, source, *, clock: Callable[[], float] = time.time, mode: str = "monitor",
                 spec=None, launcher=None, workloads_dir: str = "workloads",
                 export_dir: str | None = None, handle_signals: bool = False,
                 exporter: Callable[..., str] | None = None,
                 diagnoser: Callable[[], dict] | None = None):
        """`launcher`: loads workload files and starts sources for the `l` screen (None: no
        launcher); `exporter(session_id, path, store_path=...)`: writes a report for `e`;
        `diagnoser()`: runs `gputop-dl diagnose` on the found jobs and returns its result (the
        JSON contract's dict) for `d`."""
        super().__init__()
        self.sources: list = [source]
        self.specs: dict[int, Any] = {0: spec if spec is not None else source_attr(source, "spec")}
        self.clock = clock
        self.mode = mode
        self.launcher = launcher
        self.exporter = exporter
        self.diagnoser = diagnoser
        self.diagnosis: dict | None = None  # the last `d` result
        self.diagnosing = False
        self.workloads_dir = workloads_dir
        self.export_dir = export_dir
        self.handle_signals = handle_signals
        self.inbox = Inbox()
        self._stale_handle: asyncio.TimerHandle | None = None
        self.latest: dict[int, Snapshot] = {}
        self.first_time: dict[int, float] = {}
        self.paused = False
        self.stopping = False
        self.epochs_all = False
        self.renders = 0
        self.first_render_at: float | None = None  # time.perf_counter() of the first rendered snapshot
        self.palette = Palette()
        self.exported: list[str] = []
        self._watchdog_started = False
        self._widgets_ready = threading.Event()  # set once the widgets exist (on_mount)

    # --- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        interval = float(source_attr(self.sources[0], "interval", 1.0) or 1.0)
        # Small widgets sit in containers (#head, #foot): Textual's compositor asks every child of
        # the screen for its lines on each frame, but a container's children only when the
        # frame's changed region reaches the container.
        with Vertical(id="head"):
            yield TitleBar(self._title_content(), id="title")
            yield VerdictBanner(Content.styled("waiting for the first sample…", "$text-muted"), id="banner")
        with Horizontal(id="top"):
            yield GpuPanel(interval=interval, id="gpus", classes="panel")
            yield HostPanel(interval=interval, id="host", classes="panel")
        yield JobsTable(id="jobs")
        with Vertical(id="foot"):
            with Horizontal(id="bottom"):
                yield EpochPanel(id="epochs", classes="panel")
                yield QueuePanel(id="queue", classes="panel")
                yield LogPanel(id="log", classes="panel")
            yield Footer()

    def on_load(self) -> None:
        # start sampling before the screen is built, so the first tick overlaps start-up
        for i, src in enumerate(self.sources):
            self._attach(i, src)

    def on_mount(self) -> None:
        # widget handles: `query_one` searches the *active* screen, which is a modal at times
        self.gpu_panel = self.query_one(GpuPanel)
        self.host_panel = self.query_one(HostPanel)
        self.table = self.query_one(JobsTable)
        self.epoch_panel = self.query_one(EpochPanel)
        self.banner = self.query_one(VerdictBanner)
        self.log_panel = self.query_one(LogPanel)
        self.queue_panel = self.query_one(QueuePanel)
        self.title_bar = self.query_one(TitleBar)
        self.bottom = self.query_one("#bottom")
        self.palette = Palette(self.theme_variables)
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        self.table.focus()
        self._widgets_ready.set()
        self._drain()  # a snapshot that came while the screen was being built
        self._arm_stale_check()
        if self.handle_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self._on_signal, sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass  # no signal handlers on this loop (not the main thread): the default stays

    def _attach(self, index: int, src) -> None:
        src.subscribe(lambda snap, i=index: self._receive(i, snap))
        src.start()

    def _receive(self, index: int, snap: Snapshot) -> None:
        """Called in the source's thread: keep the newest, wake the UI once."""
        if self.inbox.put(index, snap) and self._widgets_ready.is_set():
            self.post_message(SnapshotsArrived())

    def on_snapshots_arrived(self, _msg: SnapshotsArrived) -> None:
        if not self.paused:
            self._drain()

    def _drain(self) -> None:
        snaps = self.inbox.take()
        if not snaps:
            return
        for i, s in snaps.items():
            self.first_time.setdefault(i, s.time)
        self.latest.update(snaps)
        self.render_snapshots(set(snaps))

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
            gpu_panel.show(primary, (source_attr(self.sources[0], "env", None) or {}).get("gpu_status_detail"))
            host_panel.show(primary.host)
            height = max(gpu_panel.lines_needed(), host_panel.lines_needed()) + 2  # + border
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

    def job_rows(self) -> list[Row]:
        rows: list[Row] = []
        job_pids: set[int] = set()
        for i in sorted(self.latest):
            for j in self.latest[i].jobs:
                rows.append(job_row(j, self.palette, i))
                job_pids.update(j.pids)
                if j.pid is not None:
                    job_pids.add(j.pid)
        procs: dict[int, list[GpuProcess]] = defaultdict(list)
        primary = self.primary
        for p in (primary.gpu_processes if primary else ()):
            if p.pid not in job_pids:
                procs[p.pid].append(p)
        rows += [process_row(pid, procs[pid], self.palette) for pid in sorted(procs)]
        return rows

    def _render_jobs(self) -> None:
        table = self.table
        rows = self.job_rows()
        table.show(rows)
        n_jobs = sum(1 for r in rows if r.job is not None)
        n_proc = len(rows) - n_jobs
        if n_jobs:
            sub = f"{n_jobs} job(s)" + (f" · {n_proc} other GPU process(es)" if n_proc else "")
        else:
            sub = f"{n_proc} GPU process(es)" if n_proc else "no jobs"
        if table.sort_by:
            sub += f" · sorted by {SORTS[table.sort_by][0]}"
        table.set_subtitle(sub)
        has_launched = any(r.launched for r in rows)
        main = self.screen_stack[0]
        if main.has_class("-no-epochs") == has_launched:
            main.set_class(not has_launched, "-no-epochs")
        self._render_epochs()

    def _render_epochs(self) -> None:
        if self.screen_stack[0].has_class("-no-epochs"):
            return  # hidden (no launched job): drawn when it shows again
        table = self.table
        row = table.selected()
        jobs = [r.job for r in table.rows_by_key.values() if r.job is not None]
        sel = None if self.epochs_all or row is None else row.job
        if row is not None and row.job is None and not self.epochs_all:
            sel = None
        panel = self.epoch_panel
        panel.show(jobs, sel)
        height = max(10, min(panel.desired_lines(jobs, sel) + 2, BOTTOM_MAX))
        bottom = self.bottom
        if bottom.styles.height is None or bottom.styles.height.value != height:
            bottom.styles.height = height

    def _render_banner_and_log(self) -> None:
        li = self.launch_index()
        snap = self.latest.get(li) if li is not None else self.primary
        extra = ""
        if self.mode == "monitor" and li is None and self.primary is not None:
            n = len({p.pid for p in self.primary.gpu_processes})
            extra = f"{n} GPU process(es)" + (" · l: launch workloads" if self.launcher else "")
        if self.stopping:
            extra = "stopping jobs, then quitting…"
        if li is None and snap is not None and self.diagnosis and self.diagnosis.get("verdict"):
            snap = dataclasses.replace(snap, verdict=self.diagnosis["verdict"])  # found jobs
        self.banner.show(snap, mode="launch" if li is not None else self.mode, extra=extra)
        queue = snap.queue if snap is not None else None
        main = self.screen_stack[0]
        if main.has_class("-queue") != (queue is not None):
            main.set_class(queue is not None, "-queue")
        if queue is not None:
            self.queue_panel.show(queue)
        log: list[tuple[float, str]] = []
        for i in sorted(self.latest):
            log.extend(self.latest[i].log)
        log.sort(key=lambda e: e[0])
        self.log_panel.show(tuple(log[-50:]))

    def _title_content(self) -> Content:
        parts: list = [("gputop-dl", "bold")]
        li = self.launch_index() if self.latest else None
        spec = self.specs.get(li if li is not None else 0)
        if self.mode == "launch" or li is not None:
            kind = "queue" if li is not None and getattr(self.latest.get(li), "queue", None) else "launch"
            parts.append(clean(f" · {kind} · {spec.name}") if spec is not None else f" · {kind}")
        else:
            parts.append(" · monitor")
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

    def _update_title(self) -> None:
        self.title_bar.set(self._title_content())

    def _arm_stale_check(self, delay: float | None = None) -> None:
        """Redraw the title (its "no new sample for N s") `delay` s from now: by default two
        intervals after this snapshot, then every second while no snapshot comes.

        The title redraws with every snapshot anyway; this check is only for when they stop. It
        is a plain event-loop callback, cancelled and re-armed by each snapshot, so a monitor
        that gets its samples never wakes for it (a Textual interval timer woke every second)."""
        handle = self._stale_handle
        if handle is not None:
            handle.cancel()
        if delay is None:
            delay = 2 * float(source_attr(self.sources[0], "interval", 1.0) or 1.0)
        self._stale_handle = asyncio.get_running_loop().call_later(delay, self._stale_check)

    def on_unmount(self) -> None:
        if self._stale_handle is not None:
            self._stale_handle.cancel()
            self._stale_handle = None

    def _stale_check(self) -> None:
        self._stale_handle = None
        self._update_title()
        self._arm_stale_check(1.0)

    def _on_theme_changed(self, _theme) -> None:
        self.palette = Palette(self.get_css_variables())
        if self.latest:
            self._render_jobs()

    # --- events --------------------------------------------------------------------------------
    def on_jobs_table_highlighted(self, _event: JobsTable.Highlighted) -> None:
        self._render_epochs()

    def on_jobs_table_selected(self, _event: JobsTable.Selected) -> None:
        self.action_details()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "launcher":
            return self.launcher is not None
        if action == "diagnose":
            return self.diagnoser is not None
        return True

    # --- actions -------------------------------------------------------------------------------
    def action_cursor(self, delta: int) -> None:
        self.table.move_cursor(delta)

    def action_sort(self, which: str) -> None:
        table = self.table
        table.set_sort(which or None)
        self._render_jobs()

    def action_epochs_all(self) -> None:
        self.epochs_all = not self.epochs_all
        self._render_epochs()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_diagnose(self) -> None:
        if self.diagnoser is None or self.launch_index() is not None:
            self.notify("diagnose is for the jobs the monitor found (launches have their own "
                        "verdict: v)", timeout=4)
            return
        if self.diagnosing:
            self.notify("a diagnosis is running…", timeout=3)
            return
        self.diagnosing = True
        self.notify("diagnosing the jobs found running: together, then each alone (others "
                    "paused a few seconds)…", timeout=6)
        self.run_worker(self._diagnose(), exclusive=True, group="diagnose")

    async def _diagnose(self) -> None:
        try:
            result = await asyncio.to_thread(self.diagnoser)
        except Exception as exc:
            self.notify(f"diagnosis failed: {exc}", severity="error", timeout=6)
            return
        finally:
            self.diagnosing = False
        self.diagnosis = result
        if not result.get("verdict"):
            self.notify("diagnosis: no training job found", timeout=4)
            return
        self._render_banner_and_log()
        self.push_screen(VerdictScreen(result["verdict"]))

    def current_verdict(self) -> dict | None:
        li = self.launch_index()
        if li is None and self.diagnosis:
            return self.diagnosis.get("verdict")
        snap = self.latest.get(li) if li is not None else None
        return snap.verdict if snap is not None else None

    def action_verdict(self) -> None:
        v = self.current_verdict()
        if not v:
            li = self.launch_index()
            phase = self.latest[li].phase if li is not None else None
            self.notify(f"no verdict yet (phase: {phase or 'monitor only'})", timeout=3)
            return
        self.push_screen(VerdictScreen(v))

    def _config_for(self, row: Row) -> dict | None:
        spec = self.specs.get(row.source)
        if spec is None:
            return None
        for w in getattr(spec, "workloads", ()):
            if w.name == row.name:
                return w.to_dict(redact=True)
        return None

    def action_details(self) -> None:
        row = self.table.selected()
        if row is None:
            self.notify("no row selected", timeout=2)
            return
        if row.job is not None:
            self.push_screen(JobDetailScreen(f"job {row.name}", row.job, self._config_for(row)))
        else:
            procs = [p for p in (self.primary.gpu_processes if self.primary else ()) if f"pid {p.pid}" == row.name]
            extra = {f"gpu {p.gpu_index}": f"memory {row.cell('gpumem').text} · SM "
                     f"{'–' if p.sm_util is None else f'{p.sm_util:.0%}'}" for p in procs}
            self.push_screen(JobDetailScreen(f"GPU process {row.name}", None, None,
                                             {"kind": "not launched by gputop-dl", **extra}))

    def live_jobs(self) -> list[tuple[int, str]]:
        out = []
        for i, src in enumerate(self.sources):
            try:
                out += [(i, n) for n in src.live_jobs()]
            except Exception:
                pass
        return out

    def action_stop_job(self) -> None:
        row = self.table.selected()
        if row is None or row.job is None or not row.launched:
            self.notify("only jobs launched by gputop-dl can be stopped", severity="warning", timeout=3)
            return
        if (row.source, row.name) not in self.live_jobs():
            self.notify(f"{escape(row.name)} is not running", timeout=3)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.sources[row.source].stop_job(row.name)
                self.notify(f"stopping {escape(row.name)}…", timeout=3)

        self.push_screen(ConfirmScreen(f"Stop job {row.name}? Its processes get SIGTERM, then SIGKILL "
                                       "after a grace period.", title="stop job", yes="Stop"), answer)

    def export_target(self) -> str | None:
        li = self.launch_index()
        if li is not None:
            return source_attr(self.sources[li], "session_id") or self.latest[li].session_id
        return source_attr(self.sources[0], "session_id")

    def action_export(self) -> None:
        sid = self.export_target()
        if not sid:
            self.notify("nothing to export: the plain monitor records no session (l launches workloads)",
                        severity="warning", timeout=4)
            return
        fn = self.exporter
        if fn is None:
            self.notify("export not available", severity="warning", timeout=4)
            return
        path = os.path.join(self.export_dir or os.getcwd(), f"gputop-dl-{sid}.md")
        li = self.launch_index()
        store_path = source_attr(self.sources[li if li is not None else 0], "store_path")
        kw = {"store_path": store_path} if store_path else {}
        self.run_worker(self._export(fn, sid, path, kw), exclusive=True, group="export")

    async def _export(self, fn, sid: str, path: str, kw: dict) -> None:
        try:
            result = await asyncio.to_thread(fn, sid, path, **kw)
        except Exception as exc:
            self.notify(f"export failed: {escape(exc)}", severity="error", timeout=6)
            return
        written = result if isinstance(result, (str, os.PathLike)) else path
        self.exported.append(os.fspath(written))
        self.notify(f"exported to {escape(os.fspath(written))}", timeout=6)

    def action_launcher(self) -> None:
        if self.launcher is None:
            return
        if any(i > 0 and source_attr(s, "running", False) for i, s in enumerate(self.sources)):
            self.notify("a launch is already running", severity="warning", timeout=3)
            return

        def started(result: tuple[str, list[str]] | None) -> None:
            if not result:
                return
            path, names = result
            try:
                spec = self.launcher.load(path, only=names)
                src = self.launcher.start(spec)
            except Exception as exc:
                self.notify(f"cannot launch: {escape(exc)}", severity="error", timeout=8)
                return
            index = len(self.sources)
            self.sources.append(src)
            self.specs[index] = spec
            self._attach(index, src)
            self.notify(escape(f"launched {', '.join(names)} from {os.path.relpath(path)}"), timeout=4)

        self.push_screen(LauncherScreen(self.workloads_dir, self.launcher.load), started)

    def action_quit_app(self) -> None:
        if self.stopping:
            self.notify("still stopping jobs…", timeout=2)
            return
        live = self.live_jobs()
        if not live:
            self.run_worker(self.stop_and_exit(), group="quit")
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.run_worker(self.stop_and_exit(), group="quit")

        names = ", ".join(n for _, n in live)
        self.push_screen(ConfirmScreen(f"{len(live)} launched job(s) still running: {names}.\n"
                                       "Stop them and quit?", title="quit", yes="Stop and quit"), answer)

    async def stop_and_exit(self) -> None:
        """Ask every source to stop, wait for them to finish cleanly (off the UI thread), exit."""
        self.stopping = True
        self._render_banner_and_log()
        self._update_title()
        for src in self.sources:
            src.request_stop("interrupted")
        await asyncio.to_thread(self._join_all)
        self._drain()
        self.exit(0)

    def _join_all(self) -> None:
        for src in self.sources:
            try:
                src.join(JOIN_TIMEOUT_S)
            except Exception:
                pass

    def _on_signal(self, signum: int) -> None:
        """SIGTERM/SIGHUP/SIGINT: stop the jobs cleanly and quit.

        After SIGHUP the terminal is usually gone, and Textual's shutdown can block writing to it;
        so a watchdog thread ends the process once every source has stopped (jobs stopped, session
        closed) and the UI has not managed to exit within WATCHDOG_S.
        """
        for src in self.sources:
            src.request_stop("interrupted")
        if not self._watchdog_started:
            self._watchdog_started = True
            # after a hang-up there is no terminal to restore: exit as soon as the jobs are stopped
            delay = 0.5 if signum == signal.SIGHUP else WATCHDOG_S
            threading.Thread(target=self._watchdog, args=(128 + int(signum), delay),
                             name="gputop-dl-watchdog", daemon=True).start()
        if not self.stopping:
            self.run_worker(self.stop_and_exit(), group="quit")

    def _watchdog(self, code: int, delay: float) -> None:
        self._join_all()
        time.sleep(delay)
        os._exit(code)
