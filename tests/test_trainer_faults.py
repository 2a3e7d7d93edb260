"""A trainer's minor page faults a second (collect/procs.py `TreeSample.faults_by_pid`,
`trainer_faults`): read from real processes, one that maps and touches new memory a known
number of pages, one asleep; the live pace that uses them is tests/test_own_pace.py's."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from gputop_dl.collect.procs import PROC, TreeSampler, trainer_faults

PAGES = 2048  # pages touched per round (8 MiB of 4 KiB pages), ROUNDS rounds on each "go"
ROUNDS = 8
TOUCH = f"""
import mmap, sys
print("ready", flush=True)
for line in sys.stdin:
    for _ in range({ROUNDS}):
        m = mmap.mmap(-1, {PAGES} * mmap.PAGESIZE)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):  # a page a fault, whatever the THP setting
            m.madvise(mmap.MADV_NOHUGEPAGE)
        for i in range(0, len(m), mmap.PAGESIZE):
            m[i] = 1
        m.close()
    print("done", flush=True)
"""


@pytest.mark.skipif(not PROC, reason="minor faults are read from /proc/PID/stat (Linux only)")
def test_a_trainer_that_maps_new_pages_reads_them_and_one_asleep_none():
    procs = [subprocess.Popen([sys.executable, "-c", TOUCH], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    busy, idle = procs
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "ready\n"
        samplers = [TreeSampler(p.pid) for p in procs]
        t0 = time.monotonic()
        first = [s.sample() for s in samplers]
        assert all(ts is not None and ts.faults_by_pid is None for ts in first)  # no delta yet
        assert busy.stdin is not None and busy.stdout is not None
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline() == "done\n"  # the event: every round touched its pages
        got = [s.sample() for s in samplers]
        span = time.monotonic() - t0  # at least the sampler's interval
        rate = trainer_faults(got[0], {busy.pid})
        # rate × the interval is the faults counted; the span bounds the interval from above
        assert rate is not None and rate * span >= PAGES * ROUNDS
        quiet = trainer_faults(got[1], {idle.pid})
        assert quiet is not None and quiet * span < PAGES  # asleep: next to none
        assert trainer_faults(got[0], {idle.pid}) is None  # not one of that tree's processes
        for s in samplers:
            s.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()
