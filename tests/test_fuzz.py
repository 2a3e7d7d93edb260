"""The fuzzer: property-based tests over every input gputop-dl parses.

Hypothesis draws the inputs from a fixed seed (`derandomize=True`: the same inputs on every run,
so CI is reproducible) and a small budget (`max_examples`). The properties:

- in-process parsers raise only the project's documented error types (`ConfigError`,
  `UsageError`, `PrometheusError`, `StoreError`) or return a value / None;
- a CLI run exits 0, 1, 2 or 130, prints no traceback, and a 2 is one line;
- a run in a subprocess does so within a time limit and under a memory limit (RLIMIT_AS);
- nothing is half-written: no 0-byte or damaged sessions.db after a launch, no partial export.

`GPUTOP_DL_FUZZ=20` multiplies every budget (the long local run in docs/faults.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputop_dl import cli
from gputop_dl.injob.channel import RANK_ENV, rank_info
from gputop_dl.collect.proc import diskio
from gputop_dl.collect.proc import host
from gputop_dl.collect.proc import procs
from gputop_dl.collect.proc import schedstat
from gputop_dl.collect.fleet.nodes import (PrometheusError, load_node_file, nodes_from_prometheus,
                                     parse_node, parse_nodes)
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.config import FIELDS, SESSION_FIELDS, load_session
from gputop_dl.errors import UsageError
from gputop_dl.record.store import Store
from gputop_dl.tomlcheck import ConfigError
from gputop_dl.config.trace import JOB_FIELDS, MACHINE_FIELDS, TRACE_FIELDS, load_trace
from tests.fakes.nvml import FakeGpu, FakeProcess, FakePynvml, NVMLError
from tests.fakes.reports import make_session

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCALE = max(1, int(os.environ.get("GPUTOP_DL_FUZZ", "1")))
RUN_COUNT: dict[str, int] = {}  # inputs tried per property (printed by the long run)


def budget(n: int, **kw) -> settings:
    return settings(max_examples=n * SCALE, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much], **kw)


def tried(name: str) -> None:
    RUN_COUNT[name] = RUN_COUNT.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    if SCALE > 1:
        print("\nfuzz inputs tried:", json.dumps(RUN_COUNT, sort_keys=True), file=sys.__stderr__)


# ---- TOML text ---------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.integers(), st.integers(-3, 100), st.sampled_from([0, 1, 2, 4, 100000, 2**63 - 1, -2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(max_size=30), st.sampled_from(["true", "measure", "none", "probe", "synthetic", "fifo",
                                           "200MiB", "1e9", "../x", ".", "..", "", "a b", "x" * 300]))
KEYS = st.one_of(st.sampled_from(sorted(set(FIELDS) | set(SESSION_FIELDS) | set(TRACE_FIELDS)
                                        | set(MACHINE_FIELDS) | set(JOB_FIELDS))),
                 st.text(min_size=1, max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


def toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(map(toml_value, v)) + "]"
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def render(doc: dict) -> str:
    """A dict as TOML text: tables as [t], lists of tables as [[t]], the rest inline (a
    generated document may be invalid TOML, e.g. a key twice: the loader must say so)."""
    out = [f"{toml_key(k)} = {toml_value(v)}" for k, v in doc.items()
           if not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))]
    for k, v in doc.items():
        if isinstance(v, dict):
            out.append(f"[{toml_key(k)}]")
            out += [f"{toml_key(a)} = {toml_value(b)}" for a, b in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for t in v:
                out.append(f"[[{toml_key(k)}]]")
                out += [f"{toml_key(a)} = {toml_value(b)}" for a, b in t.items()]
    return "\n".join(out) + "\n"


TABLE = st.dictionaries(KEYS, VALUES, max_size=6)
WORKLOAD_DOCS = st.fixed_dictionaries(
    {}, optional={"session": TABLE, "defaults": TABLE, "trace": TABLE, "machine": TABLE,
                  "workload": st.lists(st.dictionaries(KEYS, VALUES, max_size=6).map(
                      lambda d: {"name": "j", **d}), max_size=4)}).map(render)


def shipped(*names: str) -> list[bytes]:
    out = []
    for n in names:
        with open(os.path.join(ROOT, "workloads", n), "rb") as f:
            out.append(f.read())
    return out


WORKLOAD_FILES = shipped("mobilenet_trio.toml", "queue_sleepers.toml",
                         *[os.path.join("scenarios", n) for n in
                           sorted(os.listdir(os.path.join(ROOT, "workloads", "scenarios")))])
TRACE_FILES = shipped("queue_trace.toml")

NASTY = st.sampled_from([b"[", b"]", b"{", b"}", b"=", b'"', b"'''", b"\n", b"[[", b".", b"#",
                         b"99999999999999999999", b"-1", b"1e400", b"nan", b"\x00", b"\xff\xfe",
                         b"[" * 200, b"a." * 100, b"\\u0000", b"\xe2\x80\xae", b"\r"])


@st.composite
def mutated(draw, texts: list[bytes]) -> bytes:
    """A shipped file with a few random edits: cut, insert, duplicate a line, swap two lines,
    change a number."""
    data = bytearray(draw(st.sampled_from(texts)))
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["cut", "insert", "dup", "swap", "number"]))
        at = draw(st.integers(0, len(data)))
        if op == "cut":
            del data[at:at + draw(st.integers(1, 40))]
        elif op == "insert":
            data[at:at] = draw(st.one_of(NASTY, st.binary(max_size=20)))
        elif op in ("dup", "swap"):
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if op == "dup":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
        else:
            nums = list(re.finditer(rb"\d+(\.\d+)?", bytes(data)))
            if nums:
                m = draw(st.sampled_from(nums))
                new = draw(st.sampled_from([b"0", b"-1", b"100000", b"1e308", b"0.0", b"inf",
                                            b"9223372036854775808", b"1.5", b'"3"']))
                data[m.start():m.end()] = new
    return bytes(data)


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory() as d:
        yield d


def write_bytes(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def only_config_errors(load, path: str) -> None:
    try:
        load(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)


@budget(150)
@given(text=st.one_of(WORKLOAD_DOCS.map(str.encode), mutated(WORKLOAD_FILES),
                      st.binary(max_size=200)))
def test_workload_files_raise_only_config_errors(scratch, text):
    tried("workload TOML")
    path = write_bytes(scratch, "w.toml", text)
    only_config_errors(lambda p: load_session(p, gpu_count=0), path)
    only_config_errors(lambda p: load_session(p, gpu_count=4), path)


@budget(100)
@given(text=st.one_of(WORKLOAD_DOCS.map(str.encode), mutated(TRACE_FILES)))
def test_trace_files_raise_only_config_errors(scratch, text):
    tried("trace TOML")
    path = write_bytes(scratch, "t.toml", text)
    only_config_errors(load_trace, path)


NODE_DOCS = st.dictionaries(st.sampled_from(["node", "nodes", "x"]), st.lists(
    st.dictionaries(st.sampled_from(["address", "name", "port", "x"]), SCALARS, max_size=3),
    max_size=3), max_size=2).map(render)


@budget(60)
@given(text=st.one_of(NODE_DOCS, st.text(max_size=80)))
def test_node_lists_raise_only_config_and_usage_errors(scratch, text):
    tried("node list")
    path = write_bytes(scratch, "nodes.toml", text.encode())
    try:
        load_node_file(path)
    except (ConfigError, UsageError):
        pass
    try:
        parse_nodes(text)
    except UsageError:
        pass


# ---- /metrics text and a Prometheus answer (the fleet view) ------------------------------------

EXPOSITION = """\
# HELP gputop_dl_exporter_info x
# TYPE gputop_dl_exporter_info gauge
gputop_dl_exporter_info{Hostname="a",mode="serve",version="0.1.0"} 1
# TYPE gputop_dl_host_cpus gauge
gputop_dl_host_cpus{Hostname="a"} 8
# TYPE gputop_dl_gpu_utilization_ratio gauge
gputop_dl_gpu_utilization_ratio{Hostname="a",gpu="0",UUID="GPU-1"} 0.5
# TYPE gputop_dl_job_info gauge
gputop_dl_job_info{Hostname="a",job_name="bs32",pid="100",status="running",phase="co-run",launched="true",run_id="r",world_size="2"} 1
# TYPE gputop_dl_job_step_seconds gauge
gputop_dl_job_step_seconds{Hostname="a",job_name="bs32",pid="100"} 0.4
# TYPE gputop_dl_job_rank_info gauge
gputop_dl_job_rank_info{Hostname="a",job_name="bs32",pid="100",run_id="r",rank="0",local_rank="0",world_size="2",rank_pid="101"} 1
# TYPE gputop_dl_last_sample_timestamp_seconds gauge
gputop_dl_last_sample_timestamp_seconds{Hostname="a"} 1.7e9
"""
LABEL_VALUES = st.one_of(st.sampled_from(["²", "٣", "-1", "1e3", "", "0x1", "99999999999999999999"]),
                         st.text(st.characters(categories=["Nd", "No", "L", "P"]), max_size=4),
                         st.text(max_size=8))


@st.composite
def metrics_text(draw) -> str:
    """The exposition with label values and sample values swapped for others, lines cut or
    repeated, or plain garbage."""
    text = EXPOSITION
    for _ in range(draw(st.integers(0, 6)) or draw(st.integers(1, 3))):
        spots = list(re.finditer(r'="([^"]*)"|\} (\S+)', text))
        m = draw(st.sampled_from(spots))
        if m.group(1) is not None:
            new = json.dumps(draw(LABEL_VALUES), ensure_ascii=False)[1:-1]
            text = text[:m.start(1)] + new + text[m.end(1):]
        else:
            new = draw(st.sampled_from(["NaN", "+Inf", "-Inf", "-1", "1e308", "x", "0"]))
            text = text[:m.start(2)] + new + text[m.end(2):]
    lines = text.split("\n")
    if draw(st.booleans()):
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, draw(st.sampled_from(lines + [draw(st.text(max_size=40))])))
    return "\n".join(lines)


@budget(150)
@given(text=st.one_of(metrics_text(), st.text(max_size=200)))
def test_metrics_text_of_a_node_never_raises(text):
    tried("/metrics text")
    node = parse_node("n:1", text)
    assert isinstance(node.ok, bool)


PROM_RESULT = st.fixed_dictionaries({"metric": st.dictionaries(
    st.sampled_from(["__name__", "instance", "job", "gpu", "job_name", "pid", "Hostname"]),
    LABEL_VALUES | st.sampled_from(["gputop_dl_exporter_info", "up", "gputop_dl_host_cpus"]),
    max_size=5), "value": st.lists(st.one_of(st.floats(), st.text(max_size=5)), max_size=3)})


@budget(80)
@given(doc=st.one_of(
    st.fixed_dictionaries({"status": st.sampled_from(["success", "error"]),
                           "data": st.fixed_dictionaries({"resultType": st.just("vector"),
                                                          "result": st.lists(PROM_RESULT, max_size=6)})}),
    st.recursive(SCALARS, lambda i: st.lists(i, max_size=3) | st.dictionaries(st.text(max_size=5), i, max_size=3),
                 max_leaves=8)))
def test_a_prometheus_answer_raises_only_prometheus_errors(doc):
    tried("Prometheus answer")
    try:
        nodes_from_prometheus(doc)
    except PrometheusError:
        pass


# ---- /proc files that hold garbage or vanish ---------------------------------------------------

GARBAGE = st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(st.sampled_from([b"cpu", b"cpu0", b"procs_running", b"MemTotal:", b"MemFree:",
                                        b"MemAvailable:", b"rchar:", b"read_bytes:", b"(", b")", b"-",
                                        b"some", b"avg10=", b"kB", b"R", b"Z", b"nr_throttled",
                                        b"throttled_usec", b"0:0", b"1", b"-1", b"x", b"\xff"]),
                          st.integers(-2**70, 2**70).map(lambda i: str(i).encode())),
             max_size=60).map(lambda ws: b" ".join(ws).replace(b"- ", b"\n")))
STAT_LINE = (b"4242 (py thon) S 1 4242 4242 0 -1 4194560 25000 0 12 0 700 300 0 0 20 0 9 0 "
             b"5000 123456789 30000 18446744073709551615 1 1 0 0 0 0 0 16781312 17154 0 0 0 17 3 0 0 7 0 0")


@st.composite
def proc_bytes(draw) -> bytes:
    if draw(st.booleans()):
        return draw(GARBAGE)
    fields = STAT_LINE.split(b" ")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(fields) - 1))
        fields[i] = draw(st.sampled_from([b"", b"x", b"-5", b"99999999999999999999999", b")", b"Z", b"\xff"]))
    return b" ".join(fields)


@budget(300)
@given(data=proc_bytes())
def test_proc_parsers_return_a_value_or_none(data):
    tried("/proc text")
    procs.parse_stat(data)
    procs.stat_fields(data)
    host.parse_cpu_times(b"cpu  1 2 3\n" + data)
    host.parse_cpu_times(data)
    host.parse_procs_running(data)
    host.parse_meminfo(data)
    diskio.parse_io(data)
    diskio.parse_mountinfo(data)
    schedstat.parse_schedstat(data)
    read = lambda _p, *a: data  # noqa: E731
    host.read_psi_some10("psi", read=read)
    host.read_cgroup_throttled_usec("cg", read=read)
    diskio.delayacct_on("d", read=read)


@budget(60)
@given(files=st.dictionaries(st.sampled_from(["stat", "schedstat", "io", "task", "status", "cgroup"]),
                             st.one_of(st.none(), proc_bytes()), max_size=6))
def test_proc_readers_over_vanishing_or_garbage_files(files):
    """The readers with a `read` that returns garbage, or raises as a file that vanished."""
    tried("/proc readers")

    def read(path, *_a):
        got = files.get(os.path.basename(str(path)), b"")
        if got is None:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return got

    procs.read_stat(4242, read=read)
    r = schedstat.SchedReader(proc="/fake-proc", read=lambda path, _n=0: read(path),
                              listdir=lambda _p: ["4242", "4243"])
    try:
        for cpu in (1.0, 2.0):
            r.read({4242: (1.0, 2, cpu)})
    finally:
        r.close()


ENV_VALUES = st.one_of(st.sampled_from(["0", "-1", "²", "٣", "-²", " 3 ", "", "1e3", "99999999999999999999999"]),
                       st.text(st.characters(categories=["Nd", "No", "Zs", "Pd"]), max_size=4),
                       st.text(max_size=6))


@budget(100)
@given(env=st.dictionaries(st.sampled_from(sorted(RANK_ENV)), ENV_VALUES))
def test_the_rank_variables_of_any_process_environment_never_raise(env):
    """`/proc/PID/environ` of any process on the box (a found job) is read for its ranks."""
    tried("process environment")
    info = rank_info(env)
    assert all(isinstance(v, int) for k, v in info.items() if k != "run_id")


# ---- NVML errors from the fake -----------------------------------------------------------------

NVML_FIELDS = ["name", "uuid", "memory", "utilization", "temperature", "power", "power_limit",
               "sm_clock", "clock_reasons", "pcie", "processes", "graphics_processes", "process_util"]
ANY_ERROR = st.one_of(st.integers(0, 1000).map(NVMLError),
                      st.sampled_from([RuntimeError("boom"), OSError(5, "EIO"), ValueError("v"),
                                       TypeError("t"), KeyError("k"), ZeroDivisionError("z"),
                                       UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad")]))


@st.composite
def fake_gpu(draw) -> FakeGpu:
    g = FakeGpu(unsupported=set(draw(st.lists(st.sampled_from(NVML_FIELDS), max_size=4))),
                raise_in=draw(st.dictionaries(st.sampled_from(NVML_FIELDS), ANY_ERROR, max_size=4)),
                lost=draw(st.booleans()))
    for attr in ("util", "mem_util", "temp_c", "power_mw", "power_limit_mw", "sm_clock_mhz", "mem_used",
                 "clock_reasons", "pcie_tx_kbs"):
        if draw(st.booleans()):
            setattr(g, attr, draw(st.sampled_from([-1, 0, 2**32 - 1, 2**64, 101, 4294967295])))
    if draw(st.booleans()):
        g.name = draw(st.sampled_from(["", "\xff", "x" * 500, "a\x1b[31mred"]))
    g.processes = [FakeProcess(pid=p, used_memory=m) for p, m in draw(st.lists(
        st.tuples(st.integers(-1, 2**22), st.one_of(st.none(), st.integers(-1, 2**64))), max_size=3))]
    for p in g.processes[:1]:
        g.add_util_sample(pid=p.pid, sm=draw(st.integers(-5, 300)))
    return g


@budget(100)
@given(gpus=st.lists(fake_gpu(), max_size=3),
       init_error=st.one_of(st.none(), st.integers(0, 1000), ANY_ERROR))
def test_nvml_errors_from_the_fake_never_escape(gpus, init_error):
    tried("NVML fake")
    nv = Nvml(module=FakePynvml(gpus=gpus, init_error=init_error))
    for _ in range(2):
        assert isinstance(nv.sample(), tuple)
        assert isinstance(nv.processes(), tuple)
    nv.names()
    nv.close()


# ---- the session database: random byte damage, wrong file types --------------------------------

class RealDb(tuple):
    """(bytes, session id); a short repr in Hypothesis's report of a failing case."""

    def __repr__(self) -> str:
        return f"<sessions.db, {len(self[0])} bytes>"


