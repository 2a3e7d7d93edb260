"""Cost of `gputop-dl export` on a long session: 24 hours at 1 Hz, 8 GPUs, 50 processes.

    .venv/bin/python benchmarks/export.py [--hours 24] [--step-s 1.0] [--keep DB]

Synthesises the session into a temporary database through the real Store API (the engine's
write path, committed in batches), then times `export_session` to .md and .json (median of 3)
and prints the database size. Targets: export <= 3 s, database <= 200 MB.

Model of the 50 processes: 10 jobs x 5 processes (a trainer and 4 data-loader workers each).
`job_samples` is per job (a job's sample sums its process tree, `nprocs` = 5), so a tick
writes 1 host row, 8 GPU rows and 10 job rows. Every job also reports one step event per
`--step-s` seconds (default 1: a 1-second training step) and an epoch event per hour.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gputop_dl.analyse.recorded.summary import summarize  # noqa: E402
from gputop_dl.present.report import export_session, render_markdown, session_json  # noqa: E402
from gputop_dl.record.store import Store  # noqa: E402
from gputop_dl.snapshot import GpuSample, HostSample, JobSample  # noqa: E402

GIB = 1024**3


def synthesize(path: str, hours: float, gpus: int, jobs: int, procs: int, step_s: float,
               cpus: int = 64) -> str:
    rnd = random.Random(0)
    st = Store(path)
    env = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "cpus": cpus, "cpus_logical": cpus,
           "mem_total": 512 * GIB, "gpus": ["NVIDIA A100-SXM4-80GB"] * gpus, "gpu_status": "ok",
           "gpu_status_detail": f"{gpus} NVIDIA GPUs", "driver": "550.54.15", "cuda": "12.4",
           "os": "Linux 5.15.0", "python": "3.11.7", "torch": "2.3.1", "torchvision": "0.18.1"}
    sid = st.create_session("24h synthetic", file="long.toml", command="gputop-dl launch long.toml",
                            kind="launch", environment=env,
                            spec={"baseline": "measure", "interval": 1.0, "cuda": True})
    n = int(hours * 3600)
    t0 = time.time() - n - 60
    st.db.execute("UPDATE sessions SET started=? WHERE id=?", (t0, sid))
    names = [f"job{i:02d}" for i in range(jobs)]
    solo = {"step_time_s": 0.8 * step_s, "samples_per_s": 128 / (0.8 * step_s),
            "stall_fraction": 0.05, "steps": 50, "cpu_cores": 4.0, "cv": 0.02, "device": "cuda:0"}
    for i, name in enumerate(names):
        cfg = {"name": name, "model": "resnet50", "dataset": "imagefolder", "input_size": 224,
               "batch_size": 128, "num_workers": procs - 1, "transforms": "heavy",
               "epochs": int(hours), "warmup_steps": 3, "gpus": [i % gpus]}
        st.upsert_job(sid, name, launched=True, config=cfg, status="waiting")
        base = [{"ev": "started", "t": t0 + 1, "device": "cuda:0"}]
        base += [{"ev": "step", "t": t0 + 1 + s * 0.8 * step_s, "epoch": 1, "step": s,
                  "t_data": 0.04, "t_step": 0.8 * step_s, "samples": 128} for s in range(1, 54)]
        st.add_events(sid, name, "baseline", base + [{"ev": "baseline", "t": t0 + 5, **solo}])
    for name in names:  # what the trainer says first in the co-run
        st.add_events(sid, name, "co-run", [{"ev": "started", "t": t0 + 9, "device": "cuda:0",
                                             "pid": 1000, "batch_size": 128}])
    st.commit()
    steps_per_tick = 1.0 / step_s
    acc = {name: 0.0 for name in names}
    step_no = {name: 0 for name in names}
    per_epoch = int(3600 / step_s)
    for k in range(n):
        t = t0 + k
        busy = 0.6 + 0.3 * rnd.random()
        st.add_host_sample(sid, t, HostSample(
            cpus=cpus, cpu_busy=busy, per_cpu=tuple(round(rnd.random(), 2) for _ in range(cpus)),
            load1=cpus * busy, cpu_pressure_some10=0.1 * rnd.random(), mem_used=200 * GIB))
        st.add_gpu_samples(sid, t, [GpuSample(
            index=g, util=0.5 + 0.5 * rnd.random(), mem_used=40 * GIB + g, mem_total=80 * GIB,
            temp_c=65.0, power_w=300.0, sm_clock_mhz=1410) for g in range(gpus)])
        for name in names:
            st.add_job_sample(sid, t, JobSample(
                name=name, pid=1000, launched=True, pids=tuple(range(procs)),
                cpu_cores=3.5 + rnd.random(), rss=20 * GIB, gpu_mem=30 * GIB,
                stall_fraction=0.2, step_time_s=step_s, samples_per_s=128 / step_s), "co-run")
            acc[name] += steps_per_tick
            evs = []
            while acc[name] >= 1.0:
                acc[name] -= 1.0
                step_no[name] += 1
                s = step_no[name]
                evs.append({"ev": "step", "t": t, "epoch": 1 + (s - 1) // per_epoch,
                            "step": 1 + (s - 1) % per_epoch, "t_data": 0.2 * step_s,
                            "t_step": step_s * (0.95 + 0.1 * rnd.random()), "samples": 128})
                if s % per_epoch == 0:
                    evs.append({"ev": "epoch", "t": t, "epoch": s // per_epoch,
                                "time_s": 3600.0 + rnd.random(), "steps": per_epoch,
                                "samples": 128 * per_epoch, "loss": 1.0, "peak_mem": 30 * GIB})
            if evs:
                st.add_events(sid, name, "co-run", evs)
        st.heartbeat(sid, t)
        if k % 3600 == 3599:
            st.commit()
    for name in names:
        st.upsert_job(sid, name, launched=True, config=None, status="done", device="cuda:0",
                      pid=1000, started=t0 + 10, ended=t0 + n,
                      info={"phase": "co-run", "stderr_tail": [], "solo": solo})
    st.commit()
    st.end_session(sid, "finished", {"kind": "parallel", "title": "truly parallel",
                                     "reason": "synthetic", "evidence": {}, "jobs": []})
    st.db.execute("UPDATE sessions SET ended=? WHERE id=?", (t0 + n, sid))
    st.commit()
    st.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    st.close()
    return sid


def _time(fn, runs: int = 3) -> tuple[float, list[float], float]:
    """Median wall seconds, all wall times, and the median CPU seconds of this process (the
    CPU time is what a quiet machine's wall time would be; this box is often shared)."""
    times, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(times), times, statistics.median(cpu)


def _has_dbstat(st: Store) -> bool:
    try:
        st.db.execute("SELECT 1 FROM dbstat LIMIT 1")
        return True
    except Exception:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
        return False


def _db_size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal", path + "-shm")
               if os.path.exists(p))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--procs-per-job", type=int, default=5)
    ap.add_argument("--step-s", type=float, default=1.0, help="training step time (seconds)")
    ap.add_argument("--keep", metavar="DB", help="write the database here and keep it "
                    "(reused if it exists)")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gputop-dl-bench-")
    path = args.keep or os.path.join(d, "sessions.db")
    t = time.perf_counter()
    if args.keep and os.path.exists(path):
        st = Store(path)
        sid = st.session(None).id
        st.close()
        print(f"reusing {path}")
    else:
        sid = synthesize(path, args.hours, args.gpus, args.jobs, args.procs_per_job, args.step_s)
        print(f"synthesised in {time.perf_counter() - t:.1f} s")
    st = Store(path)
    counts = {tbl: st.db.execute(f"SELECT COUNT(*) FROM {tbl}").fetchone()[0]
              for tbl in ("host_samples", "gpu_samples", "job_samples", "steps", "events")}
    print(f"session {sid}: {args.hours:g} h at 1 Hz, {args.gpus} GPUs, {args.jobs} jobs x "
          f"{args.procs_per_job} processes; rows: "
          + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    size = _db_size(path)
    tables = dict(st.db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()) \
        if _has_dbstat(st) else {}
    print(f"DB size: {size / 1e6:.1f} MB ({size / 2**20:.1f} MiB)  target <= 200 MB  "
          f"{'OK' if size <= 200e6 else 'MISSED'}")
    if tables:
        print("  by table/index: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in
                                              sorted(tables.items(), key=lambda kv: -kv[1])
                                              if v > 1e5))
    # where the time goes
    med, _, cpu = _time(lambda: summarize(st, sid), 1)
    print(f"  analyse.recorded.summary.summarize(): {med:.2f} s (CPU {cpu:.2f} s)")
    med, _, cpu = _time(lambda: session_json(st, sid), 1)
    print(f"  session_json():    {med:.2f} s (CPU {cpu:.2f} s)")
    data = session_json(st, sid)
    med, _, cpu = _time(lambda: render_markdown(data), 1)
    print(f"  render_markdown(): {med * 1000:.1f} ms")
    st.close()
    for ext in ("md", "json"):
        out = os.path.join(d, f"report.{ext}")
        med, times, cpu = _time(lambda out=out: export_session(sid, out, path))
        print(f"export .{ext}: median {med:.2f} s of 3 ({', '.join(f'{x:.2f}' for x in times)}),"
              f" CPU {cpu:.2f} s  target <= 3 s  {'OK' if med <= 3 else 'MISSED'}; file "
              f"{os.path.getsize(out) / 1024:.0f} KiB")
    with open(os.path.join(d, "report.json"), encoding="utf-8") as f:
        data = json.load(f)
    print(f"report: {data['series']['points']} points per chart, "
          f"{len(data['jobs'][0]['epochs'])} epochs per job, {len(data['events'])} events; "
          f"series read every {data['series']['every_s']} s; step statistics sampled: "
          f"{data['jobs'][0]['step_stats_sampled']}")
    print(f"load average now: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for name in os.listdir(d):  # the reports (and the database unless --keep)
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
