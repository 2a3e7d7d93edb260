"""The engine's writes to the session store, all in one place: sessions, job rows, samples, events.

One `Recorder` per engine, used only by the engine thread (a SQLite connection belongs to the
thread that opened it). Until a session is opened every write is a no-op, so the engine and
its plans never ask whether they record:

    rec.open_launch(spec, command, env)        # a launch records from its start
    rec.open_monitor(command, env, interval)   # the monitor from the first training job seen
    rec.launched(now, run, row, was_alive)     # a launched job's row (when it changed) + sample
    rec.found(now, jobs)                       # the monitor's found jobs (rows + samples)
    rec.verdict(v, now)                        # the latest verdict; a change of its kind kept
    rec.pace_ref(fp, until, command, data)     # a found job's readings alone (engine/pace_refs.py)
    rec.tick(now, host, gpus)                  # host/GPU samples, heartbeat, one commit per tick
    rec.close(state, verdict)

`enabled=False` (tests, benchmarks) opens nothing and writes nothing. A store that fails
(disk full, a damaged page, a vanished directory) stops the *recording* only: `failure` says
why, the session is marked "cut short" where the database still takes that, and every later
write is a no-op, so the jobs and the live view go on.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gputop_dl.analyse.stats.phases import ranks_json
from gputop_dl.analyse.recorded.summary import verdict_slowdowns
from gputop_dl.analyse.verdict_types import VerdictJson
from gputop_dl.record.paths import StoreError, session_work_dir
from gputop_dl.record.store import Store
from gputop_dl.snapshot import Distributed, GpuSample, HostSample, JobSample
from gputop_dl.workload import SessionSpec, Workload, redact_args

if TYPE_CHECKING:
    from gputop_dl.engine.jobrun import Event, JobRun, SoloBaseline

# what a launched job's row last said: status, failure, device, pid, ended, stderr tail, solo
# baseline, ranks (written when it changes; the end's catch-up writes the first five)
_Row = tuple[str, "str | None", "str | None", "int | None", "float | None", tuple[str, ...],
             "SoloBaseline | None", "Distributed | None"]


class Recorder:
    """Owns the engine's `Store` and the bookkeeping of what it last wrote."""

    def __init__(self, store_path: str | None = None, enabled: bool = True):
        self.store_path = store_path
        self.enabled = enabled
        self.session_id: str | None = None
        self.work_dir: str | None = None
        self._store: Store | None = None
        self._rows: dict[str, _Row] = {}  # launched job -> its latest row (written unless failed)
        # found pid -> (its row's name, device, distributed)
        self._found_live: dict[int | None, tuple[str, str | None, Distributed | None]] = {}
        self._found_names: set[str] = set()  # the monitor session's job rows
        self._verdict_kind: str | None = None  # the kind of the last verdict change recorded
        self.failure: str | None = None  # why recording stopped mid-run

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Run store writes; a failure stops the recording (see the module docstring)."""
        try:
            yield
        except (sqlite3.Error, OSError, StoreError) as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        where = self._store.path if self._store is not None else self.store_path or "the store"
        self.failure = (f"recording stopped: {exc} ({where}); the jobs and the live view go on,"
                        " the session is kept up to the last tick")
        st, self._store = self._store, None
        if st is None:
            return
        try:
            st.db.rollback()
            if self.session_id:
                st.end_session(self.session_id, "cut short", None)
        except (sqlite3.Error, OSError):
            pass
        try:
            st.close()
        except sqlite3.Error:
            pass

    @property
    def is_open(self) -> bool:
        return self._store is not None

    # --- sessions ------------------------------------------------------------------------------
    def open_launch(self, spec: SessionSpec, command: str, env: dict[str, Any], *,
                    kind: str = "launch", extra: dict[str, Any] | None = None) -> None:
        """A launch's session (or a queue's: `kind`, with `extra` in its spec), with a
        "waiting" row per workload."""
        if not self.enabled:
            return
        with self._writing():
            st = self._store = Store(self.store_path)
            self.session_id = st.create_session(
                spec.name, file=spec.path, command=command, kind=kind, environment=env,
                spec={"workloads": [w.to_dict(redact=True) for w in spec.workloads], "baseline": spec.baseline,
                      "interval": spec.interval, "cuda": spec.cuda, **(extra or {})})
            self.work_dir = session_work_dir(self.session_id)
            for w in spec.workloads:
                st.upsert_job(self.session_id, w.name, launched=True, config=w.to_dict(redact=True),
                              status="waiting")
            st.commit()

    def open_monitor(self, command: str, env: dict[str, Any], interval: float,
                     kind: str = "monitor") -> bool:
        """The monitor's session (kind "monitor", or "diagnose"); False when recording is off
        (or failed)."""
        if not self.enabled:
            return False
        with self._writing():
            st = self._store = Store(self.store_path)
            self.session_id = st.create_session(
                f"{kind} {os.uname().nodename}", file=None, command=command, kind=kind,
                environment=env, spec={"interval": interval})
        return self._store is not None

    def close(self, state: str, verdict: VerdictJson | None) -> None:
        with self._writing():
            if self._store is not None:
                if self.session_id is not None:
                    self._note_change(self._store, self.session_id, verdict, time.time())
                    self._store.end_session(self.session_id, state, verdict)
                self._store.close()
                return
        if self.failure and self.session_id:
            self._catch_up(self.session_id, self.failure, verdict)

    def _catch_up(self, sid: str, failure: str, verdict: VerdictJson | None) -> None:
        """After a failure, once at the end: the session marked "cut short" with its verdict
        and the jobs' final statuses, if the database takes writes again (space freed); the
        samples of the gap stay lost. A second failure changes nothing."""
        try:
            st = Store(self.store_path)
            try:
                for name, (status, why, device, pid, ended, *_) in self._rows.items():
                    st.upsert_job(sid, name, launched=True, config=None,
                                  status=status, failure=why, device=device, pid=pid,
                                  ended=ended)
                st.end_session(sid, "cut short", verdict)
            finally:
                st.close()
        except (sqlite3.Error, OSError, StoreError):
            return
        self.failure = failure + "; at the end the session's state and the jobs' final statuses were saved"

    # --- launched jobs ------------------------------------------------------------------------
    def job_started(self, w: Workload, phase: str, pid: int | None, started: float,
                    argv: list[str] | None) -> None:
        with self._writing():
            if self._store is not None and self.session_id is not None:
                self._store.upsert_job(self.session_id, w.name, launched=True, config=w.to_dict(redact=True),
                                       status="starting", pid=pid, started=started,
                                       info={"phase": phase, "argv": redact_args(argv or ())})

    def job_status(self, w: Workload, status: str) -> None:
        """A job row's status without a run (a queued job that never started)."""
        with self._writing():
            if self._store is not None and self.session_id is not None:
                self._store.upsert_job(self.session_id, w.name, launched=True, config=None,
                                       status=status)

    def events(self, job: str, phase: str, evs: list[Event]) -> None:
        with self._writing():
            if self._store is not None and self.session_id is not None and evs:
                self._store.add_events(self.session_id, job, phase, evs)

    def launched(self, now: float, run: JobRun, js: JobSample, was_alive: bool) -> None:
        """A launched job's tick: its jobs row when it changed (rarely), its sample while it
        runs and on the tick it ended. `run` is the engine's JobRun."""
        with self._writing():
            dist = js.distributed
            row: _Row = (js.status, js.failure, js.device, js.pid, run.ended, run.stderr_tail, run.solo,
                   dist)
            changed = row != self._rows.get(js.name)
            self._rows[js.name] = row  # also after a failure: what the end's catch-up writes
            st, sid = self._store, self.session_id
            if st is None or sid is None:
                return
            if changed:
                st.upsert_job(sid, js.name, launched=True, config=None, status=js.status,
                              failure=js.failure, device=js.device, pid=js.pid, ended=run.ended,
                              info={"phase": run.phase, "stderr_tail": list(run.stderr_tail),
                                    "solo": run.solo, "argv": redact_args(run.proc.argv or ()),
                                    "distributed": dist.to_json() if dist else None,
                                    # every rank's phases and the late one (docs/phases.md),
                                    # as of the row's last change (the job's end)
                                    **dict(zip(("ranks", "straggler"),
                                               ranks_json(js.ranks, js.straggler)))})
            if run.alive or was_alive:
                st.add_job_sample(sid, now, js, run.phase)

    # --- solo baselines -----------------------------------------------------------------------
    def cached_baseline(self, fingerprint: str) -> SoloBaseline | None:
        return self._store.baseline(fingerprint) if self._store is not None else None

    def cached_solo_profile(self, fingerprint: str) -> dict[str, Any] | None:
        """A cached solo baseline with its solo run's peak RSS, read rate and GPU memory
        (Store.solo_profile); None without one, or when recording is off."""
        return self._store.solo_profile(fingerprint) if self._store is not None else None

    def cached_baseline_any(self, fingerprint: str) -> SoloBaseline | None:
        """A cached solo baseline, also before a session is open (None when recording is off)."""
        if self._store is not None or not self.enabled:
            return self.cached_baseline(fingerprint)
        st = Store(self.store_path)
        try:
            return st.baseline(fingerprint)
        finally:
            st.close()

    def queue_event(self, job: str, ev: str, t: float, **data: Any) -> None:
        """A queued job's arrival, start or end (ev "queued", "queue-start", "queue-end"; times
        in `data` are seconds from the queue's start)."""
        self.events(job, "queue", [{"ev": ev, "t": t, **data}])

    def baseline(self, fingerprint: str, job: str, base: SoloBaseline) -> None:
        with self._writing():
            if self._store is not None and self.session_id is not None:
                self._store.save_baseline(fingerprint, self.session_id, job, base)
                self._store.add_events(self.session_id, job, "baseline",
                                       [{"ev": "baseline", "t": time.time(), **base}])

    def verdict(self, v: VerdictJson | None, now: float | None = None) -> None:
        """The session's latest verdict (each tick it is judged); when its kind differs from
        the last one recorded, a verdict change at `now` too (a kind comparison per tick, a
        row per change: a live verdict that wavers between two kinds writes each change)."""
        with self._writing():
            if self._store is not None and self.session_id is not None:
                self._note_change(self._store, self.session_id, v, now)
                self._store.set_verdict(self.session_id, v)

    def _note_change(self, st: Store, sid: str, v: VerdictJson | None, now: float | None) -> None:
        kind = v.get("kind") if v else None
        if not isinstance(kind, str) or kind == self._verdict_kind:
            return  # no verdict (the last one stands), or the same kind
        assert v is not None
        reason = v.get("reason")
        first = str(reason).strip().splitlines()[0] if reason and str(reason).strip() else None
        slow = [x for x in verdict_slowdowns(v).values()
                if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)]
        st.add_verdict_change(sid, time.time() if now is None else now, self._verdict_kind, kind,
                              first, max(slow) if slow else None)
        self._verdict_kind = kind

    # --- found jobs (monitor) -----------------------------------------------------------------
    def found(self, now: float, jobs: tuple[JobSample, ...]) -> None:
        """The monitor's found jobs: a row per job (a new one even when an earlier job had its
        name; updated when it appears on a GPU; "ended" once gone) and a sample per tick."""
        with self._writing():
            st, sid = self._store, self.session_id
            if st is None or sid is None:
                return
            seen: dict[int | None, tuple[str, str | None, Distributed | None]] = {}
            for j in jobs:
                known = self._found_live.get(j.pid)
                if known is None:  # a new job: its own row, even if an earlier one had its name
                    name = j.name if j.name not in self._found_names else f"{j.name} ({j.pid})"
                    self._found_names.add(name)
                    device: str | None = "?"
                    dist: Distributed | None = None
                else:
                    name, device, dist = known
                if device != j.device or dist != j.distributed:  # new, on a GPU, its ranks
                    d = j.distributed
                    st.upsert_job(sid, name, launched=False, config=None, status="running",
                                  device=j.device, pid=j.pid, started=now,
                                  info={"command": j.command,
                                        "distributed": d.to_json() if d else None})
                seen[j.pid] = (name, j.device, j.distributed)
                st.add_job_sample(sid, now, j, "monitor", name=name)
            for pid, (name, *_) in self._found_live.items():
                if pid not in seen:  # gone since the last tick
                    st.upsert_job(sid, name, launched=False, config=None, status="ended",
                                  pid=pid, ended=now)
            self._found_live = seen

    def job_event(self, j: JobSample, ev: Event) -> None:
        """An event of a job this session records (stuck, moves again): a launched job's, or a
        found one the monitor records; another's is not recorded."""
        if j.launched:
            self.events(j.name, j.phase or "co-run", [ev])
        elif j.pid in self._found_live:
            self.events(self._found_live[j.pid][0], "monitor", [ev])

    # --- every tick ---------------------------------------------------------------------------
    def pace_ref(self, fingerprint: str, until: float, command: str, data: dict[str, Any]
                 ) -> None:
        """A found job's readings alone (engine/pace_refs.py), committed with the tick."""
        with self._writing():
            if self._store is not None:
                self._store.save_pace_ref(fingerprint, until, command, data)

    def tick(self, now: float, host: HostSample, gpus: tuple[GpuSample, ...]) -> None:
        """Host and GPU samples, the heartbeat, and the tick's one commit."""
        with self._writing():
            st, sid = self._store, self.session_id
            if st is None or sid is None:
                return
            st.add_host_sample(sid, now, host)
            if gpus:
                st.add_gpu_samples(sid, now, gpus)
            st.heartbeat(sid, now)
            st.commit()