@pytest.fixture(scope="module")
def real_db():
    """A real small sessions.db (the report fixture's session), checkpointed into one file."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sessions.db")
        store = Store(path)
        sid = make_session(store, ticks=12)
        store.close()
        con = sqlite3.connect(path)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode=DELETE")
        con.close()
        with open(path, "rb") as f:
            yield RealDb((f.read(), sid))


@st.composite
def damaged(draw, data: bytes) -> bytes:
    buf = bytearray(data)
    page = 4096
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["bytes", "page", "truncate", "append"]))
        if not buf:
            buf += draw(st.binary(max_size=64))
            continue
        if op == "bytes":
            at = draw(st.one_of(st.integers(0, 100), st.integers(0, len(buf) - 1)))
            for i, b in enumerate(draw(st.binary(min_size=1, max_size=8))):
                if at + i < len(buf):
                    buf[at + i] = b
        elif op == "page":
            n = draw(st.integers(0, max(0, len(buf) // page - 1)))
            buf[n * page:(n + 1) * page] = draw(st.sampled_from([b"\0", b"\xff"])) * page
        elif op == "truncate":
            del buf[draw(st.integers(0, len(buf))):]
        else:
            buf += draw(st.binary(max_size=64))
    return bytes(buf)


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(args)
        except SystemExit as e:  # argparse: --help, a bad flag
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def check_run(code: int, err: str, allowed=(0, 1, 2, 130)) -> None:
    assert code in allowed, (code, err)
    assert "Traceback" not in err, err
    if code == 2 and not err.startswith("usage:"):
        assert len(err.strip().splitlines()) == 1, err


DB_COMMANDS = [["sessions"], ["sessions", "--json"], ["export", "OUT/r.json"], ["export", "OUT/r.md"],
               ["compare", "SID", "SID"], ["export", "OUT/r.md", "--session", "SID"]]


@budget(60)
@given(data=st.data())
def test_a_damaged_database_is_one_line_in_every_reader(real_db, gdl_home, tmp_path, data):
    tried("damaged sessions.db")
    good, sid = real_db
    db = gdl_home / "sessions.db"
    for extra in gdl_home.iterdir():
        extra.unlink()
    db.write_bytes(data.draw(damaged(good)))
    out = tmp_path / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    args = [a.replace("OUT", str(out)).replace("SID", sid[:8])
            for a in data.draw(st.sampled_from(DB_COMMANDS))]
    code, _o, err = run_cli(args)
    check_run(code, err, (0, 1, 2))
    if code != 0:
        assert os.listdir(out) == [], "a failed export left a file"


@pytest.mark.parametrize("column", ["environment", "verdict", "spec"])
@pytest.mark.parametrize("args", DB_COMMANDS)
def test_a_json_column_that_is_not_json_is_one_line(real_db, gdl_home, tmp_path, args, column):
    """Found by the fuzzer above (a damaged page inside a session's environment text made
    `sessions` end in a JSONDecodeError's traceback): a stored JSON value that is not JSON is
    a damaged database, one line and exit 2 in every reader, no file left behind."""
    good, sid = real_db
    db = gdl_home / "sessions.db"
    for extra in gdl_home.iterdir():
        extra.unlink()
    db.write_bytes(good)
    con = sqlite3.connect(db)
    con.execute(f"UPDATE sessions SET {column} = '{{\"cpus\": 2, '")  # cut mid-object
    con.commit()
    con.close()
    out = tmp_path / "out"
    out.mkdir()
    code, _o, err = run_cli([a.replace("OUT", str(out)).replace("SID", sid[:8]) for a in args])
    check_run(code, err, (2,))
    assert "damaged" in err and os.listdir(out) == [], err


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink to /dev/zero", "dangling symlink",
                                  "symlink loop", "socket", "a text file", "a WAL file only"])
@pytest.mark.parametrize("args", DB_COMMANDS[:4])
def test_a_database_of_the_wrong_type_is_one_line(gdl_home, tmp_path, kind, args):
    import socket
    db = gdl_home / "sessions.db"
    if kind == "directory":
        db.mkdir()
    elif kind == "fifo":
        os.mkfifo(db)
    elif kind == "symlink to /dev/zero":
        db.symlink_to("/dev/zero")
    elif kind == "dangling symlink":
        db.symlink_to(tmp_path / "nowhere")
    elif kind == "symlink loop":
        db.symlink_to(db)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(db))
        s.close()
    elif kind == "a text file":
        db.write_text("SQLite format 3\0 but not really" * 10)
    else:
        (gdl_home / "sessions.db-wal").write_bytes(b"\0" * 100)
    code, _o, err = run_cli([a.replace("OUT", str(tmp_path)) for a in args])
    check_run(code, err, (0, 2))


# ---- CLI argument lists -------------------------------------------------------------------------

WORDS = ["launch", "queue", "export", "sessions", "compare", "diagnose", "serve", "simulate",
         "--once", "--json", "--stall", "--interval", "--nodes", "--prometheus", "--stall-budget",
         "--metrics", "--readonly", "--headless", "--only", "--baseline", "--tensorboard",
         "--session", "--listen", "--record", "--seconds", "--no-probe", "--pid", "--policies",
         "--rates", "--seeds", "--jobs", "--out", "--calibrate", "--no-calibrate", "--policy",
         "--sbatch", "--help", "-h", "--version", "--", "-", "=", "--json=1", "--interval=-1"]
VALUES_ARG = st.one_of(
    st.sampled_from(["0", "-1", "1e308", "nan", "inf", "-inf", "0.1", "3", "100000", "",
                     "127.0.0.1:0", "[::1]:99999", "host:", ":9402", "a:b:c", "1,2,,3", "fifo,sjf",
                     "http://u:p@h:1", "http://h:99999", "ftp://x", "w.toml", "r.md", "r.json",
                     "nodes.toml", "x" * 5000, "\u202e", "é", "0x10", "1_000", "²", "127.0.0.1:²",
                     "a:²,b", "[::1]:٣"]),
    st.text(max_size=10).filter(lambda s: "/" not in s and "\0" not in s and ".." not in s))
ADDRESSES = st.one_of(st.sampled_from(["127.0.0.1:0", "[::1]:99999", "host:", ":9402", "a:b:c", "9402",
                                      "²", "127.0.0.1:²", "a:²,b", "[::1]:٣", "0.0.0.0:65536",
                                      "a:1,,b:2", "[::1", "x y:1", "a:-1", "localhost:9402"]),
                      st.text(st.characters(categories=["Nd", "No", "L", "P"]), max_size=6))
NUMBERS = st.one_of(st.sampled_from(["0", "-1", "1e308", "nan", "inf", "-inf", "0.1", "3", "100000",
                                     "²", "1_000", "0x10", ""]), st.floats().map(str))
LISTS = st.one_of(st.sampled_from(["1,2,,3", "fifo,sjf", ",", "nan,1", "²,1", "0.25,inf"]),
                  st.lists(NUMBERS, max_size=3).map(",".join))
URLS = st.sampled_from(["http://u:p@h:1", "http://h:99999", "ftp://x", "http://", "https://h/?q=1",
                        "http://[::1", "http://h:²", "http://h:٣"])
FLAG_VALUES = {"--metrics": ADDRESSES, "--listen": ADDRESSES, "--nodes": ADDRESSES,
               "--interval": NUMBERS, "--stall": NUMBERS, "--stall-budget": NUMBERS,
               "--seconds": NUMBERS, "--seeds": NUMBERS, "--jobs": NUMBERS, "--pid": LISTS,
               "--rates": LISTS, "--policies": LISTS, "--prometheus": URLS}
FLAG_AND_VALUE = st.sampled_from(sorted(FLAG_VALUES)).flatmap(
    lambda f: st.tuples(st.just(f), FLAG_VALUES[f]).map(list))
POSITIONALS = {"file": st.sampled_from(["w.toml", "missing.toml", ".", "nodes.toml", "x" * 300]),
               "trace": st.sampled_from(["w.toml", "missing.toml", "."]),
               "out": st.sampled_from(["r.md", "r.json", "r.txt", "tb", ".", "no/such/r.md", ""]),
               "a": st.sampled_from(["SID", "", "0", "zz"]), "b": st.sampled_from(["SID", "s"])}


def _value(action):
    """A value for one option or positional of the real parser."""
    if action.choices:
        return st.one_of(st.sampled_from(sorted(action.choices)), VALUES_ARG)
    flag = action.option_strings[0] if action.option_strings else None
    if flag in FLAG_VALUES:
        return FLAG_VALUES[flag]
    return POSITIONALS.get(action.dest, VALUES_ARG)


def _arguments(parser) -> tuple[list, list]:
    """(options as strategies of [flag, value...], positionals as value strategies)."""
    import argparse
    opts, pos = [], []
    for act in parser._actions:
        if isinstance(act, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        if act.option_strings:
            flag = st.just([act.option_strings[0]])
            if act.nargs == 0:
                opts.append(flag)
            elif act.nargs == "?":
                opts.append(st.one_of(flag, st.tuples(flag, _value(act)).map(lambda t: t[0] + [t[1]])))
            else:
                opts.append(st.tuples(flag, _value(act)).map(lambda t: t[0] + [t[1]]))
        elif act.nargs not in ("*", "?"):
            pos.append(_value(act))
    return opts, pos


@st.composite
def argv_lists(draw) -> list[str]:
    """Mostly well-formed: the real parser's own options and positionals with hostile values,
    sometimes a word out of place; a fifth are any words."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.lists(st.one_of(st.sampled_from(WORDS), VALUES_ARG), max_size=6))
    parser = cli.build_parser()
    top_opts, _ = _arguments(parser)
    subs = next(a for a in parser._actions if a.option_strings == [] and a.dest == "cmd").choices
    argv = [x for o in draw(st.lists(st.one_of(*top_opts), max_size=2)) for x in o]
    name = draw(st.sampled_from([None, "launch", "queue", "export", "sessions", "compare",
                                 "diagnose", "serve", "simulate", "schema"]))
    if name:
        opts, pos = _arguments(subs[name])
        argv.append(name)
        if opts:
            argv += [x for o in draw(st.lists(st.one_of(*opts), max_size=3)) for x in o]
        argv += [draw(p) for p in pos]
    if draw(st.integers(0, 5)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.one_of(st.sampled_from(WORDS), VALUES_ARG)))
    return argv


