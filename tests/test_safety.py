"""Safe on a shared box: many workloads, signals in every phase, linear reads."""

import os
import resource
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gputop_dl.analyse.recorded.summary import _job_result, corun_events, summarize
from gputop_dl.config import MAX_WORKLOADS, ConfigError, load_session
from gputop_dl.record.store import Store
from gputop_dl.runner.engines import stop_on_signals
from tests.conftest import write


def many(n: int, command: str = '["true"]') -> str:
    body = '[session]\nname = "many"\ninterval = 0.5\nbaseline = "none"\n'
    return body + "".join(f'[[workload]]\nname = "j{i}"\ncommand = {command}\n'
                          for i in range(n))


def test_a_file_with_too_many_workloads_is_one_line(tmp_path):
    path = write(tmp_path, "w.toml", many(MAX_WORKLOADS + 1))
    with pytest.raises(ConfigError) as e:
        load_session(path, gpu_count=0)
    msg = str(e.value)
    assert "\n" not in msg and f"{MAX_WORKLOADS + 1} [[workload]] tables" in msg
    assert f"at most {MAX_WORKLOADS}" in msg
    p = subprocess.run([sys.executable, "-m", "gputop_dl", "launch", path, "--headless"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr


def _session_with_jobs(n: int) -> tuple[Store, str]:
    store = Store()
    sid = store.create_session("s", file=None, command="t", kind="launch", environment={})
    for i in range(n):
        store.upsert_job(sid, f"j{i}", launched=True, config={"warmup_steps": 0},
                         status="done")
        store.add_events(sid, f"j{i}", "co-run", [
            {"ev": "started", "t": 1.0, "batch_size": 4},
            {"ev": "step", "t": 2.0, "epoch": 0, "step": 0, "t_data": 0.0, "t_step": 0.1,
             "samples": 4},
            {"ev": "epoch", "t": 3.0 + i, "epoch": 0, "time_s": 1.5, "peak_mem": 100 + i}])
    store.commit()
    return store, sid


def test_the_summary_reads_the_jobs_list_once_not_once_per_job():
    store, sid = _session_with_jobs(40)
    queries = []
    store.db.set_trace_callback(queries.append)
    summary = summarize(store, sid)
    store.db.set_trace_callback(None)
    whole = [q for q in queries if "FROM jobs WHERE session_id" in q]
    assert len(summary.jobs) == 40
    assert len(whole) <= 3, whole  # the jobs, the events of the session, the notable ones
    # the per-session read gives what the per-job read gave
    slow = {r.name: r for r in summary.jobs}
    for j in store.jobs(sid)[:5]:
        alone, _ = _job_result(store, sid, j, {})
        assert alone == slow[j["name"]]
    assert corun_events(store, sid)[("j3", "epoch")] == corun_events(store, sid, "j3")[("j3", "epoch")]
    store.close()


class _Engine:
    def __init__(self, running):
        self.running = running
        self.stops = 0

    def request_stop(self, reason="interrupted"):
        self.stops += 1


def test_a_signal_after_the_engine_ended_cuts_the_summary_short():
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                            signal.SIGALRM)}
    try:
        eng = _Engine(running=False)
        stop_on_signals(eng)
        with pytest.raises(KeyboardInterrupt):
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        eng = _Engine(running=True)
        stop_on_signals(eng)
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # stops the engine, arms a deadline
        assert eng.stops == 1 and signal.getitimer(signal.ITIMER_REAL)[0] > 0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, h in old.items():
            signal.signal(s, h)


def _sleepers(mark: str) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"])
            if (p.info["cmdline"] or [None])[-1:] == [mark]]


