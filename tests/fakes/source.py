"""A fake snapshot source for TUI tests, and fixed, deterministic snapshots to feed it.

`FakeSource` has the Engine's thread-facing API (subscribe, start, request_stop, stop_job,
live_jobs, running, join, session_id, interval, env, spec) and records what the app asked of it.
Tests call `emit(snap)` to hand the app a snapshot (from the test's thread, or any thread).

`make_snapshot(...)` builds a launch-like snapshot at a fixed time `T0` with 4 GPUs, a host, three
launched jobs, one foreign GPU process, a log and (optionally) a verdict; `monitor_snapshot()` a
plain-monitor snapshot on a machine without a GPU; `found_jobs_snapshot(t)` the monitor watching
three found jobs on 2 GPUs, one of which slows down from t=200 to t=400 (the verdict with it).
"""

from __future__ import annotations

import threading
from dataclasses import replace

from gputop_dl.analyse.verdict_types import JobVerdict, Verdict
from gputop_dl.snapshot import GpuProcess, GpuSample, HostSample, JobSample, Snapshot
from gputop_dl.workload import SessionSpec, Workload

T0 = 1_763_750_000.0  # fixed wall time of the fake snapshots (tests set TZ=UTC)
GiB = 1 << 30
SESSION = "20251121-183320-abc123"

# built with the real constructor, so the fake cannot show a verdict the code cannot produce
VERDICT = Verdict(
    kind="cpu-bound",
    reason="bs128 runs 2.61× slower together than alone while its data-wait rose from 4% to 31%, "
           "and the 16 CPUs are 97% busy.",
    confidence=0.85,
    evidence_lines=(
        "slowdown: bs32 1.18×, bs64 1.64×, bs128 2.61× (STP 1.89 of 3, efficiency 0.63)",
        "data-wait: bs32 4%→12%, bs64 6%→22%, bs128 4%→31%",
        "host CPU 97% busy, load 1.9 per CPU, CPU pressure some 42%",
    ),
    recommendations=(
        "the jobs need 21.5 cores at solo speed; 16 are available",
        "lighter transforms, or pre-compute the augmentation",
    ),
    jobs=(JobVerdict(name="bs128", slowdown=2.61, stall=0.31, solo_stall=0.04,
                     step_time_s=0.47, solo_step_time_s=0.18),),
).to_json()

SPEC = SessionSpec(
    name="mobilenet trio", path="workloads/mobilenet_trio.toml", baseline="measure",
    workloads=(Workload(name="bs32", batch_size=32, gpus=(0,), steps_per_epoch=100),
               Workload(name="bs64", batch_size=64, gpus=(1,), steps_per_epoch=100),
               Workload(name="bs128", batch_size=128, gpus=(2, 3), steps_per_epoch=100)))


def gpus(n: int = 4, t: int = 0) -> tuple[GpuSample, ...]:
    utils = (0.93, 0.41, 0.67, 0.05, 0.88, 0.12, 0.5, 0.0)
    mems = (41.2, 18.5, 77.9, 0.4, 12.0, 1.0, 30.0, 0.0)
    out = []
    for i in range(n):
        u = utils[i % 8]
        out.append(GpuSample(index=i, name="NVIDIA H100 80GB HBM3", util=round((u + 0.01 * (t % 7)) % 1.0, 2),
                             mem_used=int(mems[i % 8] * GiB), mem_total=80 * GiB, temp_c=45 + 10 * i,
                             power_w=120.0 + 60 * i, power_limit_w=700.0,
                             # the PCIe link and rates, and GPU 2 power-capped
                             pcie_link_gen=5, pcie_link_gen_max=5, pcie_link_width=16,
                             pcie_link_width_max=16, pcie_rx_bytes_per_s=(12_300_000_000, 800_000_000, 2_100_000_000, 0)[i % 4],
                             pcie_tx_bytes_per_s=(450_000_000, 20_000_000, 300_000_000, 0)[i % 4],
                             sm_clock_mhz=1980 if i != 2 else 1410, sm_clock_max_mhz=1980,
                             throttle=(("power", 0.34 if i == 2 else 0.0), ("thermal", 0.05 if i == 2 else 0.0))))
    return tuple(out)


def host(t: int = 0) -> HostSample:
    per = tuple(round(((i * 37 + t * 11) % 100) / 100, 2) for i in range(16))
    return HostSample(cpus=16, cpu_busy=0.97, per_cpu=per, load1=30.4, load5=22.1, load15=12.0,
                      cpu_pressure_some10=0.42, cgroup_throttled_frac=None,
                      mem_used=int(41.5 * GiB), mem_total=int(125.7 * GiB))


