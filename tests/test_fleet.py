"""The fleet view's reading side: node lists, each node's /metrics parsed back into a Node, and
`--nodes ... --once` over three real `serve` processes on loopback, one of them killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from gputop_dl.collect.fleet import parse_node, parse_nodes, read_node
from gputop_dl.collect.host import HostSample
from gputop_dl.errors import UsageError
from gputop_dl.present.prometheus import SnapshotCollector
from gputop_dl.snapshot import Snapshot
from tests.test_serve import FOUND, LAUNCHED, VERDICT, four_gpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_node_lists():
    assert parse_nodes("a:9402, b ,10.0.0.3:19000") == ["a:9402", "b:9402", "10.0.0.3:19000"]
    for bad, says in (("a:http", "'a:http' is not HOST:PORT"), ("a:70000", "not HOST:PORT"),
                      ("http://a/metrics", "not HOST:PORT"), (" , ", "comma-separated")):
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
        doc = json.loads(out.stdout)
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


@pytest.mark.parametrize("args,says", [(["--nodes", "a:1"], "--nodes goes with --once"),
                                       (["--nodes", "a:x", "--once"], "not HOST:PORT")])
def test_fleet_bad_usage_is_one_line_exit_2(args, says):
    out = subprocess.run([sys.executable, "-m", "gputop_dl", *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