ARGV = argv_lists()


def checked_fleet(nodes, *_a, prometheus=None, **_k) -> int:
    """The fleet view's checks of --nodes and --prometheus, without reading any node."""
    from gputop_dl.collect.fleet.nodes import check_prometheus_url, resolve_nodes

    if prometheus is not None:
        check_prometheus_url(prometheus)
    else:
        resolve_nodes(nodes or "")
    return 0


STUBBED = ["run_launch", "run_queue", "run_serve", "run_monitor", "run_once", "run_diagnose",
           "run_simulate"]


@budget(400)
@given(argv=ARGV)
def test_any_argument_list_exits_0_1_2_or_130(monkeypatch, tmp_path, real_db, argv):
    """Parsing and every check before a command starts, in-process. What would run for long
    (the monitor, launch, serve, diagnose, simulate) is stubbed after its checks; `sessions`,
    `export` and `compare` run for real on a recorded session (the folder: a temporary one)."""
    tried("CLI arguments")
    from gputop_dl import runner
    from gputop_dl.runner import sbatch

    for name in STUBBED:
        monkeypatch.setattr(runner, name, lambda *a, **k: 0)
    monkeypatch.setattr(runner, "run_fleet_once", checked_fleet)
    monkeypatch.setattr(runner, "run_fleet_tui", lambda nodes, prometheus, **k:
                        checked_fleet(nodes, prometheus=prometheus))
    monkeypatch.setattr(sbatch, "run_sbatch", lambda *a, **k: 0)
    monkeypatch.setattr(cli, "LAB_COMMANDS", {})
    home = tmp_path / "gdl-home"
    if not (home / "sessions.db").exists():
        (home / "sessions.db").write_bytes(real_db[0])
    work = tmp_path / "cwd"
    if not work.exists():
        work.mkdir()
        (work / "w.toml").write_bytes(WORKLOAD_FILES[1])
        (work / "nodes.toml").write_text('[[node]]\naddress = "a:1"\n')
    monkeypatch.chdir(work)
    code, _o, err = run_cli([a.replace("SID", real_db[1][:8]) for a in argv])
    check_run(code, err)


