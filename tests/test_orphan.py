"""tests/fakes/orphan.py: a script 'started by hand' is never re-parented to the test process,
even when an in-process launch earlier made the test process a child subreaper (the cause of
test_io_verdict_real's intermittent 'no disk_reader.py job found')."""

import os
import subprocess

import psutil

from tests.fakes.orphan import _PR_SET_CHILD_SUBREAPER, _prctl, is_subreaper, orphan_shell

CMD = 'sleep 30 & echo "pid $!"'


def _parent(pid: int) -> int:
    return psutil.Process(pid).ppid()


def test_a_background_child_leaves_a_subreaper_test_process():
    was = is_subreaper()
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    pids = []
    try:
        # the failure it guards against: a plain shell's orphan comes back to this process
        sh = subprocess.Popen(["sh", "-c", CMD], stdout=subprocess.PIPE, text=True)
        plain = int(sh.stdout.readline().split()[1])
        sh.wait()
        pids.append(plain)
        assert _parent(plain) == os.getpid()
        _, pid = orphan_shell(CMD)
        pids.append(pid)
        assert _parent(pid) != os.getpid()
        assert is_subreaper()  # the flag is back
    finally:
        for p in pids:
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
        for p in pids:  # reap the one that is ours
            try:
                os.waitpid(p, 0)
            except ChildProcessError:
                pass
        _prctl(_PR_SET_CHILD_SUBREAPER, int(was))
