"""The fleet: node lists (comma-separated and TOML), each node's /metrics parsed back into a Node,
the ranks of distributed jobs grouped across nodes, a Prometheus server's API mapped to the same
Nodes, the poller, and `--nodes ... --once` / the live view over real `serve` processes on
loopback, one of them killed."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from gputop_dl.analyse.live.distributed import group_distributed
from gputop_dl.collect.fleet.nodes import (Node, load_node_file, nodes_from_prometheus, parse_node,
                                     parse_nodes, read_fleet, read_node, resolve_nodes,
                                     text_samples)
from gputop_dl.collect.fleet.poll import FleetPoller
from gputop_dl.collect.proc.host import HostSample
from gputop_dl.errors import UsageError
from gputop_dl.present.fleet import JOB_COLUMNS, job_cells
from gputop_dl.present.prometheus import SnapshotCollector
from gputop_dl.snapshot import Snapshot
from tests.fakes.samples import FOUND, LAUNCHED, VERDICT, four_gpus
from tests.schema_check import check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_node_lists():
    assert parse_nodes("a:9402, b ,10.0.0.3:19000,[::1]:7") == ["a:9402", "b:9402", "10.0.0.3:19000", "[::1]:7"]
    for bad, says in (("a:http", "'a:http' is not HOST:PORT"), ("a:70000", "not HOST:PORT"),
                      ("http://a/metrics", "not HOST:PORT"), ("a:1:2", "not HOST:PORT"),
                      (" , ", "comma-separated")):
        with pytest.raises(UsageError, match=says):
            parse_nodes(bad)


def test_a_nodes_exposition_reads_back_as_the_snapshot_it_came_from():
    c = SnapshotCollector(hostname="node7")
    host = HostSample(cpus=8, cpu_busy=0.75, per_cpu=(0.5, 1.0), load1=6.5)
    c.feed(Snapshot(time=time.time(), gpu_status="ok", gpus=four_gpus(), host=host,
                    jobs=(LAUNCHED, FOUND), verdict=VERDICT, session_id="s1"))
    reg = CollectorRegistry()
    reg.register(c)
    n = parse_node("node7:9402", generate_latest(reg).decode())
    assert n.ok and n.hostname == "node7" and n.mode == "monitor" and n.age_s < 5
    assert [g["index"] for g in n.gpus] == ["0", "1", "2", "3"] and n.gpus[1]["util"] == 0.97
    assert (n.cpus, n.cpu_busy, n.load1) == (8, 0.75, 6.5)
    jobs = {j.name: j for j in n.jobs}
    assert jobs["bs32"].pid == 4242 and jobs["bs32"].slowdown == 1.4
    assert jobs["bs32"].stall_fraction == 0.31 and jobs["train.py"].cpu_cores == 0.9
    assert (n.verdict, n.confidence) == ("cpu-bound", 0.8)


def test_a_slowdowns_source_and_a_bound_where_there_is_none_reach_the_fleets_row():
    """A job whose own pace is only bounded ("at least 36× slower") shows the bound, not "–";
    a measured one its source."""
    slow = dataclasses.replace(FOUND, slowdown_at_least=36.0, slowdown_source="own pace")
    c = SnapshotCollector(hostname="node7")
    c.feed(Snapshot(time=time.time(), gpu_status="ok", gpus=four_gpus(),
                    host=HostSample(cpus=8), jobs=(LAUNCHED, slow), verdict=VERDICT))
    reg = CollectorRegistry()
    reg.register(c)
    n = parse_node("node7:9402", generate_latest(reg).decode())
    jobs = {j.name: j for j in n.jobs}
    bounded, measured = jobs["train.py"], jobs["bs32"]
    assert (bounded.slowdown, bounded.slowdown_at_least, bounded.slowdown_source) == (
        None, 36.0, "own pace")
    assert (measured.slowdown, measured.slowdown_at_least, measured.slowdown_source) == (
        1.4, None, "measured")
    col = [h for h, _ in JOB_COLUMNS].index("slowdown")
    assert job_cells(n, bounded)[col].startswith("≥36×")
    assert job_cells(n, measured)[col].startswith("1.40×")
    # a job that outside load slows more than the other jobs do: that figure, marked "out"
    out = dataclasses.replace(FOUND, slowdown=1.0, slowdown_source="estimated",
                              outside_slowdown=3.7)
    c.feed(Snapshot(time=time.time(), gpu_status="ok", gpus=four_gpus(),
                    host=HostSample(cpus=8), jobs=(LAUNCHED, out), verdict=VERDICT))
    n = parse_node("node7:9402", generate_latest(reg).decode())
    found = {j.name: j for j in n.jobs}["train.py"]
    assert found.outside_slowdown == 3.7 and job_cells(n, found)[col] == "3.70× out"


def test_garbage_and_other_exporters_are_nodes_that_say_so():
    assert "not Prometheus text" in parse_node("x:1", "<html>{not metrics").error
    other = parse_node("x:1", "# TYPE node_load1 gauge\nnode_load1 0.5\n")
    assert not other.ok and "not a gputop-dl exporter" in other.error
    assert "unreachable" in read_node("127.0.0.1:9", timeout=1).error


def serve(port: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-m", "gputop_dl", "serve", "--listen",
                          "127.0.0.1:0", "--interval", "0.5", "--stall-budget", "0"],
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stderr.readline()
    assert line.startswith("gputop-dl: serving http://127.0.0.1:"), line
    p.address = line.split()[-1].removeprefix("http://").removesuffix("/metrics")
    return p


@pytest.mark.shares_box("servers on loopback and a kill")
def test_end_to_end_fleet_of_three_serves_one_killed():
    procs = [serve(0) for _ in range(3)]
    try:
        time.sleep(1.5)  # each has a first sample
        procs[1].kill()
        procs[1].wait()
        nodes = ",".join(p.address for p in procs)
        out = subprocess.run([sys.executable, "-m", "gputop_dl", "--nodes", nodes, "--once",
                              "--json"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        doc = check(json.loads(out.stdout))
        assert doc["schema"] == "gputop-dl.fleet/1"
        ok = [n["ok"] for n in doc["nodes"]]
        assert ok == [True, False, True]
        assert "unreachable" in doc["nodes"][1]["error"]
        assert all(n["cpus"] and n["mode"] == "serve" for n in doc["nodes"] if n["ok"])
        table = subprocess.run([sys.executable, "-m", "gputop_dl", "--nodes", nodes, "--once"],
                               capture_output=True, text=True, timeout=60)
        assert table.returncode == 0 and "unreachable" in table.stdout
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()




# --- node lists in TOML ----------------------------------------------------------------------

def write(tmp_path, body: str, name: str = "nodes.toml") -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def test_a_toml_node_list(tmp_path):
    path = write(tmp_path, '[[node]]\naddress = "gpu-1:9402"\nname = "rack1-a"\n\n'
                           '[[node]]\naddress = "gpu-2"\n')
    assert load_node_file(path) == (["gpu-1:9402", "gpu-2:9402"], {"gpu-1:9402": "rack1-a"})
    assert resolve_nodes(path) == load_node_file(path)
    assert resolve_nodes("a,b:1") == (["a:9402", "b:1"], {})
    shipped = os.path.join(ROOT, "docs", "nodes.toml")
    addresses, _names = load_node_file(shipped)  # the example in the docs loads
    assert len(addresses) >= 2


@pytest.mark.parametrize("body,says", [
    ('[[node]]\naddres = "a:1"\n', "[[node]] #1: unknown key 'addres', expected address or name"),
    ('[[node]]\naddress = "a:1"\n[[node]]\naddress = "b:http"\n',
     "[[node]] #2 key 'address': 'b:http' is not HOST:PORT"),
    ('[[node]]\nname = "x"\n', "[[node]] #1 key 'address': missing"),
    ('[[node]]\naddress = 9402\n', "key 'address': 9402 is not a string"),
    ('[[node]]\naddress = "a"\nname = ""\n', "key 'name': '', expected a non-empty string"),
    ('[[node]]\naddress = "a"\n[[node]]\naddress = "a:9402"\n', "a:9402 is listed twice"),
    ('nodes = ["a:1"]\n', "unknown key 'nodes' at the top level, expected only [[node]]"),
    ('[node]\naddress = "a"\n', "no [[node]] tables"),
    ('[[node]\naddress = "a"\n', "not valid TOML"),
])
def test_a_bad_toml_node_list_is_one_line_naming_file_and_key(tmp_path, body, says):
    path = write(tmp_path, body)
    with pytest.raises(UsageError) as err:
        load_node_file(path)
    msg = str(err.value)
    assert says in msg and path in msg and "\n" not in msg


# --- distributed jobs (torchrun) across nodes --------------------------------------------------

EXPOSITION = """\
# HELP gputop_dl_exporter_info gputop-dl's version and mode
# TYPE gputop_dl_exporter_info gauge
gputop_dl_exporter_info{{Hostname="{host}",version="0.1",mode="serve"}} 1
# TYPE gputop_dl_job_info gauge
gputop_dl_job_info{{Hostname="{host}",job_name="torchrun train.py",pid="{pid}",launched="false",status="running",phase="",device="cuda",model="",run_id="{run}",world_size="{ws}"}} 1
gputop_dl_job_info{{Hostname="{host}",job_name="eval.py",pid="9",launched="false",status="running",phase="",device="",model="",run_id="",world_size=""}} 1
# TYPE gputop_dl_job_step_seconds gauge
gputop_dl_job_step_seconds{{Hostname="{host}",job_name="torchrun train.py",pid="{pid}"}} {step}
# TYPE gputop_dl_job_rank_info gauge
{ranks}
"""


def node_text(host: str, pid: int, ranks: list[tuple[int, int]], *, ws: str = "4",
              run: str = "rdzv-1", step: float = 0.4) -> str:
    lines = "\n".join(
        f'gputop_dl_job_rank_info{{Hostname="{host}",job_name="torchrun train.py",pid="{pid}",'
        f'run_id="{run}",rank="{r}",local_rank="{lr}",world_size="{ws}",rank_pid="{pid + 1 + lr}"}} 1'
        for r, lr in ranks)
    return EXPOSITION.format(host=host, pid=pid, run=run, ws=ws, step=step, ranks=lines)


def test_ranks_of_a_distributed_job_parse_into_the_node_jobs():
    n = parse_node("a:1", node_text("a", 100, [(0, 0), (1, 1)]))
    jobs = {j.name: j for j in n.jobs}
    tr = jobs["torchrun train.py"]
    assert (tr.run_id, tr.world_size, tr.pid, tr.step_time_s) == ("rdzv-1", 4, 100, 0.4)
    assert tr.ranks == [{"rank": 0, "local_rank": 0, "rank_pid": 101},
                        {"rank": 1, "local_rank": 1, "rank_pid": 102}]
    assert (jobs["eval.py"].run_id, jobs["eval.py"].world_size, jobs["eval.py"].ranks) == (None, None, [])


def test_an_exporter_without_the_rank_labels_still_parses():
    old = node_text("a", 100, []).replace(',run_id="rdzv-1",world_size="4"', "") \
        .replace(',run_id="",world_size=""', "")
    assert "run_id" not in old
    n = parse_node("a:1", old)
    assert n.ok and {j.name for j in n.jobs} == {"torchrun train.py", "eval.py"}
    assert all(j.run_id is None and j.ranks == [] for j in n.jobs)
    assert group_distributed([n]) == []


def test_ranks_are_grouped_across_nodes_and_a_missing_rank_shows_as_missing():
    a = parse_node("a:1", node_text("a", 100, [(0, 0), (1, 1)], step=0.4))
    b = parse_node("b:1", node_text("b", 200, [(2, 0), (3, 1)], step=0.7))
    other = parse_node("c:1", node_text("c", 300, [(0, 0)], run="rdzv-2", ws=""))
    full = group_distributed([a, b, other])
    assert [d["run_id"] for d in full] == ["rdzv-1", "rdzv-2"]
    d = full[0]
    assert (d["world_size"], d["ranks_seen"], d["missing_ranks"], d["complete"]) == (4, [0, 1, 2, 3], [], True)
    assert [(e["node"], e["ranks"]) for e in d["nodes"]] == [("a:1", [0, 1]), ("b:1", [2, 3])]
    assert (d["slowest_step_s"], d["slowest_node"]) == (0.7, "b:1")
    assert (full[1]["world_size"], full[1]["complete"]) == (None, False)  # world size unknown
    # node b goes down: its ranks are missing, named with where they were last seen
    seen: dict = {}
    group_distributed([a, b], seen)
    down = Node("b:1", False, "unreachable (Connection refused)")
    d = group_distributed([a, down], seen)[0]
    assert (d["ranks_seen"], d["missing_ranks"], d["complete"]) == ([0, 1], [2, 3], False)
    assert d["missing_last_seen"] == {"2": "b:1", "3": "b:1"}
    # without memory (--once) the world size alone says which are missing
    assert group_distributed([a, down])[0]["missing_ranks"] == [2, 3]


def test_one_rank_seen_by_two_exporters_of_one_host_counts_once_launch_first():
    """Two launches on one host (the loopback two-node test, or serve beside a launch): each
    exporter lists its own ranks as launched and the other's torchrun as a found job."""
    import dataclasses

    def node(addr, own_pid, own_rank, other_pid, other_rank):
        own = node_text("h", own_pid, [(own_rank, 0)], ws="2")
        found = node_text("h", other_pid, [(other_rank, 0)], ws="2")
        a, b = parse_node(addr, own), parse_node(addr, found)
        jobs = [dataclasses.replace(j, launched=True) for j in a.jobs if j.run_id] + \
            [j for j in b.jobs if j.run_id]
        return dataclasses.replace(a, jobs=jobs)

    first, second = node("h:1", 100, 0, 200, 1), node("h:2", 200, 1, 100, 0)
    (d,) = group_distributed([first, second])
    assert [(e["node"], e["ranks"]) for e in d["nodes"]] == [("h:1", [0]), ("h:2", [1])]
    assert d["complete"] and d["ranks_seen"] == [0, 1]
    assert sorted((x["node"], x["same_as"]) for x in d["duplicates"]) == [("h:1", "h:2"), ("h:2", "h:1")]
    assert parse_node("x:1", node_text("h", 1, [(0, 0)])).jobs[1].launched is False


