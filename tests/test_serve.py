"""`gputop-dl serve` and `--metrics`: the snapshot as Prometheus metrics, parsed back with
prometheus_client's own parser; ended jobs' series vanish; bad addresses are one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputop_dl.cli import main
from gputop_dl.collect.nvml.gpu_sample import REASON_LABELS
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.errors import UsageError
from gputop_dl.present.metrics_http import DEFAULT_PORT, parse_listen
from gputop_dl.present.prometheus import SnapshotCollector
from gputop_dl.snapshot import (Distributed, GpuSample, HostSample, JobSample, RankProc, Snapshot,
                                evolve)

from tests.fakes.nvml import GiB, FakeProcess, FakePynvml
from tests.fakes.procs import GPU_MAPS, TORCH_MAPS, Clock, FakeProc
from tests.fakes.samples import FOUND, LAUNCHED, VERDICT, four_gpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def samples(text: str) -> dict[str, list]:
    """Exposition text -> {sample name: [(labels, value), ...]} via prometheus_client's parser."""
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def one(found: dict, name: str, **labels) -> float:
    hits = [v for lab, v in found.get(name, []) if all(lab.get(k) == w for k, w in labels.items())]
    assert len(hits) == 1, (name, labels, found.get(name))
    return hits[0]


def render(collector: SnapshotCollector) -> dict[str, list]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return samples(generate_latest(reg).decode())


# --- the address ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,want", [
    ("127.0.0.1:9500", ("127.0.0.1", 9500)), (":9500", ("127.0.0.1", 9500)),
    ("9500", ("127.0.0.1", 9500)), ("0.0.0.0", ("0.0.0.0", DEFAULT_PORT)),
    ("[::1]:9500", ("::1", 9500)), ("localhost:0", ("localhost", 0)),
])
def test_listen_addresses(text, want):
    assert parse_listen(text) == want


@pytest.mark.parametrize("text,says", [
    ("127.0.0.1:99999", "port '99999'"), ("host.example:9402", "is not an IP address"),
    ("127.0.0.1:http", "port 'http'"), ("1.2.3:9402", "is not an IP address"),
    ("[::1]9402", "expected HOST:PORT"),
])
def test_bad_listen_addresses_are_one_line(text, says):
    with pytest.raises(UsageError, match=says):
        parse_listen(text)


def test_serve_bad_address_and_port_in_use_exit_2_with_one_line(capsys):
    assert main(["serve", "--listen", "no-such-host:9402"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not an IP address" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--listen", f"127.0.0.1:{port}"]) == 2
        err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot serve metrics on 127.0.0.1:{port}" in err
    assert main(["launch", "x.toml", "--metrics", "1.2.3.4.5:1"]) == 2
    assert "is not an IP address" in capsys.readouterr().err
    assert main(["--once", "--metrics", ":9402"]) == 2


