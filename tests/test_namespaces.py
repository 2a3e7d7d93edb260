"""gputop-dl and jobs in PID namespaces (as containers have them), with real namespaces
(`unshare --pid --fork --mount-proc`, root only): gputop-dl inside one sees the jobs inside it
only, under their PIDs there; gputop-dl on the host sees a job inside one under its host PID."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# a job as discovery sees a PyTorch one, without torch's import: a file mapped at "torch/_C"
FAKE_TORCH = """
import mmap, os, sys, time
f = open(os.path.join(sys.argv[1], "torch", "_C.so"), "rb")
m = mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ)
open(sys.argv[3], "w").close()
time.sleep(120)
"""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare to make PID namespaces (CI runs as root)")


@pytest.fixture
def work():
    d = tempfile.mkdtemp(prefix="gputopdl-ns-")
    os.makedirs(os.path.join(d, "torch"))
    with open(os.path.join(d, "torch", "_C.so"), "wb") as f:
        f.write(b"\0" * 4096)
    with open(os.path.join(d, "fake.py"), "w") as f:
        f.write(FAKE_TORCH)
    procs: list[subprocess.Popen] = []
    yield d, procs
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
    shutil.rmtree(d, ignore_errors=True)


def _job(d, procs, tag, ns):
    ready = os.path.join(d, f"ready-{tag}")
    argv = [sys.executable, os.path.join(d, "fake.py"), d, tag, ready]
    if ns:
        argv = ["unshare", "--pid", "--fork", "--mount-proc", *argv]
    procs.append(subprocess.Popen(argv, start_new_session=True))
    _wait(ready)


def _wait(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _once(d, argv=None):
    """`gputop-dl --once --json`, or `argv` that runs it, as JSON."""
    env = dict(os.environ, GPUTOP_DL_HOME=os.path.join(d, "home"))
    argv = argv or [sys.executable, "-m", "gputop_dl", "--once", "--json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
                         start_new_session=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _ours(snap, d):
    """Our jobs by their tag (the box runs other people's jobs too)."""
    return {j["cmdline"].split()[-2]: j for j in snap["jobs"]
            if j.get("cmdline") and os.path.join(d, "fake.py") in j["cmdline"]}


def test_gputop_dl_inside_a_pid_namespace_sees_only_the_jobs_inside_it(work):
    d, procs = work
    _job(d, procs, "outside", ns=False)
    ready = os.path.join(d, "ready-inside")
    inner = (f"{sys.executable} {d}/fake.py {d} inside {ready} & "
             f"while [ ! -e {ready} ]; do sleep 0.05; done; "
             f"exec {sys.executable} -m gputop_dl --once --json")
    ours = _ours(_once(d, ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", inner]), d)
    assert set(ours) == {"inside"}  # the host's job is not in this namespace
    assert ours["inside"]["pid"] < 100  # its PID in the namespace (sh is 1, the job next)


def test_a_job_inside_a_pid_namespace_is_found_from_the_host_under_its_host_pid(work):
    d, procs = work
    _job(d, procs, "contained", ns=True)
    unshare = procs[-1].pid
    snap = _once(d)
    ours = _ours(snap, d)
    assert set(ours) == {"contained"}
    job = ours["contained"]
    with open(f"/proc/{job['pid']}/stat") as f:  # the host's PID: unshare's child
        assert int(f.read().rsplit(")", 1)[1].split()[1]) == unshare
    assert job["found_by"] == "maps" and job["cpu_cores"] is not None
