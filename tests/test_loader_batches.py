"""A real DataLoader worker hands each batch over in a fixed number of write calls, fast or slow
(collect/proc/diskio.py, analyse/slowdown/pace.py: the pace by batches), and the collector finds
it by torch's name for it. One tiny torch process; counts, no timing."""

import os
import subprocess
import sys

import pytest

from gputop_dl.collect.proc.diskio import parse_io
from gputop_dl.collect.proc.procs import read_stat

pytest.importorskip("torch")
SCRIPT = os.path.join(os.path.dirname(__file__), "external", "loader_batches.py")


def _writes(pid: int) -> int:
    with open(f"/proc/{pid}/io", "rb") as f:
        got = parse_io(f.read())
    assert got is not None and got[2] is not None
    return got[2]


def test_a_workers_write_calls_per_batch_do_not_move_with_the_pace():
    p = subprocess.Popen([sys.executable, SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        ready = p.stdout.readline().split()
        assert ready[0] == "ready", ready
        worker = int(ready[1])
        st = read_stat(worker)
        assert st is not None and st.loader  # torch named it pt_data_worker: a loader worker

        def phase(n: int, gap: float) -> int:
            """The worker's write calls while the trainer consumed `n` batches `gap` s apart."""
            before = _writes(worker)
            p.stdin.write(f"{n} {gap}\n")
            p.stdin.flush()
            assert p.stdout.readline().startswith("done")
            return _writes(worker) - before

        phase(4, 0.0)  # past the prefetched batches' start
        fast, slow, fast2 = phase(20, 0.0), phase(20, 0.05), phase(20, 0.0)
        assert fast > 0
        # the same count for the same batches, whatever the pace (a batch or two in flight at
        # a phase's ends: the worker runs ahead of the trainer by its prefetch)
        per = fast / 20
        for got in (slow, fast2):
            assert abs(got - fast) <= 2 * per + 1, (fast, slow, fast2)
    finally:
        p.kill()
        p.wait()
