"""The Prometheus exporter: the latest `Snapshot` rendered as metrics at scrape time, over HTTP.

`gputop-dl serve` (and `launch`/the monitor with `--metrics ADDR`) subscribe a
`SnapshotCollector` to their engine: each tick hands it the new snapshot (one reference
assignment, no work), and a scrape renders whatever snapshot is the latest. A job that ended
is not in it, so its label sets are simply gone at the next scrape; nothing is unregistered.
The exposition format is `prometheus_client`'s, never written here.

Names: every metric starts with `gputop_dl_`, in base units (bytes, seconds, watts, hertz,
ratios 0..1). Labels: dcgm-exporter's `Hostname`, `gpu`, `UUID`, `modelName` on GPU series, so
a PromQL join with an existing dcgm-exporter works; `job_name` and `pid` on job series (not
`job`: Prometheus owns that target label and would rename ours to `exported_job`); a
distributed job's ranks on this node are `gputop_dl_job_rank_info` series with the job's labels
plus `run_id`, `rank`, `local_rank`, `world_size` and `rank_pid` (a contract: the fleet view
groups one job's ranks across nodes by `run_id`). An unknown
value (None in the snapshot) is no sample at all, never 0. The metric list is in README.md.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Iterable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from gputop_dl import __version__
from gputop_dl.analyse.verdict import TITLES
from gputop_dl.errors import UsageError
from gputop_dl.snapshot import GpuSample, JobSample, Snapshot

DEFAULT_PORT = 9402  # not dcgm-exporter's 9400, nvitop-exporter's 5050 or Ray's 8265
DEFAULT_HOST = "127.0.0.1"
ENDED = ("done", "failed", "stopped")  # job statuses whose series are dropped

GPU_LABELS = ["Hostname", "gpu", "UUID", "modelName"]
JOB_LABELS = ["Hostname", "job_name", "pid"]
RANK_LABELS = JOB_LABELS + ["run_id", "rank", "local_rank", "world_size", "rank_pid"]

# (metric suffix, help, GpuSample attribute, scale)
_GPU_GAUGES = (
    ("gpu_utilization_ratio", "GPU busy (kernel running) over the last sample period, 0..1",
     "util", 1.0),
    ("gpu_memory_utilization_ratio", "GPU memory controller busy, 0..1", "mem_util", 1.0),
    ("gpu_memory_used_bytes", "GPU memory in use", "mem_used", 1.0),
    ("gpu_memory_total_bytes", "GPU memory in total", "mem_total", 1.0),
    ("gpu_temperature_celsius", "GPU core temperature", "temp_c", 1.0),
    ("gpu_power_watts", "GPU board power draw", "power_w", 1.0),
    ("gpu_power_limit_watts", "GPU enforced power limit", "power_limit_w", 1.0),
    ("gpu_sm_clock_hertz", "GPU SM clock", "sm_clock_mhz", 1e6),
    ("gpu_pcie_tx_bytes_per_second", "GPU PCIe transmit throughput", "pcie_tx_kbs", 1024.0),
    ("gpu_pcie_rx_bytes_per_second", "GPU PCIe receive throughput", "pcie_rx_kbs", 1024.0),
)

# (metric suffix, help, HostSample attribute)
_HOST_GAUGES = (
    ("host_cpus", "Logical CPUs this process may use (affinity and cgroup quota)", "cpus"),
    ("host_cpu_busy_ratio", "Host CPU busy over the allowed CPUs, 0..1", "cpu_busy"),
    ("host_cpu_pressure_some_ratio", "CPU pressure (PSI) 'some' avg10, 0..1",
     "cpu_pressure_some10"),
    ("host_cgroup_throttled_ratio", "Share of the interval the cgroup was CPU-throttled, 0..1",
     "cgroup_throttled_frac"),
    ("host_load1", "Load average over 1 minute", "load1"),
    ("host_load5", "Load average over 5 minutes", "load5"),
    ("host_load15", "Load average over 15 minutes", "load15"),
    ("host_memory_used_bytes", "Host memory in use", "mem_used"),
    ("host_memory_total_bytes", "Host memory in total", "mem_total"),
)

# (metric suffix, help, JobSample attribute)
_JOB_GAUGES = (
    ("job_cpu_cores", "CPU cores the job (trainer and its workers) used", "cpu_cores"),
    ("job_rss_bytes", "Resident memory of the job's processes", "rss"),
    ("job_threads", "Threads of the job's processes", "threads"),
    ("job_gpu_memory_bytes", "GPU memory of the job's processes (NVML, summed over GPUs)",
     "gpu_mem"),
    ("job_gpu_sm_ratio", "SM utilisation of the job's processes (NVML), 0..1", "gpu_sm"),
    ("job_step_seconds", "Recent training step time", "step_time_s"),
    ("job_solo_step_seconds", "Step time measured alone (solo baseline)", "solo_step_time_s"),
    ("job_samples_per_second", "Training throughput", "samples_per_s"),
    ("job_epoch", "Current epoch (1-based)", "epoch"),
    ("job_epochs", "Epochs planned", "epochs"),
    ("job_step", "Step within the current epoch", "step"),
    ("job_eta_seconds", "Estimated time to the end of training", "eta_s"),
    ("job_slowdown", "Step time together / step time alone (1 = no slowdown)", "slowdown"),
)


# CPU wait (issue 21, branch cpuwait): per job, the share of its threads' runnable time spent
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
        if getattr(j, "cpu_throttled_fraction", None) is not None:
            thr.add_metric(k, float(j.cpu_throttled_fraction))
    yield wait
    yield thr


def parse_listen(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT`, `PORT`, `HOST` or `[IPv6]:PORT` -> (host, port); raises UsageError.
    HOST is an IP address or `localhost`; an empty host means 127.0.0.1; port 0 = any free."""
    t = text.strip()
    host, port_s = t, ""
    if t.startswith("["):
        end = t.find("]")
        host, rest = (t[1:end], t[end + 1:]) if end > 0 else (t, "?")
        if rest and not rest.startswith(":"):
            raise UsageError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:{default_port}")
        port_s = rest[1:]
    elif t.count(":") == 1:
        host, port_s = t.split(":")
    elif t.isdigit():
        host, port_s = "", t
    host = host or DEFAULT_HOST
    if port_s:
        if not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
            raise UsageError(f"--listen {text!r}: port {port_s!r} is not a number from 0 to 65535")
        port = int(port_s)
    else:
        port = default_port
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise UsageError(f"--listen {text!r}: {host!r} is not an IP address (e.g. 127.0.0.1, "
                             f"0.0.0.0, ::1); expected HOST:PORT") from None
    return host, port