def test_once_table_and_json_show_the_distributed_job(tmp_path, capsys):
    from gputop_dl.present.fleet import distributed_table
    from gputop_dl.text.console import console

    a = parse_node("a:1", node_text("a", 100, [(0, 0), (1, 1)]))
    groups = group_distributed([a, Node("b:1", False, "unreachable (timed out)")])
    out = console()
    out.print(distributed_table(groups))
    shown = capsys.readouterr().out
    assert "rdzv-1" in shown and "2/4" in shown and "2, 3" in shown and "a:1: 0,1" in shown


# --- the same Nodes from a Prometheus server's HTTP API ---------------------------------------

def api_answer(scrapes: dict[str, str | None], job: str = "gputop") -> dict:
    """What Prometheus's /api/v1/query answers for PROMETHEUS_QUERY over these targets
    (address -> exposition text, None for a target that is down)."""
    result = []
    for inst, body in scrapes.items():
        result.append({"metric": {"__name__": "up", "instance": inst, "job": job},
                       "value": [time.time(), "0" if body is None else "1"]})
        for name, labels, value in text_samples(body or ""):
            if name.startswith("gputop_dl_"):
                result.append({"metric": {"__name__": name, **labels, "instance": inst, "job": job},
                               "value": [time.time(), repr(value)]})
    result.append({"metric": {"__name__": "up", "instance": "node-exporter:9100", "job": "node"},
                   "value": [time.time(), "1"]})  # another exporter's target: not a fleet node
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_prometheus_answers_map_to_the_nodes_a_scrape_gives():
    a, b = node_text("a", 100, [(0, 0), (1, 1)]), node_text("b", 200, [(2, 0)])
    nodes = nodes_from_prometheus(api_answer({"a:9402": a, "b:9402": b, "c:9402": None}))
    assert [n.address for n in nodes] == ["a:9402", "b:9402", "c:9402"]
    for n, text in zip(nodes, (a, b)):
        assert n == parse_node(n.address, text)
    assert not nodes[2].ok and "up == 0" in nodes[2].error
    assert group_distributed(nodes)[0]["missing_ranks"] == [3]


