"""Safe on a shared box (issue 27): many workloads, signals in every phase, linear reads."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gputop_dl.analyse.summary import _job_result, corun_events, summarize
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
