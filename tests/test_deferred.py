"""The monitor's first frame before its engine (runner/deferred.py): nothing read before the app
says its frame is shown, then the preview, then the engine; a stop before that, a build that
fails; and the app's side."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from gputop_dl.runner import deferred
from gputop_dl.runner.deferred import DeferredSource, host_preview
from gputop_dl.snapshot import GPU_STATUS_STARTING

from tests.fakes.source import T0, FakeSource, FixedClock, monitor_snapshot

WAIT = 30.0  # generous: every wait below ends on an event, this only bounds a broken build


class Preview:
    """A host preview that records whether the first frame was on screen when it was read."""

    def __init__(self, fail: Exception | None = None):
        self.calls: list[bool] = []  # per call: the app had said its frame was shown
        self.src: DeferredSource | None = None
        self.fail = fail

    def __call__(self):
        assert self.src is not None
        self.calls.append(self.src._shown.is_set())
        if self.fail is not None:
            raise self.fail
        return replace(monitor_snapshot(0), gpu_status=GPU_STATUS_STARTING)


def deferred_source(build, preview: Preview | None = None, **kw) -> DeferredSource:
    src = DeferredSource(build, interval=1.0, preview=preview, **kw)
    if preview is not None:
        preview.src = src
    return src


class Builds:
    """A build function that records its calls and returns a FakeSource."""

    def __init__(self, fail: Exception | None = None):
        self.calls = 0
        self.fail = fail
        self.engine = FakeSource(session_id=None)
        self.done = threading.Event()

    def __call__(self):
        self.calls += 1
        self.done.set()
        if self.fail is not None:
            raise self.fail
        return self.engine


def collect(src: DeferredSource) -> tuple[list, threading.Event]:
    got: list = []
    first = threading.Event()

    def fn(snap):
        got.append(snap)
        first.set()

    src.subscribe(fn)
    return got, first


def test_host_preview_reads_the_host_and_says_it_is_starting():
    snap = host_preview()
    assert snap.gpu_status == GPU_STATUS_STARTING and snap.jobs == () and snap.gpus == ()
    assert snap.host is not None and snap.host.cpus >= 1 and snap.host.mem_total
    # one reading has no interval to average the CPU over: unknown, not 0 %
    assert snap.host.cpu_busy is None and snap.host.per_cpu == ()


def test_nothing_is_read_before_the_frame_is_shown_then_the_preview_then_the_engine(monkeypatch):
    monkeypatch.setattr(deferred, "FIRST_FRAME_WAIT_S", 3600.0)  # only first_frame() lets it go on
    build = Builds()
    look = Preview()
    src = deferred_source(build, look)
    got, first = collect(src)
    src.start()
    assert src.running and src.state == "starting" and src.session_id is None
    assert src.live_jobs() == [] and src.error is None
    with pytest.raises(AttributeError):
        src.env  # noqa: B018 - the engine's attributes exist once it does
    src.first_frame()
    assert first.wait(WAIT)
    assert got[0].gpu_status == GPU_STATUS_STARTING  # the preview, before the engine's ticks
    assert build.done.wait(WAIT) and src._thread is not None
    assert look.calls == [True]  # read once, and only once the first frame was on screen
    src._thread.join(WAIT)
    engine = build.engine
    assert src.engine is engine and engine.started and len(engine.subscribers) == 1
    engine.emit(monitor_snapshot(1))  # the app's subscriber now hears the engine
    assert got[-1].time == T0 + 1
    assert src.env == engine.env and src.state == "running"
    engine.live = ["x"]
    assert src.live_jobs() == ["x"]
    src.stop_job("x")
    assert engine.stopped_jobs == ["x"]
    src.request_stop("interrupted")
    assert engine.stop_reasons == ["interrupted"] and not src.running
    assert src.join(WAIT)


def test_an_app_that_never_says_gets_its_engine_after_the_wait(monkeypatch):
    monkeypatch.setattr(deferred, "FIRST_FRAME_WAIT_S", 0.0)
    build = Builds()
    src = DeferredSource(build, interval=1.0, preview=None)
    src.start()
    assert build.done.wait(WAIT)
    src._thread.join(WAIT)
    assert src.engine is build.engine and build.engine.started


def test_a_stop_before_the_first_frame_reads_and_builds_nothing(monkeypatch):
    monkeypatch.setattr(deferred, "FIRST_FRAME_WAIT_S", 3600.0)
    build = Builds()
    look = Preview()
    src = deferred_source(build, look)
    src.start()
    src.request_stop("interrupted")  # wakes the thread, which must not read or build
    assert src.join(WAIT)
    assert build.calls == 0 and look.calls == [] and src.engine is None and not src.running


def test_a_stop_during_the_build_is_not_waited_for_and_the_engine_never_starts(monkeypatch):
    """`q` while the engine is being built (its imports, NVML, the store's check: seconds on a
    loaded box) ends the monitor at once: nothing that records has run yet."""
    monkeypatch.setattr(deferred, "FIRST_FRAME_WAIT_S", 0.0)
    entered, release = threading.Event(), threading.Event()
    build = Builds()

    def slow_build():
        entered.set()
        assert release.wait(WAIT)
        return build()

    src = deferred_source(slow_build)
    src.start()
    assert entered.wait(WAIT)
    src.request_stop("interrupted")  # returns while the build goes on
    assert src.join(0.0)  # nothing to wait for
    release.set()
    assert build.done.wait(WAIT)
    src._thread.join(WAIT)
    assert not build.engine.started and src.engine is None and not src.running


def test_a_preview_that_fails_says_so_and_the_engine_still_starts(monkeypatch):
    monkeypatch.setattr(deferred, "FIRST_FRAME_WAIT_S", 0.0)
    build = Builds()
    src = deferred_source(build, Preview(fail=OSError("no /proc/meminfo")))
    got, first = collect(src)
    src.start()
    assert first.wait(WAIT) and build.done.wait(WAIT) and src.join(WAIT)
    assert got[0].host is None and got[0].log and build.engine.started


def test_a_build_that_fails_is_shown_and_kept(monkeypatch):
    monkeypatch.setattr(deferred, "FIRST_FRAME_WAIT_S", 0.0)
    build = Builds(fail=RuntimeError("NVML went away"))
    src = DeferredSource(build, interval=1.0, preview=None)
    got, first = collect(src)
    src.start()
    assert first.wait(WAIT) and src.join(WAIT)
    assert "could not start sampling: NVML went away" in got[-1].log[-1][1]
    assert isinstance(src.error, RuntimeError) and src.state == "failed" and not src.running


# --- the app's side -------------------------------------------------------------------------------

def test_the_app_shows_the_preview_then_lets_the_engine_start(monkeypatch):
    pytest.importorskip("textual")
    import asyncio

    from gputop_dl.present.tui.app import GputopApp
    from gputop_dl.present.tui.jobs_table import JobsTable

    monkeypatch.setattr(deferred, "FIRST_FRAME_WAIT_S", 3600.0)
    build = Builds()
    src = deferred_source(build, Preview())

    async def run() -> None:
        app = GputopApp(src, clock=FixedClock(T0), mode="monitor")
        async with app.run_test(size=(160, 50)) as pilot:
            # the first frame, then the preview: the host, and what is still being read
            while not build.done.is_set():  # the app calls first_frame() once it is shown
                await pilot.pause(0.02)
            while app.primary is None:
                await pilot.pause(0.02)
            assert "of 2 CPUs" in app.query_one("#host").plain()
            assert "GPUs: reading NVML…" in str(app.query_one("#gpuline").render())
            assert "looking for training jobs…" in str(app.query_one(JobsTable).border_subtitle)
            assert "reading GPUs and processes" in str(app.query_one("#banner").render())
            src._thread.join(WAIT)
            build.engine.emit(monitor_snapshot(1))  # the engine's first tick
            while "no jobs" not in str(app.query_one(JobsTable).border_subtitle):
                await pilot.pause(0.02)
            assert "reading NVML" not in str(app.query_one("#gpuline").render())

    asyncio.run(asyncio.wait_for(run(), WAIT))


@pytest.mark.parametrize("fail", [None, RuntimeError("no engine")])
def test_started_is_called_once_the_engine_runs_or_could_not_be_built(fail):
    build = Builds(fail)
    started = threading.Event()

    def on_started():
        # the engine is running by then (or its build failed): the start-up is over
        assert (build.engine.started if fail is None else src.error is fail)
        started.set()

    src = deferred_source(build, Preview(), started=on_started)
    src.start()
    src.first_frame()
    assert started.wait(WAIT) and build.calls == 1


def test_settle_gc_freezes_the_start_up_and_collects_the_young_less_often():
    import gc

    from gputop_dl.runner.monitor import GC_YOUNG, settle_gc

    was, frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        gc.disable()
        settle_gc()
        assert gc.isenabled() and gc.get_threshold()[0] == GC_YOUNG
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()
        gc.set_threshold(*was)
        gc.enable()