def jobs(t: int = 0) -> tuple[JobSample, ...]:
    step = 40 + t
    return (
        JobSample(name="bs32", pid=4242, launched=True, pids=(4242, 4250, 4251), status="running",
                  device="cuda:0", batch_size=32, model="mobilenet_v2", cpu_cores=2.41, rss=int(2.1 * GiB),
                  stall_fraction=0.12, stall_source="trainer", step_time_s=0.094, samples_per_s=340.4,
                  epoch=3, epochs=3, step=step, steps_per_epoch=100, eta_s=6.0 + t, epoch_times=(9.8, 9.6),
                  gpu_mem=int(4.1 * GiB), slowdown=1.18, solo_step_time_s=0.08, phase="co-run"),
        JobSample(name="bs64", pid=4300, launched=True, pids=(4300, 4301), status="running",
                  device="cuda:1", batch_size=64, model="mobilenet_v2", cpu_cores=3.9, rss=int(3.0 * GiB),
                  stall_fraction=0.22, stall_source="trainer", step_time_s=0.213, samples_per_s=300.5,
                  epoch=2, epochs=3, step=step, steps_per_epoch=100, eta_s=40.0, epoch_times=(21.9,),
                  gpu_mem=int(7.9 * GiB), slowdown=1.64, solo_step_time_s=0.13, phase="co-run"),
        JobSample(name="bs128", pid=4400, launched=True, pids=(4400,), status="failed",
                  failure="CUDA out of memory", device="cuda:2,3", batch_size=128, model="mobilenet_v2",
                  stall_fraction=0.31, step_time_s=0.47, samples_per_s=272.3, epoch=1, epochs=3, step=12,
                  steps_per_epoch=100, gpu_mem=None, slowdown=2.61, solo_step_time_s=0.18, phase="co-run",
                  stderr_tail=("Traceback (most recent call last):", "  File \"train.py\", line 3",
                               "torch.OutOfMemoryError: CUDA out of memory")),
    )


def log(n: int = 5) -> tuple[tuple[float, str], ...]:
    msgs = ("baseline 1/3: bs32 alone for 3+6 steps", "bs32 solo: step 0.080 s, stall 4%",
            "bs64 solo: step 0.130 s, stall 6%", "bs128 solo: step 0.180 s, stall 4%",
            "co-run: starting bs32, bs64, bs128", "bs128 (co-run) failed: CUDA out of memory")
    return tuple((T0 - 60 + 10 * i, m) for i, m in enumerate(msgs[:n]))


def make_snapshot(t: int = 0, *, verdict: dict | None = VERDICT, n_gpus: int = 4, phase: str = "co-run",
                  **changes) -> Snapshot:
    snap = Snapshot(time=T0 + t, gpu_status="ok", gpus=gpus(n_gpus, t), host=host(t), jobs=jobs(t),
                    gpu_processes=(GpuProcess(gpu_index=0, pid=4242, mem_used=int(4.1 * GiB), sm_util=0.8),
                                   GpuProcess(gpu_index=3, pid=777, mem_used=int(0.4 * GiB), sm_util=0.02)),
                    verdict=verdict, log=log(6), phase=phase, session_id=SESSION)
    return replace(snap, **changes) if changes else snap


def monitor_snapshot(t: int = 0, **changes) -> Snapshot:
    snap = Snapshot(time=T0 + t, gpu_status="no-library", host=replace(host(t), per_cpu=(0.62, 0.4), cpus=2,
                                                                        load1=1.92, load5=1.5, load15=1.2),
                    notes=())
    return replace(snap, **changes) if changes else snap


