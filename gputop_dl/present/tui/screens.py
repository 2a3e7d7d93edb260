"""Modal screens: confirmation, help, verdict evidence, job details, and the workload launcher."""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any, Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, SelectionList, Static

from gputop_dl.text.fmt import DASH
from gputop_dl.present.tui.job_detail import job_detail_lines
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
    ("b", "the bell with the notice of a stuck or failed job: on / off (--no-bell)"),
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
        lines.append(Content.styled(
            "slowdown's mark: meas a launch's baselines · probe diagnose paused the others · est "
            "estimated live from the jobs' waits · pace its own pace, alone and now · est? an "
            "estimate its spinning intra-op pool can put several times off (v: why)",
            "$text-muted"))
        return Content("\n").join(lines)


def _job_line(j: Mapping[str, Any]) -> str:
    line, name = str(job_line(j) or ""), str(j.get("name") or "")
    return line if line.startswith(name) else f"{name}: {line}"


class VerdictScreen(_InfoScreen):
    TITLE_TEXT = "verdict"
    BINDINGS = [Binding("escape,q,v", "close", "Close")]

    def __init__(self, verdict: Mapping[str, Any],
                 follow: Callable[[], Mapping[str, Any] | None] | None = None):
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


class JobDetailScreen(_InfoScreen):
    BINDINGS = [Binding("escape,q,enter", "close", "Close")]

    def __init__(self, title: str, job: JobSample | None, config: Mapping[str, Any] | None,
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
