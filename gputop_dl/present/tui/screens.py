"""Modal screens: confirmation, help, verdict evidence, job details, and the workload launcher."""

from __future__ import annotations

import glob
import os
from dataclasses import asdict
from typing import Any, Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, SelectionList, Static

from gputop_dl.text.fmt import DASH, dash, duration, num, pct, progress, rank_list, secs, size
from gputop_dl.present.tui.phase_bar import phase_lines
from gputop_dl.snapshot import JobSample
from gputop_dl.text.safe import clean, escape
from gputop_dl.present.verdict_text import job_line
from gputop_dl.workload import redact_secrets

def modal_css(name: str, width: int = 100) -> str:
    """CSS for a centred dialog screen (DEFAULT_CSS is scoped to the class, so name it)."""
    return f"""
    {name} {{ align: center middle; background: $background 60%; }}
    {name} > .dialog {{
        width: {width}; max-width: 95%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 1 2;
    }}
    {name} .dialog-title {{ text-style: bold; color: $text-accent; width: 1fr; margin-bottom: 1; }}
    {name} .hint {{ color: $text-muted; margin-top: 1; }}
    {name} .body {{ height: auto; max-height: 40; }}
    """


class ConfirmScreen(ModalScreen[bool]):
    """Yes/no question; `y`/`enter` on Yes answers yes, `n`/`escape` no."""

    DEFAULT_CSS = modal_css("ConfirmScreen", 70) + """
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, *, title: str = "Confirm", yes: str = "Yes"):
        super().__init__()
        self.question, self.title_text, self.yes = question, title, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(Content(clean(self.question)), id="question")
            with Horizontal():
                yield Button(f"{self.yes} (y)", variant="error", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class _InfoScreen(ModalScreen[None]):
    """A scrollable read-only dialog; escape/q closes."""

    DEFAULT_CSS = modal_css("_InfoScreen")
    BINDINGS = [Binding("escape,q", "close", "Close")]
    TITLE_TEXT = ""

    def body(self) -> Content:
        return Content("")

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(escape(self.TITLE_TEXT), classes="dialog-title", id="dialog-title")
            with VerticalScroll(classes="body"):
                yield Static(self.body(), id="body")
            yield Label("escape: close", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)


HELP_KEYS = (
    ("q", "quit (asks first while launched jobs run, then stops them cleanly)"),
    ("?", "this help"),
    ("↑ ↓ / j k", "select a row (mouse: click selects, a second click opens it)"),
    ("pgup pgdn", "a page up / down; the wheel scrolls"),
    ("home end", "the first / last row"),
    ("enter", "details of the selected job: config, stderr tail, epoch times"),
    ("c m n t", "sort by CPU, memory, name, step time (again: reverse)"),
    ("o", "back to the default order"),
    ("a", "epoch panel: selected job ↔ all jobs (a launch)"),
    ("z", "history charts: the last 5 minutes ↔ the whole session (the monitor)"),
    ("v", "the verdict with its full evidence"),
    ("s", "stop the selected launched job (asks first)"),
    ("e", "export the session as Markdown (gputop-dl-<session>.md)"),
    ("p", "pause / resume updates"),
    ("l", "launch workloads from a workload file (monitor)"),
    ("d", "diagnose the jobs found running: together, then each alone (monitor, ~20 s)"),
    ("ctrl+p", "command palette (themes: dark/light)"),
    ("ctrl+c ctrl+q", "quit, as q"),
    ("tab shift+tab", "move the focus (dialogs: between their buttons)"),
    ("super+c", "copy the selected text (Textual's; where the terminal passes the key)"),
)


class HelpScreen(_InfoScreen):
    TITLE_TEXT = "gputop-dl · keys"
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, keys: tuple[tuple[str, str], ...] = HELP_KEYS, notes: tuple[str, ...] = (),
                 title: str | None = None):
        """The monitor's keys by default; another view (the fleet's) passes its own keys and
        notes (muted lines after them)."""
        super().__init__()
        self.keys, self.notes = keys, notes
        if title:
            self.TITLE_TEXT = title

    def key_lines(self) -> list[Content]:
        width = max(12, max((len(k) for k, _d in self.keys), default=0) + 2)
        return [Content.assemble((f"{k:<{width}}", "bold $text-accent"), d) for k, d in self.keys]

    def body(self) -> Content:
        lines = self.key_lines()
        if self.keys is not HELP_KEYS:
            return Content("\n").join(lines + [Content.styled(n, "$text-muted") for n in self.notes])
        lines += [Content(""), Content.assemble(
            ("● ", "bold"), "job launched by gputop-dl;  ", ("┃", "bold $text-accent"),
            " solo epoch time in the epoch chart")]
        lines.append(Content.styled(
            "slowdown = median step time together, while every job is past its warm-up and none "
            "has ended, / step time alone (the verdict's figure); the epoch chart's ratio = the "
            "whole epoch / solo step × steps; data-wait = share of each step spent waiting for "
            "the next batch", "$text-muted"))
        return Content("\n").join(lines)


def _job_line(j: dict) -> str:
    line, name = str(job_line(j) or ""), str(j.get("name") or "")
    return line if line.startswith(name) else f"{name}: {line}"


class VerdictScreen(_InfoScreen):
    TITLE_TEXT = "verdict"
    BINDINGS = [Binding("escape,q,v", "close", "Close")]

    def __init__(self, verdict: dict, follow: Callable[[], dict | None] | None = None):
        """`follow`: where the header's verdict is read; the dialog follows it as it changes
        (the live verdict moves every tick), once a second."""
        super().__init__()
        self.verdict = verdict
        self._follow = follow

    def on_mount(self) -> None:
        if self._follow is not None:
            self.set_interval(1.0, self.refresh_verdict)

    def refresh_verdict(self) -> None:
        v = self._follow() if self._follow is not None else None
        if v and v != self.verdict:
            self.verdict = v
            self.query_one("#body", Static).update(self.body())

    def body(self) -> Content:
        v = self.verdict
        out: list[Content] = [Content.assemble((clean(v.get("title") or v.get("kind") or "verdict"), "bold"))]
        meta = [f"kind: {v.get('kind') or DASH}"]
        if v.get("confidence") is not None:
            c = v["confidence"]
            meta.append(f"confidence: {c:.0%}" if isinstance(c, (int, float)) else f"confidence: {c}")
        out.append(Content.styled(" · ".join(meta), "$text-muted"))
        if v.get("reason"):
            out += [Content(""), Content(clean(v["reason"]))]
        sections = (("Evidence", v.get("evidence_lines") or []),
                    ("Jobs", [_job_line(j) for j in v.get("jobs") or []]),
                    ("Recommendations", v.get("recommendations") or []))
        for head, items in sections:
            if items:
                out += [Content(""), Content.styled(head, "bold $text-accent")]
                out += [Content(clean(f"  • {x}")) for x in items]
        return Content("\n").join(out)


ALWAYS_SHOWN = ("name", "model", "dataset", "batch_size", "epochs", "gpus")


def _is_default(key: str, value: Any) -> bool:
    """Whether a workload config value is the Workload dataclass default."""
    from dataclasses import MISSING, fields

    from gputop_dl.workload import Workload

    for f in fields(Workload):
        if f.name == key:
            default = f.default if f.default is not MISSING else (
                f.default_factory() if f.default_factory is not MISSING else MISSING)  # type: ignore[misc]
            if isinstance(default, tuple):
                default = list(default)
            return default is not MISSING and value == default
    return False


def _distributed_rows(j: JobSample) -> list[tuple[str, str]]:
    """A distributed job's run and its ranks on this node (none for other jobs)."""
    d = j.distributed
    if d is None:
        return []
    return [("run", f"{dash(d.run_id)} · node {dash(d.group_rank)} of {dash(d.nnodes)} · "
                    f"world size {dash(d.world_size)}"),
            ("ranks here", rank_list(asdict(r) for r in d.ranks))]