# ---- real processes: time, memory, no partial write --------------------------------------------

MEMORY_CAP = 3 << 30  # RLIMIT_AS of each gputop-dl process


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def gdl(home: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUTOP_DL_HOME=home, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "gputop_dl", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, preexec_fn=limited,
                          stdin=subprocess.DEVNULL)


def database_whole(path: str) -> bool:
    """No sessions.db, or one that SQLite reads as a whole (not 0 bytes, integrity ok)."""
    if not os.path.exists(path):
        return True
    if os.path.getsize(path) == 0:
        return False
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


HOSTILE_FILES = st.one_of(
    st.just(b"x = " + b"[" * 1200 + b"]" * 1200),
    st.just(b'[session]\nname = "' + b"n" * (5 << 20) + b'"\n'),
    mutated(TRACE_FILES), WORKLOAD_DOCS.map(str.encode), st.binary(max_size=100))


@budget(4)
@given(text=HOSTILE_FILES, cmd=st.sampled_from([["launch", "F", "--headless"], ["queue", "F", "--headless"],
                                               ["simulate", "F", "--jobs", "20", "--seeds", "1",
                                                "--rates", "1", "--no-calibrate"]]))
def test_hostile_files_in_a_process_end_in_bounded_time_and_memory(tmp_path, text, cmd):
    tried("subprocess: hostile file")
    d = tempfile.mkdtemp(dir=tmp_path)
    path = write_bytes(d, "f.toml", text)
    home = os.path.join(d, "home")
    t0 = time.monotonic()
    p = gdl(home, *[path if a == "F" else a for a in cmd], timeout=120)
    assert time.monotonic() - t0 < 120
    check_run(p.returncode, p.stderr)
    assert database_whole(os.path.join(home, "sessions.db"))


