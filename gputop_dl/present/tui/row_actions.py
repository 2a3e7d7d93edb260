"""The monitor app's actions on the jobs table's rows: details (enter), stop a job (`s`), sort,
the cursor, all epochs (`a`), the charts' zoom (`z`) and help (`?`).

`RowActions` is a mixin of `GputopApp` (app.py); the screens it opens are built on demand
(screens.py), not on start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop_dl.text.safe import escape

if TYPE_CHECKING:
    from gputop_dl.present.tui.app_state import MonitorHost as _Host
    from gputop_dl.present.tui.jobs_table import JobRow
else:
    _Host = object  # a plain mixin at run time


class RowActions(_Host):
    """Needs `table`, `history_panel`, `epochs_all`, `specs`, `sources`, `primary`,
    `live_jobs()`, `_render_jobs()` and `_render_epochs()` from the app (app_state.py lists
    them)."""

    def action_cursor(self, delta: int) -> None:
        self.table.move_cursor(delta)

    def action_sort(self, which: str) -> None:
        table = self.table
        table.set_sort(which or None)
        self._render_jobs()

    def action_epochs_all(self) -> None:
        self.epochs_all = not self.epochs_all
        self._render_epochs()

    def action_zoom(self) -> None:
        """The history charts: the last 5 minutes, or the whole session."""
        panel = self.history_panel
        if not panel.display:
            self.notify("the history charts show in the monitor, with no launched job", timeout=3)
            return
        panel.toggle_zoom()

    def action_help(self) -> None:
        from gputop_dl.present.tui.screens import HelpScreen  # on demand: not on start-up

        self.push_screen(HelpScreen())

    def _config_for(self, row: JobRow) -> dict[str, Any] | None:
        spec = self.specs.get(row.source)
        if spec is None:
            return None
        for w in getattr(spec, "workloads", ()):
            if w.name == row.name:
                config: dict[str, Any] = w.to_dict(redact=True)  # the workload's keys, as TOML has them
                return config
        return None

    def action_details(self) -> None:
        from gputop_dl.present.tui.screens import JobDetailScreen  # on demand: not on start-up

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

    def action_stop_job(self) -> None:
        from gputop_dl.present.tui.screens import ConfirmScreen  # on demand: not on start-up

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
