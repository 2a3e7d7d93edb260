"""The Prometheus exporter: the latest `Snapshot` rendered as metrics at scrape time.

`gputop-dl serve` (and `launch`/the monitor with `--metrics ADDR`) subscribe a
`SnapshotCollector` to their engine: each tick hands it the new snapshot (one reference
assignment, no work), and a scrape renders whatever snapshot is the latest. A job that ended
is not in it, so its label sets are simply gone at the next scrape; nothing is unregistered.
The exposition format is `prometheus_client`'s, never written here; present/metrics_http.py
serves it.

Names: every metric starts with `gputop_dl_`, in base units (bytes, seconds, watts, hertz,
ratios 0..1). Labels: dcgm-exporter's `Hostname`, `gpu`, `UUID`, `modelName` on GPU series, so
a PromQL join with an existing dcgm-exporter works; `job_name` and `pid` on job series (not
`job`: Prometheus owns that target label and would rename ours to `exported_job`); a
distributed job's ranks on this node are `gputop_dl_job_rank_info` series with the job's labels
plus `run_id`, `rank`, `local_rank`, `world_size` and `rank_pid` (a contract: the fleet view
groups one job's ranks across nodes by `run_id`). An unknown
value (None in the snapshot) is no sample at all, never 0. The metric list is in docs/prometheus.md.
"""

from __future__ import annotations

import socket
from typing import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from gputop_dl import __version__
from gputop_dl.schemas import metrics as m
from gputop_dl.analyse.verdict import TITLES
from gputop_dl.snapshot import LIVE_STATUSES, GpuSample, JobSample, Snapshot

ENDED = ("done", "failed", "stopped")  # job statuses whose series are dropped

GPU_LABELS = m.GPU_LABELS
JOB_LABELS = m.JOB_LABELS
RANK_LABELS = m.RANK_LABELS

# (metric suffix, help, GpuSample attribute, scale)
_GPU_GAUGES = (
    (m.GPU_UTILIZATION, "GPU busy (kernel running) over the last sample period, 0..1",
     "util", 1.0),
    (m.GPU_MEMORY_UTILIZATION, "GPU memory controller busy, 0..1", "mem_util", 1.0),
    (m.GPU_MEMORY_USED, "GPU memory in use", "mem_used", 1.0),
    (m.GPU_MEMORY_TOTAL, "GPU memory in total", "mem_total", 1.0),
    (m.GPU_TEMPERATURE, "GPU core temperature", "temp_c", 1.0),
    (m.GPU_POWER, "GPU board power draw", "power_w", 1.0),
    (m.GPU_POWER_LIMIT, "GPU enforced power limit", "power_limit_w", 1.0),
    (m.GPU_SM_CLOCK, "GPU SM clock", "sm_clock_mhz", 1e6),
    (m.GPU_PCIE_TX, "GPU PCIe transmit throughput (NVML's cumulative byte counters over the "
     "last interval; else its 20 ms point sample)", "pcie_tx_bytes_per_s", 1.0),
    (m.GPU_PCIE_RX, "GPU PCIe receive throughput (as the transmit one)", "pcie_rx_bytes_per_s", 1.0),
    (m.GPU_SM_CLOCK_MAX, "GPU SM clock's maximum", "sm_clock_max_mhz", 1e6),
    (m.GPU_PCIE_LINK_GEN, "GPU PCIe link generation now (idle GPUs drop to 1)", "pcie_link_gen", 1.0),
    (m.GPU_PCIE_LINK_GEN_MAX, "GPU PCIe link generation at most (this GPU in this slot)",
     "pcie_link_gen_max", 1.0),
    (m.GPU_PCIE_LINK_WIDTH, "GPU PCIe link width now (lanes)", "pcie_link_width", 1.0),
    (m.GPU_PCIE_LINK_WIDTH_MAX, "GPU PCIe link width at most (lanes)", "pcie_link_width_max", 1.0),
)

