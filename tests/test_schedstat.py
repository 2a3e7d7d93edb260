"""CPU wait: the threads' schedstat per job (collect/proc/schedstat.py), its faults, and its JSON."""

import errno
import os
import threading

import pytest

from gputop_dl.collect.proc import schedstat
from gputop_dl.collect.proc.procfs import PROC, read_proc
from gputop_dl.collect.proc.procs import TreeSampler, children_map
from gputop_dl.collect.proc.cgroup_cpu import CgroupThrottle, quota_cgroup
from gputop_dl.collect.proc.cpu_wait import job_wait, tree_wait
from gputop_dl.collect.proc.schedstat import KERNEL_NOTE, SchedReader, parse_schedstat
from gputop_dl.snapshot import Distributed, JobSample, RankProc, Snapshot


def _thread(root, pid, tid, run, wait, slices=7):
    d = root / str(pid) / "task" / str(tid)
    d.mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "stat").write_text(f"{pid} (python) S 1 0\n")
    (d / "schedstat").write_text(f"{run} {wait} {slices}\n")


def _reader(root, **kw):
    return SchedReader(proc=str(root), read=read_proc, **kw)


def test_parse_schedstat():
    assert parse_schedstat(b"171074 2210766 2\n") == (171074, 2210766, 2)
    assert parse_schedstat(b"171074 2210766\n") == (171074, 2210766, 0)  # no slices: 0
    assert parse_schedstat(b"") is None and parse_schedstat(b"x y z") is None


def test_waits_per_process_and_the_trainer_worker_split(tmp_path):
    _thread(tmp_path, 10, 10, 1000, 0)
    _thread(tmp_path, 10, 11, 1000, 0)
    _thread(tmp_path, 20, 20, 1000, 0)  # a loader worker
    r = _reader(tmp_path)
    procs = {10: (1.0, 2), 20: (2.0, 1)}
    assert r.read(procs) == {}  # first reading: the start of the deltas
    _thread(tmp_path, 10, 10, 4000, 1000)
    _thread(tmp_path, 10, 11, 2000, 0)
    _thread(tmp_path, 20, 20, 2000, 3000)
    waits = r.read(procs)
    assert waits == {10: (4000, 1000), 20: (1000, 3000)} and r.note is None
    cw = job_wait(waits, {10})
    assert cw.trainer == 0.2 and cw.workers == 0.75 and cw.fraction == round(4000 / 9000, 4)
    # no worker: its share is unknown, not 0; no runnable time at all: unknown too
    assert job_wait({10: (100, 0)}, {10}).workers is None
    assert job_wait({10: (0, 0)}, {10}).fraction is None
    assert job_wait({}, {10}, note="why").note == "why"


def test_threads_come_and_go_and_a_reused_pid_starts_again(tmp_path):
    _thread(tmp_path, 10, 10, 1000, 0)
    _thread(tmp_path, 10, 11, 1000, 0)
    r = _reader(tmp_path)
    r.read({10: (1.0, 2)})
    # thread 11 exits (its read fails: dropped silently), thread 12 starts
    for f in ("schedstat",):
        os.remove(tmp_path / "10" / "task" / "11" / f)
    os.rmdir(tmp_path / "10" / "task" / "11")
    _thread(tmp_path, 10, 12, 5000, 5000)
    _thread(tmp_path, 10, 10, 2000, 1000)
    assert r.read({10: (1.0, 2)}) == {10: (1000, 1000)} and r.note is None
    _thread(tmp_path, 10, 12, 6000, 6000)
    _thread(tmp_path, 10, 10, 3000, 1000)
    assert r.read({10: (1.0, 2)}) == {10: (2000, 1000)}  # 12 counts from its second reading
    # the same PID with another start time is another process: no delta against the old one
    assert r.read({10: (9.0, 2)}) == {}
    # a process that vanished between the listing and the read: no figure, no note
    assert r.read({99: (1.0, 1)}) == {} and r.note is None


def test_kernel_without_schedstat_says_so_once(tmp_path):
    (tmp_path / "10" / "task" / "10").mkdir(parents=True)
    (tmp_path / "10" / "stat").write_text("10 (python) S 1\n")
    r = _reader(tmp_path)
    assert r.read({10: (1.0, 1)}) == {} and r.note == KERNEL_NOTE and r.off
    cw = tree_wait(_tree({}, r.note), 10)
    assert cw.fraction is None and cw.note == "CPU wait: not available (kernel: no " \
        "/proc/PID/task/TID/schedstat)"


