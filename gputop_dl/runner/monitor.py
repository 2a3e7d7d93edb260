"""`gputop-dl`, the live monitor: its first frame first, then the engine (runner/deferred.py).

Before the app runs, only what must fail as one line and exit 2 is done here, and nothing that
reads the machine or opens the database: the terminal is ours, the data directory can be used
at all (one under a file cannot). The first frame is the layout, each panel saying what it
waits for; after it, in the `DeferredSource`'s thread, the host's first reading, the store's
check (a database that cannot be written only stops recording) and the engine with its
collectors and NVML. The launcher (`l`), the diagnosis (`d`) and the export (`e`) import theirs
when used.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gputop_dl.quick_exit import exit_now
from gputop_dl.runner.deferred import DeferredSource, host_preview
from gputop_dl.runner.terminal import require_foreground

if TYPE_CHECKING:
    from gputop_dl.engine import Engine
    from gputop_dl.runner.engines import Launcher
    from gputop_dl.workload import SessionSpec

JOIN_TIMEOUT_S = 60.0  # how long quitting waits for an engine to stop its jobs


GC_YOUNG = 10_000  # allocations between two collections of the youngest objects (Python: 700)


def settle_gc() -> None:
    """The start-up is over: what it built (modules, the app, the engine) lives as long as the
    process. Moved out of the cyclic collector's sight (`gc.freeze`), the collections that
    follow look at what came after; and they come after GC_YOUNG allocations, not 700: each
    frame and tick makes thousands of short-lived objects that reference counting frees, and
    a collection costs what is alive at the time, so fewer of them cost less in all. Together
    ~2 ms of a second's CPU before (docs/benchmarks.md). Collection, off during the start-up
    (its ~90 collections found nothing to free), is back on."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
    gc.enable()


class LazyLauncher:
    """The `l` screen's launcher (runner.engines.Launcher), imported on its first use."""

    def __init__(self) -> None:
        self._launcher: Launcher | None = None

    def _get(self) -> Launcher:
        if self._launcher is None:
            from gputop_dl.collect.nvml.gpus import Nvml
            from gputop_dl.runner.engines import Launcher

            self._launcher = Launcher(Nvml())
        return self._launcher

    def load(self, path: str, only: list[str] | None = None) -> SessionSpec:
        return self._get().load(path, only=only)

    def start(self, spec: SessionSpec) -> Engine:
        return self._get().start(spec)


def export(session_id: str, path: str, store_path: str | None = None) -> str:
    """The `e` key (runner.records.export_for_tui)."""
    from gputop_dl.runner.records import export_for_tui

    return export_for_tui(session_id, path, store_path=store_path)


def diagnose(seconds: float = 20.0, probe: bool = True,
             progress: Callable[[str], None] | None = None, *,
             readonly: bool = False) -> dict[str, Any]:
    """The `d` key (runner.live.diagnose_for_tui); read-only: observed, never probed."""
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner.live import diagnose_for_tui

    return diagnose_for_tui(Nvml(), seconds, probe=probe and not readonly, progress=progress)


def run_monitor(*, interval: float = 1.0, stall_budget: float | None = None,
                metrics: str | None = None, readonly: bool = False,
                stuck_after: float | None = None, bell: bool = True) -> int:
    """`gputop-dl`: the live monitor; on quitting, the sessions it recorded. With `metrics`
    (HOST:PORT) the monitor's snapshots are served on /metrics while it runs (the engine is
    then built before the first frame, so that a port in use is one line and exit 2)."""
    require_foreground("run it in the foreground or with `timeout --foreground`; "
                       "`gputop-dl --once` prints one snapshot")
    gc.disable()  # until the engine runs (settle_gc)
    try:
        return _run_monitor(interval=interval, stall_budget=stall_budget, metrics=metrics,
                            readonly=readonly, stuck_after=stuck_after, bell=bell)
    finally:
        gc.enable()


def _run_monitor(*, interval: float, stall_budget: float | None, metrics: str | None,
                 readonly: bool, stuck_after: float | None = None, bell: bool = True) -> int:
    from gputop_dl.record.paths import data_dir

    data_dir(writable=False)  # one that cannot be used at all (under a file): its line, exit 2
    from gputop_dl.present.tui.app import GputopApp

    def build() -> Engine:
        from gputop_dl.collect.nvml.gpus import Nvml
        from gputop_dl.collect.pyspy.stall_sampler import STALL_BUDGET
        from gputop_dl.record.paths import StoreError
        from gputop_dl.record.store_open import check_store  # not the store's reads and writes
        from gputop_dl.runner.engines import monitor_engine

        try:  # watching needs no writes: a data directory that takes none only stops recording
            check_store()
            no_record = None
        except StoreError as exc:
            no_record = f"not recording: {exc}; watching only"
        engine = monitor_engine(Nvml(), interval=max(0.1, interval), record=no_record is None,
                                stall_budget=STALL_BUDGET if stall_budget is None else stall_budget,
                                stuck_after=stuck_after)
        if no_record:
            engine.say(f"warning: {no_record}")
        return engine

    source = DeferredSource(build, interval=max(0.1, interval), preview=host_preview,
                            started=settle_gc)
    if metrics:  # served until this process exits
        from gputop_dl.runner.remote import start_metrics

        engine = build()
        start_metrics(engine, metrics, "monitor")
        source = DeferredSource(lambda: engine, interval=engine.interval, preview=host_preview,
                                started=settle_gc)
    app = GputopApp(source, mode="monitor", launcher=LazyLauncher(), handle_signals=True,
                    exporter=export, readonly=readonly, bell=bell,
                    diagnoser=functools.partial(diagnose, readonly=readonly))
    try:
        app.run()
    finally:
        for src in app.sources:
            src.request_stop("interrupted")
        joined = [src.join(JOIN_TIMEOUT_S) for src in app.sources]
    for i, src in enumerate(app.sources):
        if src.session_id:  # the launches, and the monitor's own once it saw a training job
            print(f"session {src.session_id} ({src.state})"
                  + (": the training jobs this monitor saw" if i == 0 else ""))
    code = 130 if getattr(app, "return_value", None) == 130 else 0  # Ctrl-C: interrupted (README)
    if source.error is not None:
        from gputop_dl.text.safe import clean

        print(clean(f"gputop-dl: the monitor stopped: {source.error}"))
        code = 1
    if all(joined):  # every session closed: what was recorded is kept; the interpreter's
        exit_now(code)  # teardown of the app and its modules was ~230 ms of a quit (benchmarks/quit_time.py)
    return code