@budget(3)
@given(data=st.data())
def test_a_launch_onto_a_damaged_database_leaves_a_whole_one(real_db, tmp_path, data):
    """A damaged sessions.db is moved aside (or refused in one line) and the new one is whole."""
    tried("subprocess: launch onto damaged sessions.db")
    d = tempfile.mkdtemp(dir=tmp_path)
    home = os.path.join(d, "home")
    os.mkdir(home, 0o700)
    write_bytes(home, "sessions.db", data.draw(damaged(real_db[0])))
    w = write_bytes(d, "w.toml", b'[session]\nname = "s"\nbaseline = "none"\ninterval = 0.2\n'
                                 b'[[workload]]\nname = "a"\ncommand = ["true"]\n')
    p = gdl(home, "launch", w, "--headless")
    check_run(p.returncode, p.stderr)
    assert database_whole(os.path.join(home, "sessions.db"))
    s = gdl(home, "sessions")
    check_run(s.returncode, s.stderr)



# ---- the crashes the fuzzer found, one focused test each ---------------------------------------

def test_a_proc_stat_cpu_line_that_is_not_numbers_is_no_reading():
    """Found: `cpu \\x00` in /proc/stat raised ValueError out of the host sampler."""
    assert host.parse_cpu_times(b"cpu  1 2 3\ncpu0 1 2 x\n") == []
    assert host.parse_cpu_times(b"cpu  1 2\ncpu0 100 0 100 700\n") == [[1.0, 0.0, 1.0, 7.0]]