def job_detail_lines(j: JobSample | None, config: dict | None, extra: dict[str, str] | None = None) -> Content:
    """The job details text: live numbers, config, epoch times, stderr tail."""
    out: list[Content] = []
    if j is not None:
        rows = [
            ("status", (f"{j.status}: {j.failure}" if j.failure else j.status)
             + (f" ({j.phase})" if j.phase else "")),
            ("pid", f"{j.pid or DASH}" + (f"  (tree: {', '.join(map(str, j.pids))})" if j.pids else "")),
            *_distributed_rows(j),
            ("device", j.device or DASH), ("model", j.model or DASH),
            ("batch", DASH if j.batch_size is None else str(j.batch_size)),
            ("progress", progress(j.epoch, j.epochs, j.step, j.steps_per_epoch) + f"  ETA {secs(j.eta_s)}"),
            ("step", f"{secs(j.step_time_s)}  solo {secs(j.solo_step_time_s)}  slowdown {num(j.slowdown, '.2f', '×')}"
             + (f"  (step time {DASH}: {j.step_time_note})" if j.step_time_note else "")),
            ("throughput", f"{num(j.samples_per_s, '.1f')} samples/s"),
            ("data-wait", f"{pct(j.stall_fraction)}" + (f" (from {j.stall_source})" if j.stall_source else "")),
            ("CPU", f"{num(j.cpu_cores, '.2f')} cores · {j.threads or DASH} threads · RSS {size(j.rss)}"),
            ("GPU", f"memory {size(j.gpu_mem)} · SM {pct(j.gpu_sm)}"),
            *_identity_rows(j),
        ]
        if not j.launched:  # a found job: what only a launch knows is left out, not shown as "–"
            known = {"device": j.device, "model": j.model, "batch": j.batch_size, "progress": j.epoch,
                     "step": j.step_time_s if j.step_time_s is not None else (
                         j.slowdown if j.slowdown is not None else j.step_time_note),
                     "throughput": j.samples_per_s}
            rows = [(k, v) for k, v in rows if k not in known or known[k] is not None]
        out += [Content.assemble((f"{k:<11}", "bold"), clean(v)) for k, v in rows]
        out += _process_tree(j)
        out += phase_lines(j)  # step phases, solo against now; ranks (present/tui/phase_bar.py)
        out += [Content(""), Content.styled("epoch times", "bold $text-accent")]
        if j.epoch_times:
            out += [Content(f"  epoch {i}: {secs(t)}") for i, t in enumerate(j.epoch_times, 1)]
        else:
            out.append(Content.styled("  none finished yet", "$text-muted"))
    width = max([11] + [len(k) + 1 for k in extra or {}])  # a long label still gets a gap
    for k, v in (extra or {}).items():
        out.append(Content.assemble((f"{k:<{width}}", "bold"), clean(v)))
    if config:
        out += [Content(""), Content.styled("config (defaults left out)", "bold $text-accent")]
        for k, v in config.items():
            if k not in ALWAYS_SHOWN and (v in (None, (), [], {}, "") or k == "cpu_fallback_applied"
                                          or _is_default(k, v)):
                continue
            out.append(Content(clean(f"  {k} = {v!r}")))
        if config.get("cpu_fallback_applied"):
            out.append(Content.styled(f"  (no CUDA: cpu_fallback applied to {', '.join(config['cpu_fallback_applied'])})",
                                      "$text-warning"))
    if j is not None:
        out += [Content(""), Content.styled("stderr (last lines)", "bold $text-accent")]
        if j.stderr_tail:
            out += [Content.styled(clean(f"  {line}"), "$text-muted") for line in j.stderr_tail[-40:]]
        else:
            out.append(Content.styled("  (none yet: shown when the job ends)", "$text-muted"))
    return Content("\n").join(out)


