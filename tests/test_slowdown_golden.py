"""The slowdown outputs on fixed inputs, value for value: `--once --json`'s snapshot after the
live judge, `diagnose --json`'s jobs and verdict, and a recorded session's export (JSON and
Markdown). Hand-made samples, no process, no clock: a change that moves code around must
leave every value of tests/golden/slowdown.json as it is. A field added anywhere (the
contracts only add) does not fail it; `GPUTOP_DL_UPDATE_GOLDEN=1` rewrites the file, whose
diff then shows what was added."""

from __future__ import annotations

import json
import os
import re
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputop_dl.analyse.live import passive
from gputop_dl.analyse.live.passive import PassiveJudge, annotate
from gputop_dl.collect.jobs.loader_work import LoaderWork, work_rate
from gputop_dl.collect.pyspy.run import StallEstimate
from gputop_dl.engine import diagnose_plan
from gputop_dl.engine.launch_plan import LaunchPlan
from gputop_dl.present.report import render_markdown, session_json
from gputop_dl.record.store import Store
from gputop_dl.snapshot import HostSample, JobSample, ProcSample, Snapshot
from gputop_dl.workload import SessionSpec, Workload
from tests.fakes import reports
from tests.fakes.source import found_jobs_snapshot

GOLDEN = Path(__file__).parent / "golden" / "slowdown.json"
TWO = HostSample(cpus=2, cpu_busy=1.0, cpu_pressure_some10=0.9)
SETTLE, REF, NOW = 10, 10, 10  # ticks: a job's start-up, its pace alone, beside the others


def job(name: str, pid: int, workers: float | None, f: float = 0.5, **kw: Any) -> JobSample:
    return JobSample(name=name, pid=pid, launched=False, pids=(pid, pid + 1), cpu_cores=1.0,
                     cpu_wait_fraction=f, cpu_cores_workers=workers, **kw)


def feed(phases: list[tuple[int, list[JobSample]]]) -> Snapshot:
    """The live judge over `phases` ((ticks, jobs), one tick a second): the last snapshot as
    `--once`'s JSON has it (rows annotated, the verdict)."""
    judge, t, v, est, jobs = PassiveJudge(), 0, None, {}, []
    for ticks, jobs in phases:
        for _ in range(ticks):
            v, est = judge.verdict(jobs, TWO, t=float(t))
            t += 1
    return Snapshot(time=float(t), gpu_status="no-driver", host=TWO,
                    jobs=tuple(annotate(jobs, est)), verdict=v.to_json() if v else None)


def live() -> dict[str, Any]:
    """The live judge's routes: the CPU-wait estimate, a pace by batches, by loader cores, by
    py-spy steps and by a loop counter (tests/test_own_pace.py's cases)."""
    b = job("b", 200, 0.1, loader_writes_per_s=1.0)
    pool = ((0.5, 1.0), (0.5, 1.0))
    out = {"once_found": passive.once(found_jobs_snapshot(250)).to_json(),
           "once_pair": passive.once(Snapshot(time=1.0, gpu_status="no-driver", host=TWO, jobs=(
               job("a", 10, None, f=0.6), job("b", 20, None, f=0.6)))).to_json()}
    out["batches"] = feed([(SETTLE + REF, [job("a", 100, 0.0417, f=0.05, loader_writes_per_s=3.44)]),
                           (SETTLE + NOW, [job("a", 100, 0.0205, loader_writes_per_s=1.2), b])]
                          ).to_json()
    out["cores"] = feed([(SETTLE + REF, [job("a", 100, 0.4, f=0.05)]),
                         (SETTLE + NOW, [job("a", 100, 0.1, cpu_pool=pool), b])]).to_json()
    c = replace(b, cpu_cores_workers=None, loader_writes_per_s=None, cpu_pool=pool)

    def steps(step: float | None, p: tuple[tuple[float, float], ...] = ((0.05, 1.0),) * 2
              ) -> JobSample:
        return job("a", 100, None, f=0.05, step_time_s=step, cpu_pool=p)

    out["steps"] = feed([(SETTLE + 2, [steps(None)]), (5, [steps(0.044)]), (5, [steps(0.046)]),
                         (36, [steps(0.046, pool), c]), (2, [steps(1.5, pool), c])]).to_json()
    name = "main.py:train:batch_idx"

    def count(n: int, span: float, at: float, p: tuple[tuple[float, float], ...] = ((0.05, 1.0),) * 2
              ) -> JobSample:
        return job("a", 100, None, f=0.05, cpu_pool=p, loop_counter=name, loop_steps=n,
                   loop_span_s=span, loop_read_t=at)

    old = replace(c, elapsed_s=600.0)
    out["counter"] = feed(
        [(31, [count(0, 0.0, 0.0)]),
         *[(10, [count(100 * k, 10.0 * k, 30.0 + 10 * k)]) for k in range(1, 4)],
         *[(10, [count(300 + 25 * k, 30.0 + 10 * k, 60.0 + 10 * k, pool), old])
           for k in range(1, 3)],
         (1, [count(375, 60.0, 90.0, pool), old])]).to_json()
    return out


