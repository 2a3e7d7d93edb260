"""The monitor app's actions on sessions: diagnose the found jobs (`d`), the verdict (`v`),
export a report (`e`) and launch workloads (`l`).

`SessionActions` is a mixin of `GputopApp` (app.py); the work itself runs in the callables the
app was handed (`diagnoser`, `exporter`, `launcher`), off the UI thread.
"""

from __future__ import annotations

import asyncio
import os

from gputop_dl.present.tui.screens import LauncherScreen, VerdictScreen
from gputop_dl.present.tui.source import source_attr
from gputop_dl.text.safe import escape


class SessionActions:
    """Needs `sources`, `specs`, `latest`, `launch_index()`, `diagnoser`, `exporter`,
    `launcher`, `export_dir`, `workloads_dir` and `_attach()` from the app."""

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