@pytest.mark.shares_box("a signal and what it leaves")
@pytest.mark.heavy
def test_term_while_starting_many_jobs_stops_them_all_and_exits_130(tmp_path):
    """A TERM once some of 600 jobs run (waiting on the processes, not on a clock): no more are
    started, every started one is stopped, the session is kept as interrupted."""
    mark = "611.25"
    path = write(tmp_path, "w.toml", many(600, f'["sleep", "{mark}"]'))
    p = subprocess.Popen([sys.executable, "-m", "gputop_dl", "launch", path, "--headless"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(_sleepers(mark)) < 20 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert len(_sleepers(mark)) >= 20
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 130, p.stderr.read()
        deadline = time.monotonic() + 10
        while _sleepers(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _sleepers(mark)
        store = Store(readonly=True)
        s = store.session()
        assert s.state == "interrupted"
        assert not [j for j in store.jobs(s.id) if j["status"] == "running"]
        store.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for pid in _sleepers(mark):
            os.kill(pid, signal.SIGKILL)


GOOD = """
[[workload]]
name = "good"
model = "synthetic"
input_size = 8
num_classes = 10
batch_size = 4
num_workers = 0
sample_cpu_ms = 1.0
step_device_ms = 20.0
epochs = 1
steps_per_epoch = 15
warmup_steps = 1
"""


def test_a_job_that_died_at_start_up_is_named_and_the_one_that_ran_is_judged(tmp_path):
    from gputop_dl.collect.nvml.gpus import Nvml
    from gputop_dl.runner import run_file

    empty = tmp_path / "empty_images"
    empty.mkdir()
    path = write(tmp_path, "w.toml", '[session]\nname = "t"\ninterval = 0.2\nbaseline = "none"\n'
                 + GOOD + f'\n[[workload]]\nname = "hog"\ndataset = "imagefolder"\n'
                 f'root = "{empty}"\nmodel = "resnet18"\nbatch_size = 2\nnum_workers = 0\n'
                 'epochs = 1\n')
    eng = run_file(path, nvml=Nvml())
    assert eng.runs["hog"].status == "failed" and eng.runs["good"].status == "done"
    v = eng.verdict
    assert list(v["evidence"]["died_at_start"]) == ["hog"]
    assert "FileNotFoundError" in v["evidence"]["died_at_start"]["hog"]
    lines = " ".join(v["evidence_lines"]) + v["reason"]
    assert "hog failed at start-up" in lines
    assert "good" not in v["reason"] or "fewer than" not in v["reason"], v["reason"]
    assert [j["name"] for j in v["jobs"]] == ["good"]


# --- memory: sizes up front, a cap per job, the cause named ------------------------------------

def _workload_error(tmp_path, body: str) -> str:
    path = write(tmp_path, "w.toml", '[session]\nname = "t"\n[[workload]]\nname = "a"\n' + body)
    with pytest.raises(ConfigError) as e:
        load_session(path, gpu_count=0)
    return str(e.value)


def test_sizes_are_checked_up_front(tmp_path):
    msg = _workload_error(tmp_path, "batch_size = 1000000000\n")
    assert "key 'batch_size'" in msg and "1000000000" in msg
    msg = _workload_error(tmp_path, "batch_size = 64\ndataset_size = 10\n")
    assert "larger than dataset_size = 10" in msg
    msg = _workload_error(tmp_path, 'batch_size = 512\nmemory_limit = "100MiB"\n')
    assert "memory cap is 100 MiB" in msg and "\n" not in msg
    msg = _workload_error(tmp_path, 'memory_limit = "lots"\n')
    assert "key 'memory_limit'" in msg and '"25%"' in msg
    path = write(tmp_path, "ok.toml", '[session]\nname = "t"\n[[workload]]\nname = "a"\n'
                 'memory_limit = "1GiB"\n[[workload]]\nname = "b"\nmemory_limit = "10%"\n')
    a, b = load_session(path, gpu_count=0).workloads
    assert a.memory_limit == 1 << 30 and b.memory_limit == psutil.virtual_memory().total // 10


def test_a_memory_error_under_an_rlimit_is_not_called_host_oom():
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this test process already runs under an address-space rlimit")
    code = ("import resource, sys; from gputop_dl.injob.channel import host_memory_cause as c; a = c(); "
            "resource.setrlimit(resource.RLIMIT_AS, (8 << 30, resource.RLIM_INFINITY)); "
            "print(a, c())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert out.stdout.split() == ["host-oom", "memory-limit"], out.stderr


@pytest.mark.shares_box("a memory cap, not CPU")
@pytest.mark.heavy
def test_a_runaway_job_fails_alone_on_its_memory_cap(tmp_path):
    """A job that allocates 20 MiB every 50 ms under memory_limit = 200MiB is killed with
    "memory cap" as its cause; the other job finishes; the host's available memory stays
    above a floor the whole time (the job would stop at 2 GiB by itself anyway)."""
    hog = ("import time\\nx = []\\nfor _ in range(100):\\n    x.append(bytearray(20 << 20))\\n"
           "    time.sleep(0.05)\\ntime.sleep(60)")
    path = write(tmp_path, "w.toml", '[session]\nname = "t"\ninterval = 0.2\nbaseline = "none"\n'
                 f'[[workload]]\nname = "hog"\nmemory_limit = "200MiB"\n'
                 f'command = ["{sys.executable}", "-c", "{hog}"]\n'
                 '[[workload]]\nname = "good"\ncommand = ["sleep", "4"]\n')
    floor = psutil.virtual_memory().available - (1 << 30)
    p = subprocess.Popen([sys.executable, "-m", "gputop_dl", "launch", path, "--headless"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lowest = psutil.virtual_memory().available
    while p.poll() is None:
        lowest = min(lowest, psutil.virtual_memory().available)
        time.sleep(0.02)
    out = p.stdout.read()
    assert lowest > floor, (lowest, floor)
    store = Store(readonly=True)
    jobs = {j["name"]: j for j in store.jobs(store.session().id)}
    store.close()
    assert jobs["hog"]["status"] == "failed", out
    assert jobs["hog"]["failure"].startswith("memory cap: its processes used"), jobs["hog"]
    assert "over its memory_limit of 200 MiB" in jobs["hog"]["failure"]
    assert jobs["good"]["status"] == "done"


@pytest.mark.shares_box("a memory cap, not CPU")
@pytest.mark.heavy
def test_the_memory_cap_holds_between_ticks_at_a_long_interval(tmp_path):
    """At `interval = 5` a job once reached 2.7x its cap before the next tick read it: the cap
    is checked every 0.25 s between ticks, so the job is stopped near it."""
    import re

    hog = ("import time\\nx = []\\nfor _ in range(100):\\n    x.append(bytearray(20 << 20))\\n"
           "    time.sleep(0.05)\\ntime.sleep(60)")
    path = write(tmp_path, "w.toml", '[session]\nname = "t"\ninterval = 5\nbaseline = "none"\n'
                 f'[[workload]]\nname = "hog"\nmemory_limit = "200MiB"\n'
                 f'command = ["{sys.executable}", "-c", "{hog}"]\n')
    r = subprocess.run([sys.executable, "-m", "gputop_dl", "launch", path, "--headless"],
                       capture_output=True, text=True, timeout=120)
    store = Store(readonly=True)
    [hog_job] = store.jobs(store.session().id)
    store.close()
    used = re.search(r"used ([0-9.]+) ([MG])iB", hog_job["failure"] or "")
    assert hog_job["status"] == "failed" and used, (hog_job, r.stdout)
    mib = float(used.group(1)) * (1024 if used.group(2) == "G" else 1)
    assert mib <= 1.6 * 200, hog_job["failure"]


# --- smaller ones -------------------------------------------------------------------------------

def test_the_exporter_answers_metrics_and_root_and_404_elsewhere():
    import http.client

    from gputop_dl.present.metrics_http import MetricsServer
    from gputop_dl.present.prometheus import SnapshotCollector

    srv = MetricsServer(SnapshotCollector(hostname="h"), "127.0.0.1:0").start()
    try:
        got = {}
        for path in ("/metrics", "/", "/debug", "/../../etc/passwd", "/metrics/x"):
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            c.request("GET", path)
            r = c.getresponse()
            got[path] = (r.status, r.read())
            c.close()
        assert got["/metrics"][0] == got["/"][0] == 200
        assert b"process_cpu_seconds_total" in got["/metrics"][1]
        for path in ("/debug", "/../../etc/passwd", "/metrics/x"):
            assert got[path][0] == 404 and b"passwd" not in got[path][1]
    finally:
        srv.stop()


def test_an_export_is_private_and_elsewhere_follows_the_umask_only_when_shared(tmp_path, gdl_home):
    """A report holds each job's command line, so it is 0600 wherever it is written;
    `export --shared` leaves a file outside the data dir to the umask, never one inside it."""
    from gputop_dl.present.report import export_session

    store, sid = _session_with_jobs(2)
    store.end_session(sid, "finished")
    store.close()
    inside = export_session(sid, str(gdl_home / "r.md"), shared=True)
    outside = export_session(sid, str(tmp_path / "r.json"))
    shared = export_session(sid, str(tmp_path / "s.json"), shared=True)
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(inside).st_mode & 0o777 == 0o600
    assert os.stat(outside).st_mode & 0o777 == 0o600
    assert os.stat(shared).st_mode & 0o777 == 0o666 & ~umask


def test_a_data_dir_on_a_read_only_file_system_is_called_read_only(gdl_home, monkeypatch):
    from gputop_dl.record import paths

    real = os.statvfs

    class Ro:
        def __init__(self, st):
            self.f_flag = st.f_flag | os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda p: Ro(real(p)) if str(p) == str(gdl_home) else real(p))
    with pytest.raises(paths.StoreError) as e:
        paths.data_dir()
    assert "read-only (on a read-only file system)" in str(e.value)
    assert "not writable" not in str(e.value)
    assert paths.data_dir(writable=False) == str(gdl_home)  # reading it is fine


def test_a_tui_in_the_background_of_its_terminal_says_so(monkeypatch):
    from gputop_dl.errors import UsageError
    from gputop_dl.runner import terminal

    monkeypatch.setattr(os, "isatty", lambda fd: True)
    monkeypatch.setattr(os, "tcgetpgrp", lambda fd: os.getpgrp() + 1)
    assert terminal.background_terminal()
    with pytest.raises(UsageError) as e:
        terminal.require_foreground("add --headless")
    assert "background" in str(e.value) and "timeout" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setattr(os, "tcgetpgrp", lambda fd: os.getpgrp())
    assert not terminal.background_terminal()
    terminal.require_foreground("add --headless")


def test_a_signal_as_the_session_finishes_by_itself_still_exits_130():
    """The fault matrix's race: TERM arrives while the engine is finishing on its own (every job
    ended, the session recorded finished); the summary then ran to its end and exited 0."""
    from types import SimpleNamespace

    from gputop_dl.engine.core import Engine

    done = SimpleNamespace(error=None, state="finished", signalled=False, runs={},
                           recorder=SimpleNamespace(failure=None))
    assert Engine.exit_code(done) == 0
    done.signalled = True  # what stop_on_signals' handler sets
    assert Engine.exit_code(done) == 130
