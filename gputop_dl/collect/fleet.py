"""Several nodes at once: each node's gputop-dl `/metrics` (serve, or --metrics) read into a `Node`.

No home-made protocol: a node is whatever `gputop-dl serve` (or `launch`/the monitor with
`--metrics`) exposes in the Prometheus text format, parsed with prometheus_client's own
parser. A node that does not answer, answers garbage or is not a gputop-dl exporter is a
`Node` with `ok=False` and the reason; the others are read all the same (in parallel, each
with a timeout).
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from gputop_dl.errors import UsageError

DEFAULT_PORT = 9402  # = present.prometheus.DEFAULT_PORT (collect may not import present)


@dataclass(frozen=True)
class NodeJob:
    name: str
    pid: int | None
    status: str | None = None
    phase: str | None = None
    cpu_cores: float | None = None
    stall_fraction: float | None = None
    step_time_s: float | None = None
    slowdown: float | None = None
    gpu_mem: float | None = None


@dataclass(frozen=True)
class Node:
    address: str
    ok: bool
    error: str | None = None
    hostname: str | None = None
    mode: str | None = None
    age_s: float | None = None  # seconds since the node's latest sample
    cpus: float | None = None
    cpu_busy: float | None = None
    load1: float | None = None
    gpus: list[dict] = field(default_factory=list)  # index, util, mem_used, mem_total
    jobs: list[NodeJob] = field(default_factory=list)
    verdict: str | None = None
    confidence: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


def parse_nodes(text: str) -> list[str]:
    """`host1:9402,host2` -> ["host1:9402", "host2:9402"]; a bad entry is a UsageError."""
    out = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":") if ":" in item else (item, "", "")
        if not sep:
            host, port = item, str(DEFAULT_PORT)
        if not host or any(c in host for c in "/ ?#@") or not port.isdigit() \
                or not 0 < int(port) < 65536:
            raise UsageError(f"--nodes: {item!r} is not HOST:PORT (e.g. gpu-node-1:{DEFAULT_PORT})")
        out.append(f"{host}:{int(port)}")
    if not out:
        raise UsageError("--nodes: expected a comma-separated list of HOST:PORT")
    return out


def parse_node(address: str, text: str, now: float | None = None) -> Node:
    """One node's exposition text -> Node (ok=False when it is not a gputop-dl exporter)."""
    try:
        samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    except Exception as exc:  # the parser raises ValueError and friends on garbage
        return Node(address, False, f"not Prometheus text ({type(exc).__name__}: {exc})"[:200])
    by: dict[str, list] = {}
    for s in samples:
        by.setdefault(s.name, []).append(s)
    exporter = by.get("gputop_dl_exporter_info")
    if not exporter:
        return Node(address, False, "not a gputop-dl exporter (no gputop_dl_exporter_info)")
    labels = exporter[0].labels

    def one(name: str) -> float | None:
        got = by.get(name)
        return float(got[0].value) if got else None

    gpus: dict[str, dict] = {}
    for name, key in (("gputop_dl_gpu_utilization_ratio", "util"),
                      ("gputop_dl_gpu_memory_used_bytes", "mem_used"),
                      ("gputop_dl_gpu_memory_total_bytes", "mem_total")):
        for s in by.get(name, ()):
            gpus.setdefault(s.labels.get("gpu", "?"), {"index": s.labels.get("gpu")})[key] = s.value
    jobs: dict[tuple, dict] = {}
    for s in by.get("gputop_dl_job_info", ()):
        k = (s.labels.get("job_name"), s.labels.get("pid"))
        jobs[k] = {"status": s.labels.get("status"), "phase": s.labels.get("phase") or None}
    for name, key in (("gputop_dl_job_cpu_cores", "cpu_cores"),
                      ("gputop_dl_job_data_stall_ratio", "stall_fraction"),
                      ("gputop_dl_job_step_seconds", "step_time_s"),
                      ("gputop_dl_job_slowdown", "slowdown"),
                      ("gputop_dl_job_gpu_memory_bytes", "gpu_mem")):
        for s in by.get(name, ()):
            jobs.setdefault((s.labels.get("job_name"), s.labels.get("pid")), {})[key] = s.value
    verdict = [s for s in by.get("gputop_dl_verdict", ()) if s.value == 1.0]
    ts = one("gputop_dl_last_sample_timestamp_seconds")
    return Node(
        address, True, hostname=labels.get("Hostname"), mode=labels.get("mode"),
        age_s=None if ts is None else max(0.0, (now or time.time()) - ts),
        cpus=one("gputop_dl_host_cpus"), cpu_busy=one("gputop_dl_host_cpu_busy_ratio"),
        load1=one("gputop_dl_host_load1"),
        gpus=sorted(gpus.values(), key=lambda g: int(g["index"]) if str(g["index"]).isdigit() else 0),
        jobs=[NodeJob(name=n, pid=int(p) if p and p.isdigit() else None, **v)
              for (n, p), v in sorted(jobs.items(), key=lambda kv: str(kv[0]))],
        verdict=verdict[0].labels.get("kind") if verdict else None,
        confidence=one("gputop_dl_verdict_confidence"))


def read_node(address: str, timeout: float = 2.0) -> Node:
    """GET http://ADDRESS/metrics and parse it; any failure is a Node with ok=False."""
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as r:
            text = r.read(8 << 20).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        why = getattr(exc, "reason", None) or exc
        return Node(address, False, f"unreachable ({why})"[:200])
    return parse_node(address, text)


def read_fleet(addresses: list[str], timeout: float = 2.0) -> list[Node]:
    """Every node at once, in the order given."""
    out: list[Node | None] = [None] * len(addresses)

    def one(i: int, a: str) -> None:
        out[i] = read_node(a, timeout)

    threads = [threading.Thread(target=one, args=(i, a), daemon=True)
               for i, a in enumerate(addresses)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 1)
    return [n if n is not None else Node(a, False, "no answer in time")
            for n, a in zip(out, addresses)]
