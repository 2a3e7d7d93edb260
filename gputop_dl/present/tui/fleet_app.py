"""The live fleet view (`gputop-dl --nodes ...` / `--prometheus URL`): nodes, distributed jobs
and every node's jobs, from fleet snapshots handed in by a source.

    FleetApp(source)    source: runner's FleetPoller (collect/fleet/poll.py), or a fake in tests

The source polls in its own thread and calls the app's subscriber with immutable fleet
snapshots (`time`, `nodes`, `distributed`, `poll_s`, `source`, `error`, `last_ok`); the intake
and the staleness check are the base app's (live_app.py), the CSS is fleet_app.tcss. The three
tables are `KeyedTable`s with their own columns: rows kept by key, only changed lines repainted,
a vanished job's row removed. Nothing here reads the network.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Callable, Protocol

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content

from gputop_dl.present.fleet import (FleetJob, FleetNode, FleetSnap, dist_cells, job_cells,
                                     node_cells, node_state, slowdown_shown)
from gputop_dl.present.tui.base import Panel
from gputop_dl.present.tui.jobs_table import SORTS as JOB_SORTS
from gputop_dl.present.tui.key_bar import KeyBar
from gputop_dl.present.tui.keyed_table import KeyedTable
from gputop_dl.present.tui.table_cells import Cell, Row
from gputop_dl.present.tui.live_app import QUIT_BINDINGS, ROW_BINDINGS, SORT, LiveApp, TitleBar
from gputop_dl.present.tui.screens import HelpScreen, JobDetailScreen
from gputop_dl.present.tui.source import source_attr
from gputop_dl.text.fmt import DASH, num, pct, secs, size
from gputop_dl.text.safe import clean
from gputop_dl.present.verdict_text import slowdown_tone

NODES_MAX = 14  # rows of the nodes table before it scrolls
DIST_MAX = 8


class NodesTable(KeyedTable[Row]):
    TABLE_TITLE = "nodes"
    COLUMNS = (("node", "node", 16, False), ("host", "host", 12, False),
               ("state", "state", 44, False), ("gpus", "GPUs", 4, True),
               ("util", "GPU util", 8, True), ("gpumem", "GPU mem", 15, True),
               ("cpu", "CPU busy", 10, True), ("load", "load", 5, True),
               ("jobs", "jobs", 4, True), ("verdict", "verdict", 18, False))
    DROP_ORDER = ("load", "host", "gpumem", "verdict", "cpu")
    SORTS = {"name": ("name", "node", False), "cpu": ("CPU busy", "cpu", True),
             "mem": ("GPU memory", "gpumem", True), "util": ("GPU util", "util", True)}


class DistributedTable(KeyedTable[Row]):
    TABLE_TITLE = "distributed jobs (ranks across nodes)"
    COLUMNS = (("run", "run id", 16, False), ("job", "job", 18, False),
               ("world", "world", 5, True), ("seen", "ranks", 6, True),
               ("missing", "missing ranks", 26, False), ("nodes", "nodes: ranks", 44, False),
               ("step", "slowest step", 22, False))
    DROP_ORDER = ("step", "world")
    SORTS = {"name": ("run id", "run", False), "step": ("slowest step", "step", True)}


class FleetJobsTable(KeyedTable[Row]):
    TABLE_TITLE = "jobs (all nodes)"
    COLUMNS = (("node", "node", 18, False), ("job", "job", 24, False), ("pid", "pid", 8, True),
               ("status", "status", 12, False), ("cpu", "CPU", 6, True),
               ("stall", "data-wait", 9, True), ("step", "step", 8, True),
               ("slowdown", "slowdown", 11, True), ("gpumem", "GPU mem", 9, True),
               ("ranks", "ranks", 14, False))
    DROP_ORDER = ("ranks", "pid", "slowdown", "gpumem")
    SORTS = JOB_SORTS


FLEET_KEYS = (
    ("q", "quit"),
    ("?", "this help"),
    ("tab", "next table (nodes → distributed jobs → jobs)"),
    ("↑ ↓ / j k", "select a row"),
    ("enter", "details of the selected node (its last error), job or distributed job"),
    ("c m n t u", "sort the focused table by CPU, GPU memory, name, step time, GPU util "
                  "(again: reverse)"),
    ("o", "back to the list's order"),
    ("r", "poll the nodes now"),
    ("p", "pause / resume updates"),
    ("ctrl+p", "command palette (themes: dark/light)"),
)
FLEET_NOTES = (
    "",
    "state: ok · stale N s (the node's latest sample is that old) · unreachable (why) · not a "
    "gputop-dl exporter · not Prometheus text. A node that stops answering stays as a row; it "
    "is read again at every poll.",
    "distributed jobs: the ranks of one torchrun run (its run id) gathered across nodes; a rank "
    "not seen on any node that answered is missing (with the node it was last seen on).",
)


class FleetSource(Protocol):
    """What the fleet view uses of its source (runner's FleetPoller, or a fake in tests)."""

    def subscribe(self, fn: Callable[[FleetSnap], None]) -> None: ...
    def start(self) -> None: ...
    def request_stop(self, reason: str = "interrupted") -> None: ...


class FleetApp(LiveApp[FleetSnap]):
    """The fleet view. `source` has subscribe/start/request_stop/join/interval (FleetPoller)."""

    TITLE = "gputop-dl"
    CSS_PATH = "fleet_app.tcss"

    BINDINGS = [
        *QUIT_BINDINGS,
        Binding("enter", "details", "Details"),
        Binding("r", "poll_now", "Poll now"),
        Binding("p", "pause", "Pause"),
        *ROW_BINDINGS,
        Binding("u", "sort('util')", "Sort GPU util", group=SORT),
    ]

    def __init__(self, source: FleetSource, *, clock: Callable[[], float] = time.time):
        super().__init__(clock)
        self.source = source
        self.latest: FleetSnap | None = None  # the newest fleet snapshot shown

    @property
    def interval(self) -> float:
        return float(source_attr(self.source, "interval", 2.0) or 2.0)

    def compose(self) -> ComposeResult:
        with Vertical(id="head"):
            yield TitleBar(self._title_content(), id="title")
            yield Panel(Content("waiting for the first poll…"), id="summary")
        yield NodesTable(id="nodes")
        yield DistributedTable(id="distributed")
        yield FleetJobsTable(id="fleet-jobs")
        yield KeyBar()

    def on_load(self) -> None:
        self.source.subscribe(lambda snap: self._receive(0, snap))
        self.source.start()

    def on_mount(self) -> None:
        self.summary = self.query_one("#summary", Panel)
        self.nodes_table = self.query_one(NodesTable)
        self.dist_table = self.query_one(DistributedTable)
        self.jobs_table = self.query_one(FleetJobsTable)
        self.nodes_table.focus()
        self.ready(self.query_one(TitleBar))

    # --- snapshots ----------------------------------------------------------------------------
    def take(self, snaps: dict[int, FleetSnap]) -> None:
        snap = snaps.get(0)
        if snap is not None:
            self.latest = snap
            self.render_fleet()

    def render_fleet(self) -> None:
        snap = self.latest
        if snap is None:
            return
        self.nodes_table.show([self.node_row(n, snap) for n in snap.nodes])
        self.dist_table.show([self.dist_row(d) for d in snap.distributed])
        self.jobs_table.show([self.job_row(n, j) for n in snap.nodes for j in n.jobs])
        screen = self.screen_stack[0]
        if screen.has_class("-distributed") != bool(snap.distributed):
            screen.set_class(bool(snap.distributed), "-distributed")
        self._fit(self.nodes_table, len(snap.nodes), NODES_MAX)
        self._fit(self.dist_table, len(snap.distributed), DIST_MAX)
        ok = sum(1 for n in snap.nodes if n.ok)
        stale = sum(1 for n in snap.nodes if node_state(n)[1] == "warn")
        down = len(snap.nodes) - ok
        n_jobs = sum(len(n.jobs) for n in snap.nodes)
        self._subtitle(self.nodes_table, f"{ok} of {len(snap.nodes)} answering"
                       + (f" · {stale} stale" if stale else ""))
        self._subtitle(self.jobs_table, f"{n_jobs} job(s)")
        missing = sum(len(d["missing_ranks"]) for d in snap.distributed)
        self._subtitle(self.dist_table, f"{len(snap.distributed)} run(s)"
                       + (f" · {missing} rank(s) missing" if missing else ""))
        if snap.error:
            line = Content(clean(f"cannot read the fleet: {snap.error}" + (
                "; the nodes below are its last answer, going stale" if snap.nodes else "")))
        else:
            parts = [f"{len(snap.nodes)} node(s): {ok} ok" + (f", {down} not answering" if down else ""),
                     f"{n_jobs} job(s)"]
            if snap.distributed:
                parts.append(f"{len(snap.distributed)} distributed"
                             + (f" ({missing} rank(s) missing)" if missing else ""))
            if snap.poll_s is not None:
                parts.append(f"poll {secs(snap.poll_s)}")
            parts.append(f"every {self.interval:g} s")
            line = Content(clean(" · ".join(parts)))
        self.summary.set(line)
        if self.summary.has_class("-error") != bool(snap.error):
            self.summary.set_class(bool(snap.error), "-error")
        self._update_title()
        self._arm_stale_check()
        self.renders += 1

    @staticmethod
    def _subtitle(table: KeyedTable[Row], text: str) -> None:
        if table.sort_by:
            text += f" · sorted by {table.SORTS[table.sort_by][0]}"
        table.set_subtitle(text)

    @staticmethod
    def _fit(table: KeyedTable[Row], rows: int, most: int) -> None:
        height = min(max(rows, 1), most) + 3  # + header + border
        if table.styles.height is None or table.styles.height.value != height:
            table.styles.height = height

    def node_row(self, n: FleetNode, snap: FleetSnap) -> Row:
        p = self.palette
        state, tone = node_state(n, snap.time, (snap.last_ok or {}).get(n.address))
        host, gpus, util, mem, cpu, load, jobs, verdict = node_cells(n)
        tones = {"ok": p.ok, "warn": p.warn, "err": p.err}
        used = sum(g.get("mem_used") or 0 for g in n.gpus) if n.gpus else None
        utils = [g["util"] for g in n.gpus if g.get("util") is not None]
        cells = (Cell(clean(n.label), p.bold), Cell(clean(host)), Cell(clean(state), tones[tone]),
                 Cell(gpus), Cell(util), Cell(mem), Cell(cpu), Cell(load), Cell(jobs),
                 Cell(clean(verdict), p.accent if n.verdict else p.plain))
        sort = {"node": n.label.lower(), "cpu": n.cpu_busy, "gpumem": used,
                "util": sum(utils) / len(utils) if utils else None}
        return Row(f"node:{n.address}", cells, sort, name=n.label)

    def job_row(self, n: FleetNode, j: FleetJob) -> Row:
        p = self.palette
        cells = [Cell(clean(c)) for c in job_cells(n, j)]
        status = {"running": p.ok, "failed": p.err, "stopped": p.warn}.get(j.status or "", p.muted)
        cells[1] = Cell(cells[1].text, p.bold)
        cells[3] = Cell(cells[3].text, status)
        cells[7] = Cell(cells[7].text, p.tone(slowdown_tone(slowdown_shown(j)[1],
                                                              j.slowdown_at_least)))
        name = j.name or DASH  # None: the exporter's series had no job label
        sort = {"job": name.lower(), "cpu": j.cpu_cores, "gpumem": j.gpu_mem,
                "step": j.step_time_s}
        return Row(f"job:{n.address}:{j.name}:{j.pid}", tuple(cells), sort, name=name)

    def dist_row(self, d: Mapping[str, Any]) -> Row:
        p = self.palette
        cells = [Cell(clean(c)) for c in dist_cells(d)]
        cells[0] = Cell(cells[0].text, p.bold)
        bad = bool(d["missing_ranks"])
        cells[3] = Cell(cells[3].text, p.err if bad else p.ok if d["complete"] else p.plain)
        cells[4] = Cell(cells[4].text, p.err if bad else p.muted)
        return Row(f"run:{d['run_id']}", tuple(cells),
                   {"run": d["run_id"], "step": d["slowest_step_s"]}, name=d["run_id"])

    # --- title and staleness --------------------------------------------------------------------
    def _title_content(self) -> Content:
        src = source_attr(self.source, "source", "nodes") or "nodes"
        parts: list[str | tuple[str, str]] = [("gputop-dl", "bold"), " · fleet"]
        parts.append(" · from the nodes' /metrics" if src == "nodes" else clean(f" · from {src}"))
        snap = self.latest
        if snap is not None:
            parts.append(f" · polled {time.strftime('%H:%M:%S', time.localtime(snap.time))}")
        if self.paused:
            parts.append(("  ⏸ PAUSED (p resumes)", "bold $text-warning"))
        elif snap is not None:
            age = self.clock() - snap.time
            if age > max(3 * self.interval, 6.0) and source_attr(self.source, "running", True):
                parts.append((f"  no poll finished for {age:.0f} s", "bold $text-error"))
        return Content.assemble(*parts)

    def stale_after(self) -> float:
        """The title's staleness is checked when a poll is overdue."""
        return max(6.0, 3 * self.interval)

    def palette_changed(self) -> None:
        self.render_fleet()

    # --- actions -------------------------------------------------------------------------------
    def focused_table(self) -> KeyedTable[Row]:
        f = self.focused
        return f if isinstance(f, KeyedTable) else self.nodes_table

    def action_cursor(self, delta: int) -> None:
        self.focused_table().move_cursor(delta)

    def action_sort(self, which: str) -> None:
        table = self.focused_table()
        if which and which not in table.SORTS:
            self.notify(f"the {table.TABLE_TITLE} table has no {which} sort", timeout=2)
            return
        table.set_sort(which or None)
        self.render_fleet()

    def action_poll_now(self) -> None:
        poll_now = source_attr(self.source, "poll_now")
        if poll_now is not None:
            poll_now()
            self.notify("polling the nodes now…", timeout=2)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(FLEET_KEYS, FLEET_NOTES, title="gputop-dl fleet · keys"))

    def on_keyed_table_selected(self, _event: KeyedTable.Selected) -> None:
        self.action_details()

    def action_details(self) -> None:
        table = self.focused_table()
        row = table.selected()
        snap = self.latest
        if row is None or snap is None:
            self.notify("no row selected", timeout=2)
            return
        kind, _, rest = row.key.partition(":")
        if kind == "node":
            node = next((n for n in snap.nodes if n.address == rest), None)
            if node is not None:
                self.push_screen(JobDetailScreen(f"node {node.label}", None, None,
                                                 self.node_details(node, snap)))
        elif kind == "job":
            for n in snap.nodes:
                for j in n.jobs:
                    if f"job:{n.address}:{j.name}:{j.pid}" == row.key:
                        self.push_screen(JobDetailScreen(f"job {j.name} on {n.label}", None, None,
                                                         self.job_details(n, j)))
                        return
        elif kind == "run":
            d = next((d for d in snap.distributed if d["run_id"] == rest), None)
            if d is not None:
                self.push_screen(JobDetailScreen(f"distributed job {d['run_id']}", None, None,
                                                 self.run_details(d)))

    @staticmethod
    def node_details(n: FleetNode, snap: FleetSnap) -> dict[str, str]:
        state, _tone = node_state(n, snap.time, (snap.last_ok or {}).get(n.address))
        out = {"address": n.address, "name": n.name or DASH, "state": state}
        if not n.ok:
            out["last error"] = n.error or DASH
            return out
        out.update({"hostname": n.hostname or DASH, "mode": n.mode or DASH,
                    "sample age": secs(n.age_s),
                    "host CPU": f"{pct(n.cpu_busy)} busy of {num(n.cpus, 'g')} cores · load "
                                f"{num(n.load1, '.1f')}",
                    "verdict": (n.verdict or DASH) + (f" ({n.confidence:.0%})"
                                                      if n.confidence is not None else "")})
        for g in n.gpus:
            out[f"gpu {g.get('index')}"] = (f"util {pct(g.get('util'))} · memory "
                                            f"{size(g.get('mem_used'))} / {size(g.get('mem_total'))}")
        out["jobs"] = ", ".join(j.name or DASH for j in n.jobs) or "none"
        return out

    @staticmethod
    def job_details(n: FleetNode, j: FleetJob) -> dict[str, str]:
        out = {"node": f"{n.label} ({n.hostname or n.address})",
               "pid": DASH if j.pid is None else str(j.pid),
               "status": (j.status or DASH) + (f" ({j.phase})" if j.phase else ""),
               "CPU": f"{num(j.cpu_cores, '.2f')} cores", "data-wait": pct(j.stall_fraction),
               "step": (f"{secs(j.step_time_s)} · slowdown "
                        + slowdown_shown(j)[0]),
               "GPU memory": size(j.gpu_mem)}
        if j.run_id:
            out["run id"] = j.run_id
            out["world size"] = DASH if j.world_size is None else str(j.world_size)
            for r in j.ranks:
                out[f"rank {r.get('rank')}"] = (f"local rank {r.get('local_rank')} · pid "
                                                f"{r.get('rank_pid')}")
        return out

    @staticmethod
    def run_details(d: Mapping[str, Any]) -> dict[str, str]:
        ws = d["world_size"]
        out = {"job": d["job"], "world size": str(ws) if ws else "unknown",
               "ranks seen": ", ".join(map(str, d["ranks_seen"])) or "none"}
        where = d.get("missing_last_seen") or {}
        out["missing"] = ", ".join(f"{r}" + (f" (last seen on {where[str(r)]})" if str(r) in where
                                             else "") for r in d["missing_ranks"]) or "none"
        for e in d["nodes"]:
            out[f"on {e['node']}"] = (f"ranks {','.join(map(str, e['ranks'])) or '?'} · pid "
                                      f"{e['pid'] or DASH} · {e['status'] or DASH} · step "
                                      f"{secs(e['step_time_s'])}")
        out["slowest step"] = DASH if d["slowest_step_s"] is None else (
            f"{secs(d['slowest_step_s'])} on {d['slowest_node']}")
        for x in d.get("duplicates") or ():
            out[f"also on {x['node']}"] = f"{x['job']}: the ranks {x['same_as']} shows, counted once"
        return out

    def action_quit_app(self) -> None:
        self.source.request_stop("quit")
        self.exit(0)

