"""Start a shell whose background child is re-parented to init, as a script started by hand is.

A test process may be a child subreaper: an in-process `launch` test earlier in the same xdist
worker made it one (`launch.become_subreaper`), so a grandchild whose shell exits is
re-parented to the test process, which has imported torch, and discovery then counts the script
as one of its loader workers, not as a job (seen in CI: `--once` listed none of the two
`disk_reader.py` copies). `orphan_shell` turns the flag off while the shell runs and exits, and
back on after.
"""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg: int | ctypes.c_int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(option, arg, 0, 0, 0))


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
        return False
    return bool(flag.value)


@contextmanager
def not_a_subreaper() -> Iterator[None]:
    """This process is no child subreaper inside the block (and is again after, if it was)."""
    was = is_subreaper()
    if was:
        _prctl(_PR_SET_CHILD_SUBREAPER, 0)
    try:
        yield
    finally:
        if was:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def orphan_shell(cmd: str, **popen: object) -> tuple[subprocess.Popen[str], int]:
    """Run `cmd` (which must end in `& echo "pid $!"`) in `sh -c` with stdout piped; wait for
    the shell to exit, so its background child is re-parented to init. (the shell, the
    child's PID)."""
    with not_a_subreaper():
        sh = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.PIPE, text=True, **popen)  # type: ignore[call-overload]
        assert sh.stdout is not None
        first = sh.stdout.readline()
        assert first.startswith("pid "), first
        sh.wait()
    return sh, int(first.split()[1])