def _text(v) -> str:
    """A label value: "" for unknown (None)."""
    return "" if v is None else str(v)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily("gputop_dl_" + name, doc, labels=labels)


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
        info = InfoMetricFamily("gputop_dl_exporter", "gputop-dl's version and mode",
                                labels=["Hostname", "version", "mode"])
        info.add_metric([self.hostname, __version__, self.mode], {})
        yield info
        if snap is None:
            return
        ts = _gauge("last_sample_timestamp_seconds", "Unix time of the latest sample", ["Hostname"])
        ts.add_metric([self.hostname], snap.time)
        yield ts
        st = InfoMetricFamily("gputop_dl_gpu_status", "NVML status ('ok' or why there are "
                              "no GPU metrics)", labels=["Hostname", "status"])
        st.add_metric([self.hostname, snap.gpu_status], {})
        yield st
        yield from self._gpus(snap.gpus)
        yield from self._host(snap)
        yield from self._jobs([j for j in snap.jobs if j.status not in ENDED])
        yield from self._verdict(snap)

    # --- families --------------------------------------------------------------------------
    def _gpus(self, gpus: tuple[GpuSample, ...]) -> Iterator[Metric]:
        h = self.hostname
        keys = {g.index: [h, str(g.index), g.uuid or "", g.name or ""] for g in gpus}
        up = _gauge("gpu_up", "1 if NVML answered for this GPU this tick, 0 if it is lost or "
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
        reasons = _gauge("gpu_throttle_reason", "1 while this clock event (throttle) reason "
                         "is active", GPU_LABELS + ["reason"])
        for g in gpus:
            if g.error:
                continue
            for r in dict.fromkeys(self.reasons + g.throttle_reasons):
                reasons.add_metric(keys[g.index] + [r], 1.0 if r in g.throttle_reasons else 0.0)
        yield reasons

    def _host(self, snap: Snapshot) -> Iterator[Metric]:
        host = snap.host
        if host is None:
            return
        for suffix, doc, attr in _HOST_GAUGES:
            v = getattr(host, attr)
            fam = _gauge(suffix, doc, ["Hostname"])
            if v is not None:
                fam.add_metric([self.hostname], float(v))
            yield fam
        cores = _gauge("host_cpu_core_busy_ratio", "Busy per logical CPU, 0..1",
                       ["Hostname", "cpu"])
        for i, v in enumerate(host.per_cpu):
            cores.add_metric([self.hostname, str(i)], float(v))
        yield cores

    def _jobs(self, jobs: list[JobSample]) -> Iterator[Metric]:
        keys = [[self.hostname, j.name, _text(j.pid)] for j in jobs]
        info = InfoMetricFamily("gputop_dl_job", "A training job: launched by gputop-dl or "
                                "found running; its status, phase, device and model",
                                labels=JOB_LABELS)
        for j, k in zip(jobs, keys):
            d = j.distributed
            info.add_metric(k, {"launched": "true" if j.launched else "false",
                                "status": j.status, "phase": j.phase or "",
                                "device": j.device or "", "model": j.model or "",
                                "run_id": _text(d and d.run_id),
                                "world_size": _text(d and d.world_size)})
        yield info
        ranks = InfoMetricFamily("gputop_dl_job_rank", "A rank process of a distributed job on "
                                 "this node (from its environment): its global and local rank "
                                 "and its own pid (rank_pid)", labels=RANK_LABELS)
        for j, k in zip(jobs, keys):
            d = j.distributed
            for r in d.ranks if d else ():
                ranks.add_metric(k + [_text(d.run_id), str(r.rank), _text(r.local_rank),
                                      _text(d.world_size), str(r.pid)], {})
        yield ranks
        cpu = _gauge("job_rank_cpu_cores", "CPU cores one rank of a distributed job used, its "
                     "data-loader workers included", JOB_LABELS + ["rank"])
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
        stall = _gauge("job_data_stall_ratio", "Share of step time spent waiting for data, "
                       "0..1 (source: trainer, hook or py-spy)", JOB_LABELS + ["source"])
        for j, k in zip(jobs, keys):
            if j.stall_fraction is not None:
                stall.add_metric(k + [j.stall_source or ""], float(j.stall_fraction))
        yield stall
        yield from _cpu_wait(jobs, keys)

    def _verdict(self, snap: Snapshot) -> Iterator[Metric]:
        v = snap.verdict
        kinds = _gauge("verdict", "The verdict on the jobs running together: 1 for the current "
                       "kind, 0 for the others (absent before any verdict)",
                       ["Hostname", "session", "kind"])
        conf = _gauge("verdict_confidence", "Confidence of the current verdict, 0..1",
                      ["Hostname", "session", "kind"])
        if v and v.get("kind"):
            session = snap.session_id or ""
            for kind in dict.fromkeys((*TITLES, v["kind"])):
                kinds.add_metric([self.hostname, session, kind], 1.0 if kind == v["kind"] else 0.0)
            if v.get("confidence") is not None:
                conf.add_metric([self.hostname, session, v["kind"]], float(v["confidence"]))
        yield kinds
        yield conf


class MetricsServer:
    """`/metrics` over HTTP for one collector, in a daemon thread (prometheus_client's WSGI
    server). `start` raises UsageError for an address that cannot be bound."""

    def __init__(self, collector: SnapshotCollector, listen: str):
        self.collector = collector
        self.host, self.port = parse_listen(listen)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.registry.register(ProcessCollector(registry=None))  # the exporter's own CPU, RSS
        self._httpd = None
        self._thread: threading.Thread | None = None

    def start(self) -> "MetricsServer":
        try:
            self._httpd, self._thread = start_http_server(self.port, self.host, self.registry)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise UsageError(f"cannot serve metrics on {self.host}:{self.port}: {why}") from None
        self.port = self._httpd.server_address[1]  # the real one when port 0 was asked for
        return self

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
