"""The monitor's engine, built after the first frame: a source that stands in for it until then.

`gputop-dl`'s first frame used to wait for the engine: its imports (collectors, recorder, the
live judge), NVML's start and a first tick that reads every process; later for a reading of the
host and the store's check. `DeferredSource` is what the app gets instead, and nothing is read
before the first frame: the app draws its layout with each panel saying what it waits for. In
its own thread the source waits until the app says that frame is on screen (`first_frame()`, or
FIRST_FRAME_WAIT_S at most, for apps that never say), then hands the app one reading of the host
(a `preview`: real CPU count, memory and load, with `gpu_status` STARTING, so the screen says
GPUs and jobs are being read rather than that there are none), then builds the engine, hands it
the app's subscribers and starts it. From then on every call goes to the engine. A stop
requested before the engine exists means it is never built; one during its build, that it is
never started, and nobody waits for that build (`join` returns at once: nothing that records
has run).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from gputop_dl.statuses import GPU_STATUS_STARTING

if TYPE_CHECKING:  # imported after the first frame (statuses.py)
    from gputop_dl.snapshot import Snapshot

FIRST_FRAME_WAIT_S = 1.0  # the engine is built this long after start at the latest


def host_preview() -> Snapshot:
    """One reading of the host alone (the engine reads it again on its first tick): CPUs,
    memory, load and pressure. Busy shares are averages over an interval, and one reading has
    none: unknown ("–"), not 0 %."""
    from gputop_dl.collect.proc.host import HostSampler
    from gputop_dl.snapshot import Snapshot

    sampler = HostSampler()
    host = dataclasses.replace(sampler.sample(), cpu_busy=None, per_cpu=(),
                               cgroup_throttled_frac=None)
    return Snapshot(time=time.time(), gpu_status=GPU_STATUS_STARTING, host=host)


class DeferredSource:
    """The Engine's thread-facing API (present/tui/source.py), the engine built on first frame."""

    def __init__(self, build: Callable[[], Any], *, interval: float,
                 preview: Callable[[], Snapshot] | None = None,
                 started: Callable[[], None] | None = None):
        """`preview()`: the reading shown before the engine's first tick, taken in the source's
        thread once the first frame is on screen (`host_preview`; None: none). `started()`:
        called in the source's thread once the engine is running (or could not be built, or
        was never to be)."""
        self.interval = interval
        self._build = build
        self._started = started
        self._preview = preview
        self._subs: list[Callable[[Snapshot], None]] = []
        self._lock = threading.Lock()
        self._shown = threading.Event()
        self._stopped: str | None = None
        self._thread: threading.Thread | None = None
        self.engine: Any = None
        self._error: BaseException | None = None

    # --- the source API ------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[Snapshot], None]) -> None:
        self._subs.append(fn)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="gdl-start", daemon=True)
        self._thread.start()

    def first_frame(self) -> None:
        """The app's first frame is on screen: the engine may take the CPU now."""
        self._shown.set()

    def request_stop(self, reason: str = "interrupted") -> None:
        """Stop the engine, or never start it: one being built (its imports, NVML, the store's
        check) is let go when its build returns; the caller does not wait for that."""
        self._stopped = reason
        self._shown.set()
        with self._lock:  # held only while the built engine is handed over, never during the build
            engine = self.engine
        if engine is not None:
            engine.request_stop(reason)

    def join(self, timeout: float | None = None) -> bool:
        """True once everything that ran has ended: at once where the stop came before an
        engine was started (nothing ran that records; the build still under way is cut short
        with the process)."""
        if self._stopped is not None and self.engine is None:
            return True
        t0 = time.monotonic()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return False
        if self.engine is None:
            return True
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - t0))
        return bool(self.engine.join(left))

    @property
    def running(self) -> bool:
        if self.engine is not None:
            return bool(self.engine.running)
        return self._stopped is None and self._thread is not None and self._thread.is_alive()

    def stop_job(self, name: str) -> None:
        if self.engine is not None:
            self.engine.stop_job(name)

    def live_jobs(self) -> list[str]:
        return self.engine.live_jobs() if self.engine is not None else []

    @property
    def session_id(self) -> str | None:
        return self.engine.session_id if self.engine is not None else None

    @property
    def state(self) -> str:
        if self.engine is not None:
            return str(self.engine.state)
        return "failed" if self._error is not None else "starting"

    @property
    def error(self) -> BaseException | None:
        """The engine's error, or why it could not be built."""
        return self.engine.error if self.engine is not None else self._error

    def __getattr__(self, name: str) -> Any:
        """The engine's optional attributes (env, store_path, ...) once it exists."""
        engine = self.__dict__.get("engine")
        if engine is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(engine, name)

    # --- the thread ----------------------------------------------------------------------------
    def _emit(self, snap: Snapshot) -> None:
        for fn in self._subs:
            fn(snap)

    def _main(self) -> None:
        try:
            self._start_engine()
        finally:
            if self._started is not None:
                self._started()

    def _stop_asked(self) -> bool:
        """Whether a stop was asked for (read again at each step: another thread sets it)."""
        return self._stopped is not None

    def _start_engine(self) -> None:
        self._shown.wait(FIRST_FRAME_WAIT_S)
        from gputop_dl.snapshot import Snapshot

        if self._preview is not None and not self._stop_asked():
            try:
                self._emit(self._preview())
            except Exception as exc:  # the engine reads the host again; say why it waits
                self._emit(Snapshot(time=time.time(), gpu_status=GPU_STATUS_STARTING,
                                    log=((time.time(), f"could not read the host: {exc}"),)))
        if self._stop_asked():
            return
        try:
            engine = self._build()
        except Exception as exc:  # shown on screen, and the monitor exits 1 with it
            self._error = exc
            self._emit(Snapshot(time=time.time(), gpu_status=GPU_STATUS_STARTING,
                                log=((time.time(), f"could not start sampling: {exc}"),)))
            return
        with self._lock:
            if self._stop_asked():  # stopped during the build: never started
                return
            for fn in self._subs:
                engine.subscribe(fn)
            self.engine = engine
        engine.start()