def test_another_users_process_and_another_pid_namespace(tmp_path):
    (tmp_path / "10").mkdir()
    (tmp_path / "10" / "stat").write_text("10 (python) S 1\n")

    def denied(path):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    r = _reader(tmp_path, listdir=denied)
    assert r.read({10: (1.0, 3)}) == {}
    assert "another user's process" in r.note and "PID 10" in r.note
    r = _reader(tmp_path)  # stat readable, task folder not there
    assert r.read({10: (1.0, 3)}) == {} and "PID namespace" in r.note


def test_cgroup_quota_of_a_parent_and_its_throttled_share(tmp_path):
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    (proc / "10").mkdir(parents=True)
    (proc / "10" / "cgroup").write_text("0::/box/job\n")
    (cg / "box" / "job").mkdir(parents=True)
    (cg / "box" / "job" / "cpu.max").write_text("max 100000\n")
    (cg / "box" / "cpu.max").write_text("50000 100000\n")
    (cg / "box" / "cpu.stat").write_text("usage_usec 5\nnr_throttled 1\nthrottled_usec 1000000\n")
    assert quota_cgroup(10, str(proc), str(cg)) == str(cg / "box")
    t = CgroupThrottle(10, str(proc), str(cg))
    t._files.read = read_proc  # the fake is a plain file: read it anew each time
    assert t.read(100.0) is None  # the first reading starts the delta
    (cg / "box" / "cpu.stat").write_text("usage_usec 9\nnr_throttled 4\nthrottled_usec 1500000\n")
    assert t.read(102.0) == 0.25
    (cg / "box" / "cpu.max").write_text("max 100000\n")  # no quota anywhere: nothing to say
    assert quota_cgroup(10, str(proc), str(cg)) is None
    (proc / "10" / "cgroup").write_text("4:memory:/x\n1:cpu:/\n")  # cgroup v1 only
    assert quota_cgroup(10, str(proc), str(cg)) is None


def _tree(waits, note=None, pids=(10,)):
    from gputop_dl.collect.proc.procs import TreeSample
    return TreeSample(pids=pids, cpu_cores=1.0, rss=0, threads=1, waits=waits, wait_note=note)


def test_ranks_are_trainers_and_the_rest_workers():
    waits = {1: (100, 0), 2: (100, 100), 3: (100, 300)}
    dist = Distributed(ranks=(RankProc(rank=0, local_rank=0, pid=2),))
    cw = tree_wait(_tree(waits, pids=(1, 2, 3)), 1, dist)
    assert cw.trainer == round(100 / 300, 4) and cw.workers == 0.75
    assert tree_wait(None, 1).fraction is None


def test_snapshot_json_has_cpu_wait_as_an_object():
    j = JobSample(name="a", pid=1, launched=False, cpu_wait_fraction=0.4, cpu_wait_trainer=0.5,
                  cpu_wait_workers=None)
    out = Snapshot(time=0.0, gpu_status="ok", jobs=(j,)).to_json()["jobs"][0]
    assert out["cpu_wait_fraction"] == 0.4 and out["cpu_wait"] == {"trainer": 0.5, "workers": None}
    assert out["cpu_throttled_fraction"] is None and out["cpu_wait_note"] is None


@pytest.mark.skipif(not PROC, reason="needs Linux /proc")
def test_tree_sampler_reads_real_threads_that_come_and_go():
    stop = threading.Event()
    ts_ = [threading.Thread(target=stop.wait, daemon=True) for _ in range(3)]
    for t in ts_:
        t.start()
    tree = TreeSampler(os.getpid())
    every = schedstat.READ_EVERY
    try:
        assert tree.sample(children_map()).waits == {}  # the first reading starts the deltas
        stop.set()
        for t in ts_:
            t.join()
        sum(range(200000))  # some run time of our own
        s = tree.sample(children_map())  # read again at once (`--once` samples twice)
        assert os.getpid() in s.waits and s.waits[os.getpid()][0] > 0 and s.wait_note is None
        first = s.waits
        for _ in range(every - 1):  # then every READ_EVERY ticks: the last reading between
            assert tree.sample(children_map()).waits is first
        s = tree.sample(children_map())  # the exited threads are gone: no error
        assert os.getpid() in s.waits and s.waits is not first
        cw = tree_wait(s, os.getpid())
        assert cw.fraction is None or 0.0 <= cw.fraction <= 1.0
    finally:
        tree.close()
    assert tree._sched._procs == {}  # every thread's file closed


BUSY_ON_CPU0 = ("import os\n"
                "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
                "while True: pass\n")
SPAWN_3 = ("import subprocess, sys, time\n"
           "ps = [subprocess.Popen([sys.executable, '-c', sys.argv[1]]) for _ in range(3)]\n"
           "print('ready', flush=True)\n"
           "time.sleep(120)\n")
SLEEPER = "import time\nwhile True:\n    time.sleep(0.05)\n    sum(range(2000))\n"


