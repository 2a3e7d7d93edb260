"""A job's slowdown from its loader workers' work (collect/jobs/loader_work.py, analyse/slowdown/loader_rate.py)."""

from __future__ import annotations

import os

import pytest

from gputop_dl.analyse.slowdown.loader_rate import CHECK, loader_slowdown
from gputop_dl.collect.jobs.loader_work import (LoaderWork, WorkWatch, chain_rate, read_work,
                                           work_rate, workers_of)


def test_the_slowdown_is_the_cpu_ratio_and_the_switches_its_check():
    # alone: 50 ms of CPU and 400 switches a second; together 1/4 of the CPU, 1/5 of the switches
    got = loader_slowdown((10.0, 0.125, 800), (4.0, 0.2, 1600))
    assert got.why is None and got.slowdown == pytest.approx(4.0)
    assert (got.by_cpu, got.by_switches) == (pytest.approx(4.0), pytest.approx(5.0))
    assert 0 < got.agreement < 1  # 4x against 5x: near, not equal
    got = loader_slowdown((10.0, 0.125, 800), (4.0, 0.2, 1280))  # both 4x
    assert (got.slowdown, got.agreement) == (pytest.approx(4.0), 1.0)


def test_ratios_that_disagree_or_too_little_work_give_no_slowdown_and_say_why():
    got = loader_slowdown((10.0, 0.125, 800), (4.0, 0.2, 1280 * CHECK * 1.1))
    assert got.slowdown is None and got.agreement is None
    assert "disagree" in got.why and "4.00×" in got.why
    got = loader_slowdown((10.0, 0.125, 30), (4.0, 0.2, 1280))
    assert got.slowdown is None
    assert got.why.startswith("together, its loader workers did too little")
    got = loader_slowdown((10.0, 0.125, 800), (4.0, 0.001, 1280))
    assert got.slowdown is None and got.why.startswith("alone, ") and "1 ms of CPU" in got.why


def test_work_rate_needs_the_same_workers_in_both_readings():
    a = LoaderWork(0.0, ((11, 0, 0), (12, 0, 0)))
    b = LoaderWork(2.0, ((11, 10**9, 300), (12, 5 * 10**8, 100)))
    rate, why = work_rate(a, b)
    assert why is None and rate is not None
    assert (rate.cpu_s, rate.switches, rate.cores, rate.switches_per_s) == (1.5, 400, 0.75, 200)
    rate, why = work_rate(a, LoaderWork(3.0, ((13, 10**9, 300),)))  # a new epoch's worker,
    assert rate is None and "replaced" in why  # and what the old ones did before they ended?
    rate, why = work_rate(None, b)
    assert rate is None and "no data-loader worker" in why


def test_read_work_sums_a_real_process_threads_and_moves_with_its_work():
    me = os.getpid()
    a = read_work([me, 2**22 + 12345])  # the second PID does not exist: left out
    assert a is not None and a.pids == frozenset({me})
    x = 0
    for i in range(300_000):  # CPU time, measured in ns by the kernel
        x += i
    os.sched_yield()
    b = read_work([me])
    rate, why = work_rate(a, b)
    assert why is None and rate is not None and rate.cpu_s > 0
    assert read_work([2**22 + 12345]) is None


def test_read_work_from_a_fake_proc(tmp_path):
    for pid, tids in ((7, (7, 8)), (9, (9,))):
        for tid in tids:
            d = tmp_path / str(pid) / "task" / str(tid)
            d.mkdir(parents=True)
            (d / "schedstat").write_text(f"{tid * 1000} 5 3\n")
            (d / "status").write_text(f"Name:\tpt_data_worker\nvoluntary_ctxt_switches:\t{tid}\n"
                                      "nonvoluntary_ctxt_switches:\t1\n")
    w = read_work([9, 7], proc=str(tmp_path), clock=lambda: 5.0)
    assert w == LoaderWork(5.0, ((7, 15000, 15), (9, 9000, 9)))


def test_a_chain_of_close_readings_counts_through_a_new_epochs_workers():
    ms = 10**6
    readings = [LoaderWork(0.0, ((11, 0, 0),)), LoaderWork(0.5, ((11, 5 * ms, 10),)),
                None,  # between two epochs: no worker to read
                LoaderWork(1.5, ((12, 3 * ms, 6),)),  # the new worker, counted from its start
                LoaderWork(2.0, ((12, 8 * ms, 16),))]
    rate, why = chain_rate(readings)
    assert why is None and (rate.seconds, rate.switches) == (2.0, 26)
    assert rate.cpu_s == pytest.approx(0.013)
    # a worker ended across a long step: the run breaks there; the longest part is rated
    readings += [LoaderWork(5.0, ((13, 1 * ms, 2),)), LoaderWork(5.5, ((13, 2 * ms, 4),))]
    rate, why = chain_rate(readings)
    assert why is None and rate.seconds == 2.0 and rate.switches == 26
    rate, why = chain_rate([LoaderWork(0.0, ((11, 0, 0),))])
    assert rate is None and "read once" in why


