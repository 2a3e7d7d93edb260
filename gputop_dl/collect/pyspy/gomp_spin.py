"""Where a trainer's main thread spends its time in an intra-op pool: py-spy `--native` bursts.

An OpenMP pool (torch's intra-op threads: GCC's libgomp in torch's wheels, Intel's libiomp5,
LLVM's libomp) splits each operator across its threads and waits at a barrier for the last
one: a thread that finished its part spins in the runtime (libgomp's busy-wait), then sleeps on
a futex. Spinning is CPU time without work, so a spinning pool's CPU time says nothing of its
progress. A native stack says which it is: its innermost frames in the OpenMP runtime, or in
libc called from it (`runtime`: the barrier's spin and futex sleep, the team's start); in libc
called from Python or the interpreter (`idle`: a data wait, a lock); anything else is the
operators' own code (`work`). py-spy names the runtime's exported functions (`GOMP_parallel`)
and shows its hidden ones (`gomp_team_barrier_wait_end`, in a stripped wheel) as addresses in
the library: the library, not the name, says it is the runtime.

`record_spin` samples the main thread (the pool's thread 0: it runs every serial part and its
share of each operator) for one burst and reads its schedstat around it; `SpinSample` holds the
counts and what the kernel said. py-spy cannot read native stacks without pausing the process
(`--native` refuses `--nonblocking`): each sample stops it for the unwinding, which the
kernel's figures leave out (a stopped thread is neither running nor waiting for a CPU).
analyse/live/pool_progress.py turns a sample into the job's progress and its slowdown.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass

from gputop_dl.collect.pyspy.run import _run_pyspy, is_main_thread, split_thread
from gputop_dl.collect.pyspy.trace import parse_raw

OMP_RUNTIMES = ("libgomp", "libiomp", "libomp")  # a frame's file: the OpenMP runtime
C_LIBRARIES = ("libc.so", "libc-", "libpthread", "ld-linux")  # where a futex or poll sleeps
KINDS = ("work", "runtime", "idle")


def _file(frame: str) -> str:
    """The file in py-spy's 'func (file[:line])' frame ('' for none)."""
    frame = frame.strip()
    if not frame.endswith(")") or "(" not in frame:
        return ""
    return frame[frame.rfind("(") + 1:-1]


def _in(frame: str, names: tuple[str, ...]) -> bool:
    f = os.path.basename(_file(frame))
    return any(f.startswith(n) for n in names)


def native_kind(frames: list[str]) -> str:
    """One native stack (root first, no thread entry) -> "runtime" (innermost frame in the
    OpenMP runtime, or in libc called from it), "idle" (in libc called from Python or the
    interpreter, or an empty stack), else "work"."""
    if not frames:
        return "idle"
    if _in(frames[-1], OMP_RUNTIMES):
        return "runtime"
    if _in(frames[-1], C_LIBRARIES):
        for fr in reversed(frames[:-1]):
            if _in(fr, C_LIBRARIES):
                continue
            if _in(fr, OMP_RUNTIMES):
                return "runtime"
            f = _file(fr)
            return "idle" if f.endswith(".py") or ".py:" in f or "libpython" in f else "work"
        return "idle"
    return "work"


def main_thread_kinds(stacks: Counter[str], pid: int | None = None) -> Counter[str]:
    """Folded `--native --threads` stacks (`parse_raw`) -> the main thread's samples per kind
    (`KINDS`); the other threads' samples are left out."""
    out: Counter[str] = Counter({k: 0 for k in KINDS})
    for stack, n in stacks.items():
        if not is_main_thread(stack, pid):
            continue
        _, _, rest = split_thread(stack)
        out[native_kind([f for f in rest.split(";") if f.strip()])] += n
    return out


@dataclass(frozen=True)
class SpinSample:
    """One native burst on a trainer's main thread: its samples per kind, and its schedstat over
    the burst (seconds on a CPU, seconds runnable but waiting for one)."""

    work: int
    runtime: int
    idle: int
    ran_s: float | None  # on a CPU during the burst (None: schedstat unreadable)
    waited_s: float | None  # runnable, waiting for a CPU
    wall_s: float
    cpu_s: float | None = None  # what the burst cost py-spy itself

    @property
    def samples(self) -> int:
        return self.work + self.runtime + self.idle


def _schedstat(pid: int) -> tuple[int, int] | None:
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            ran, waited, _ = f.read().split()
        return int(ran), int(waited)
    except (OSError, ValueError):
        return None


def record_spin(pid: int, duration_s: float = 2.0, rate: int = 20,
                exe: str | None = None) -> tuple[SpinSample | None, str | None]:
    """One `py-spy record --native` burst on `pid` (blocking: see the module's docstring) ->
    (its main thread's `SpinSample`, error message or None)."""
    s0, t0 = _schedstat(pid), time.monotonic()
    text, err, cpu = _run_pyspy(pid, duration_s, rate, "raw", ["--native", "--threads"], exe,
                                blocking=True)
    s1, t1 = _schedstat(pid), time.monotonic()
    if err is not None:
        return None, err
    kinds = main_thread_kinds(parse_raw(text or ""), pid)
    ran = waited = None
    if s0 is not None and s1 is not None:
        ran, waited = (s1[0] - s0[0]) / 1e9, (s1[1] - s0[1]) / 1e9
    return SpinSample(kinds["work"], kinds["runtime"], kinds["idle"], ran, waited, t1 - t0,
                      cpu), None