def found_jobs(t: int) -> tuple[JobSample, ...]:
    """Three found jobs; "prep.py" is slowed from t=200 to t=400 (CPU wait and step time up)."""
    slow = 200 <= t < 400
    wave = ((t // 5 * 7) % 10) / 100  # a little movement, deterministic
    out = []
    for i, (name, pid, step) in enumerate((("train.py --lr 0.1", 5100, 0.12), ("prep.py", 5200, 0.30),
                                          ("train.py --lr 0.3", 5300, 0.20))):
        hit = slow and i == 1
        out.append(JobSample(
            name=name, pid=pid, launched=False, pids=(pid,), status="running", cpu_cores=1.5 + i,
            step_time_s=step * (2.4 if hit else 1.0) + wave / 10, stall_fraction=0.05 + wave + (0.3 if hit else 0),
            cpu_wait_fraction=(0.55 if hit else 0.04) + wave / 2, slowdown=2.3 if hit else 1.0 + wave / 5,
            slowdown_source="estimated", command=f"python {name}"))
    return tuple(out)


def found_jobs_snapshot(t: int = 0) -> Snapshot:
    slow = 200 <= t < 400
    kind = "cpu-bound" if slow else "parallel"
    verdict = {"kind": kind, "title": kind, "reason": "prep.py waits for a CPU 55% of the time" if slow
               else "no job waits for a shared resource", "confidence": 0.8,
               "evidence": {"method": "passive"}}
    return Snapshot(time=T0 + t, gpu_status="ok", gpus=gpus(2, t), host=host(t), jobs=found_jobs(t),
                    verdict=verdict if t >= 10 else None)


class FakeSource:
    """Engine stand-in: records calls; `emit` hands the subscribers a snapshot."""

    def __init__(self, *, session_id: str | None = SESSION, live: list[str] | None = None,
                 spec=None, interval: float = 1.0, env: dict | None = None):
        self.session_id = session_id
        self.interval = interval
        self.env = env if env is not None else {"gpu_status_detail": None}
        self.spec = spec
        self.subscribers: list = []
        self.started = False
        self.stop_reasons: list[str] = []
        self.stopped_jobs: list[str] = []
        self.joined = 0
        self.live = list(live or [])
        self._alive = threading.Event()
        self.state = "running"
        self.error = None

    def subscribe(self, fn) -> None:
        self.subscribers.append(fn)

    def start(self) -> None:
        self.started = True
        self._alive.set()

    def emit(self, snap: Snapshot) -> None:
        for fn in self.subscribers:
            fn(snap)

    def request_stop(self, reason: str = "interrupted") -> None:
        self.stop_reasons.append(reason)
        self.live = []
        self.state = "interrupted"
        self._alive.clear()

    def stop_job(self, name: str) -> None:
        self.stopped_jobs.append(name)

    def live_jobs(self) -> list[str]:
        return list(self.live)

    @property
    def running(self) -> bool:
        return self._alive.is_set()

    def join(self, timeout: float | None = None) -> bool:
        self.joined += 1
        return True


class FixedClock:
    """A clock that returns `now` (settable)."""

    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def queue_state(t: int = 0) -> dict:
    """A `gputop-dl queue` run's Snapshot.queue: two running, two waiting (one for cores, one
    behind it), one still to arrive, one ended."""
    now = 42.0 + t
    return {"policy": "fifo", "slots": 4, "unit": "GPU", "cpus": 16.0, "cpu_aware": True,
            "ageing_s": 600.0, "v": 1.0, "elapsed_s": now, "jobs": [
                {"name": "bs128", "state": "waiting", "arrival_s": 5.0, "expected_s": 90.0, "gpus": 2,
                 "waited_s": now - 5.0, "reason": "GPUs 2, 3 free, but 1.8 cores short"},
                {"name": "resnet50", "state": "waiting", "arrival_s": 20.0, "expected_s": 300.0,
                 "gpus": 1, "waited_s": now - 20.0, "reason": "behind bs128 (first come, first served)"},
                {"name": "bs32", "state": "running", "arrival_s": 0.0, "start_s": 0.0, "expected_s": 30.0,
                 "gpus": 1},
                {"name": "bs64", "state": "running", "arrival_s": 0.0, "start_s": 0.0, "expected_s": 60.0,
                 "gpus": 1},
                {"name": "tiny", "state": "ended", "arrival_s": 0.0, "start_s": 0.0, "end_s": 12.0,
                 "expected_s": 10.0, "gpus": 1},
                {"name": "late", "state": "pending", "arrival_s": 120.0, "expected_s": 30.0, "gpus": 1}]}


def queue_snapshot(t: int = 0, **changes) -> Snapshot:
    """A queue run: bs32 and bs64 running, the others waiting (rows without a process)."""
    running = jobs(t)[:2]
    waiting = tuple(JobSample(name=n, pid=None, launched=True, status="waiting", batch_size=b,
                              model=m) for n, b, m in (("bs128", 128, "mobilenet_v2"),
                                                       ("resnet50", 64, "resnet50"),
                                                       ("late", 32, "mobilenet_v2")))
    snap = make_snapshot(t, verdict=None, phase="queue", jobs=running + waiting, queue=queue_state(t),
                         log=log(5) + ((T0 - 5, "queue: bs128 waits: GPUs 2, 3 free, but 1.8 cores short"),))
    return replace(snap, **changes) if changes else snap


def monitor_app():
    """A monitor-mode `GputopApp` on a `FakeSource` (no session yet) with the fixed clock."""
    from gputop_dl.present.tui.app import GputopApp

    src = FakeSource(live=[], spec=None, session_id=None)
    return GputopApp(src, clock=FixedClock(T0), mode="monitor"), src