@pytest.mark.parametrize("label", ["pid", "world_size", "gpu"])
def test_a_unicode_digit_in_a_nodes_label_is_not_a_number(label):
    """Found: '²'.isdigit() is True but int('²') raises: a node's label `pid="²"` (or
    world_size, gpu) took the fleet view down."""
    text = EXPOSITION.replace(f'{label}="', f'{label}="²', 1)
    node = parse_node("n:1", text)
    assert node.ok


@pytest.mark.parametrize("nodes", ["127.0.0.1:²", "a:٣", "a:1,b:²"])
def test_a_unicode_digit_port_in_nodes_is_a_usage_error(nodes):
    """Found: `--nodes 127.0.0.1:²` raised ValueError (a traceback), not the one line."""
    with pytest.raises(UsageError, match="is not HOST:PORT"):
        parse_nodes(nodes)


@pytest.mark.parametrize("args", [["--metrics", "127.0.0.1:²"], ["serve", "--listen", ":²"],
                                  ["launch", "w.toml", "--metrics", "[::1]:٣"]])
def test_a_unicode_digit_port_to_listen_on_is_one_line(args):
    """The same in `parse_listen` (--metrics, serve --listen): exit 2, one line, before any start."""
    code, _o, err = run_cli(args)
    assert code == 2 and "is not a number from 0 to 65535" in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["²", "-²", "--3", "٣x"])
