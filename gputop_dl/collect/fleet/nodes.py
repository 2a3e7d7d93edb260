"""Several nodes at once: each node's gputop-dl `/metrics` (serve, or --metrics), or a Prometheus
server's API, read into `Node` values (the node list, the scrape, the parse). The poller that
feeds the live fleet view from these reads is `collect/fleet/poll.py`.

No home-made protocol: a node is whatever `gputop-dl serve` (or `launch`/the monitor with
`--metrics`) exposes in the Prometheus text format, parsed with prometheus_client's own
parser, or the same series as a Prometheus server returns them (grouped by `instance`). Both
become (name, labels, value) samples and `build_node` maps them. A node that does not answer,
answers garbage or is not a gputop-dl exporter is a `Node` with `ok=False` and the reason; the
others are read all the same (in parallel, each with a timeout).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, TypedDict

from prometheus_client.parser import text_string_to_metric_families

from gputop_dl.schemas import metrics as m
from gputop_dl.errors import UsageError
from gputop_dl.tomlcheck import ConfigError, read_toml

DEFAULT_PORT = m.DEFAULT_PORT  # the exporter's default port, where --nodes looks


# (metric sample name, labels, value): both inputs become these; labels are free-form
Sample = tuple[str, dict[str, str], float]


class NodeRank(TypedDict):
    """One rank of a distributed job seen on a node (None: the label was not a number)."""

    rank: int | None
    local_rank: int | None
    rank_pid: int | None


class NodeGpu(TypedDict, total=False):
    """One GPU of a node: its index label and the figures the node exported."""

    index: str | None
    util: float
    mem_used: float
    mem_total: float


@dataclass(frozen=True)
class NodeJob:
    name: str | None  # None: the exporter's series had no job label
    pid: int | None
    status: str | None = None
    phase: str | None = None
    cpu_cores: float | None = None
    stall_fraction: float | None = None
    step_time_s: float | None = None
    slowdown: float | None = None
    # where there is no slowdown: its own pace is at least this many times slower than alone
    slowdown_at_least: float | None = None
    slowdown_source: str | None = None  # the exporter's `source` label of either: measured, ...
    outside_slowdown: float | None = None  # how much faster without the load outside the jobs
    gpu_mem: float | None = None
    run_id: str | None = None  # torchrun's rendezvous id; None: not distributed (or not exported)
    world_size: int | None = None
    ranks: list[NodeRank] = field(default_factory=list)  # the ranks seen on this node
    launched: bool | None = None  # started by that node's gputop-dl (else found running)


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
    gpus: list[NodeGpu] = field(default_factory=list)
    jobs: list[NodeJob] = field(default_factory=list)
    verdict: str | None = None
    confidence: float | None = None
    name: str | None = None  # the node list's name for it (TOML `name`), else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def label(self) -> str:
        return self.name or self.address


def _host_port(item: str) -> str | None:
    host, sep, port = item.rpartition(":") if ":" in item else (item, "", "")
    if not sep:
        host, port = item, str(DEFAULT_PORT)
    bracketed = host.startswith("[") and host.endswith("]")  # [::1]:9402
    if not host or any(c in host for c in "/ ?#@") or not _digits(port) \
            or (not bracketed and any(c in host for c in ":[]")) \
            or not 0 < int(port) < 65536:
        return None
    return f"{host}:{int(port)}"


def parse_nodes(text: str) -> list[str]:
    """`host1:9402,host2` -> ["host1:9402", "host2:9402"]; a bad entry is a UsageError."""
    out = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        addr = _host_port(item)
        if addr is None:
            raise UsageError(f"--nodes: {item!r} is not HOST:PORT (e.g. gpu-node-1:{DEFAULT_PORT})")
        out.append(addr)
    if not out:
        raise UsageError("--nodes: expected a comma-separated list of HOST:PORT")
    return out


NODE_KEYS = ("address", "name")


def load_node_file(path: str) -> tuple[list[str], dict[str, str]]:
    """A node list in TOML: `[[node]]` tables with `address = "HOST[:PORT]"` and an optional
    `name`. Returns (addresses, {address: name}); any mistake is one UsageError line naming
    the file, the table and the key."""
    try:
        _, doc = read_toml(path, "node list")
    except ConfigError as exc:
        if exc.reason == "missing":
            raise UsageError(f"--nodes {path}: no such file") from None
        if exc.reason == "unreadable":
            raise UsageError(f"--nodes {path}: cannot read it ({exc.problem.split(': ', 1)[-1]})") from None
        raise UsageError(f"{path}: not valid TOML ({exc.problem.removeprefix('invalid TOML: ')}"
                         + (f" (at line {exc.line}, column {exc.column})" if exc.line else "") + ")") from None
    extra = [k for k in doc if k != "node"]
    if extra:
        raise UsageError(f"{path}: unknown key {extra[0]!r} at the top level, expected only "
                         "[[node]] tables")
    nodes = doc.get("node")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, dict) for n in nodes):
        raise UsageError(f"{path}: no [[node]] tables, expected at least one [[node]] (double "
                         'brackets) with address = "HOST:PORT"')
    addresses, names = [], {}
    for i, n in enumerate(nodes, 1):
        where = f"{path}: [[node]] #{i}"
        bad = [k for k in n if k not in NODE_KEYS]
        if bad:
            raise UsageError(f"{where}: unknown key {bad[0]!r}, expected {' or '.join(NODE_KEYS)}")
        addr = n.get("address")
        if not isinstance(addr, str):
            raise UsageError(f"{where} key 'address': " + ("missing" if addr is None else
                             f"{addr!r} is not a string") + f', expected "HOST:PORT" (e.g. '
                             f'"gpu-node-1:{DEFAULT_PORT}")')
        norm = _host_port(addr.strip())
        if norm is None:
            raise UsageError(f"{where} key 'address': {addr!r} is not HOST:PORT, expected e.g. "
                             f'"gpu-node-1:{DEFAULT_PORT}"')
        if norm in addresses:
            raise UsageError(f"{where} key 'address': {norm} is listed twice")
        name = n.get("name")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise UsageError(f"{where} key 'name': {name!r}, expected a non-empty string")
        addresses.append(norm)
        if name:
            names[norm] = name.strip()
    return addresses, names


def resolve_nodes(arg: str) -> tuple[list[str], dict[str, str]]:
    """`--nodes`: a TOML file (a name ending in .toml, or an existing file) or HOST:PORT,..."""
    if arg.strip().endswith(".toml") or os.path.isfile(arg):
        return load_node_file(arg.strip())
    return parse_nodes(arg), {}


def text_samples(text: str) -> list[Sample]:
    """Prometheus text exposition -> samples (prometheus_client's parser; raises on garbage)."""
    return [(s.name, s.labels, float(s.value))
            for fam in text_string_to_metric_families(text) for s in fam.samples]


def parse_node(address: str, text: str, now: float | None = None) -> Node:
    """One node's exposition text -> Node (ok=False when it is not a gputop-dl exporter)."""
    try:
        samples = text_samples(text)
    except Exception as exc:  # the parser raises ValueError and friends on garbage
        return Node(address, False, f"not Prometheus text ({type(exc).__name__}: {exc})"[:200])
    return build_node(address, samples, now)


def _digits(v: object) -> bool:
    """ASCII digits only: str.isdigit() is also true of '²', which int() refuses."""
    return isinstance(v, str) and v.isascii() and v.isdigit()


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and _digits(v) else None


def build_node(address: str, samples: list[Sample], now: float | None = None) -> Node:
    """The one mapping from a node's samples (scraped, or from a Prometheus server) to a Node."""
    by: dict[str, list[Sample]] = {}
    for s in samples:
        by.setdefault(s[0], []).append(s)
    exporter = by.get(m.info(m.EXPORTER))
    if not exporter:
        return Node(address, False, f"not a gputop-dl exporter (no {m.info(m.EXPORTER)})")
    labels = exporter[0][1]

    def one(name: str) -> float | None:
        got = by.get(name)
        return got[0][2] if got else None

    gpus: dict[str, NodeGpu] = {}
    figures: tuple[tuple[str, Literal["util", "mem_used", "mem_total"]], ...] = (
        (m.full(m.GPU_UTILIZATION), "util"), (m.full(m.GPU_MEMORY_USED), "mem_used"),
        (m.full(m.GPU_MEMORY_TOTAL), "mem_total"))
    for name, fig in figures:
        for _n, lab, v in by.get(name, ()):
            gpus.setdefault(lab.get(m.GPU, "?"), {"index": lab.get(m.GPU)})[fig] = v
    jobs: dict[tuple[str | None, str | None], dict[str, Any]] = {}  # -> NodeJob's keywords

    def job(lab: dict[str, str]) -> dict[str, Any]:
        return jobs.setdefault((lab.get(m.JOB_NAME), lab.get(m.PID)), {})

    for _n, lab, _v in by.get(m.info(m.JOB), ()):
        j = job(lab)
        j.update(status=lab.get(m.STATUS), phase=lab.get(m.PHASE) or None)
        if lab.get(m.LAUNCHED) in ("true", "false"):
            j["launched"] = lab[m.LAUNCHED] == "true"
        if lab.get(m.RUN_ID):
            j["run_id"] = lab[m.RUN_ID]
        if _int(lab.get(m.WORLD_SIZE)) is not None:
            j["world_size"] = _int(lab[m.WORLD_SIZE])
    for name, key in ((m.full(m.JOB_CPU_CORES), "cpu_cores"),
                      (m.full(m.JOB_DATA_STALL), "stall_fraction"),
                      (m.full(m.JOB_STEP), "step_time_s"),
                      (m.full(m.JOB_SLOWDOWN), "slowdown"),
                      (m.full(m.JOB_SLOWDOWN_AT_LEAST), "slowdown_at_least"),
                      (m.full(m.JOB_OUTSIDE_SLOWDOWN), "outside_slowdown"),
                      (m.full(m.JOB_GPU_MEMORY), "gpu_mem")):
        for _n, lab, v in by.get(name, ()):
            job(lab)[key] = v
    # where the slowdown (or its bound) came from: the label of the series that carry it
    for name in (m.full(m.JOB_SLOWDOWN_BY_SOURCE), m.full(m.JOB_SLOWDOWN_AT_LEAST)):
        for _n, lab, _v in by.get(name, ()):
            if lab.get(m.SOURCE):
                job(lab)["slowdown_source"] = lab[m.SOURCE]
    for _n, lab, _v in by.get(m.info(m.JOB_RANK), ()):
        j = job(lab)
        if lab.get(m.RUN_ID):
            j.setdefault("run_id", lab[m.RUN_ID])
        if _int(lab.get(m.WORLD_SIZE)) is not None:
            j.setdefault("world_size", _int(lab[m.WORLD_SIZE]))
        j.setdefault("ranks", []).append({"rank": _int(lab.get(m.RANK)),
                                          "local_rank": _int(lab.get(m.LOCAL_RANK)),
                                          "rank_pid": _int(lab.get(m.RANK_PID))})
    for j in jobs.values():
        if "ranks" in j:
            j["ranks"].sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))
    verdict = [s for s in by.get(m.full(m.VERDICT), ()) if s[2] == 1.0]
    ts = one(m.full(m.LAST_SAMPLE_TIMESTAMP))
    return Node(
        address, True, hostname=labels.get(m.HOSTNAME), mode=labels.get(m.MODE),
        age_s=None if ts is None else max(0.0, (now or time.time()) - ts),
        cpus=one(m.full(m.HOST_CPUS)), cpu_busy=one(m.full(m.HOST_CPU_BUSY)),
        load1=one(m.full(m.HOST_LOAD1)),
        gpus=sorted(gpus.values(), key=lambda g: _int(g.get("index")) or 0),
        jobs=[NodeJob(name=n, pid=_int(p), **v)
              for (n, p), v in sorted(jobs.items(), key=lambda kv: str(kv[0]))],
        verdict=verdict[0][1].get(m.KIND) if verdict else None,
        confidence=one(m.full(m.VERDICT_CONFIDENCE)))


