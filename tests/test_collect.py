"""Unit tests of the channel, the process-tree and host samplers, and py-spy stack folding."""

import subprocess
import sys
import time
from collections import Counter

import psutil

from gputop_dl.channel import EventReader, EventWriter
from gputop_dl.collect import host as host_mod
from gputop_dl.collect import pyspy
from gputop_dl.collect.procs import TreeSampler


def test_channel_roundtrip_and_torn_line(tmp_path):
    path = str(tmp_path / "ev.jsonl")
    w = EventWriter(path, flush_s=3600)
    w.emit("started", pid=1)
    w.emit("step", epoch=1, step=1, t_data=0.1, t_step=0.2, samples=4)
    r = EventReader(path)
    assert r.read_new() == []  # buffered until flush
    w.flush()
    evs = r.read_new()
    assert [e["ev"] for e in evs] == ["started", "step"] and evs[1]["t_step"] == 0.2
    with open(path, "a") as f:  # a writer killed mid-line
        f.write('{"ev": "epoch", "epo')
    assert r.read_new() == []
    with open(path, "a") as f:
        f.write('ch": 1}\n')
    assert r.read_new()[0]["epoch"] == 1
    w.close()


def test_tree_sampler_counts_children_and_survives_a_vanishing_one():
    code = ("import subprocess,sys,time;"
            "ps=[subprocess.Popen([sys.executable,'-c','while True: pass']) for _ in range(2)];"
            "time.sleep(60)")
    root = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.time() + 20
        while len(psutil.Process(root.pid).children()) < 2 and time.time() < deadline:
            time.sleep(0.1)
        ts = TreeSampler(root.pid)
        first = ts.sample()
        assert first.cpu_cores is None and len(first.pids) == 3
        time.sleep(1.0)
        second = ts.sample()
        assert 0.5 < second.cpu_cores <= 2.2  # two spinning children on <= 2 cores
        psutil.Process(second.pids[-1]).kill()  # a worker vanishes between ticks
        time.sleep(0.5)
        third = ts.sample()
        assert third is not None and third.cpu_cores >= 0 and len(third.pids) == 2
    finally:
        for c in psutil.Process(root.pid).children(recursive=True):
            c.kill()
        root.kill()
        root.wait()
    assert ts.sample() is None  # root gone


def test_psi_and_cgroup_parsers(tmp_path):
    psi = tmp_path / "cpu"
    psi.write_text("some avg10=12.50 avg60=3.00 avg300=1.00 total=1\n"
                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert host_mod.read_psi_some10(str(psi)) == 0.125
    assert host_mod.read_psi_some10(str(tmp_path / "missing")) is None
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert host_mod.cgroup_cpu_limit(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert host_mod.cgroup_cpu_limit(str(tmp_path)) is None
    (tmp_path / "cpu.stat").write_text("usage_usec 10\nthrottled_usec 2500\n")
    assert host_mod.read_cgroup_throttled_usec(str(tmp_path)) == 2500


def test_host_sampler_shape():
    hs = host_mod.HostSampler()
    time.sleep(0.2)
    s = hs.sample()
    assert s.cpus >= 1 and len(s.per_cpu) == s.cpus and 0 <= s.cpu_busy <= 1
    assert s.mem_total > 0


RAW = (
    "_run_module_as_main (<frozen runpy>:198);Trainer.run (gputop_dl/trainer/loop.py:108);"
    "_worker_loop (torch/utils/data/_utils/worker.py:300);fetch (torch/utils/data/_utils/fetch.py:52);"
    "FakeData.__getitem__ (torchvision/datasets/fakedata.py:60);Compose.__call__ (torchvision/transforms/transforms.py:95);"
    "Module._wrapped_call_impl (torch/nn/modules/module.py:1); RandomResizedCrop.forward (torchvision/transforms/transforms.py:979);"
    "resized_crop (torchvision/transforms/functional.py:600) 30\n"
    "_run_module_as_main (<frozen runpy>:198);_worker_loop (torch/utils/data/_utils/worker.py:300);"
    "Queue.get (multiprocessing/queues.py:100) 10\n"
    "Thread._bootstrap (threading.py:1002);Queue._feed (multiprocessing/queues.py:231) 60\n"
)


def test_pyspy_folding_charges_the_transform_and_ignores_other_threads():
    stacks = pyspy.parse_raw(RAW)
    assert sum(stacks.values()) == 100
    frames = dict(pyspy.hot_frames(stacks))
    assert frames == {"RandomResizedCrop.forward (transforms.py)": 0.75, pyspy.IDLE: 0.25}
    assert pyspy.hot_frames(Counter()) == []


def test_pyspy_on_a_vanished_pid_is_a_message_not_an_exception():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    stacks, err = pyspy.record(p.pid, duration_s=1)
    assert not stacks and err
