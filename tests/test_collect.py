"""Unit tests of the channel, the process-tree and host samplers, and py-spy stack folding."""

import os
import subprocess
import sys
import time
from collections import Counter
from types import SimpleNamespace

import psutil
import pytest

from gputop_dl.injob.channel import EventReader, EventWriter
from gputop_dl.collect.proc import host as host_mod
from gputop_dl.collect.proc import procfs
from gputop_dl.collect.proc import procs
from gputop_dl.collect.pyspy import run as pyspy
from gputop_dl.collect.proc.procs import Stat, TreeSampler, parse_stat, psutil_stat, read_stat


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


@pytest.mark.shares_box("a process tree counted")
@pytest.mark.heavy  # two spinning processes measured: another test's load would skew it
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
        spun = [c.cpu_times() for c in psutil.Process(root.pid).children()]
        deadline = time.time() + 60
        while time.time() < deadline and any(  # each child ran a while, however busy the box
                sum(c.cpu_times()[:2]) - sum(t[:2]) < 0.2
                for c, t in zip(psutil.Process(root.pid).children(), spun)):
            time.sleep(0.1)
        second = ts.sample()
        # two spinning children: each ran (how much depends on what else runs: not asserted),
        # within the cores allowed
        kids = [p for p in second.pids if p != root.pid]
        assert all(second.cpu_by_pid[p] > 0 for p in kids), second.cpu_by_pid
        # each child's main thread from its schedstat (ns: a loader's pace, analyse/slowdown/pace.py);
        # the root (the trainer) is not read there
        assert first.main_cores_by_pid is None and root.pid not in second.main_cores_by_pid
        assert all(second.main_cores_by_pid[p] > 0 for p in kids), second.main_cores_by_pid
        assert 0 < second.cpu_cores <= len(os.sched_getaffinity(0)) + 0.2
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


def test_parse_stat_counts_fields_after_the_last_paren():
    given = {14: 300, 15: 200, 20: 7, 22: 500, 24: 25}  # utime, stime, threads, start, rss pages
    tail = "".join(f" {given.get(n, n)}" for n in range(4, 53))  # fields 4.. as `man proc` counts
    st = parse_stat(f"42 (a b) c)) R{tail}\n".encode())  # comm "a b) c)"
    assert st == Stat(cpu=500 / procs._TICK, rss=25 * procs._PAGE, threads=7,
                      start=procs._BOOT + 500 / procs._TICK, state="R", majflt=12, blkio=42)
    assert not st.loader
    assert parse_stat(f"43 (pt_data_worker) S{tail}".encode()).loader  # torch's loader worker
    assert parse_stat(f"42 (x) Z{tail}".encode()) is None  # a zombie
    assert parse_stat(b"42 (x) R 1 2") is None  # malformed