class FakePrometheus:
    """/api/v1/query on loopback answering `self.answer` (a dict as JSON, or raw bytes)."""

    def __init__(self, answer, code: int = 200):
        self.answer, self.code, self.queries = answer, code, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.queries.append(self.path)
                body = outer.answer if isinstance(outer.answer, bytes) else json.dumps(outer.answer).encode()
                self.send_response(outer.code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "gputop_dl", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.shares_box("servers on loopback")
def test_end_to_end_prometheus_api_built_from_real_serves():
    procs = [serve(0) for _ in range(2)]
    try:
        time.sleep(1.5)
        scrapes = {}
        for p in procs:
            with urllib.request.urlopen(f"http://{p.address}/metrics", timeout=5) as r:
                scrapes[p.address] = r.read().decode()
        scrapes["127.0.0.1:9"] = None  # a third target Prometheus sees down
        prom = FakePrometheus(api_answer(scrapes))
        try:
            out = cli("--prometheus", prom.url + "/", "--once", "--json")
            assert out.returncode == 0, out.stderr
            doc = check(json.loads(out.stdout))
            assert doc["schema"] == "gputop-dl.fleet/1" and doc["source"] == prom.url
            by = {n["address"]: n for n in doc["nodes"]}
            assert [by[p.address]["ok"] for p in procs] == [True, True]
            for p in procs:  # the same Node the scrape itself gives
                want = parse_node(p.address, scrapes[p.address]).to_json()
                got = by[p.address]
                assert {k: v for k, v in got.items() if k != "age_s"} == \
                    {k: v for k, v in want.items() if k != "age_s"}
                assert got["mode"] == "serve" and got["cpus"] >= 1
            assert not by["127.0.0.1:9"]["ok"] and "up == 0" in by["127.0.0.1:9"]["error"]
            assert "node-exporter:9100" not in by
            assert prom.queries and "query=" in prom.queries[0]
            table = cli("--prometheus", prom.url, "--once")
            assert table.returncode == 0 and "up == 0" in table.stdout
        finally:
            prom.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.parametrize("answer,code,says", [
    (b"<html>proxy error", 200, "not a Prometheus API answer (not JSON)"),
    ({"status": "error", "errorType": "bad_data", "error": "parse error"}, 400,
     "HTTP 400 (status 'error': bad_data parse error)"),
    ({"status": "success", "data": {"resultType": "matrix", "result": []}}, 200,
     "not an instant vector"),
])
def test_a_prometheus_that_answers_garbage_is_one_line_exit_1(answer, code, says):
    prom = FakePrometheus(answer, code)
    try:
        out = cli("--prometheus", prom.url, "--once")
    finally:
        prom.close()
    assert out.returncode == 1 and says in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


# --- the poller and the live view ---------------------------------------------------------------

def test_polls_never_overlap_and_keep_the_interval():
    spans = []

    def slow_read():
        t0 = time.monotonic()
        time.sleep(0.3 if len(spans) == 1 else 0.02)  # the second poll is slow
        spans.append((t0, time.monotonic()))
        return [Node("a:1", False, "unreachable (timed out)")]

    poller = FleetPoller(slow_read, interval=0.1)
    got = []
    poller.subscribe(got.append)
    poller.start()
    time.sleep(0.8)
    poller.request_stop()
    assert poller.join(2)
    assert len(spans) >= 4 and len(got) >= 3
    for (_s0, e0), (s1, _e1) in zip(spans, spans[1:]):
        assert s1 >= e0  # the next poll starts after the previous one ended
    starts = [s for s, _e in spans]
    assert all(b - a >= 0.09 for a, b in zip(starts, starts[1:]))
    assert got[0].nodes[0].error == "unreachable (timed out)" and got[0].poll_s >= 0.02


def wait_for(cond, timeout: float = 20.0, step: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


@pytest.mark.shares_box("servers on loopback and a kill")
def test_end_to_end_live_view_keeps_two_nodes_when_one_is_killed():
    """The fleet view on a real poller over three real serves: the killed node's row turns
    unreachable and the other two keep answering, poll after poll."""
    import asyncio

    pytest.importorskip("textual")
    from gputop_dl.present.tui.fleet_app import FleetApp

    procs = [serve(0) for _ in range(3)]
    addresses = [p.address for p in procs]
    poller = FleetPoller(lambda: read_fleet(addresses, timeout=1.0), interval=0.3)

    async def go():
        app = FleetApp(poller)
        async with app.run_test(size=(160, 50)) as pilot:
            table = app.nodes_table

            async def until(cond, timeout=20.0):
                end = time.monotonic() + timeout
                while time.monotonic() < end:
                    await pilot.pause(0.1)
                    if cond():
                        return True
                return False

            def state(a):
                return table.cell(f"node:{a}", "state").text.strip()

            assert await until(lambda: table.row_count == 3 and all(state(a) == "ok" for a in addresses))
            procs[1].kill()
            procs[1].wait()
            assert await until(lambda: state(addresses[1]).startswith("unreachable")), state(addresses[1])
            t_down = app.latest.time
            assert await until(lambda: app.latest.time > t_down + 0.5)  # later polls came
            assert [state(a) for a in (addresses[0], addresses[2])] == ["ok", "ok"]
            assert "unreachable for" in state(addresses[1])  # it answered before
            assert "2 ok, 1 not answering" in str(app.summary.content)
            await pilot.press("q")
        assert not poller.running or poller.join(3)

    try:
        asyncio.run(go())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# --- bad input: one line each, nothing crashes -------------------------------------------------

def garbage_node() -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>{{ not metrics \x00\x1b[31m")

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_a_node_that_answers_garbage_is_a_row_that_says_so():
    srv = garbage_node()
    try:
        out = cli("--nodes", f"127.0.0.1:{srv.server_address[1]}", "--once")
    finally:
        srv.shutdown()
        srv.server_close()
    assert out.returncode == 1 and "not Prometheus text" in out.stdout and "Traceback" not in out.stderr
    assert "\x1b[31m" not in out.stdout  # the node's bytes are text, not terminal codes


@pytest.mark.parametrize("args,says", [
    (["--nodes", "a:x"], "not HOST:PORT"),
    (["--nodes", "a:1,b:9402:7", "--once"], "'b:9402:7' is not HOST:PORT"),
    (["--nodes", "missing.toml"], "--nodes missing.toml: no such file"),
    (["--prometheus", "prometheus:9090"], "--prometheus 'prometheus:9090': expected the server's URL"),
    (["--prometheus", "http://p:9090/?x=1", "--once"], "expected the server's URL"),
    (["--nodes", "a:1", "--prometheus", "http://p:9090"], "give one"),
    (["--nodes", "a:1", "--interval", "0.01"], "--interval 0.01: expected 0.2 to 3600 seconds"),
    (["--nodes", "a:1", "--stall", "2", "--once"], "not the fleet view"),
    (["--nodes", "a:1", "sessions"], "do not go with `sessions`"),
])
def test_fleet_bad_usage_is_one_line_exit_2(args, says):
    out = cli(*args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1


def test_a_bad_toml_node_list_on_the_command_line_is_one_line_exit_2(tmp_path):
    path = write(tmp_path, '[[node]]\naddress = "gpu-1:9402"\n[[node]]\nadress = "gpu-2"\n')
    out = cli("--nodes", path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (f"gputop-dl: error: {path}: [[node]] #2: unknown key 'adress', "
                                  "expected address or name")


def test_a_prometheus_that_stops_answering_keeps_the_last_nodes_aged_not_fresh():
    from gputop_dl.collect.fleet.nodes import PrometheusError

    clock = {"t": 1000.0}
    answers = [[Node("a:1", True, hostname="a", age_s=1.0), Node("b:1", False, "up == 0")]]

    def read():
        if not answers:
            raise PrometheusError("http://p:9090 unreachable (Connection refused)")
        return answers.pop()

    poller = FleetPoller(read, clock=lambda: clock["t"])
    first = poller.poll()
    assert first.error is None and first.nodes[0].age_s == 1.0
    clock["t"] += 30
    later = poller.poll()
    assert later.error and "unreachable" in later.error
    assert [n.address for n in later.nodes] == ["a:1", "b:1"]  # kept, not emptied
    assert later.nodes[0].age_s == 31.0  # shown as stale 31 s, never as fresh
    assert later.nodes[1].error == "up == 0"
    assert FleetPoller(read).poll().nodes == []  # nothing known yet: nothing to keep
