"""Plain PyTorch scripts of known cost (tests/external/calibrated.py) started as from a terminal.

    scripts = ByHand()
    pids = scripts.start(HEAVY, 3)   # the scripts' PIDs, once each is past its warm-up steps
    ...
    scripts.stop()                   # kill -9 to each one's process group

Each script runs through `sh -c`, as from a terminal: the test process may have imported torch
(another test did), and discovery then counts its direct children as its own workers (a
notebook's DataLoader workers look like that).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

CALIBRATED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "external", "calibrated.py")
LIGHT = ["--sample-io-ms", "10", "--compute-ms", "60"]  # sleeps: no CPU to speak of
HEAVY = ["--sample-cpu-ms", "10", "--workers", "2", "--compute-ms", "20"]  # ~1.8 cores alone


def training(pid: int, workers: int = 0) -> bool:
    """Whether the process has loaded torch and, with `workers`, started its loader workers (it
    forks them at its first batch: torch is mapped long before, while it still imports)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            if "libtorch" not in f.read():
                return False
        return workers == 0 or len(psutil.Process(pid).children()) >= workers
    except (OSError, psutil.Error):
        return False


def _workers(args: list[str]) -> int:
    return int(args[args.index("--workers") + 1]) if "--workers" in args else 0


class ByHand:
    """Scripts started by hand; `stop()` ends every one."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.dir = tempfile.mkdtemp(prefix="by-hand-")  # the scripts' --ready files

    def start(self, args: list[str], n: int, *, cwd: str | None = None,
              env: dict[str, str] | None = None, program: list[str] | None = None) -> set[int]:
        """`n` copies of the calibrated script (`program`: how a terminal would name it, run
        in `cwd`), started through `sh -c`; their PIDs once each is training."""
        mine, ready = [], []
        for _ in range(n):
            ready.append(os.path.join(self.dir, f"ready-{len(self.procs)}"))
            argv = (program or [sys.executable, CALIBRATED]) + ["--steps", "0", *args]
            if program is None:  # the script says when its warm-up steps are done
                argv += ["--ready", ready[-1]]
            cmd = " ".join(shlex.quote(a) for a in argv)
            p = subprocess.Popen(["sh", "-c", cmd + "; exit 0"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True, cwd=cwd,
                                 env=env)
            self.procs.append(p)
            mine.append(p)
        scripts: list[int] = []
        deadline = time.monotonic() + 120  # torch imported and training (slow on a busy box)
        while time.monotonic() < deadline:
            scripts = [c.pid for p in mine for c in psutil.Process(p.pid).children()]
            if (len(scripts) == n and all(training(pid, _workers(args)) for pid in scripts)
                    and (program is not None or all(os.path.exists(r) for r in ready))):
                break
            time.sleep(0.2)
        return set(scripts)

    def stop(self, pids: set[int] | None = None) -> None:
        """kill -9 to the process group of each script (of those with these PIDs: `pids`)."""
        for p in list(self.procs):
            if pids is not None and not pids & {c.pid for c in _children(p.pid)}:
                continue
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
            p.wait()
            self.procs.remove(p)
        if pids is None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []


class Reused:
    """Scripts kept running from one test of a module to the next that asks for the same (a
    module-scoped fixture; the module's heavy tests run one after another on one worker,
    tests/box_schedule.py): `start(args, n)` gives `n` running copies of `args`, those of the
    test before where it asked for as many or more of the same (the rest stopped), else new
    ones, after stopping any others: only the scripts of the test that runs are on the box.
    Their start (torch's import) is what a test of a running job need not wait for again."""

    def __init__(self) -> None:
        self.hand: ByHand | None = None
        self.args: tuple[str, ...] = ()
        self.pids: set[int] = set()

    def start(self, args: list[str], n: int) -> set[int]:
        if (self.hand is not None and self.args == tuple(args) and len(self.pids) >= n
                and all(_running(pid) for pid in self.pids)):
            extra = set(sorted(self.pids)[n:])
            self.hand.stop(extra)
            self.pids -= extra
            return set(self.pids)
        self.stop()
        self.hand, self.args = ByHand(), tuple(args)
        self.pids = self.hand.start(args, n)
        return set(self.pids)

    def stop(self) -> None:
        if self.hand is not None:
            self.hand.stop()
        self.hand, self.pids = None, set()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def never_left_stopped(pids) -> bool:
    """No process of these jobs' trees is stopped (SIGSTOP, or held by a ptrace tracer) now."""
    for pid in pids:
        try:
            procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for p in procs:
            try:
                if p.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
                    return False
            except psutil.NoSuchProcess:
                continue
    return True


def only_found(pids: set[int], **kw):
    """A `FoundJobs` that finds only the jobs with these root PIDs (the box runs other
    people's jobs; a test or a benchmark judges its own). `kw`: FoundJobs' arguments."""
    from gputop_dl.collect.jobs.found import FoundJobs

    class OnlyFound(FoundJobs):
        def sample(self, *args, **kwargs):
            jobs, notes = super().sample(*args, **kwargs)
            return [j for j in jobs if j.pid in pids], notes

    return OnlyFound(**kw)