# (metric suffix, help, HostSample attribute)
_HOST_GAUGES = (
    (m.HOST_CPUS, "Logical CPUs this process may use (affinity and cgroup quota)", "cpus"),
    (m.HOST_CPU_BUSY, "Host CPU busy over the allowed CPUs, 0..1", "cpu_busy"),
    (m.HOST_CPU_PRESSURE_SOME, "CPU pressure (PSI) 'some' avg10, 0..1",
     "cpu_pressure_some10"),
    (m.HOST_IO_PRESSURE_SOME, "I/O pressure (PSI) 'some' avg10, 0..1", "io_pressure_some10"),
    (m.HOST_MEMORY_PRESSURE_SOME, "Memory pressure (PSI) 'some' avg10, 0..1",
     "memory_pressure_some10"),
    (m.HOST_MEMORY_PRESSURE_FULL, "Memory pressure (PSI) 'full' avg10, 0..1",
     "memory_pressure_full10"),
    (m.HOST_MEMORY_REFAULTS, "Bytes per second of file pages read again after eviction from "
     "the page cache (/proc/vmstat workingset_refault_file)", "memory_refault_bytes_per_s"),
    (m.HOST_CGROUP_THROTTLED, "Share of the interval the cgroup was CPU-throttled, 0..1",
     "cgroup_throttled_frac"),
    (m.HOST_LOAD1, "Load average over 1 minute", "load1"),
    (m.HOST_LOAD5, "Load average over 5 minutes", "load5"),
    (m.HOST_LOAD15, "Load average over 15 minutes", "load15"),
    (m.HOST_MEMORY_USED, "Host memory in use", "mem_used"),
    (m.HOST_MEMORY_TOTAL, "Host memory in total", "mem_total"),
    (m.HOST_CPU_POWER, "The CPU packages' power over the last interval (RAPL; root only on "
     "Linux 5.10 and later)", "cpu_power_w"),
)

# (metric suffix, help, JobSample attribute)
_JOB_GAUGES = (
    (m.JOB_CPU_CORES, "CPU cores the job (trainer and its workers) used", "cpu_cores"),
    (m.JOB_RSS, "Resident memory of the job's processes", "rss"),
    (m.JOB_THREADS, "Threads of the job's processes", "threads"),
    (m.JOB_GPU_MEMORY, "GPU memory of the job's processes (NVML, summed over GPUs)",
     "gpu_mem"),
    (m.JOB_GPU_SM, "SM utilisation of the job's processes (NVML), 0..1", "gpu_sm"),
    (m.JOB_STEP, "Recent training step time", "step_time_s"),
    (m.JOB_SOLO_STEP, "Step time measured alone (solo baseline)", "solo_step_time_s"),
    (m.JOB_SAMPLES_PER_SECOND, "Training throughput", "samples_per_s"),
    (m.JOB_EPOCH, "Current epoch (1-based)", "epoch"),
    (m.JOB_EPOCHS, "Epochs planned", "epochs"),
    (m.JOB_STEP_IN_EPOCH, "Step within the current epoch", "step"),
    (m.JOB_ETA, "Estimated time to the end of training", "eta_s"),
    (m.JOB_SLOWDOWN, "Step time together / step time alone (1 = no slowdown)", "slowdown"),
    (m.JOB_IO_READ, "Bytes per second the job's processes read from storage (/proc/PID/io "
     "read_bytes; page-cache hits not counted)", "io_read_bytes_per_s"),
    (m.JOB_IO_WAIT, "Share of the live verdict's window the job waited on I/O (a process in D "
     "state, none running), 0..1", "io_wait_fraction"),
    (m.JOB_MAJOR_FAULTS, "Major page faults per second of the job's processes",
     "major_faults_per_s"),
    (m.JOB_MEMORY_REFAULTS, "Bytes per second of page-cache refaults in the job's cgroup "
     "(memory.stat workingset_refault_file)", "mem_refault_bytes_per_s"),
    (m.JOB_MEMORY_WAIT, "Share of the live verdict's window the job waited on re-reads of "
     "pages the page cache had evicted, 0..1", "memory_wait_fraction"),
    (m.JOB_POWER, "The job's GPU power over the last seconds (its share of a GPU it shares)",
     "energy_w"),
    (m.JOB_ENERGY_PER_STEP, "The job's GPU joules per step (its power x its mean step time)",
     "energy_per_step_j"),
    (m.JOB_ENERGY_PER_EPOCH, "The job's GPU joules per epoch", "energy_per_epoch_j"),
    (m.JOB_SAMPLES_PER_JOULE, "Training samples per joule of the job's GPUs",
     "samples_per_joule"),
    (m.JOB_ENERGY_ESTIMATE, "1 where the job's energy splits a GPU it shares by time share "
     "(an estimate), 0 where its GPUs are its own", "energy_estimate"),
)


