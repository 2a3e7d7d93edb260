"""Verdict banner: the run's verdict (title and one-line reason), or else the phase and latest news.

The monitor's verdict is the live one (analyse/live/passive.py: estimated every tick from the found
jobs' CPU and GPU waits, no job paused); the banner says so beside its confidence.

`snapshot.verdict` is None or a dict with "kind", "title", "reason", "evidence_lines",
"recommendations", "jobs", "confidence"; the full evidence opens in a modal (key `v`). Without
a verdict the banner says which phase a launch is in ("baseline", "co-run", "finished") and the
newest engine message, or for the plain monitor what it is watching.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from gputop_dl.present.stuck_text import stuck_lines
from gputop_dl.present.tui.base import Panel
from gputop_dl.text.safe import clean

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import Snapshot

KIND_LABEL = {
    "parallel": "TRULY PARALLEL",
    "cpu-bound": "CONCURRENT · CPU-BOUND",
    "gpu-contended": "CONCURRENT · GPU-CONTENDED",
    "io-bound": "CONCURRENT · I/O-BOUND",
    "memory-bound": "CONCURRENT · MEMORY-BOUND",
    "outside-load": "CONCURRENT · OUTSIDE LOAD",
    "other": "CONCURRENT · OTHER",
    "insufficient-data": "NOT ENOUGH DATA",
    "no-baseline": "NO BASELINE",
    "alone": "ONE JOB · ALONE",
}

PHASE_TEXT = {
    "baseline": "solo baselines: each job alone first, then all together",
    "co-run": "co-run: all jobs together",
    "queue": "jobs start as the policy frees GPUs (slots) for them",
    "finished": "finished",
    "interrupted": "interrupted",
}


def _same(a: str, b: str) -> bool:
    """Whether a verdict title only repeats the kind label ("concurrent: CPU-bound")."""
    def norm(x: str) -> str:
        return "".join(c for c in x.lower() if c.isalnum())
    na, nb = norm(a), norm(b)
    return bool(na) and bool(nb) and (na in nb or nb in na)


TONES = ("-good", "-bad", "-neutral")


def verdict_class(kind: str | None) -> str:
    if kind == "parallel":
        return "-good"
    if kind in ("cpu-bound", "gpu-contended", "io-bound", "memory-bound", "outside-load", "other"):
        return "-bad"
    return "-neutral"


class VerdictBanner(Panel):
    """One or two lines above the panels: verdict, or phase + newest message."""

    DEFAULT_CSS = """
    VerdictBanner { height: auto; padding: 0 1; background: $panel; }
    VerdictBanner.-good { background: $success-muted; }
    VerdictBanner.-bad { background: $warning-muted; }
    """

    def show(self, snap: Snapshot | None, *, mode: str, extra: str = "") -> None:
        self.set(self.render_content(snap, mode=mode, extra=extra))

    def _tone(self, cls: str) -> None:
        """Set the background class; only a change, as each class change restyles the widget."""
        if not self.has_class(cls):
            self.set_classes({c for c in self.classes if c not in TONES} | {cls})

    def render_content(self, snap: Snapshot | None, *, mode: str, extra: str = "") -> Content:
        if snap is None:
            self._tone("-neutral")
            return Content.styled("waiting for the first sample…", "$text-muted")
        stuck = stuck_lines(snap.jobs)
        if stuck:  # a stuck job first: nothing else about the box matters as much
            self._tone("-bad")
            more = "; ".join(clean(s) for s in stuck[1:]) or "enter on its row: where, evidence, fix"
            return Content.assemble(("STUCK  ", "bold $text-error"), (clean(stuck[0]), "bold"),
                                    ("\n" + more, "$text-muted"))
        v = snap.verdict
        if v:
            kind = v.get("kind")
            self._tone(verdict_class(kind))
            label = KIND_LABEL.get(kind or "", (kind or "verdict").upper())
            # an ANSI theme's tone text on its tone background is one colour twice (the
            # terminal cannot blend them): the title is then in the text colour, bold
            ansi = str(self.app.theme_variables.get("background", "")).startswith("ansi")
            style = "bold" if ansi else {"-good": "bold $text-success", "-bad": "bold $text-warning"}.get(
                verdict_class(kind), "bold")
            conf = v.get("confidence")
            conf_s = f" · confidence {conf}" if isinstance(conf, str) else (
                f" · confidence {conf:.0%}" if isinstance(conf, (int, float)) else "")
            if str((v.get("evidence") or {}).get("method") or "").startswith("passive"):
                conf_s += " · live estimate, nothing paused"  # analyse/live/passive.py
            title = clean(v.get("title"))
            runs = [(label, style)] if _same(title, label) or not title else [(f"{label}  ", style), (title, "bold")]
            return Content.assemble(
                *runs,
                ("\n" + clean(v.get("reason")), ""), (f"   v: evidence{conf_s}", "$text-muted"))
        self._tone("-neutral")
        newest = clean(snap.log[-1][1]) if snap.log else ""
        if mode == "monitor" and snap.phase is None:
            head = "monitor"
            body = extra or "watching this machine"
        else:
            head = f"phase: {snap.phase or 'starting'}"
            body = PHASE_TEXT.get(snap.phase or "", "starting")
            if extra:
                body += f" · {extra}"
        if not newest:
            newest = ("d: diagnose the jobs found running (parallel or only concurrent, and why)"
                      if mode == "monitor" else "no verdict yet")
        return Content.assemble((head, "bold $text-accent"), ("  " + body, ""), ("\n" + newest, "$text-muted"))
