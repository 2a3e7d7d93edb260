"""The session store's writes: sessions, jobs, step and other events, samples, baselines, profiles.

The writer commits once per tick (`Store.commit`); `SessionWrites` is a part of
`record/store.py`'s `Store`.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gputop_dl.record.schema import JOB_SAMPLE_ADDED, dumps
from gputop_dl.record.store_keys import StoreKeys
from gputop_dl.snapshot import GpuSample, HostSample, JobSample
from gputop_dl.workload import redact_line

STEP_FIELDS = ("epoch", "step", "t_data", "t_step", "samples")
# What the writes take as JSON columns (an environment, a spec, a verdict, a job's config and
# info, the trainer's events, a baseline, a machine profile): any JSON object, stored as text.
JsonIn = Mapping[str, Any]
PHASE_COLS = ("ph_h2d", "ph_forward", "ph_backward", "ph_optimizer")  # steps: the step's phases
PHASE_KEYS = ("ph", "rank", "ph_clock", "ph_dropped")  # a step event's keys that go to them


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def pack_per_cpu(per_cpu: Iterable[float]) -> bytes:
    """Per-core busy fractions (0..1) as one byte per core, in whole percent."""
    return bytes(max(0, min(100, round(v * 100))) for v in per_cpu)



class SessionWrites(StoreKeys):
    """What gputop-dl records as a run goes (a part of `Store`)."""

    def create_session(self, name: str, *, file: str | None, command: str, kind: str,
                       environment: JsonIn, spec: JsonIn | None = None,
                       session_id: str | None = None) -> str:
        sid = session_id or new_session_id()
        now = time.time()
        self.db.execute(
            "INSERT INTO sessions (id, name, file, command, kind, started, state, heartbeat,"
            " owner_pid, owner_host, environment, spec, verdict_history)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,1)",
            (sid, name, file, redact_line(command), kind, now, "running", now, os.getpid(),
             socket.gethostname(), dumps(environment), dumps(spec)))
        self.db.commit()
        return sid

    def heartbeat(self, sid: str, t: float) -> None:
        self.db.execute("UPDATE sessions SET heartbeat=? WHERE id=?", (t, sid))

    def end_session(self, sid: str, state: str, verdict: JsonIn | None = None) -> None:
        self.db.execute("UPDATE sessions SET ended=?, state=?, verdict=? WHERE id=?",
                        (time.time(), state, dumps(verdict), sid))
        self.db.commit()

    def set_verdict(self, sid: str, verdict: JsonIn | None) -> None:
        self.db.execute("UPDATE sessions SET verdict=? WHERE id=?", (dumps(verdict), sid))

    def add_verdict_change(self, sid: str, t: float, old: str | None, new: str,
                           reason: str | None, worst_slowdown: float | None) -> None:
        """The session's verdict changed kind at `t` (`old` None: its first verdict)."""
        self.db.execute("INSERT INTO verdict_changes VALUES (?,?,?,?,?,?)",
                        (self._sk(sid), t, old, new, reason, worst_slowdown))

    def upsert_job(self, sid: str, name: str, *, launched: bool, config: JsonIn | None,
                   status: str, failure: str | None = None, device: str | None = None,
                   pid: int | None = None, started: float | None = None,
                   ended: float | None = None, info: JsonIn | None = None) -> None:
        self.db.execute(
            "INSERT INTO jobs (session_id, name, launched, config, status, failure, device, pid,"
            " started, ended, info) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(session_id, name) DO UPDATE"
            " SET launched=excluded.launched, config=COALESCE(excluded.config, jobs.config),"
            " status=excluded.status, failure=excluded.failure,"
            " device=COALESCE(excluded.device, jobs.device),"
            " pid=excluded.pid, started=COALESCE(jobs.started, excluded.started),"
            " ended=excluded.ended, info=COALESCE(excluded.info, jobs.info)",
            (sid, name, int(launched), dumps(config), status, failure, device, pid, started,
             ended, dumps(info)))

    def add_events(self, sid: str, job: str, phase: str, events: Sequence[JsonIn]) -> None:
        jk = self._jk(sid, job, create=True)
        steps, rows = [], []
        phased: list[tuple[Any, ...]] = []  # steps with phases
        for e in events:
            if e.get("ev") == "rank_step":  # every rank's steps are a live view, not recorded
                continue
            if e.get("ev") == "step" and set(e) <= {"ev", "t", *STEP_FIELDS} and not phased:
                steps.append((jk, phase, e.get("t"), *(e.get(k) for k in STEP_FIELDS)))
            elif (e.get("ev") == "step" and set(e) <= {"ev", "t", *STEP_FIELDS, *PHASE_KEYS}
                  and isinstance(e.get("ph", {}), dict) and self.has_column("steps", "ph_cuda")):
                # (once one step of the batch has phases, the later ones go this way too, so
                # the rows keep their order)
                ph = e.get("ph") or {}
                phased.append((jk, phase, e.get("t"), *(e.get(k) for k in STEP_FIELDS),
                               *(ph.get(c[3:]) for c in PHASE_COLS), e.get("rank"),
                               int(e.get("ph_clock") == "cuda") if "ph" in e else None))
            else:
                data = {k: v for k, v in e.items() if k not in ("ev", "t")}
                rows.append((jk, phase, e.get("t"), e.get("ev"), dumps(data)))
        if steps:
            self.db.executemany(f"INSERT INTO steps (jk, phase, t, {', '.join(STEP_FIELDS)})"
                                " VALUES (?,?,?,?,?,?,?,?)", steps)  # (+ ADDED_COLUMNS: NULL)
        if phased:
            cols = ("jk", "phase", "t", *STEP_FIELDS, *PHASE_COLS, "rank", "ph_cuda")
            self.db.executemany(f"INSERT INTO steps ({', '.join(cols)}) VALUES "
                                f"({','.join('?' * len(cols))})", phased)
        if rows:
            self.db.executemany("INSERT INTO events VALUES (?,?,?,?,?)", rows)

    def add_host_sample(self, sid: str, t: float, h: HostSample) -> None:
        self.db.execute("INSERT OR REPLACE INTO host_samples VALUES (?,?,?,?,?,?,?,?)",
                        (self._sk(sid), t, h.cpu_busy, h.load1, h.cpu_pressure_some10,
                         h.cgroup_throttled_frac, h.mem_used, pack_per_cpu(h.per_cpu)))

    def add_gpu_samples(self, sid: str, t: float, gpus: Iterable[GpuSample]) -> None:
        sk = self._sk(sid)
        self.db.executemany(
            "INSERT OR REPLACE INTO gpu_samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(sk, t, g.index, g.util, g.mem_used, g.mem_total, g.temp_c, g.power_w,
              g.sm_clock_mhz, ",".join(g.throttle_reasons) or None, g.error) for g in gpus])

    def add_job_sample(self, sid: str, t: float, j: JobSample, phase: str | None,
                       name: str | None = None) -> None:
        """One tick of job `j`, kept under `name` (default: `j.name`): the name the job's row
        was recorded by, where the live name can change (found jobs)."""
        cols = "".join(f", {c}" for c, _ in JOB_SAMPLE_ADDED)
        self.db.execute(
            "INSERT OR REPLACE INTO job_samples (jk, t, phase, cpu_cores, rss, nprocs, gpu_mem,"
            f" stall, step_time, samples_per_s{cols}) VALUES"
            f" (?,?,?,?,?,?,?,?,?,?{',?' * len(JOB_SAMPLE_ADDED)})",
            (self._jk(sid, name or j.name, create=True), t, phase, j.cpu_cores, j.rss, len(j.pids),
             j.gpu_mem, j.stall_fraction, j.step_time_s, j.samples_per_s,
             *(getattr(j, a, None) for _, a in JOB_SAMPLE_ADDED)))

    def save_baseline(self, fingerprint: str, sid: str, job: str, data: JsonIn) -> None:
        self.db.execute("INSERT OR REPLACE INTO baselines VALUES (?,?,?,?,?)",
                        (fingerprint, time.time(), sid, job, dumps(data)))

    def save_pace_ref(self, fingerprint: str, until: float, command: str, data: JsonIn) -> None:
        """Keep (or replace) a found job's readings alone (engine/pace_refs.py); committed
        with the tick."""
        self.db.execute("INSERT OR REPLACE INTO pace_refs VALUES (?,?,?,?,?)",
                        (fingerprint, until, socket.gethostname(), command, dumps(data)))

    def save_machine(self, profile: JsonIn) -> None:
        """Keep a machine profile (gputop-dl.machine/1) and commit."""
        self.db.execute("INSERT INTO machine_profiles VALUES (?,?,?,?)",
                        (profile.get("created"), profile.get("host"), int(bool(profile.get("quick"))),
                         dumps(profile)))
        self.db.commit()
