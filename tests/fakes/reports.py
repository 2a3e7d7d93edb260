"""A recorded session with known numbers, built through the real Store API (for report tests).

`make_session(store)` records what the engine would for three jobs on a 4-GPU machine: solo
baselines, a co-run with step/epoch events, host/GPU/job samples once a second, one failed job
with a stderr tail, and a verdict. `EXPECT` holds the numbers the report must show.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from gputop_dl.record.store import Store
from gputop_dl.snapshot import GpuSample, HostSample, JobSample

GIB = 1024**3

ENV_GPU = {
    "cpu_model": "Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz", "cpus": 16, "cpus_logical": 32,
    "mem_total": 64 * GIB, "gpus": ["NVIDIA TITAN Xp"] * 4, "gpu_status": "ok",
    "gpu_status_detail": "4 NVIDIA GPUs: NVIDIA TITAN Xp (driver 535.54.03, CUDA 12.2).",
    "driver": "535.54.03", "cuda": "12.2", "os": "Linux 5.15.0-91-generic", "python": "3.11.7",
    "torch": "2.3.1", "torchvision": "0.18.1", "gputop_dl": "0.1.0",
}

ENV_CPU = dict(ENV_GPU, gpus=[], gpu_status="no-driver", driver=None, cuda=None, cpus=2,
               cpus_logical=2, cpu_model="AMD EPYC",
               gpu_status_detail="No NVIDIA GPU: the NVIDIA driver is not loaded "
                                 "(libnvidia-ml.so.1 not found); workloads train on the CPU.")

VERDICT = {
    "kind": "cpu-bound", "title": "concurrent: CPU-bound",
    "reason": "the jobs slowed 2.0-2.5× while their data-loader stall rose and the CPU was "
              "saturated",
    "confidence": 0.8,
    "evidence": {"stp": 0.9, "efficiency": 0.3, "host_busy": 0.97, "cpu_signals": ["busy", "psi"],
                 "slowdowns": {"bs32": 2.5, "bs64": 2.0}},
    "evidence_lines": ["STP 0.90 for 3 jobs (parallel efficiency 0.30)",
                       "host CPU 97% busy of 16 cores"],
    "recommendations": ["give each job 4 cores or fewer workers",
                        "pre-resize the dataset so the loader does less work"],
    "jobs": [{"name": "bs32", "slowdown": 2.5,
              "line": "bs32: step 0.500 s vs solo 0.200 s (2.50×)"},
             {"name": "bs64", "slowdown": 2.0, "line": "step 0.800 s vs solo 0.400 s (2.00×)"}],
}

# name, batch, gpus, co-run (t_step, t_data), solo (step, stall, cores), cores, peak GPU mem
JOBS = [
    ("bs32", 32, [0], (0.5, 0.2), (0.2, 0.05, 2.0), 2.4, 4378853376),
    ("bs64", 64, [1], (0.8, 0.2), (0.4, 0.02, 2.5), 3.1, 6 * GIB),
]
FAILED = ("bs128", 128, [2, 3])

EXPECT = {
    "bs32": {"epochs": "3/3", "median_epoch": "28.5 s", "step": "500 ms", "samples/s": "64.0",
             "peak_mem": "4.1 GiB (GPU)", "cores": "2.40", "stall": "40%", "solo_step": "200 ms",
             "solo_stall": "5%", "slowdown": "2.50×", "compute": "0.12 TFLOP/s"},
    "bs64": {"epochs": "3/3", "median_epoch": "30.0 s", "step": "800 ms", "samples/s": "80.0",
             "peak_mem": "6.0 GiB (GPU)", "cores": "3.10", "stall": "25%", "solo_step": "400 ms",
             "solo_stall": "2%", "slowdown": "2.00×", "compute": "0.14 TFLOP/s"},
}
FWD_FLOPS = 0.6e9  # mobilenet_v2 at 224: 0.30 GMac forward per image; 3x for training
EPOCH_TIMES = {"bs32": [29.0, 28.5, 28.0], "bs64": [31.0, 30.0, 29.5]}
OOM_MESSAGE = "CUDA out of memory. Tried to allocate 2.00 GiB"
STDERR_TAIL = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
               "torch.OutOfMemoryError: " + OOM_MESSAGE]


def config(name: str, batch: int, gpus: list[int], **kw) -> dict:
    cfg = {"name": name, "model": "mobilenet_v2", "dataset": "fake", "input_size": 224,
           "num_classes": 1000, "batch_size": batch, "num_workers": 4, "transforms": "heavy",
           "epochs": 3, "steps_per_epoch": 10, "warmup_steps": 2, "gpus": gpus, "nproc": None,
           "command": None, "cpu_fallback_applied": []}
    cfg.update(kw)
    return cfg


def make_session(store: Store, *, name: str = "mobilenet trio", gpu: bool = True,
                 job_names: tuple[str, str, str] | None = None, failure: str | None = None,
                 stderr_tail: list[str] | None = None, command: str | None = None,
                 ticks: int = 90, verdict: dict | None = VERDICT, state: str | None = "finished",
                 extra_config: dict | None = None, sample_extra: dict | None = None) -> str:
    """Record the fixture session; returns its id. `state=None` leaves it "running".
    `sample_extra`: more `JobSample` fields of every job sample (CPU wait, disk I/O)."""
    names = job_names or (JOBS[0][0], JOBS[1][0], FAILED[0])
    sid = store.create_session(
        name, file="workloads/mobilenet_trio.toml",
        command=command or "gputop-dl launch workloads/mobilenet_trio.toml --headless",
        kind="launch", environment=ENV_GPU if gpu else ENV_CPU,
        spec={"baseline": "measure", "interval": 1.0, "cuda": gpu, "workloads": []})
    t0 = time.time() - 300.0  # the whole run lies in the past: heartbeats are stale
    store.db.execute("UPDATE sessions SET started=? WHERE id=?", (t0, sid))
    corun_t = t0 + 10.0
    for (_, batch, gpus, (t_step, t_data), (solo_step, solo_stall, solo_cores), _cores, gmem), jn \
            in zip(JOBS, names[:2]):
        cfg = config(jn, batch, gpus, **(extra_config or {}))
        solo = {"step_time_s": solo_step, "samples_per_s": batch / solo_step,
                "stall_fraction": solo_stall, "steps": 8, "cpu_cores": solo_cores, "cv": 0.03,
                "device": "cuda:0"}
        store.upsert_job(sid, jn, launched=True, config=cfg, status="waiting")
        store.add_events(sid, jn, "baseline", [
            {"ev": "started", "t": t0 + 1, "device": "cuda:0"},
            {"ev": "baseline", "t": t0 + 5, **solo}])
        evs = [{"ev": "started", "t": corun_t, "device": "cuda:0", "pid": 100,
                "fwd_flops": FWD_FLOPS}]
        t = corun_t
        for ep, ep_time in enumerate(EPOCH_TIMES[jn if jn in EPOCH_TIMES else JOBS[0][0]], 1):
            for step in range(1, 11):
                t += t_step
                evs.append({"ev": "step", "t": t, "epoch": ep, "step": step, "t_data": t_data,
                            "t_step": t_step, "samples": batch})
            evs.append({"ev": "epoch", "t": t, "epoch": ep, "time_s": ep_time, "steps": 10,
                        "samples": 10 * batch, "loss": 2.0, "accuracy": 0.25, "peak_mem": gmem - GIB})
        evs.append({"ev": "finished", "t": t})
        store.add_events(sid, jn, "co-run", evs)
        store.upsert_job(sid, jn, launched=True, config=None, status="done", device="cuda:0",
                         pid=100, started=t0 + 1, ended=t + 0.5,
                         info={"phase": "co-run", "stderr_tail": [], "solo": solo})
    # the third job fails with a CUDA OOM in the co-run
    fname = names[2]
    fail_msg = failure if failure is not None else OOM_MESSAGE
    store.upsert_job(sid, fname, launched=True, config=config(fname, 128, [2, 3]), status="waiting")
    store.add_events(sid, fname, "co-run", [
        {"ev": "started", "t": corun_t, "device": "cuda:0", "pid": 200},
        {"ev": "note", "t": corun_t + 1, "message": "DDP over 2 GPUs"},
        {"ev": "failed", "t": corun_t + 3, "cause": "cuda-oom", "message": fail_msg}])
    store.upsert_job(sid, fname, launched=True, config=None, status="failed",
                     failure=f"cuda-oom: {fail_msg}", device="cuda:0", pid=200,
                     started=corun_t, ended=corun_t + 3.5,
                     info={"phase": "co-run", "stderr_tail": stderr_tail or STDERR_TAIL,
                           "solo": None})
    # samples once a second
    for i in range(ticks):
        t = t0 + i
        store.add_host_sample(sid, t, HostSample(
            cpus=16, cpu_busy=0.5 if t < corun_t else 0.97, per_cpu=(0.5,) * 16, load1=4.0,
            cpu_pressure_some10=0.2, cgroup_throttled_frac=None, mem_used=20 * GIB,
            mem_total=64 * GIB))
        if gpu:
            store.add_gpu_samples(sid, t, [
                GpuSample(index=g, name="NVIDIA TITAN Xp", util=0.25 * g, mem_used=(g + 1) * GIB,
                          mem_total=12 * GIB, temp_c=60.0, power_w=150.0, sm_clock_mhz=1500)
                for g in range(4)])
        for (_, _b, _g, (t_step, _d), _s, cores, gmem), jn in zip(JOBS, names[:2]):
            phase = "baseline" if t < corun_t else "co-run"
            store.add_job_sample(sid, t, JobSample(
                name=jn, pid=100, launched=True, pids=(100, 101, 102), cpu_cores=cores,
                rss=3 * GIB, gpu_mem=gmem if i == ticks // 2 else GIB, stall_fraction=0.3,
                step_time_s=t_step, samples_per_s=10.0, **(sample_extra or {})), phase)
        store.heartbeat(sid, t)
    store.commit()
    if state is not None:
        store.end_session(sid, state, verdict)
        store.db.execute("UPDATE sessions SET ended=? WHERE id=?", (t0 + ticks, sid))
        store.commit()
    else:
        store.set_verdict(sid, verdict)
        store.commit()
    return sid


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def make_interrupted(store: Store, **kw) -> str:
    """A session left "running" by an owner that died (kill -9) minutes ago."""
    sid = make_session(store, state=None, **kw)
    last = store.db.execute("SELECT MAX(t) FROM host_samples JOIN sessions USING (sk) WHERE id=?",
                            (sid,)).fetchone()[0]
    # bs64 never got its final status: it was still running when gputop-dl died
    store.db.execute("UPDATE jobs SET status='running', ended=NULL WHERE session_id=? AND name=?",
                     (sid, "bs64"))
    store.db.execute("UPDATE sessions SET owner_pid=?, heartbeat=? WHERE id=?",
                     (dead_pid(), last, sid))
    store.commit()
    return sid


def fresh_store(path: str) -> Store:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return Store(path)


if __name__ == "__main__":  # a quick look: python -m tests.fakes.reports OUT.md
    import tempfile

    from gputop_dl.present.report import render_markdown, session_json

    with tempfile.TemporaryDirectory() as d:
        st = Store(os.path.join(d, "s.db"))
        sid_ = make_session(st)
        text = render_markdown(session_json(st, sid_))
        if len(sys.argv) > 1:
            with open(sys.argv[1], "w", encoding="utf-8") as f:
                f.write(text)
        else:
            print(text)