def _identity_rows(j: JobSample) -> list[tuple[str, str]]:
    """Who, since when, what and where (issue 23), and the CPU wait and the slowdown's source."""
    rows = []
    if j.cpu_wait_fraction is not None or j.cpu_wait_note:
        rows.append(("CPU wait", pct(j.cpu_wait_fraction)
                     + (f" (trainer {pct(j.cpu_wait_trainer)}, workers {pct(j.cpu_wait_workers)})"
                        if j.cpu_wait_trainer is not None or j.cpu_wait_workers is not None else "")
                     + (f" · throttled {pct(j.cpu_throttled_fraction)}" if j.cpu_throttled_fraction else "")
                     + (f" · {j.cpu_wait_note}" if j.cpu_wait_note else "")))
    if j.slowdown_source:
        rows.append(("slowdown", f"{num(j.slowdown, '.2f', '×')} {j.slowdown_source}"
                     + (f" (confidence {pct(j.slowdown_confidence)})" if j.slowdown_confidence is not None else "")))
    if j.user or j.elapsed_s is not None:
        rows.append(("user", f"{j.user or DASH} · running for {duration(j.elapsed_s)}"))
    cmd = j.cmdline or j.command
    if cmd:
        rows.append(("command", cmd))
    if j.cwd:
        rows.append(("directory", j.cwd))
    if j.slurm:
        s = j.slurm
        rows.append(("slurm", f"job {s.job_id} · user {s.user or DASH} · partition "
                              f"{s.partition or DASH} · account {s.account or DASH}"))
    if j.container:
        rows.append(("container", j.container))
    if j.launched_by:
        rows.append(("launched by", f"gputop-dl session {j.launched_by}"))
    if j.identity_note:
        rows.append(("not known", j.identity_note))
    return rows


def _process_tree(j: JobSample) -> list[Content]:
    """The job's processes (trainer, ranks, loader workers) with CPU, RSS, state, GPU."""
    if not j.procs:
        return []
    gpu = any(p.gpu_mem is not None or p.gpu_sm is not None for p in j.procs)
    head = f"  {'pid':<16} {'role':<8} {'CPU':>5} {'RSS':>9} state" + ("  GPU mem    SM" if gpu else "")
    out = [Content(""), Content.styled(f"processes ({len(j.procs)})", "bold $text-accent"),
           Content.styled(head, "$text-muted")]
    for p in j.procs:
        pid = ("  " * p.depth + ("└ " if p.depth else "") + str(p.pid))
        line = (f"  {pid:<16} {p.role:<8} {num(p.cpu_cores, '.2f'):>5} {size(p.rss):>9} "
                f"{STATES.get(p.state or '', p.state or DASH):<5}")
        if gpu:
            line += f"  {size(p.gpu_mem):>7} {pct(p.gpu_sm):>5}"
        out.append(Content(line))
    return out