def test_a_work_watch_reads_a_real_jobs_workers_while_the_caller_waits(tmp_path):
    import signal
    import subprocess
    import sys
    import threading
    import time

    # a "trainer" whose one child burns CPU and sleeps, as a loader worker does (not this
    # process's children: a test before may have left DataLoader workers under it); the child
    # says when its loop starts: read during its interpreter's start-up it had run 8.5 ms and
    # switched away by itself not once, and the test failed
    ready = tmp_path / "ready"
    busy = (f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\n"
            "while True: sum(range(10**5)); time.sleep(0.001)")
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.Popen("
                               f"[sys.executable, '-c', {busy!r}]).wait()"],
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not ((kids := workers_of(parent.pid)) and ready.exists()) \
                and time.monotonic() < deadline:
            time.sleep(0.01)  # until the child is in its loop (an event, with a deadline)
        assert len(kids) == 1 and workers_of(parent.pid, kids) == []
        watch = WorkWatch(lambda: workers_of(parent.pid), every_s=0.05).start()
        seen = threading.Event()
        while not seen.wait(0.01) and time.monotonic() < deadline:  # read twice: an event
            if sum(r is not None for r in watch.readings) >= 2:
                seen.set()
        rate, why = chain_rate(watch.stop())
        assert why is None and rate is not None and rate.cpu_s > 0 and rate.switches > 0
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert workers_of(2**22 + 12345) == []


def test_workers_are_the_processes_torch_named_loader_workers_where_any_is(monkeypatch):
    from gputop_dl.collect.jobs import loader_work

    class Proc:
        def __init__(self, pid, name="python"):
            self.pid, self._name = pid, name

        def name(self):
            return self._name

        def children(self, recursive=False):
            return tree.get(self.pid, [])

    tree = {1: [Proc(2, "pt_data_worker"), Proc(3), Proc(4, "pt_data_worker"), Proc(5)]}
    monkeypatch.setattr(loader_work.psutil, "Process", lambda pid: Proc(pid))
    # a compiler's worker pool (3) beside torch's loader workers (2, 4); 5 is a rank
    assert workers_of(1, [5]) == [2, 4]
    tree[1] = [Proc(3), Proc(5)]  # an older torch names no process: all but the ranks
    assert workers_of(1, [5]) == [3]


def test_batches_by_write_calls_are_the_slowdown_where_both_windows_hold_enough():
    """PyTorch's dcgan beside a copy (the 2-core box): 9 write calls a batch, its worker's CPU
    a batch up by 41 %. The write calls' ratio is its slowdown (its own iterations: 2.88×),
    the CPU's (2.04×) is said beside it; too few write calls fall back to CPU and switches."""
    alone, together = (60.0, 2.51, 600), (90.0, 1.84, 450)  # seconds, CPU-s, switches
    got = loader_slowdown(together, alone, (108, 207))
    assert got.slowdown == pytest.approx((207 / 60) / (108 / 90)) == got.by_writes
    assert got.by_cpu == pytest.approx((2.51 / 60) / (1.84 / 90)) and got.agreement == 1.0
    got = loader_slowdown(together, alone, (12, 207))  # fewer than MIN_WINDOW_WRITES together
    assert got.by_writes is None and got.slowdown == pytest.approx(got.by_cpu)
    assert loader_slowdown(together, alone, (None, 207)).by_writes is None  # not readable


def test_write_calls_chain_through_readings_and_a_new_worker():
    readings = [LoaderWork(0.0, ((11, 0, 0),), ((11, 100),)),
                LoaderWork(0.5, ((11, 10**6, 10),), ((11, 118),)),
                LoaderWork(1.0, ((12, 10**6, 6),), ((12, 27),))]  # a new worker: all its 27
    rate, why = chain_rate(readings)
    assert why is None and rate.writes == 18 + 27
    rate, _ = chain_rate([LoaderWork(0.0, ((11, 0, 0),), ((11, 100),)),
                          LoaderWork(0.5, ((11, 10**6, 10),))])  # its io not readable now
    assert rate.writes is None


def test_read_work_reads_each_workers_write_calls_where_readable(tmp_path):
    for pid in (7, 9):
        d = tmp_path / str(pid) / "task" / str(pid)
        d.mkdir(parents=True)
        (d / "schedstat").write_text("1000 5 3\n")
        (d / "status").write_text("voluntary_ctxt_switches:\t4\n")
    (tmp_path / "7" / "io").write_text("rchar: 1\nsyscw: 45\nread_bytes: 0\n")  # 9: not readable
    w = read_work([7, 9], proc=str(tmp_path), clock=lambda: 1.0)
    assert w.writes == ((7, 45),) and len(w.workers) == 2