# CPU wait: per job, the share of its threads' runnable time spent
# waiting for a CPU, for all its threads and for its trainer and loader-worker processes apart,
# and the share of the interval its cgroup's CPU quota throttled it
CPU_WAIT_THREADS = (("all", "cpu_wait_fraction"), ("trainer", "cpu_wait_trainer"),
                    ("workers", "cpu_wait_workers"))


def _cpu_wait(jobs: list[JobSample], keys: list[list[str]]) -> Iterator[Metric]:
    wait = _gauge("job_cpu_wait_ratio", "Share of the job's threads' runnable time spent waiting "
                  "for a CPU (run-queue delay, /proc schedstat), 0..1; threads: all, trainer "
                  "(its trainer or rank processes) or workers (its data-loader workers)",
                  JOB_LABELS + ["threads"])
    thr = _gauge("job_cpu_throttled_ratio", "Share of the interval the job's cgroup was "
                 "throttled by its CPU quota (cpu.stat), 0..1", JOB_LABELS)
    for j, k in zip(jobs, keys):
        for threads, attr in CPU_WAIT_THREADS:
            v = getattr(j, attr, None)
            if v is not None:
                wait.add_metric(k + [threads], float(v))
        throttled = getattr(j, "cpu_throttled_fraction", None)
        if throttled is not None:
            thr.add_metric(k, float(throttled))
    yield wait
    yield thr


def _gpu_energy(gpus: tuple[GpuSample, ...], keys: dict[int, list[str]]) -> Iterator[Metric]:
    """Each GPU's joules since the exporter first read it (a counter, created then), and how."""
    total = CounterMetricFamily(m.full(m.GPU_ENERGY), "GPU energy since gputop-dl first read "
                                "the GPU: NVML's energy counter, else power x time "
                                "(gpu_energy_source_info says which)", labels=GPU_LABELS)
    how = InfoMetricFamily(m.full(m.GPU_ENERGY_SOURCE), "How a GPU's energy is read: source "
                           "counter | power-integral; scope gpu | module (a Grace superchip's "
                           "power includes its CPU and memory)",
                           labels=GPU_LABELS + [m.SOURCE, m.SCOPE])
    for g in gpus:
        if g.energy_j is not None:
            total.add_metric(keys[g.index], g.energy_j, created=g.energy_since)
            how.add_metric(keys[g.index] + [g.energy_source or "", g.energy_scope or ""], {})
    yield total
    yield how


def _job_energy(jobs: list[JobSample], keys: list[list[str]]) -> Iterator[Metric]:
    """Each job's GPU joules since gputop-dl saw it (a counter)."""
    total = CounterMetricFamily(m.full(m.JOB_ENERGY), "The job's GPU energy since gputop-dl "
                                "saw it: its GPUs' joules, a GPU it shares split by time share "
                                "(job_energy_estimate 1)", labels=JOB_LABELS)
    for j, k in zip(jobs, keys):
        if j.energy_j is not None:
            total.add_metric(k, j.energy_j)
    yield total


def _stuck(jobs: list[JobSample], keys: list[list[str]]) -> Iterator[Metric]:
    """Whether each live job is stuck (docs/stuck.md), where, and the seconds since it last
    made progress."""
    stuck = _gauge(m.JOB_STUCK, "1 while the job is stuck: no progress past its threshold, its "
                   "threads asleep, its main thread in one place; 0 while live and not",
                   JOB_LABELS)
    where = InfoMetricFamily(m.full(m.JOB_STUCK_WHERE), "Where a stuck job's main thread "
                             "waits: dataloader | collective | lock | cuda-sync | sleep | io | "
                             "unknown, and its own frame", labels=JOB_LABELS + [m.WHERE, m.FRAME])
    age = _gauge(m.JOB_SINCE_PROGRESS, "Seconds since the job's last progress (steps, loop "
                 "counter or loader batches)", JOB_LABELS)
    for j, k in zip(jobs, keys):
        if j.status in LIVE_STATUSES:
            stuck.add_metric(k, 1.0 if j.stuck is not None else 0.0)
        if j.stuck is not None:
            where.add_metric(k + [j.stuck.where, j.stuck.frame or ""], {})
        if j.progress_age_s is not None:
            age.add_metric(k, j.progress_age_s)
    yield stuck
    yield where
    yield age