def _ticks(root: int, until, deadline_s: float = 30.0):
    """Sample the tree of `root` every 0.5 s until `until(CpuWait)` holds; the CpuWaits seen."""
    import time as _time
    tree, seen = TreeSampler(root), []
    end = _time.monotonic() + deadline_s
    try:
        while _time.monotonic() < end:
            s = tree.sample(children_map())
            seen.append(tree_wait(s, root))
            if until(seen[-1]):
                break
            _time.sleep(0.5)
    finally:
        tree.close()
    return seen


def _psi_some10() -> float | None:
    from gputop_dl.collect.proc.host import read_psi_some10
    return read_psi_some10()


@pytest.mark.heavy
@pytest.mark.skipif(not PROC or not hasattr(os, "sched_setaffinity"), reason="needs Linux /proc")
def test_ground_truth_busy_workers_wait_and_a_sleeper_does_not():
    """Three busy processes (pure Python loops) pinned to one CPU, children of a sleeping root:
    each gets a third of the core, so its threads wait about 2/3 of their runnable time; the
    measured workers' share is clearly above 0.3 (above 0.5 at some tick).
    A process that mostly sleeps waits near 0 of its runnable time on a machine with CPU to
    spare (on a saturated shared box its wake-ups wait: skipped with the reason)."""
    import subprocess
    import sys

    root = subprocess.Popen([sys.executable, "-c", SPAWN_3, BUSY_ON_CPU0],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout.readline().strip() == "ready"
        seen = _ticks(root.pid, lambda cw: cw.workers is not None and cw.workers > 0.5)
        busy = [cw.workers for cw in seen if cw.workers is not None]
        assert busy and max(busy) > 0.5, seen
        assert all(cw.fraction is None or cw.fraction >= 0.3 for cw in seen[-1:]), seen
        assert all(cw.note is None for cw in seen)
    finally:
        for pid in children_map().get(root.pid, []):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        root.kill()
        root.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", SLEEPER])
    try:
        seen = _ticks(sleeper.pid, lambda cw: cw.fraction is not None and cw.fraction < 0.1)
        light = [cw.fraction for cw in seen if cw.fraction is not None]
        assert light, "no CPU-wait figure for the sleeper"
        if min(light) >= 0.1:
            psi = _psi_some10()
            if psi is not None and psi > 0.3:
                pytest.skip(f"the machine is saturated by other processes (CPU pressure "
                            f"{psi:.0%}): a sleeper's wake-ups wait ({min(light):.2f})")
        assert min(light) < 0.1, light
    finally:
        sleeper.kill()
        sleeper.wait()


def test_idle_threads_are_read_every_few_ticks_unless_the_process_ran_more(tmp_path):
    _thread(tmp_path, 10, 10, 1000, 0)  # busy
    _thread(tmp_path, 10, 11, 500, 0)  # idle
    reads = []

    def counting(path, size):
        reads.append(path)
        return read_proc(path, size)

    r = SchedReader(proc=str(tmp_path), read=counting)
    busy = [1000]

    def tick(cpu_s):
        busy[0] += 1000
        _thread(tmp_path, 10, 10, busy[0], 0)
        reads.clear()
        return r.read({10: (1.0, 2, cpu_s)})

    tick(0.0)
    tick(0.0)  # both read: thread 11 shows no change, so it is idle from now on
    idle_reads = 0
    for _ in range(SchedReader.IDLE_EVERY):
        tick(0.0)
        idle_reads += sum("/11/" in p for p in reads)
    assert idle_reads == 1  # once in IDLE_EVERY ticks
    # the idle thread wakes and runs 50 ms; the process's CPU time shows more than thread 10's
    _thread(tmp_path, 10, 11, 500 + 50_000_000, 7_000_000)
    waits = {}
    for _ in range(SchedReader.IDLE_EVERY):
        waits = tick(0.1)
        if any("/11/" in p for p in reads):
            break
    assert waits[10] == (1000 + 50_000_000, 7_000_000)


def _switches(root, pid, tid, vol, inv):
    (root / str(pid) / "task" / str(tid) / "status").write_text(
        f"Name:\tpython\nState:\tR (running)\nvoluntary_ctxt_switches:\t{vol}\n"
        f"nonvoluntary_ctxt_switches:\t{inv}\n")


def test_busy_threads_of_a_process_are_its_pool(tmp_path):
    """Two threads of the trainer runnable most of the interval (an intra-op pool), a third
    asleep, a worker busy: the trainer's busy threads, (wait share, runnable share, ms on a CPU
    per time slice, voluntary share of their context switches), busiest first; the pool of a
    job is its trainer's, never a worker's, with its threads' medians of both."""
    for tid in (10, 11, 12):
        _thread(tmp_path, 10, tid, 0, 0)
    _thread(tmp_path, 20, 20, 0, 0)
    r = _reader(tmp_path)
    procs = {10: (1.0, 3), 20: (2.0, 1)}
    r.read(procs)
    # runnable 98 % of 1 s, waited half, 200 slices of 2.5 ms (preempted: it spins)
    _thread(tmp_path, 10, 10, 500_000_000, 480_000_000, 207)
    _thread(tmp_path, 10, 11, 300_000_000, 300_000_000, 3007)  # runnable 60 %, 0.1 ms slices
    _thread(tmp_path, 10, 12, 1_000_000, 0)  # asleep
    _thread(tmp_path, 20, 20, 900_000_000, 0)  # no slice counted: unknown, not 0
    for tid, (v, n) in {10: (5, 100), 11: (400, 100)}.items():
        _switches(tmp_path, 10, tid, v, n)
    waits = r.read(procs)
    r.span_s = 1.0  # (the reads' real span is microseconds here)
    busy = r.busy(waits)  # the switches' first reading: no share yet
    assert busy[10] == ((round(48 / 98, 4), 0.98, 2.5, None), (0.5, 0.6, 0.1, None))
    assert busy[20] == ((0.0, 0.9, None, None),)  # no status file: unknown
    cw = job_wait(waits, {10}, busy=busy)
    assert cw.pool == ((round(48 / 98, 4), 0.98), (0.5, 0.6)) and cw.pool_slice_ms == 1.3
    assert cw.pool_yields is None
    # the next interval: 10 preempted 195 times and yielded 5 (it spins), 11 yielded 3 in 4
    for tid, (v, n) in {10: (10, 295), 11: (700, 200)}.items():
        _switches(tmp_path, 10, tid, v, n)
    _thread(tmp_path, 10, 10, 1_000_000_000, 960_000_000, 407)
    _thread(tmp_path, 10, 11, 600_000_000, 600_000_000, 6007)
    waits = r.read(procs)
    r.span_s = 1.0
    busy = r.busy(waits)
    assert [t[3] for t in busy[10]] == [round(5 / 200, 4), 0.75]
    cw = job_wait(waits, {10}, busy=busy)
    assert cw.pool_yields == round((5 / 200 + 0.75) / 2, 4)
    assert job_wait(waits, {99}, busy=busy).pool == ()  # no trainer among them: no pool
    assert job_wait(waits, {20}, busy=busy).pool_slice_ms is None  # one thread: no pool
    assert SchedReader(proc=str(tmp_path), read=read_proc).busy({10: (1, 1)}) == {}  # no span


def test_a_quiet_process_is_skipped_while_its_cpu_time_stands_still(tmp_path):
    """2,000 threads: a process whose last reading found every thread still, and
    whose CPU seconds (utime + stime, all threads) did not move, is not read at all, up to
    IDLE_EVERY - 1 ticks in a row; what it did meanwhile lands in its next reading's delta.
    Its CPU time moving, or a thread count change, reads it at once."""
    for tid in (20, 21, 22):
        _thread(tmp_path, 20, tid, 5000, 100)
    reads = []

    def counting(path, size):
        reads.append(path)
        return read_proc(path, size)

    r = SchedReader(proc=str(tmp_path), read=counting)

    def tick(cpu_s, n=3):
        reads.clear()
        return r.read({20: (1.0, n, cpu_s)})

    tick(2.0)  # the first reading
    assert tick(2.0)[20] == (0, 0)  # read: nothing moved, so the process is quiet now
    skipped = []
    for _ in range(SchedReader.IDLE_EVERY):
        out = tick(2.0)
        skipped.append(not reads and 20 not in out)
    assert skipped == [True] * (SchedReader.IDLE_EVERY - 1) + [False]  # then read again
    _thread(tmp_path, 20, 21, 5000 + 4_000_000, 100 + 1_000_000)  # 4 ms run: under a clock tick
    tick(2.0)
    assert not reads  # quiet and no CPU tick: skipped ...
    total = [0, 0]
    for _ in range(2 * SchedReader.IDLE_EVERY):
        run, wait = tick(2.0).get(20, (0, 0))
        total = [total[0] + run, total[1] + wait]
    assert total == [4_000_000, 1_000_000]  # ... and counted by a later reading, not lost
    tick(2.01)  # CPU time moved: read at once
    assert reads
    SchedReader.SKIP_IDLE = False  # the old way (benchmarks/scale_tick.py compares both)
    try:
        n = 0
        for _ in range(SchedReader.IDLE_EVERY):
            tick(2.01)
            n += len(reads)
        assert n == 3  # each idle thread once in IDLE_EVERY ticks
    finally:
        SchedReader.SKIP_IDLE = True
