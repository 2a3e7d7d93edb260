"""`gputop-dl sweep`: each batch size in its own worker process; the fit, the knee, the record.

No torch here: the workers (`gputop_dl.lab.sweep_worker`) import it. Batches run in increasing
order; after the first out-of-memory batch the larger ones are skipped (they would run out of
memory too), unless `keep_going` is set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gputop_dl.child import die_with_parent
from gputop_dl.lab import sweepfit
from gputop_dl.lab.sweep_worker_protocol import RESULT_KEY, SweepRow

if TYPE_CHECKING:
    from gputop_dl.record.store import Store


@dataclass(frozen=True)
class SweepSpec:
    model: str
    batches: tuple[int, ...]
    steps: int = 10
    warmup: int = 3
    input_size: int = 224
    dataset_size: int = 50000
    gpu: int = 0
    device: str = "cpu"  # "cuda" or "cpu": what the workers are asked to use
    device_note: str | None = None  # why the CPU, when it is the CPU
    timeout_s: float = 600.0
    keep_going: bool = False
    threads: int = 0  # torch CPU threads in the workers (0: torch's default)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the workers (tests)


@dataclass
class SweepResult:
    spec: SweepSpec
    rows: list[SweepRow]  # annotated, one per batch, sorted by batch
    fit: sweepfit.Fit | None
    knee: sweepfit.Knee | None
    started: float
    ended: float
    session_id: str | None = None
    load: tuple[float, float] | None = None  # host 1-min load average at start and at end

    def to_json(self) -> dict[str, Any]:
        spec = asdict(self.spec)
        spec.pop("env")
        return {"schema": "gputop-dl.sweep/1", "spec": spec, "rows": self.rows,
                "fit": asdict(self.fit) if self.fit else None,
                "knee": asdict(self.knee) if self.knee else None,
                "started": self.started, "ended": self.ended, "session": self.session_id,
                "load": self.load}


def worker_command(spec: SweepSpec, batch: int) -> list[str]:
    return [sys.executable, "-m", "gputop_dl.lab.sweep_worker", "--model", spec.model,
            "--batch", str(batch), "--steps", str(spec.steps), "--warmup", str(spec.warmup),
            "--input-size", str(spec.input_size), "--device", spec.device, "--gpu", str(spec.gpu),
            "--threads", str(spec.threads)]


def parse_worker_output(batch: int, rc: int | None, stdout: str, stderr: str) -> SweepRow:
    """The worker's JSON line, or an error row that says how the worker ended."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except ValueError:
                continue
            if isinstance(res, dict) and res.get(RESULT_KEY):
                res.pop(RESULT_KEY)
                return cast(SweepRow, res)  # our worker's line (sweep_worker.run)
    tail = [s for s in stderr.strip().splitlines() if s.strip()]
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        msg = f"worker killed by {name}"
        if -rc == signal.SIGKILL:
            msg += " (the host's OOM killer?)"
        return {"batch": batch, "status": "oom" if -rc == signal.SIGKILL else "error",
                "message": msg}
    return {"batch": batch, "status": "error",
            "message": f"worker exited {rc} without a result" + (f": {tail[-1]}" if tail else "")}