def _diagnose_plan(probe: bool) -> tuple[diagnose_plan.DiagnosePlan, Any]:
    host = HostSample(cpus=2, cpu_busy=1.0, cpu_pressure_some10=0.9)
    engine = types.SimpleNamespace(recorder=types.SimpleNamespace(is_open=False),
                                   env={"cpus": 2})
    plan = diagnose_plan.DiagnosePlan(seconds=6, probe=probe)
    for t in range(11):
        jobs = [JobSample(name=n, pid=pid, launched=False, pids=(pid, pid + 1), cpu_cores=1.0,
                          cpu_wait_fraction=0.5 + 0.01 * (t % 3),
                          procs=(ProcSample(pid, 1, 0, "main", 1.0, None, "R"),
                                 ProcSample(pid + 1, pid, 1, "worker", 0.0, None, "S")))
                for n, pid in (("a", 10), ("b", 20))]
        plan.after_tick(engine, float(t), types.SimpleNamespace(
            host=host, gpus=(), found=jobs, gpu_processes=()))
    return plan, engine


def diagnosed(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """`diagnose`'s routes: the live estimate (no probe), py-spy's step times together and
    alone, the loader's CPU and its batches, py-spy contradicted by the loader."""
    work = {pid: [LoaderWork(float(t), ((pid, t * 5 * 10**6, t * 40),), ((pid, round(t * 4.5)),))
                  if pid == 11 else LoaderWork(float(t), ((pid, t * 5 * 10**6, t * 40),))
                  for t in range(11)] for pid in (11, 21)}
    monkeypatch.setattr(diagnose_plan, "workers_of", lambda root, skip=(): [root + 1])
    monkeypatch.setattr(diagnose_plan, "read_work",
                        lambda pids: work[pids[0]].pop(0) if pids and work[pids[0]] else None)
    out: dict[str, Any] = {}

    def both(plan: diagnose_plan.DiagnosePlan, engine: Any, key: str) -> None:
        plan.verdict = plan._judge(engine, [10, 20])
        out[key] = plan.result()

    plan, engine = _diagnose_plan(probe=False)
    together = {10: StallEstimate(1, 99, 0.2, 10), 20: StallEstimate(1, 99, None)}
    for pid in (10, 20):
        plan.jobs[pid]["together"] = together[pid]
    plan._observing = False
    plan.estimate, plan.estimates = plan._estimate(together)
    both(plan, engine, "no_probe")

    for pid in (11, 21):
        work[pid] = [LoaderWork(float(t), ((pid, t * 5 * 10**6, t * 40),),
                                ((pid, round(t * 4.5)),) if pid == 11 else ())
                     for t in range(11)]
    plan, engine = _diagnose_plan(probe=True)
    for pid in (10, 20):
        plan.jobs[pid]["together"] = StallEstimate(1, 99, None)
        plan.jobs[pid]["alone"] = StallEstimate(1, 99, None)
    plan._observing = False
    plan.estimate, plan.estimates = plan._estimate({})
    plan.jobs[10]["loader_alone"] = work_rate(
        LoaderWork(0.0, ((11, 0, 0),), ((11, 0),)), LoaderWork(4.0, ((11, 80 * 10**6, 704),),
                                                               ((11, 90),)))
    plan.jobs[20]["loader_alone"] = work_rate(LoaderWork(0.0, ((21, 0, 0),)),
                                              LoaderWork(4.0, ((21, 80 * 10**6, 10),)))
    both(plan, engine, "loader_one_unrated")
    plan.jobs[20]["loader_alone"] = work_rate(LoaderWork(0.0, ((21, 0, 0),)),
                                              LoaderWork(4.0, ((21, 80 * 10**6, 704),)))
    both(plan, engine, "loader_both")
    plan.jobs[10]["together"] = StallEstimate(1, 99, 0.3, 10)
    plan.jobs[10]["alone"] = StallEstimate(1, 99, 0.2, 10)
    both(plan, engine, "loader_contradicts_steps")
    plan.jobs[20]["together"] = StallEstimate(1, 99, 0.3, 10)
    plan.jobs[20]["alone"] = StallEstimate(1, 99, 0.25, 10)
    plan.jobs[10]["alone"] = StallEstimate(1, 99, 0.08, 10)
    plan.jobs[20]["loader_alone"] = (None, "alone, no worker read")
    both(plan, engine, "steps_both")
    return out


def launched() -> dict[str, Any]:
    """`launch`'s rows: the estimate on the first co-run ticks, then the measured slowdown."""
    spec = SessionSpec(name="pair", path="pair.toml", baseline="measure",
                       workloads=(Workload(name="a"), Workload(name="b")))
    plan = LaunchPlan(spec)
    engine = types.SimpleNamespace(runs={"a": None, "b": None})
    plan._machine = types.SimpleNamespace(host=TWO, gpu_processes=(), gpus=(), time=1.0)
    rows = [replace(job("a", 10, None, f=0.6), launched=True, phase="co-run"),
            replace(job("b", 20, None, f=0.6), launched=True, phase="co-run")]
    def shown() -> dict[str, Any]:
        return Snapshot(time=1.0, gpu_status="no-driver", host=TWO,
                        jobs=tuple(plan.rows(engine, rows))).to_json()["jobs"]

    plan.rows(engine, rows)
    out = {"estimated": shown()}
    plan.verdict = {"jobs": [{"name": "a", "slowdown": 1.5}, {"name": "b", "slowdown": None}]}
    out["measured"] = shown()
    return out


def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A recorded launch session's export, JSON and Markdown (its id and times fixed)."""
    monkeypatch.setattr(reports.time, "time", lambda: 1_763_750_000.0)
    store = Store(str(tmp_path / "s.db"))
    try:
        sid = reports.make_session(store, sample_extra=dict(cpu_wait_fraction=0.3,
                                                            slowdown=1.4,
                                                            slowdown_source="estimated"))
        data = session_json(store, sid)
        text = json.dumps(data, indent=1, sort_keys=True, default=str).replace(sid, "SID")
        md = render_markdown(data).replace(sid, "SID")
    finally:
        store.close()
    # of the Markdown, the lines with a slowdown in them (the rest is other modules' business)
    return {"json": json.loads(text),
            "md": [ln for ln in md.splitlines() if re.search(r"\d\.\d+×", ln)]}


def changed(want: Any, got: Any, path: str = "") -> list[str]:
    """Where `got` differs from `want`: a value changed, a key or an item gone. A key that
    `want` lacks is an added field (the contracts only add), not a change."""
    if isinstance(want, dict) and isinstance(got, dict):
        return [p for k, v in want.items()
                for p in ([f"{path}/{k}: gone"] if k not in got else changed(v, got[k], f"{path}/{k}"))]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [p for i, (a, b) in enumerate(zip(want, got)) for p in changed(a, b, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: {want!r} -> {got!r}"]


def test_slowdown_outputs_on_fixed_inputs_are_unchanged(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    got = {"live": live(), "diagnose": diagnosed(monkeypatch), "launch": launched(),
           "export": exported(tmp_path, monkeypatch)}
    got = json.loads(json.dumps(got, default=str))
    if os.environ.get("GPUTOP_DL_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert changed(json.loads(GOLDEN.read_text(encoding="utf-8")), got) == []


def test_the_golden_check_sees_a_change_and_a_loss_but_lets_a_field_be_added():
    want = {"jobs": [{"slowdown": 2.0, "slowdown_source": "probe"}]}
    assert changed(want, {"jobs": [{"slowdown": 2.0, "slowdown_source": "probe", "new": 1}]}) == []
    assert changed(want, {"jobs": [{"slowdown": 2.1, "slowdown_source": "probe"}]})
    assert changed(want, {"jobs": [{"slowdown": 2.0}]})
    assert changed(want, {"jobs": []})
