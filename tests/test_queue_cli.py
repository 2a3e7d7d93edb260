"""`gputop-dl queue FILE.toml` end to end: real sleeping command jobs through the CLI in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gputop_dl.analyse.recorded.queue import queue_summary
from gputop_dl.collect.environment import environment
from gputop_dl.collect.jobs.fingerprint import fingerprint
from gputop_dl.collect.nvml.gpus import Nvml
from gputop_dl.config import load_session, usable_cpus
from gputop_dl.record.store import Store


def sleeper(name: str, seconds: float, **keys) -> str:
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return (f'[[workload]]\nname = "{name}"\ncommand = ["{sys.executable}", "-c", '
            f'"import time; time.sleep({seconds})"]\nenv = {{ GPUTOP_DL_HOOK = "0" }}\n{extra}\n')


def queue_cli(tmp_path, text: str, *args: str, **kw) -> subprocess.Popen:
    path = tmp_path / "q.toml"
    path.write_text(textwrap.dedent(text))
    env = dict(os.environ, GPUTOP_DL_HOME=str(tmp_path / "home"), COLUMNS="200")
    return subprocess.Popen([sys.executable, "-m", "gputop_dl", "queue", str(path), "--headless", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)


def test_queue_cli_bad_file_exits_2_with_one_line(tmp_path):
    p = queue_cli(tmp_path, '[session]\nslots = 1\n' + sleeper("a", 0, gpus=2))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "key 'gpus' (line 7): the job asks for 2 slots but the queue has 1 slot" in lines[0]


@pytest.mark.shares_box("sleeping jobs in order")
def test_end_to_end_queue_cli_waits_for_cores_and_records_the_times(tmp_path):
    """Two slots, but each job's cached solo CPU need is 3/4 of the cores: CPU-aware admission
    (on, since profiles exist) keeps b waiting for cores while a slot is free, says so, and
    starts it once a ended; the session records arrival, start and end per job."""
    text = "[session]\ninterval = 0.2\nslots = 2\n" + sleeper("a", 1.5, duration_s=1.5) + \
        sleeper("b", 0.3, duration_s=0.3, arrival=0.3)
    path = tmp_path / "q.toml"
    path.write_text(text)
    cores = usable_cpus()
    home = tmp_path / "home"
    home.mkdir()
    env = environment(Nvml())
    st = Store(str(home / "sessions.db"))
    for w in load_session(path, gpu_count=0).workloads:
        st.save_baseline(fingerprint(w, False, env), "seed", w.name,
                         {"step_time_s": 0.1, "cpu_cores": 0.75 * cores})
    st.commit()
    st.close()
    p = queue_cli(tmp_path, text)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err + out
    short = 0.75 * cores * 2 - cores
    assert f"b waits: slot 1 free, but {short:.1f} cores short" in out, out
    assert "Queue (fifo, 2 slots)" in out and "mean JCT" in out
    st = Store(str(home / "sessions.db"))
    row = st.session()
    assert row.kind == "queue" and row.state == "finished"
    q = queue_summary(st, row.id)
    jobs = {j["name"]: j for j in q["jobs"]}
    a, b = jobs["a"], jobs["b"]
    assert (a["arrival_s"], b["arrival_s"]) == (0.0, 0.3)
    assert b["start_s"] >= a["end_s"] - 1e-6 and b["wait_s"] >= 1.0
    assert b["waited_because"].endswith("cores short") and q["cpu_aware"] is True
    assert q["makespan_s"] == max(a["end_s"], b["end_s"]) and q["jobs_ended"] == 2
    assert abs(q["mean_jct_s"] - (a["jct_s"] + b["jct_s"]) / 2) < 1e-9
    assert {j["name"]: j["status"] for j in st.jobs(row.id)} == {"a": "done", "b": "done"}


@pytest.mark.shares_box("a signal and statuses")
def test_end_to_end_queue_cli_ctrl_c_stops_running_and_waiting_jobs(tmp_path):
    text = "[session]\ninterval = 0.2\nslots = 1\n" + "".join(sleeper(f"j{i}", 60) for i in range(3))
    p = queue_cli(tmp_path, text)
    db = tmp_path / "home" / "sessions.db"
    deadline, pid = time.time() + 30, None
    while pid is None and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
        if db.exists():
            st = Store(str(db))
            row = st.session()
            jobs = {j["name"]: j for j in st.jobs(row.id)} if row else {}
            st.close()
            if jobs.get("j0", {}).get("status") == "running":
                pid = jobs["j0"]["pid"]
    assert pid is not None, p.communicate(timeout=5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err + out
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, f"job j0 (pid {pid}) outlived the queue"
    st = Store(str(db))
    row = st.session()
    assert row.state == "interrupted"
    assert {j["name"]: j["status"] for j in st.jobs(row.id)} == {"j0": "stopped", "j1": "stopped",
                                                                  "j2": "stopped"}