def run_batch(spec: SweepSpec, batch: int) -> SweepRow:
    env = dict(os.environ, **spec.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    t0 = time.time()
    try:
        p = subprocess.run(worker_command(spec, batch), capture_output=True, text=True, env=env,
                           timeout=spec.timeout_s, preexec_fn=die_with_parent)
        res = parse_worker_output(batch, p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired:
        res = {"batch": batch, "status": "error",
               "message": f"timed out after {spec.timeout_s:.0f} s"}
    res["started"] = t0
    res["ended"] = time.time()
    return res


def run_sweep(spec: SweepSpec, on_row: Callable[[SweepRow], object] | None = None,
              store: Store | None = None, session_id: str | None = None
              ) -> SweepResult:
    """Run the batches in increasing order; `on_row(row)` after each; record in `store`."""
    started, load0 = time.time(), _load1()
    raw: list[SweepRow] = []
    oom_at = None
    for b in sorted(set(spec.batches)):
        if oom_at is not None and not spec.keep_going:
            row: SweepRow = {"batch": b, "status": "skipped",
                   "message": f"not run: batch {oom_at} already ran out of memory"}
        else:
            row = run_batch(spec, b)
            if row["status"] == "oom" and oom_at is None:
                oom_at = b
        raw.append(row)
        if store is not None and session_id is not None:
            record_row(store, session_id, spec, row)
        if on_row is not None:
            on_row(row)
    rows = sweepfit.annotate(raw, spec.dataset_size)
    return SweepResult(spec, rows, sweepfit.fit_rows(rows), sweepfit.knee_rows(rows), started,
                       time.time(), session_id, (load0, _load1()))


def _load1() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


# --- the session store (a session of kind "sweep": one job per batch, the result as an event) ---

_JOB_STATUS = {"ok": "done", "oom": "failed", "error": "failed", "skipped": "skipped"}


def open_session(store: Store, spec: SweepSpec, command: str,
                 environment: Mapping[str, object]) -> str:
    d = asdict(spec)
    d.pop("env")
    return store.create_session(f"sweep {spec.model}", file=None, command=command, kind="sweep",
                                environment=environment,
                                spec={"sweep": d, "cuda": spec.device == "cuda"})


def record_row(store: Store, sid: str, spec: SweepSpec, row: SweepRow) -> None:
    name = f"bs{row['batch']}"
    failure = {"oom": "cuda-oom" if spec.device == "cuda" else "host-oom",
               "error": "exception"}.get(row["status"])
    config = {"model": spec.model, "batch_size": row["batch"], "input_size": spec.input_size,
              "steps": spec.steps, "warmup": spec.warmup}
    store.upsert_job(sid, name, launched=row["status"] != "skipped", config=config,
                     status=_JOB_STATUS.get(row["status"], "failed"), failure=failure,
                     device=row.get("device"), started=row.get("started"),
                     ended=row.get("ended"), info=row)
    ev = {k: v for k, v in row.items() if k not in ("started", "ended")}
    store.add_events(sid, name, "sweep", [dict(ev, ev="sweep_result", t=row.get("ended"))])
    if row["status"] in ("oom", "error"):
        store.add_events(sid, name, "sweep", [{"ev": "failed", "t": row.get("ended"),
                                               "cause": failure, "message": row.get("message")}])
    store.heartbeat(sid, time.time())
    store.commit()


def close_session(store: Store, res: SweepResult, state: str = "finished") -> None:
    if res.knee is not None:
        title = f"knee at batch {res.knee.batch}"
    else:
        title = "no knee in the swept range"
    verdict = {"kind": "sweep", "title": title,
               "knee": asdict(res.knee) if res.knee else None,
               "fit": asdict(res.fit) if res.fit else None}
    assert res.session_id is not None, "close_session: the sweep was not recorded"
    store.end_session(res.session_id, state, verdict)


def result_from_store(store: Store, sid: str) -> SweepResult:
    """A recorded sweep read back (for `gputop-dl export`): the rows as the workers reported
    them, with growth, fit and knee computed again by the same rules."""
    row = store.session(sid)
    assert row is not None  # the caller resolved it
    d = dict((row.spec or {}).get("sweep") or {})
    d["batches"] = tuple(d.get("batches") or ())
    spec = SweepSpec(**{k: v for k, v in d.items() if k in SweepSpec.__dataclass_fields__})
    # the rows as `record_row` kept them (each job's info)
    raw = sorted((cast(SweepRow, j["info"]) for j in store.jobs(sid)
                  if j["info"] and j["info"].get("batch") is not None), key=lambda r: r["batch"])
    rows = sweepfit.annotate(raw, spec.dataset_size)
    ended = row.ended or max((r.get("ended") or row.started for r in raw), default=row.started)
    return SweepResult(spec, rows, sweepfit.fit_rows(rows), sweepfit.knee_rows(rows),
                       row.started, ended, sid)