def test_tree_sampler_deltas_with_new_old_and_reused_pids(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(procs, "time", SimpleNamespace(monotonic=lambda: clock[0],
                                                       time=lambda: 1000 + clock[0]))
    table = {1: Stat(5.0, 100, 2, 900.0), 2: Stat(1.0, 10, 1, 900.0)}  # 3 is gone
    ts = TreeSampler(1, read=table.get)
    cmap = {1: [2, 3], 2: [4]}
    assert ts.sample(cmap) == procs.TreeSample(pids=(1, 2), cpu_cores=None, rss=110, threads=3)
    clock[0] = 2.0
    table.update({1: Stat(6.0, 100, 2, 900.0),
                  2: Stat(0.5, 10, 1, 1001.5),  # PID 2 reused: counts all its CPU time
                  3: Stat(0.2, 10, 1, 1001.0),  # new since the last tick: counts all
                  4: Stat(50.0, 10, 1, 900.0)})  # first sight of an old process: no delta yet
    s = ts.sample(cmap)
    assert s.pids == (1, 2, 3, 4) and s.cpu_cores == 0.85 and s.rss == 130 and s.threads == 5
    table[1] = Stat(0.0, 100, 2, 1002.5)  # the root's PID reused
    assert ts.sample(cmap) is None


def test_stat_readers_agree_and_a_zombie_root_is_gone():
    mine = read_stat(os.getpid()), psutil_stat(os.getpid())
    assert mine[0].start == mine[1].start and mine[0].threads == mine[1].threads
    assert abs(mine[0].cpu - mine[1].cpu) < 0.5 and mine[0].rss > 0 and mine[1].rss > 0
    ts = TreeSampler(os.getpid(), read=psutil_stat)  # the fallback where there is no /proc
    assert ts.sample({}).cpu_cores is None
    time.sleep(0.01)
    assert ts.sample({}).cpu_cores >= 0
    p = subprocess.Popen(["true"])
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        assert read_stat(p.pid) is None and psutil_stat(p.pid) is None
        assert TreeSampler(p.pid).sample({}) is None
    finally:
        p.wait()


def test_kept_proc_files_read_afresh_and_let_go_of_an_exited_process():
    files, kept = procfs.ProcFiles(), procfs.ProcFiles.kept
    own = f"/proc/{os.getpid()}/stat"
    before = parse_stat(files.read(own)).cpu
    t = time.process_time()
    while time.process_time() - t < 0.05:
        pass
    assert parse_stat(files.read(own)).cpu > before and procfs.ProcFiles.kept == kept + 1
    p = subprocess.Popen(["sleep", "30"])
    path = f"/proc/{p.pid}/stat"
    assert parse_stat(files.read(path)).start == read_stat(p.pid).start
    p.kill()
    p.wait()
    with pytest.raises(OSError):  # reaped: neither the kept file nor the path reads
        files.read(path)
    assert procfs.ProcFiles.kept == kept + 1  # its file was closed
    files.close()
    assert procfs.ProcFiles.kept == kept


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


def test_host_sampler_shape(monkeypatch):
    for proc in (True, False):  # /proc read directly, and the psutil fallback
        monkeypatch.setattr(host_mod, "PROC", proc)
        hs = host_mod.HostSampler()
        time.sleep(0.2)
        s = hs.sample()
        assert s.cpus >= 1 and len(s.per_cpu) == s.cpus and 0 <= s.cpu_busy <= 1
        assert s.mem_total == psutil.virtual_memory().total and 0 < s.mem_used < s.mem_total


STAT = ("cpu  1 0 0 0 0 0 0 0 0 0\n"
        "cpu0 {} 7 {} {} {} 1 2 3 {} 1\n"
        "cpu1 {} 0 200 {} 10 0 0 0 0 0\n"
        "cpu2 10 0 10 10 0 0 0 0 0 0\n"
        "intr 1 2 3\nctxt 4\n")
MEMINFO = ("MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    {avail} kB\n"
           "Buffers:          10 kB\nCached:          200 kB\nShmem:            5 kB\n"
           "Active:          300 kB\nInactive:        300 kB\nSReclaimable:     20 kB\n"
           "Slab:             30 kB\n")


def test_proc_readers_compute_what_psutil_computes(tmp_path, monkeypatch):
    """The same /proc files through psutil (pointed at them) and through host.py's readers."""
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    stat = tmp_path / "stat"
    stat.write_text(STAT.format(1000, 300, 900, 40, 20, 500, 700))
    psutil.cpu_percent(percpu=True)
    t1 = host_mod.parse_cpu_times(stat.read_bytes())
    # cpu0: guest time (in user time too) is left out; cpu1: idle goes down, counts as 0
    stat.write_text(STAT.format(1137, 310, 1000, 53, 40, 600, 650))
    t2 = host_mod.parse_cpu_times(stat.read_bytes())
    assert [host_mod.busy_percent(a, b) for a, b in zip(t1, t2)] == \
        psutil.cpu_percent(percpu=True) == [56.5, 100.0, 0.0]
    for avail in (700, 0, 5000):  # 0: psutil's estimate; above the total: a container
        (tmp_path / "meminfo").write_text(MEMINFO.format(avail=avail))
        vm = psutil.virtual_memory()
        mine = host_mod.parse_meminfo((tmp_path / "meminfo").read_bytes())
        assert mine == ((vm.total - vm.available, vm.total) if avail else None)


def test_proc_readers_agree_with_psutil_on_this_machine():
    times = host_mod.parse_cpu_times(procfs.read_proc("/proc/stat", 1 << 16))
    for mine, ps in zip(times, psutil.cpu_times(percpu=True), strict=True):
        assert all(abs(a - b) < 0.5 for a, b in zip(mine, ps, strict=True))
    used, total = host_mod.parse_meminfo(procfs.read_proc("/proc/meminfo"))
    vm = psutil.virtual_memory()
    assert total == vm.total and abs(used - (vm.total - vm.available)) < 0.02 * total
    with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:  # longer than one read
        assert procfs.read_proc(f"/proc/{os.getpid()}/cmdline", 8) == f.read()


RAW = (
    "_run_module_as_main (<frozen runpy>:198);Trainer.run (gputop_dl/injob/trainer/loop.py:108);"
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


def test_name_native_thread_shows_in_proc():
    import threading

    from gputop_dl.threadname import name_native_thread

    if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/comm"):
        pytest.skip("no /proc/self/task/TID/comm here")
    seen = {}

    def body():
        seen["ok"] = name_native_thread("gdl-a-very-long-thread-name")
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            seen["comm"] = f.read().strip()

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == {"ok": True, "comm": "gdl-a-very-long"}  # the kernel keeps 15 bytes


def test_pyspy_charges_a_stdlib_helper_to_its_caller():
    """A FakeData worker on a CUDA build without a GPU: torch.manual_seed queues its CUDA
    seeding with traceback.format_stack(); the sample is charged to torch's caller, not to
    traceback.py, and an __init__.py is named with its package."""
    stack = ("_worker_loop (torch/utils/data/_utils/worker.py:300);"
             "fetch (torch/utils/data/_utils/fetch.py:52);"
             "FakeData.__getitem__ (torchvision/datasets/fakedata.py:55);"
             "manual_seed (torch/random.py:46);manual_seed_all (torch/cuda/random.py:128);"
             "_lazy_call (torch/cuda/__init__.py:551);format_stack (traceback.py:213);"
             "StackSummary.format_frame_summary (traceback.py:450);getline (linecache.py:26)")
    assert pyspy.attribute(stack) == "_lazy_call (cuda/__init__.py)"


def test_a_quiet_tree_is_read_in_full_every_few_ticks_and_at_once_when_it_works(monkeypatch):
    """Speed: a tree whose last full reading found nothing moving and whose
    processes stand still (same CPU seconds, state, memory) gets a quiet tick: that reading's
    figures, CPU 0, no per-thread or disk read; every QUIET_EVERY-th tick is read in full all
    the same, and a tree whose CPU time moved, or that is running or blocked on the disk, at
    once: no stale figure is shown as fresh."""
    clock = [0.0]
    monkeypatch.setattr(procs, "time", SimpleNamespace(monotonic=lambda: clock[0],
                                                       time=lambda: 1000 + clock[0]))
    table = {1: Stat(5.0, 100, 2, 900.0, "S"), 2: Stat(1.0, 10, 1, 900.0, "S")}
    ts = TreeSampler(1, read=table.get)
    cmap = {1: [2]}

    def tick() -> procs.TreeSample:
        clock[0] += 1.0
        s = ts.sample(cmap)
        assert s is not None
        return s

    assert not tick().quiet and not tick().quiet  # first sight, then the full reading: still
    quiet = [tick() for _ in range(procs.QUIET_EVERY)]
    assert [s.quiet for s in quiet] == [True] * (procs.QUIET_EVERY - 1) + [False]
    assert all(s.cpu_cores == 0.0 and s.cpu_by_pid == {1: 0.0, 2: 0.0} for s in quiet)
    assert tick().quiet
    table[2] = Stat(1.01, 10, 1, 900.0, "S")  # a worker used a clock tick: read at once
    s = tick()
    assert not s.quiet and s.cpu_cores == 0.01 and s.cpu_by_pid is not None and s.cpu_by_pid[1] == 0.0
    assert not tick().quiet  # the full reading after it: it found CPU time moving
    assert tick().quiet  # still again since
    for state in ("R", "D"):  # running or blocked on the disk, with no CPU second moved yet
        table[1] = Stat(5.0, 100, 2, 900.0, state)
        assert not tick().quiet and not tick().quiet
        table[1] = Stat(5.0, 100, 2, 900.0, "S")
        assert not tick().quiet and not tick().quiet and tick().quiet
    table[1] = Stat(5.0, 200, 2, 900.0, "S")  # its memory grew: read again
    assert not tick().quiet
    cmap = {1: []}  # a worker left
    del table[2]
    assert not tick().quiet