STATES = {"R": "run", "S": "sleep", "D": "disk", "T": "stop", "t": "trace", "I": "idle"}


class JobDetailScreen(_InfoScreen):
    BINDINGS = [Binding("escape,q,enter", "close", "Close")]

    def __init__(self, title: str, job: JobSample | None, config: dict | None,
                 extra: dict[str, str] | None = None):
        super().__init__()
        self.TITLE_TEXT = title
        self.job, self.config, self.extra = job, config, extra

    def body(self) -> Content:
        return job_detail_lines(self.job, self.config, self.extra)


def workload_files(directory: str) -> list[str]:
    """The workload files (*.toml) in `directory`, sorted."""
    return sorted(glob.glob(os.path.join(directory, "*.toml")))


class LauncherScreen(ModalScreen[tuple[str, list[str]] | None]):
    """Pick a workload file (from ./workloads/ or a typed path), tick workloads, start them.

    Dismisses with (path, ticked workload names), or None when cancelled. `load(path)` returns a
    SessionSpec or raises (a ConfigError's one-line message is shown in the dialog).
    """

    DEFAULT_CSS = modal_css("LauncherScreen", 120) + """
    LauncherScreen #panes { height: 16; }
    LauncherScreen #files { width: 40; height: 1fr; }
    LauncherScreen #workloads { width: 1fr; height: 1fr; margin-left: 1; }
    LauncherScreen #path { margin-top: 1; }
    LauncherScreen #message { height: auto; margin-top: 1; }
    LauncherScreen #message.-error { color: $text-error; }
    LauncherScreen #buttons { height: auto; align-horizontal: right; margin-top: 1; }
    LauncherScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "start", "Start")]

    def __init__(self, directory: str, load: Callable[[str], Any]):
        super().__init__()
        self.directory = directory
        self.load = load
        self.files = workload_files(directory)
        self.path: str | None = None
        self.spec: Any = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("launch workloads", classes="dialog-title")
            with Horizontal(id="panes"):
                files = OptionList(*[escape(os.path.relpath(f)) for f in self.files], id="files")
                files.border_title = escape(f"files in {self.directory}/")
                yield files
                wl = SelectionList[str](id="workloads")
                wl.border_title = "workloads (space: tick)"
                yield wl
            yield Input(placeholder="…or type a workload file path and press enter", id="path")
            yield Static("", id="message")
            yield Label("enter: open file · space: tick · ctrl+s: start · escape: cancel", classes="hint")
            with Horizontal(id="buttons"):
                yield Button("Start", variant="success", id="start")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        if self.files:
            self._open(self.files[0])
            self.query_one("#files", OptionList).highlighted = 0
            self.query_one("#workloads", SelectionList).focus()
        else:
            self._say(f"no *.toml files in {self.directory}/: type a path below", error=False)
            self.query_one("#path", Input).focus()

    def _say(self, text: str, error: bool = False) -> None:
        msg = self.query_one("#message", Static)
        msg.update(Content(clean(text)))
        msg.set_class(error, "-error")

    def _open(self, path: str) -> None:
        wl = self.query_one("#workloads", SelectionList)
        wl.clear_options()
        self.spec, self.path = None, None
        try:
            spec = self.load(path)
        except Exception as exc:  # ConfigError: one clear line
            self._say(str(exc), error=True)
            return
        self.spec, self.path = spec, path
        for w in spec.workloads:
            what = (" ".join(redact_secrets(w.to_dict())["command"]) if w.command
                    else f"{w.model} bs{w.batch_size}")
            gpus = ",".join(map(str, w.gpus)) if w.gpus else "–"
            wl.add_option((escape(f"{w.name:<14} {what} · gpus {gpus} · {w.epochs} epochs"), w.name, True))
        if spec.workloads:
            wl.highlighted = 0
        note = "" if spec.cuda else " · no CUDA here: jobs train on the CPU"
        self._say(f"{spec.name}: {len(spec.workloads)} workload(s), baseline = {spec.baseline}{note}")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "files":
            self._open(self.files[event.option_index])
            self.query_one("#workloads", SelectionList).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self._open(os.path.expanduser(event.value.strip()))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()
        else:
            self.action_cancel()

    def action_start(self) -> None:
        if self.path is None:
            self._say("open a workload file first", error=True)
            return
        names = list(self.query_one("#workloads", SelectionList).selected)
        if not names:
            self._say("tick at least one workload", error=True)
            return
        self.dismiss((self.path, names))

    def action_cancel(self) -> None:
        self.dismiss(None)
