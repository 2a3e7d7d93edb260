"""The monitor app's actions on sessions: diagnose the found jobs (`d`), the verdict (`v`),
export a report (`e`) and launch workloads (`l`).

`SessionActions` is a mixin of `GputopApp` (app.py); the work itself runs in the callables the
app was handed (`diagnoser`, `exporter`, `launcher`), off the UI thread.

The probe of `d` pauses each found job for a few seconds. It never runs under `--readonly`
(observe only), and before it pauses another user's jobs (which gputop-dl may signal only as
root) it asks, naming whose jobs. Its progress shows in the banner at once: the seconds left and
each step (observing, py-spy, each probe window) as the diagnosis says it.
"""

from __future__ import annotations

import asyncio
import getpass
import inspect
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from gputop_dl.present.tui.source import source_attr
from gputop_dl.text.safe import escape

if TYPE_CHECKING:
    from gputop_dl.present.tui.app_state import MonitorHost as _Host
else:
    _Host = object  # a plain mixin at run time


DIAGNOSE_S = 20.0  # the TUI's diagnosis: observe, py-spy together, probe each alone


def may_signal_others() -> bool:
    """Whether gputop-dl may signal other users' processes (it runs as root)."""
    return os.geteuid() == 0


class SessionActions(_Host):
    """Needs `sources`, `specs`, `latest`, `launch_index()`, `diagnoser`, `exporter`,
    `launcher`, `export_dir`, `workloads_dir` and `_attach_source()` from the app
    (app_state.py lists them)."""

    def action_diagnose(self) -> None:
        from gputop_dl.present.tui.screens import ConfirmScreen  # on demand: not on start-up

        if self.diagnoser is None or self.launch_index() is not None:
            self.notify("diagnose is for the jobs the monitor found (launches have their own "
                        "verdict: v)", timeout=4)
            return
        if self.diagnosing:
            self.notify("a diagnosis is running…", timeout=3)
            return
        probe = not self.readonly
        others = self.other_users_jobs() if probe and may_signal_others() else {}
        if others:
            whose = "; ".join(f"{user}'s {', '.join(names)}" for user, names in sorted(others.items()))
            question = (f"The probe pauses each found job for a few seconds while the others run "
                        f"alone. This includes jobs of other users: {whose}. gputop-dl runs as "
                        "root, so it may pause them.\nProbe them too? (No: observe only, nothing "
                        "is paused.)")
            self.push_screen(ConfirmScreen(question, title="pause other users' jobs?",
                                           yes="Pause them"),
                             lambda yes: self._start_diagnose(bool(yes)))
            return
        self._start_diagnose(probe)

    def other_users_jobs(self) -> dict[str, list[str]]:
        """Found jobs of users other than gputop-dl's, by user."""
        me = getpass.getuser()
        out: dict[str, list[str]] = {}
        primary = self.latest.get(0)
        for j in (primary.jobs if primary else ()):
            if not j.launched and j.user and j.user != me:
                out.setdefault(j.user, []).append(j.name)
        return out

    def _start_diagnose(self, probe: bool) -> None:
        self.diagnosing = True
        self.diag_t0 = time.monotonic()
        self.diag_status = ("observing the jobs found running" if probe else
                            "observing only (no probe: nothing is paused)")
        self._render_banner_and_log()  # the progress shows at once
        self.run_worker(self._diagnose(probe), exclusive=True, group="diagnose")

    def diagnose_progress(self) -> str:
        """The banner's line while a diagnosis runs: seconds left and its latest step."""
        left = max(0.0, DIAGNOSE_S - (time.monotonic() - self.diag_t0))
        return f"diagnosing: {left:.0f} s left · {self.diag_status}"

    def _diagnose_said(self, message: str) -> None:
        if self.diagnosing and message:
            self.diag_status = message.removeprefix("diagnose: ")
            self._render_banner_and_log()

    async def _diagnose(self, probe: bool = True) -> None:
        from gputop_dl.present.tui.screens import VerdictScreen  # on demand: not on start-up

        diagnoser = self.diagnoser
        assert diagnoser is not None  # action_diagnose checked it
        kw: dict[str, Any] = {}
        params = inspect.signature(diagnoser).parameters
        if "probe" in params:
            kw["probe"] = probe
        if "progress" in params:
            kw["progress"] = lambda msg: self.call_from_thread(self._diagnose_said, msg)
        if "seconds" in params:
            kw["seconds"] = DIAGNOSE_S
        try:
            result = await asyncio.to_thread(diagnoser, **kw)
        except Exception as exc:
            self.notify(f"diagnosis failed: {escape(exc)}", severity="error", timeout=6)
            return
        finally:
            self.diagnosing = False
            self._render_banner_and_log()
        self.diagnosis = result
        if not result.get("verdict"):
            self.notify("diagnosis: no training job found", timeout=4)
            return
        self._render_banner_and_log()
        self.push_screen(VerdictScreen(result["verdict"]))

    def current_verdict(self) -> dict[str, Any] | None:
        """The verdict the header shows: the launch's, else a diagnosis of the found jobs, else
        the monitor's live verdict of the jobs it sees (the same choice as the banner's)."""
        li = self.launch_index()
        if li is None and self.diagnosis and self.diagnosis.get("verdict"):
            found: dict[str, Any] = self.diagnosis["verdict"]  # the diagnosis JSON's verdict
            return found
        snap = self.latest.get(li) if li is not None else self.primary
        return snap.verdict if snap is not None else None

    def action_verdict(self) -> None:
        from gputop_dl.present.tui.screens import VerdictScreen  # on demand: not on start-up

        v = self.current_verdict()
        if not v:
            li = self.launch_index()
            phase = self.latest[li].phase if li is not None else None
            what = (f"phase: {phase}" if phase else
                    "no training job seen yet" if li is None else "starting")
            self.notify(f"no verdict yet ({what})", timeout=3)
            return
        self.push_screen(VerdictScreen(v, follow=self.current_verdict))

    def export_target(self) -> str | None:
        li = self.launch_index()
        sid: str | None
        if li is not None:
            sid = source_attr(self.sources[li], "session_id") or self.latest[li].session_id
        else:
            sid = source_attr(self.sources[0], "session_id")
        return sid

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

    async def _export(self, fn: Callable[..., object], sid: str, path: str,
                      kw: dict[str, Any]) -> None:
        try:
            result = await asyncio.to_thread(fn, sid, path, **kw)
        except Exception as exc:
            self.notify(f"export failed: {escape(exc)}", severity="error", timeout=6)
            return
        written = result if isinstance(result, (str, os.PathLike)) else path
        self.exported.append(os.fspath(written))
        self.notify(f"exported to {escape(os.fspath(written))}", timeout=6)

    def action_launcher(self) -> None:
        from gputop_dl.present.tui.screens import LauncherScreen  # on demand: not on start-up

        launcher = self.launcher
        if launcher is None:
            return
        if any(i > 0 and source_attr(s, "running", False) for i, s in enumerate(self.sources)):
            self.notify("a launch is already running", severity="warning", timeout=3)
            return

        def started(result: tuple[str, list[str]] | None) -> None:
            if not result:
                return
            path, names = result
            try:
                spec = launcher.load(path, only=names)
                src = launcher.start(spec)
            except Exception as exc:
                self.notify(f"cannot launch: {escape(exc)}", severity="error", timeout=8)
                return
            index = len(self.sources)
            self.sources.append(src)
            self.specs[index] = spec
            self._attach_source(index, src)
            self.notify(escape(f"launched {', '.join(names)} from {os.path.relpath(path)}"), timeout=4)

        self.push_screen(LauncherScreen(self.workloads_dir, launcher.load), started)
