"""Faults and hostile input (issue 16), with real tiny processes (sleep, python -c) in temporary
data dirs: no orphans however gputop-dl ends."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from gputop_dl import watchdog
from gputop_dl.collect.nvml import Nvml
from gputop_dl.runner import launch_engine, open_spec, run_file
from tests.conftest import write

# a job whose own child runs under it, and whose grandchild daemon (own session, its parent
# gone) is re-parented: they write their PIDs to files so the test can look for them
FAMILY = """
import subprocess, sys, time
d = sys.argv[1]
child = subprocess.Popen(["sleep", "294"])
subprocess.run(["setsid", "sh", "-c", "sleep 295 & echo $! > " + d + "/daemon.pid"])
open(d + "/child.pid", "w").write(str(child.pid))
time.sleep(300)
"""


def session(tmp_path, *jobs):
    body = '[session]\nname = "faults"\ninterval = 0.2\nbaseline = "none"\n'
    for name, keys in jobs:
        body += f'[[workload]]\nname = "{name}"\n'
        body += "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    return write(tmp_path, "w.toml", body)


def family_jobs(tmp_path):
    return [("sh", {"command": [f"sleep 293 & echo $! > {tmp_path}/sh.pid; wait"], "shell": True}),
            ("py", {"command": [sys.executable, "-c", FAMILY, str(tmp_path)]})]


def pids_from(tmp_path, names, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return [int((tmp_path / f"{n}.pid").read_text()) for n in names]
        except (OSError, ValueError):
            time.sleep(0.05)
    raise AssertionError(f"the jobs did not write {names} in {timeout} s")


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids, timeout):
    """Seconds until none of pids runs; fails if some still run after timeout."""
    t0 = time.monotonic()
    while any(running(p) for p in pids):
        if time.monotonic() - t0 > timeout:
            for p in pids:  # do not leave them behind ourselves
                if running(p):
                    os.kill(p, signal.SIGKILL)
            raise AssertionError(f"survivors after {timeout} s: {[p for p in pids if running(p)]}")
        time.sleep(0.02)
    return time.monotonic() - t0


def test_a_background_child_of_a_finished_shell_job_is_stopped_at_the_end(tmp_path):
    """`sleep 277 & echo started`: the job is done at once, its `sleep` survived the session."""
    path = session(tmp_path, ("bg", {"command": [f"sleep 277 & echo $! > {tmp_path}/bg.pid"],
                                     "shell": True}))
    eng = run_file(path, nvml=Nvml())
    assert eng.runs["bg"].status == "done"
    [pid] = pids_from(tmp_path, ["bg"], timeout=1)
    wait_gone([pid], timeout=1.0)


def test_every_descendant_stops_with_the_session_even_a_daemon_in_its_own_session(tmp_path):
    """gputop-dl is the subreaper of its jobs' orphans: the daemon whose parent exited is still
    found (and stopped) by gputop-dl itself, not by the watchdog, which only acts when the
    process is gone."""
    nvml = Nvml()
    eng = launch_engine(open_spec(session(tmp_path, *family_jobs(tmp_path)), nvml), nvml)
    eng.start()
    pids = pids_from(tmp_path, ["sh", "child", "daemon"])
    eng.request_stop()
    assert eng.join(30)
    wait_gone(pids, timeout=0.5)
    assert {r.status for r in eng.runs.values()} == {"stopped"}


def test_kill_9_of_gputop_dl_leaves_no_process_of_any_job(tmp_path):
    """The watchdog sees its pipe close and stops every registered job's group and every
    process carrying a job's marker (the daemon in its own session included)."""
    p = subprocess.Popen([sys.executable, "-m", "gputop_dl", "launch", "--headless",
                          session(tmp_path, *family_jobs(tmp_path))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = pids_from(tmp_path, ["sh", "child", "daemon"])
    leaders = [c.pid for c in psutil.Process(p.pid).children() if c.pid not in pids]
    p.kill()
    p.wait()
    took = wait_gone(pids + leaders, timeout=5.0)
    print(f"no process left {took:.2f} s after kill -9")


def test_the_watchdog_kills_watched_groups_and_resumes_paused_ones_when_its_pipe_closes():
    dog = watchdog.Watchdog()
    job = subprocess.Popen(["sleep", "296"], start_new_session=True,
                           env={**os.environ, "GDL_TEST_MARK": "job-1"})
    other = subprocess.Popen(["sleep", "297"], start_new_session=True)  # a probe paused it
    try:
        os.kill(other.pid, signal.SIGSTOP)
        dog.watch(job.pid, "GDL_TEST_MARK=job-1")
        dog.paused(other.pid)
        dog.watch(other.pid, "GDL_TEST_MARK=not-this-one")  # no marked member: left alone
        assert job.poll() is None
        dog._proc.stdin.close()  # what gputop-dl's death looks like to it
        dog._proc.wait(timeout=10)
        assert job.wait(timeout=2) == -signal.SIGTERM
        assert psutil.Process(other.pid).status() != psutil.STATUS_STOPPED
        assert other.poll() is None
    finally:
        for proc in (job, other):
            proc.kill()
            proc.wait()


def test_the_watchdog_forgets_a_group_that_was_stopped():
    dog = watchdog.Watchdog()
    job = subprocess.Popen(["sleep", "298"], start_new_session=True,
                           env={**os.environ, "GDL_TEST_MARK": "job-2"})
    try:
        dog.watch(job.pid, "GDL_TEST_MARK=job-2")
        dog.forget(job.pid)
        dog._proc.stdin.close()
        dog._proc.wait(timeout=10)
        time.sleep(0.2)
        assert job.poll() is None
    finally:
        job.kill()
        job.wait()