def test_a_rank_variable_that_is_no_ascii_number_is_left_out(value):
    """Found: RANK='²' (or '--3') in any process's environment raised ValueError in the rank
    reader (found jobs are read from /proc/PID/environ) and in the job's own hook."""
    assert rank_info({"RANK": value, "LOCAL_RANK": "1", "WORLD_SIZE": "-2"}) == {"local_rank": 1,
                                                                                "world_size": -2}


@pytest.mark.parametrize("where", ["[machine]", "[[workload]]"])
def test_a_gpu_memory_too_large_for_64_bits_is_one_line(scratch, where):
    """Found by the long run: `gpu_mem_gb = 1e308` in a trace: 1e308 GiB is no integer
    (OverflowError: cannot convert float infinity to integer), a traceback in `simulate`."""
    text = TRACE_FILES[0].decode()
    text = (text.replace("gpu_mem_gb = 80", "gpu_mem_gb = 1e308") if where == "[machine]"
            else text.replace("gpu_mem_gb = 6", "gpu_mem_gb = 1e308"))
    path = write_bytes(scratch, "t.toml", text.encode())
    with pytest.raises(ConfigError, match=r"gpu_mem_gb = 1e\+308.*at most 1048576"):
        load_trace(path)


def test_compare_on_a_database_damaged_past_its_header_is_one_line(real_db, gdl_home, tmp_path):
    """Found by the long run: a page damaged past the header made `compare` raise
    sqlite3.DatabaseError ("database disk image is malformed"); `export` already said so in
    one line."""
    buf = bytearray(real_db[0])
    buf[4096 * 3:4096 * 4] = b"\xff" * 4096  # the page of the sessions table
    (gdl_home / "sessions.db").write_bytes(bytes(buf))
    code, _o, err = run_cli(["compare", real_db[1][:8], "zz"])
    assert code == 2 and len(err.strip().splitlines()) == 1, err


def test_a_prometheus_url_with_an_unclosed_ipv6_bracket_is_one_line():
    """Found by the long run: `--prometheus http://[::1` raised ValueError ("Invalid IPv6
    URL") out of urlsplit, a traceback."""
    code, _o, err = run_cli(["--prometheus", "http://[::1", "--once"])
    assert code == 2 and "expected the server's URL" in err and len(err.strip().splitlines()) == 1


def test_text_that_is_no_utf8_in_a_damaged_database_is_read_not_raised(real_db, gdl_home):
    """Found by the long run: a damaged byte inside a TEXT value raised UnicodeDecodeError
    out of `sessions` (and the other readers); text is now read with U+FFFD."""
    good = real_db[0]
    at = good.index(b"samplesjob_samples")  # in sqlite_master: a table's name, as text
    (gdl_home / "sessions.db").write_bytes(good[:at] + b"\x80" + good[at + 1:])
    code, _o, err = run_cli(["sessions"])
    check_run(code, err, (0, 2))