def _text(v: object) -> str:
    """A label value: "" for unknown (None)."""
    return "" if v is None else str(v)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(m.full(name), doc, labels=labels)


class SnapshotCollector(Collector):
    """A custom collector over the latest snapshot: `feed` it from the engine's subscribers,
    the registry calls `collect` at scrape time (in the HTTP server's thread)."""

    def __init__(self, hostname: str | None = None, reasons: Iterable[str] = (),
                 mode: str = "monitor"):
        self.hostname = hostname or socket.gethostname()
        self.reasons = tuple(reasons)  # throttle reason labels reported as 0 when not active
        self.mode = mode
        self.snapshot: Snapshot | None = None

    def feed(self, snap: Snapshot) -> None:
        self.snapshot = snap  # the engine thread; a reference swap, read whole by `collect`

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        info = InfoMetricFamily(m.full(m.EXPORTER), "gputop-dl's version and mode",
                                labels=[m.HOSTNAME, m.VERSION, m.MODE])
        info.add_metric([self.hostname, __version__, self.mode], {})
        yield info
        if snap is None:
            return
        ts = _gauge(m.LAST_SAMPLE_TIMESTAMP, "Unix time of the latest sample", [m.HOSTNAME])
        ts.add_metric([self.hostname], snap.time)
        yield ts
        st = InfoMetricFamily(m.full(m.GPU_STATUS), "NVML status ('ok' or why there are "
                              "no GPU metrics)", labels=[m.HOSTNAME, m.STATUS])
        st.add_metric([self.hostname, snap.gpu_status], {})
        yield st
        yield from self._gpus(snap.gpus)
        yield from self._host(snap)
        yield from self._jobs([j for j in snap.jobs if j.status not in ENDED])
        yield from self._verdict(snap)
        yield from self._live_slowdown([j for j in snap.jobs if j.status not in ENDED])

    # --- families --------------------------------------------------------------------------
    def _gpus(self, gpus: tuple[GpuSample, ...]) -> Iterator[Metric]:
        h = self.hostname
        keys = {g.index: [h, str(g.index), g.uuid or "", g.name or ""] for g in gpus}
        up = _gauge(m.GPU_UP, "1 if NVML answered for this GPU this tick, 0 if it is lost or "
                    "errored", GPU_LABELS)
        for g in gpus:
            up.add_metric(keys[g.index], 0.0 if g.error else 1.0)
        yield up
        for suffix, doc, attr, scale in _GPU_GAUGES:
            fam = _gauge(suffix, doc, GPU_LABELS)
            for g in gpus:
                v = getattr(g, attr)
                if v is not None:
                    fam.add_metric(keys[g.index], float(v) * scale)
            yield fam
        reasons = _gauge(m.GPU_THROTTLE_REASON, "1 while this clock event (throttle) reason "
                         "is active", GPU_LABELS + [m.REASON])
        for g in gpus:
            if g.error:
                continue
            for r in dict.fromkeys(self.reasons + g.throttle_reasons):
                reasons.add_metric(keys[g.index] + [r], 1.0 if r in g.throttle_reasons else 0.0)
        yield reasons
        held = _gauge(m.GPU_THROTTLED, "Share of the last counter interval (a few seconds) the "
                      "GPU's clocks were held down by this reason, 0..1 (NVML's cumulative "
                      "violation counters)", GPU_LABELS + [m.REASON])
        for g in gpus:
            if g.error:
                continue
            for r, v in g.throttle:
                if v is not None:
                    held.add_metric(keys[g.index] + [r], float(v))
        yield held
        yield from _gpu_energy(gpus, keys)

    def _host(self, snap: Snapshot) -> Iterator[Metric]:
        host = snap.host
        if host is None:
            return
        for suffix, doc, attr in _HOST_GAUGES:
            v = getattr(host, attr)
            fam = _gauge(suffix, doc, [m.HOSTNAME])
            if v is not None:
                fam.add_metric([self.hostname], float(v))
            yield fam
        cores = _gauge(m.HOST_CPU_CORE_BUSY, "Busy per logical CPU, 0..1",
                       [m.HOSTNAME, m.CPU])
        for i, v in enumerate(host.per_cpu):
            cores.add_metric([self.hostname, str(i)], float(v))
        yield cores
        energy = CounterMetricFamily(m.full(m.HOST_CPU_ENERGY), "The CPU packages' energy "
                                     "since the exporter first read it (RAPL), host energy not "
                                     "split per job", labels=[m.HOSTNAME])
        if host.cpu_energy_j is not None:
            energy.add_metric([self.hostname], host.cpu_energy_j)
        yield energy

    def _jobs(self, jobs: list[JobSample]) -> Iterator[Metric]:
        keys = [[self.hostname, j.name, _text(j.pid)] for j in jobs]
        info = InfoMetricFamily(m.full(m.JOB), "A training job: launched by gputop-dl or "
                                "found running; its status, phase, device and model",
                                labels=JOB_LABELS)
        for j, k in zip(jobs, keys):
            d = j.distributed
            info.add_metric(k, {m.LAUNCHED: "true" if j.launched else "false",
                                m.STATUS: j.status, m.PHASE: j.phase or "",
                                m.DEVICE: j.device or "", m.MODEL: j.model or "",
                                m.RUN_ID: _text(d and d.run_id),
                                m.WORLD_SIZE: _text(d and d.world_size),
                                **_identity_labels(j)})
        yield info
        ranks = InfoMetricFamily(m.full(m.JOB_RANK), "A rank process of a distributed job on "
                                 "this node (from its environment): its global and local rank "
                                 "and its own pid (rank_pid)", labels=RANK_LABELS)
        for j, k in zip(jobs, keys):
            d = j.distributed
            if d is None:
                continue
            for r in d.ranks:
                ranks.add_metric(k + [_text(d.run_id), str(r.rank), _text(r.local_rank),
                                      _text(d.world_size), str(r.pid)], {})
        yield ranks
        cpu = _gauge(m.JOB_RANK_CPU_CORES, "CPU cores one rank of a distributed job used, its "
                     "data-loader workers included", JOB_LABELS + [m.RANK])
        for j, k in zip(jobs, keys):
            for rank, cores in j.rank_cpu_cores:
                cpu.add_metric(k + [str(rank)], float(cores))
        yield cpu
        for suffix, doc, attr in _JOB_GAUGES:
            fam = _gauge(suffix, doc, JOB_LABELS)
            for j, k in zip(jobs, keys):
                v = getattr(j, attr)
                if v is not None:
                    fam.add_metric(k, float(v))
            yield fam
        stall = _gauge(m.JOB_DATA_STALL, "Share of step time spent waiting for data, "
                       "0..1 (source: trainer, hook or py-spy)", JOB_LABELS + [m.SOURCE])
        for j, k in zip(jobs, keys):
            if j.stall_fraction is not None:
                stall.add_metric(k + [j.stall_source or ""], float(j.stall_fraction))
        yield stall
        yield from self._phases(jobs, keys)
        yield from _cpu_wait(jobs, keys)
        yield from _job_energy(jobs, keys)
        yield from _stuck(jobs, keys)

    # --- step phases (docs/phases.md) ----------------------------------------------
    def _phases(self, jobs: list[JobSample], keys: list[list[str]]) -> Iterator[Metric]:
        ph = _gauge("job_phase_seconds", "Mean seconds per recent step in one phase (data, h2d, "
                    "forward, backward, optimizer, other); a phase not seen has no series",
                    JOB_LABELS + ["phase"])
        rk = _gauge("job_rank_phase_seconds", "Mean seconds per recent step in one phase, per "
                    "rank of a distributed job", JOB_LABELS + ["rank", "phase"])
        late = _gauge("job_straggler_excess_seconds", "The late rank of a distributed job: its "
                      "own work (data + h2d + forward) over the other ranks' median; the "
                      "phase that makes it late in `cause`", JOB_LABELS + ["rank", "cause"])
        for j, k in zip(jobs, keys):
            for name, v in (j.phases.parts().items() if j.phases else ()):
                if v is not None:
                    ph.add_metric(k + [name], float(v))
            for r in j.ranks:
                for name, v in (r.phases.parts().items() if r.phases else ()):
                    if v is not None:
                        rk.add_metric(k + [str(r.rank), name], float(v))
            if j.straggler is not None:
                late.add_metric(k + [str(j.straggler.rank), j.straggler.cause],
                                float(j.straggler.excess_s))
        yield ph
        yield rk
        yield late

    def _verdict(self, snap: Snapshot) -> Iterator[Metric]:
        v = snap.verdict
        kinds = _gauge(m.VERDICT, "The verdict on the jobs running together: 1 for the current "
                       "kind, 0 for the others (absent before any verdict)",
                       [m.HOSTNAME, m.SESSION, m.KIND])
        conf = _gauge(m.VERDICT_CONFIDENCE, "Confidence of the current verdict, 0..1",
                      [m.HOSTNAME, m.SESSION, m.KIND])
        out = _gauge(m.OUTSIDE_LOAD_CORES, "Cores the busiest processes outside the judged "
                     "jobs used over the live verdict's window (read while a job waits for a "
                     "CPU; absent when not read)", [m.HOSTNAME])
        if v and v.get("kind"):
            session = snap.session_id or ""
            for kind in dict.fromkeys((*TITLES, v["kind"])):
                kinds.add_metric([self.hostname, session, kind], 1.0 if kind == v["kind"] else 0.0)
            if v.get("confidence") is not None:
                conf.add_metric([self.hostname, session, v["kind"]], float(v["confidence"]))
            cores = ((v.get("evidence") or {}).get("outside_load") or {}).get("cores")
            if cores is not None:
                out.add_metric([self.hostname], float(cores))
        yield kinds
        yield conf
        yield out

    # --- live verdict: each job's one slowdown, with where it comes from ---------
    def _live_slowdown(self, jobs: list[JobSample]) -> Iterator[Metric]:
        fam = _gauge(m.JOB_SLOWDOWN_BY_SOURCE, "The job's slowdown (1 = as fast as alone) with "
                     "its source: measured (solo baseline), probe (measured alone in the "
                     "co-run), estimated (live, from its CPU and GPU waits; nothing paused) or "
                     "own pace (live, its loader's work rate against while it ran alone)",
                     JOB_LABELS + [m.SOURCE])
        conf = _gauge(m.JOB_SLOWDOWN_CONFIDENCE, "Confidence of an estimated slowdown, 0..1",
                      JOB_LABELS)
        bound = _gauge(m.JOB_SLOWDOWN_AT_LEAST, "Where the job has no slowdown: its own pace "
                       "is at least this many times slower than alone (its steps too long for "
                       "py-spy to count, or its loop counter still), with its source",
                       JOB_LABELS + [m.SOURCE])
        out = _gauge(m.JOB_OUTSIDE_SLOWDOWN, "How much faster the job would run without the "
                     "load from processes outside the judged jobs (live estimate, 1 = not "
                     "slowed by it)", JOB_LABELS)
        for j in jobs:
            k = [self.hostname, j.name, _text(j.pid)]
            if j.slowdown is not None:
                fam.add_metric(k + [j.slowdown_source or "measured"], float(j.slowdown))
            elif j.slowdown_at_least is not None:
                bound.add_metric(k + [j.slowdown_source or "own pace"], float(j.slowdown_at_least))
            if j.slowdown_confidence is not None:
                conf.add_metric(k, float(j.slowdown_confidence))
            if j.outside_slowdown is not None:
                out.add_metric(k, float(j.outside_slowdown))
        yield fam
        yield conf
        yield bound
        yield out


# identity: who runs a job, as labels of gputop_dl_job_info only (one series per
# job, so no other series gains a label set per user or Slurm job)
def _identity_labels(j: JobSample) -> dict[str, str]:
    """`user` and `slurm_job_id` ("" where unknown or not under Slurm)."""
    return {"user": j.user or "", "slurm_job_id": j.slurm.job_id if j.slurm else ""}