def test_serve_record_onto_a_store_that_takes_no_writes_is_one_line_before_serving(
        gdl_home, capsys):
    """`serve --record` never serves on while recording nothing without a word."""
    (gdl_home / "sessions.db").mkdir()
    assert main(["serve", "--listen", "127.0.0.1:0", "--record"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(gdl_home / "sessions.db") in err


# --- the rendering ----------------------------------------------------------------------------

def test_a_snapshot_renders_gpus_host_jobs_and_verdict_with_dcgm_labels():
    c = SnapshotCollector(hostname="node7", reasons=REASON_LABELS)
    host = HostSample(cpus=8, cpu_busy=0.75, per_cpu=(0.5, 1.0), load1=6.5, load5=5.0, load15=4.0,
                      cpu_pressure_some10=0.2, mem_used=10 * GiB, mem_total=64 * GiB)
    c.feed(Snapshot(time=1234.5, gpu_status="ok", gpus=four_gpus(), host=host,
                    jobs=(LAUNCHED, FOUND), verdict=VERDICT, session_id="s1"))
    m = render(c)
    gpu = "gputop_dl_gpu_utilization_ratio"
    assert sorted(lab["gpu"] for lab, _ in m[gpu]) == ["0", "1", "2", "3"]
    assert {lab["Hostname"] for lab, _ in m[gpu]} == {"node7"}
    assert one(m, gpu, gpu="1", UUID="GPU-fake-0001-0000-0000-0000-000000000000") == 0.97
    assert one(m, "gputop_dl_gpu_temperature_celsius", gpu="1") == 71
    assert one(m, "gputop_dl_gpu_memory_used_bytes", gpu="1") == 30 * GiB
    assert one(m, "gputop_dl_gpu_memory_total_bytes", gpu="0") == 80 * GiB
    assert one(m, "gputop_dl_gpu_sm_clock_hertz", gpu="0") == 1980e6
    assert one(m, "gputop_dl_gpu_power_watts", gpu="0") == 300
    assert [lab["gpu"] for lab, _ in m["gputop_dl_gpu_power_watts"]] == ["0", "1", "2"]  # 3: none
    reason = "gputop_dl_gpu_throttle_reason"
    assert one(m, reason, gpu="2", reason="hw_thermal_slowdown") == 1
    assert one(m, reason, gpu="2", reason="sw_power_cap") == 1
    assert one(m, reason, gpu="0", reason="hw_thermal_slowdown") == 0
    assert one(m, "gputop_dl_host_cpu_busy_ratio") == 0.75
    assert one(m, "gputop_dl_host_cpu_pressure_some_ratio") == 0.2
    assert one(m, "gputop_dl_host_load1") == 6.5
    assert m.get("gputop_dl_host_cgroup_throttled_ratio") is None  # unknown: no sample, not 0
    assert one(m, "gputop_dl_job_cpu_cores", job_name="bs32", pid="4242") == 2.5
    assert one(m, "gputop_dl_job_data_stall_ratio", job_name="bs32", source="trainer") == 0.31
    assert one(m, "gputop_dl_job_step_seconds", job_name="bs32") == 0.125
    assert one(m, "gputop_dl_job_samples_per_second", job_name="bs32") == 256
    assert one(m, "gputop_dl_job_epoch", job_name="bs32") == 2
    assert one(m, "gputop_dl_job_slowdown", job_name="bs32") == 1.4
    assert one(m, "gputop_dl_job_gpu_memory_bytes", job_name="train.py", pid="777") == 2 * GiB
    assert one(m, "gputop_dl_job_info", job_name="bs32", launched="true", phase="co-run") == 1
    assert one(m, "gputop_dl_job_info", job_name="train.py", launched="false") == 1
    assert [lab["job_name"] for lab, _ in m["gputop_dl_job_step_seconds"]] == ["bs32"]
    assert one(m, "gputop_dl_verdict", kind="cpu-bound", session="s1") == 1
    assert one(m, "gputop_dl_verdict", kind="parallel") == 0
    assert one(m, "gputop_dl_verdict_confidence", kind="cpu-bound") == 0.8
    assert one(m, "gputop_dl_last_sample_timestamp_seconds") == 1234.5

    # the launched job ends, the found one is gone: every series of theirs vanishes
    ended = Snapshot(time=1235.5, gpu_status="ok", gpus=four_gpus(), host=host,
                     jobs=(JobSample(name="bs32", pid=4242, launched=True, status="done",
                                     step_time_s=0.1),), verdict=VERDICT, session_id="s1")
    c.feed(ended)
    m = render(c)
    assert not [n for n, rows in m.items() if any("job_name" in lab for lab, _ in rows)]
    assert len(m["gputop_dl_gpu_utilization_ratio"]) == 4


def test_a_distributed_job_has_one_rank_info_per_rank_and_its_run_on_job_info():
    """The contract the fleet view parses: job_info's run_id and world_size ("" when unknown),
    gputop_dl_job_rank_info per rank process this node sees, gone once the job ended."""
    d = Distributed(run_id="ddp-1a2b", world_size=4, nnodes=2, group_rank=1,
                    ranks=(RankProc(rank=2, local_rank=0, pid=901, group_rank=1),
                           RankProc(rank=3, local_rank=1, pid=902, group_rank=1)))
    ddp = JobSample(name="ddp", pid=900, launched=True, status="running", distributed=d,
                    rank_cpu_cores=((2, 1.25), (3, 0.5)))
    c = SnapshotCollector(hostname="node2")
    c.feed(Snapshot(time=1.0, gpu_status="no NVML", jobs=(ddp, FOUND)))
    m = render(c)
    assert one(m, "gputop_dl_job_info", job_name="ddp", pid="900", run_id="ddp-1a2b",
               world_size="4") == 1
    assert one(m, "gputop_dl_job_info", job_name="train.py", run_id="", world_size="") == 1
    rows = sorted(m["gputop_dl_job_rank_info"], key=lambda r: r[0]["rank"])
    assert [lab for lab, _ in rows] == [
        {"Hostname": "node2", "job_name": "ddp", "pid": "900", "run_id": "ddp-1a2b", "rank": r,
         "local_rank": lr, "world_size": "4", "rank_pid": p}
        for r, lr, p in (("2", "0", "901"), ("3", "1", "902"))]
    assert {v for _, v in rows} == {1.0}
    assert one(m, "gputop_dl_job_rank_cpu_cores", job_name="ddp", pid="900", rank="2") == 1.25
    assert one(m, "gputop_dl_job_rank_cpu_cores", job_name="ddp", rank="3") == 0.5
    # unknown figures are "" (ranks that disagree on the world size), never a made-up number
    odd = Distributed(ranks=(RankProc(rank=0, local_rank=None, pid=5),))
    c.feed(Snapshot(time=2.0, gpu_status="no NVML",
                    jobs=(JobSample(name="x", pid=4, launched=False, distributed=odd),)))
    lab, _ = render(c)["gputop_dl_job_rank_info"][0]
    assert (lab["run_id"], lab["local_rank"], lab["world_size"], lab["rank"]) == ("", "", "", "0")
    c.feed(Snapshot(time=3.0, gpu_status="no NVML",
                    jobs=(JobSample(name="ddp", pid=900, launched=True, status="done",
                                    distributed=d),)))
    assert "gputop_dl_job_rank_info" not in render(c)


def test_nothing_but_the_exporter_before_the_first_snapshot_and_a_lost_gpu_is_down():
    c = SnapshotCollector(hostname="n")
    assert set(render(c)) == {"gputop_dl_exporter_info"}
    fake = FakePynvml(gpus=2)
    nv = Nvml(module=fake)
    fake.gpus[1].lost = True
    c.feed(Snapshot(time=1.0, gpu_status="ok", gpus=nv.sample()))
    m = render(c)
    assert one(m, "gputop_dl_gpu_up", gpu="0") == 1 and one(m, "gputop_dl_gpu_up", gpu="1") == 0
    assert [lab["gpu"] for lab, _ in m["gputop_dl_gpu_utilization_ratio"]] == ["0"]


# --- a running exporter, scraped over HTTP -----------------------------------------------------

def scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return samples(r.read().decode())


@pytest.mark.shares_box("the metrics served, not their values")
def test_launch_with_metrics_serves_gpus_jobs_and_verdict_and_drops_ended_jobs_real_launch(
        tmp_path):
    """A launch engine over fake NVML with 4 GPUs, one built-in job launched, one job found on
    a faked /proc (a real `sleep`, so psutil can sample it), its metrics served on a loopback
    port: every kind of series is there while they run, the verdict once judged, and the
    series of both jobs are gone once they ended."""
    from gputop_dl.collect.jobs.discover import Discoverer
    from gputop_dl.collect.jobs.found import FoundJobs
    from gputop_dl.collect.machine import MachineSampler
    from gputop_dl.engine import Engine, LaunchPlan, Recorder
    from gputop_dl.runner import open_spec, start_metrics

    wl = tmp_path / "one.toml"
    wl.write_text('[session]\nname = "one"\ninterval = 0.2\nbaseline = "none"\n'
                  '[[workload]]\nname = "a"\nmodel = "synthetic"\ninput_size = 4\n'
                  'num_classes = 2\nbatch_size = 2\nnum_workers = 0\nstep_device_ms = 20.0\n'
                  'epochs = 2\nsteps_per_epoch = 60\nwarmup_steps = 1\n')
    fake = FakePynvml(gpus=4)
    sleeper = subprocess.Popen(["sleep", "60"])
    fp = FakeProc(str(tmp_path / "proc"))
    fp.add(10, 1, ["bash"])
    fp.add(sleeper.pid, 10, ["python", "found_train.py"], TORCH_MAPS + GPU_MAPS)
    fake.gpus[2].processes = [FakeProcess(pid=sleeper.pid, used_memory=3 * GiB)]
    nvml = Nvml(module=fake)
    spec = open_spec(str(wl), nvml)
    found = FoundJobs(stall=False, discoverer=Discoverer(fp.root, own_pid=1, clock=Clock()))
    engine = Engine(LaunchPlan(spec, "test"), sampler=MachineSampler(nvml, found=found),
                    recorder=Recorder(), interval=spec.interval)
    server = start_metrics(engine, "127.0.0.1:0", "launch")
    try:
        engine.start()
        deadline = time.monotonic() + 120
        seen = None
        while time.monotonic() < deadline and engine.running:
            m = scrape(server.url)
            if m.get("gputop_dl_job_step_seconds") and m.get("gputop_dl_job_epoch"):
                seen = m
                break
            time.sleep(0.2)
        assert seen is not None, "the launched job never showed its step time"
        m = seen
        assert sorted(lab["gpu"] for lab, _ in m["gputop_dl_gpu_utilization_ratio"]) == ["0", "1", "2", "3"]
        assert one(m, "gputop_dl_gpu_memory_total_bytes", gpu="3") == 80 * GiB
        assert one(m, "gputop_dl_job_info", job_name="a", launched="true") == 1
        assert one(m, "gputop_dl_job_step_seconds", job_name="a") > 0
        assert one(m, "gputop_dl_job_info", job_name="found_train.py", pid=str(sleeper.pid),
                   launched="false") == 1
        assert one(m, "gputop_dl_job_gpu_memory_bytes", job_name="found_train.py") == 3 * GiB
        assert one(m, "gputop_dl_host_cpus") >= 1
        assert "process_cpu_seconds_total" in m  # the exporter's own cost

        sleeper.kill()
        sleeper.wait()
        fp.remove(sleeper.pid)
        fake.gpus[2].processes = []
        assert engine.join(120), "the launch did not end"
        m = scrape(server.url)  # served after the engine stopped: its last snapshot
        assert not [n for n, rows in m.items() if any("job_name" in lab for lab, _ in rows)]
        kinds = {lab["kind"]: v for lab, v in m["gputop_dl_verdict"]}
        assert sum(kinds.values()) == 1 and kinds[engine.verdict["kind"]] == 1
        assert one(m, "gputop_dl_verdict_confidence") == engine.verdict["confidence"]
    finally:
        engine.request_stop()
        engine.join(30)
        server.stop()
        if sleeper.poll() is None:
            sleeper.kill()


@pytest.mark.shares_box("a server on loopback")
def test_serve_command_end_to_end(tmp_path):
    """The console script on a loopback port: it says where it serves, answers scrapes with
    the host's series, and exits 0 on SIGTERM."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-m", "gputop_dl", "serve", "--listen", "127.0.0.1:0",
                          "--interval", "0.5", "--stall-budget", "0"],
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stderr.readline()
        assert line.startswith("gputop-dl: serving http://127.0.0.1:"), line
        url = line.split()[-1]
        m = {}
        for _ in range(40):
            m = scrape(url)
            if "gputop_dl_host_cpu_busy_ratio" in m:
                break
            time.sleep(0.25)
        assert one(m, "gputop_dl_exporter_info", mode="serve") == 1
        assert 0 <= one(m, "gputop_dl_host_cpu_busy_ratio") <= 1
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_grafana_dashboard_and_the_scrape_example_use_only_metrics_that_exist():
    import json
    import re

    c = SnapshotCollector(hostname="n", reasons=REASON_LABELS)
    host = HostSample(cpus=2, cpu_busy=0.5, load1=1.0, cpu_pressure_some10=0.1,
                      cgroup_throttled_frac=0.0)
    solo = JobSample(name="x", pid=1, launched=True, step_time_s=0.1, solo_step_time_s=0.08)
    ddp = JobSample(name="ddp", pid=2, launched=True, step_time_s=0.2, rank_cpu_cores=((0, 1.0),),
                    distributed=Distributed(run_id="r", world_size=2, ranks=(
                        RankProc(rank=0, local_rank=0, pid=3),)))
    cw = JobSample(name="cw", pid=4, launched=False, cpu_wait_fraction=0.4,  # CPU wait
                   cpu_throttled_fraction=0.1)
    energy = JobSample(name="e", pid=5, launched=True, energy_j=900.0, energy_w=300.0,
                       energy_per_step_j=30.0, samples_per_joule=2.0, energy_estimate=False)
    gpus = tuple(evolve(g, energy_j=100.0, energy_since=0.5, energy_source="counter",
                        energy_scope="gpu") for g in four_gpus())
    c.feed(Snapshot(time=1.0, gpu_status="ok", gpus=gpus, host=host,
                    jobs=(LAUNCHED, FOUND, solo, ddp, cw, energy), verdict=VERDICT))
    have = set(render(c))
    with open(os.path.join(ROOT, "docs", "grafana", "gputop-dl.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = {n for e in exprs for n in re.findall(r"gputop_dl_\w+", e)}
    assert len(used) >= 20 and used <= have, sorted(used - have)
    assert {"gputop_dl_job_rank_info", "gputop_dl_job_rank_cpu_cores"} <= used
    assert {"gputop_dl_gpu_energy_joules_total", "gputop_dl_job_energy_per_step_joules"} <= used
    with open(os.path.join(ROOT, "docs", "prometheus.yml")) as f:
        assert f":{DEFAULT_PORT}" in f.read()


def test_gpu_clocks_and_pcie_metrics():
    """Throttled share per reason, SM clock max, PCIe link now and max, PCIe bytes/s."""
    g = GpuSample(index=0, name="H100", uuid="GPU-x", util=0.9, sm_clock_max_mhz=1980,
                  throttle=(("power", 0.34), ("thermal", 0.0), ("reliability", None)),
                  pcie_tx_bytes_per_s=3_000_000, pcie_rx_bytes_per_s=12_000_000, pcie_link_gen=3,
                  pcie_link_gen_max=5, pcie_link_width=8, pcie_link_width_max=16)
    c = SnapshotCollector(hostname="n")
    c.feed(Snapshot(time=1.0, gpu_status="ok", gpus=(g, GpuSample(index=1, error="GPU is lost"))))
    m = render(c)
    assert one(m, "gputop_dl_gpu_throttled_ratio", gpu="0", reason="power") == 0.34
    assert one(m, "gputop_dl_gpu_throttled_ratio", gpu="0", reason="thermal") == 0.0
    assert {lab["reason"] for lab, _ in m["gputop_dl_gpu_throttled_ratio"]} == {"power", "thermal"}
    assert one(m, "gputop_dl_gpu_sm_clock_max_hertz", gpu="0") == 1980e6
    assert one(m, "gputop_dl_gpu_pcie_link_generation", gpu="0") == 3
    assert one(m, "gputop_dl_gpu_pcie_link_generation_max", gpu="0") == 5
    assert one(m, "gputop_dl_gpu_pcie_link_width", gpu="0") == 8
    assert one(m, "gputop_dl_gpu_pcie_link_width_max", gpu="0") == 16
    assert one(m, "gputop_dl_gpu_pcie_rx_bytes_per_second", gpu="0") == 12_000_000
    assert one(m, "gputop_dl_gpu_pcie_tx_bytes_per_second", gpu="0") == 3_000_000


def test_idle_connections_hold_a_bounded_number_of_threads_and_time_out():
    """150 idle sockets once held 150 threads for ever: now at most MAX_CONNECTIONS threads,
    the rest closed at once, and the idle ones dropped after READ_TIMEOUT_S."""
    import threading

    from gputop_dl.present import metrics_http
    from gputop_dl.present.metrics_http import MetricsServer

    server = MetricsServer(SnapshotCollector(reasons=REASON_LABELS, mode="serve"),
                           "127.0.0.1:0").start()
    base = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(60)]
    try:
        deadline = time.monotonic() + 3
        while threading.active_count() - base < metrics_http.MAX_CONNECTIONS \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() - base <= metrics_http.MAX_CONNECTIONS
        deadline = time.monotonic() + metrics_http.READ_TIMEOUT_S + 10
        while True:  # once the idle ones time out, a scrape is served again
            try:
                with urllib.request.urlopen(server.url, timeout=2) as r:
                    assert r.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "never served again"
                time.sleep(0.2)
    finally:
        for s in idle:
            s.close()
        server.stop()


def test_a_listen_address_that_is_not_loopback_is_warned_about():
    from gputop_dl.runner.remote import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.1.2.3")