def read_node(address: str, timeout: float = 2.0) -> Node:
    """GET http://ADDRESS/metrics and parse it; any failure is a Node with ok=False."""
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as r:
            text = r.read(8 << 20).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Node(address, False, f"unreachable ({_why(exc)})"[:200])
    return parse_node(address, text)


def _why(exc: BaseException) -> str:
    """A network error in a few words: "Connection refused", "timed out", "HTTP 404 ..."."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    why = getattr(exc, "reason", None) or exc
    return getattr(why, "strerror", None) or str(why) or type(why).__name__


def read_fleet(addresses: list[str], timeout: float = 2.0,
               names: dict[str, str] | None = None) -> list[Node]:
    """Every node at once, in the order given (`names`: address -> the node list's name)."""
    out: list[Node | None] = [None] * len(addresses)

    def one(i: int, a: str) -> None:
        out[i] = read_node(a, timeout)

    threads = [threading.Thread(target=one, args=(i, a), daemon=True, name="gdl-fleet")
               for i, a in enumerate(addresses)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout + 1
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    nodes = [n if n is not None else Node(a, False, "no answer in time")
             for n, a in zip(out, addresses)]
    return [replace(n, name=names[n.address]) if names and n.address in names else n
            for n in nodes]


# --- a Prometheus server's HTTP API instead of the nodes themselves ---------------------------

PROMETHEUS_QUERY = f'{{__name__=~"{m.PREFIX}.+|up"}}'


class PrometheusError(Exception):
    """The Prometheus server could not be read (one line)."""


def check_prometheus_url(url: str) -> str:
    """`--prometheus URL`: http(s)://HOST[:PORT][/prefix], without a query; UsageError if not."""
    try:
        u = urllib.parse.urlsplit(url.strip())
        port_ok = u.port is None or 0 < u.port < 65536
    except ValueError:  # "Invalid IPv6 URL" (http://[::1), a port that is no number
        u, port_ok = urllib.parse.urlsplit(""), False
    if u.scheme not in ("http", "https") or not u.hostname or not port_ok or u.query or u.fragment:
        raise UsageError(f"--prometheus {url!r}: expected the server's URL, e.g. "
                         "http://prometheus:9090")
    return url.strip().rstrip("/")


def prometheus_samples(doc: object) -> list[tuple[str, str | None, Sample]]:
    """An instant-query answer -> [(instance, job, (name, labels, value))]; raises
    PrometheusError when it is not a success with a vector."""
    if not isinstance(doc, dict):
        raise PrometheusError("the answer is not a JSON object")
    if doc.get("status") != "success":
        raise PrometheusError(f"status {doc.get('status')!r}: "
                              f"{doc.get('errorType', '')} {doc.get('error', '')}".strip())
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" \
            or not isinstance(data.get("result"), list):
        raise PrometheusError("the answer is not an instant vector (data.resultType)")
    out = []
    for item in data["result"]:
        try:
            labels = dict(item["metric"])
            value = float(item["value"][1])
            name = labels.pop("__name__")
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise PrometheusError(f"a result without metric/value ({type(exc).__name__})") from None
        out.append((labels.pop("instance", "?"), labels.pop("job", None), (name, labels, value)))
    return out


def nodes_from_prometheus(doc: object, now: float | None = None) -> list[Node]:
    """A Prometheus answer to PROMETHEUS_QUERY -> one Node per scrape target (`instance`),
    built by `build_node` like a scraped node. A target whose `up` is 0 is unreachable; the
    targets counted are those with gputop_dl_ series and the down ones of the same scrape
    jobs (or of a job whose name has "gputop" in it)."""
    per: dict[str, list[Sample]] = {}
    up: dict[str, tuple[str | None, float]] = {}
    jobs: set[str | None] = set()
    for inst, job, sample in prometheus_samples(doc):
        if sample[0] == "up":
            up[inst] = (job, sample[2])
        else:
            per.setdefault(inst, []).append(sample)
            jobs.add(job)
    instances = set(per) | {i for i, (job, _v) in up.items()
                            if job in jobs or "gputop" in (job or "")}
    out = []
    for inst in sorted(instances):
        if inst in up and up[inst][1] == 0:
            out.append(Node(inst, False, f"unreachable (Prometheus: up == 0, job "
                                         f"{up[inst][0]!r})"))
        else:
            out.append(build_node(inst, per.get(inst, []), now))
    return out


def read_prometheus(url: str, timeout: float = 5.0) -> list[Node]:
    """GET URL/api/v1/query for every gputop_dl_ series and `up`; PrometheusError if the
    server does not answer a success."""
    q = urllib.parse.urlencode({"query": PROMETHEUS_QUERY})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=timeout) as r:
            body = r.read(64 << 20)
    except urllib.error.HTTPError as exc:
        body = exc.read(1 << 20)  # Prometheus answers errors (400, 422, 503) with its JSON
        try:
            prometheus_samples(json.loads(body))
        except (ValueError, PrometheusError) as err:
            raise PrometheusError(f"{url}: HTTP {exc.code} ({err})"[:300]) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PrometheusError(f"{url} unreachable ({_why(exc)})"[:300]) from None
    try:
        doc = json.loads(body)
    except ValueError:
        raise PrometheusError(f"{url}: not a Prometheus API answer (not JSON)") from None
    try:
        return nodes_from_prometheus(doc)
    except PrometheusError as exc:
        raise PrometheusError(f"{url}: {exc}"[:300]) from None
