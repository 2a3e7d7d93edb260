"""Stopping jobs and reaping what they leave: TERM, a grace period, KILL, and no zombie.

Stopping a job is TERM to its process group and to every descendant of ours that is in that
group or carries the job's events path in its environment, also after the job's leader has
ended (gputop-dl is a child subreaper: control/launch.py); a grace period, then KILL. Ended
processes re-parented to us are reaped; how a job ended is said in words (`describe_exit`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

import psutil

from gputop_dl.collect.proc.procs import children_map, descendants
from gputop_dl.control.launch import WATCHDOG, Job, JobProcess, has_pid
from gputop_dl.injob.channel import ENV_EVENTS


def _descendants(pid: int, cmap: dict[int, list[int]]) -> list[psutil.Process]:
    out = []
    for c in descendants(pid, cmap):
        try:
            out.append(psutil.Process(c))
        except psutil.Error:
            pass
    return out


def _members(jobs: list[JobProcess]) -> list[psutil.Process]:
    """The processes of these jobs still there, leaders left out (their Popen waits for them):
    the descendants of a live leader, and those of our own descendants (an orphan comes to us,
    the subreaper) that are in a job's process group or carry a job's marker. One scan of
    /proc for all jobs (one per job made stopping 3,000 jobs take minutes)."""
    pgids = {j.pid for j in jobs}
    markers = {j.events_path for j in jobs}
    cmap = children_map()
    found: dict[int, psutil.Process] = {}
    for j in jobs:
        if j.poll() is None:
            found.update((p.pid, p) for p in _descendants(j.pid, cmap))
    for p in _descendants(os.getpid(), cmap):
        if p.pid in found or p.pid in pgids:
            continue
        try:
            if os.getpgid(p.pid) in pgids or p.environ().get(ENV_EVENTS) in markers:
                found[p.pid] = p
        except (psutil.Error, OSError):
            pass
    return list(found.values())


def _signal(jobs: list[JobProcess], procs: list[psutil.Process], sig: signal.Signals) -> None:
    for j in jobs:
        try:
            os.killpg(j.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def stop_jobs(given: Sequence[Job], grace_s: float = 5.0) -> None:
    """TERM every process of these jobs (their groups, and what is left of a job whose leader
    already ended), wait up to grace_s, then KILL what is left; the watchdog then forgets them.
    A job that never started (no PID) is left out: it has nothing to stop."""
    jobs = [j for j in given if has_pid(j)]
    live = [j for j in jobs if j.poll() is None]
    tree = _members(jobs)
    _signal(live, tree, signal.SIGTERM)
    _signal(live, tree, signal.SIGCONT)  # a stopped process handles its TERM only once resumed
    deadline = time.monotonic() + grace_s
    for j in live:
        try:
            j.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    _, alive = psutil.wait_procs(tree, timeout=max(0.0, deadline - time.monotonic()))
    _signal([j for j in live if j.poll() is None], alive, signal.SIGKILL)
    for j in live:
        try:
            j.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    _, left = psutil.wait_procs(alive, timeout=2)
    reap_orphans(jobs)
    if not left and all(j.poll() is not None for j in jobs):
        for j in jobs:
            WATCHDOG.forget(j.pid)


_CHILDREN: dict[int, bool] = {}  # our direct child PID -> whether it carries a job's marker


def reap_orphans(jobs: Sequence[Job], children: list[int] | None = None) -> None:
    """Reap the ended processes of these jobs that were re-parented to us (the subreaper):
    those of their groups, and those that left them (a `setsid` daemon); never a job's leader,
    whose exit code its Popen collects. `children`: our direct child PIDs from this tick's
    PPID map (else psutil lists them)."""
    _reap_adopted(jobs, children)
    for j in jobs:
        if not has_pid(j):  # waitid(P_PGID, 0) would reap in our own group
            continue
        while True:
            try:
                si = os.waitid(os.P_PGID, j.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except (ChildProcessError, OSError, AttributeError):
                break
            if si is None or si.si_pid == j.pid:
                break
            try:
                os.waitpid(si.si_pid, os.WNOHANG)
            except ChildProcessError:
                break


def _reap_adopted(jobs: Sequence[Job], children: list[int] | None) -> None:
    """Our direct children that carry a job's marker but are no job's leader (orphans in a
    group of their own) are reaped once they end. Each child's environment is read once, while
    it is alive; children without a marker (py-spy, the watchdog) are never touched: their
    Popen collects them."""
    if children is None:
        try:
            children = [p.pid for p in psutil.Process().children()]
        except psutil.Error:
            return
    markers = {j.events_path for j in jobs}
    leaders = {j.pid for j in jobs if has_pid(j)}
    for pid in children:
        if pid in leaders:
            continue
        ours = _CHILDREN.get(pid)
        if ours is None:
            try:
                ours = _CHILDREN[pid] = psutil.Process(pid).environ().get(ENV_EVENTS) in markers
            except (psutil.Error, OSError):  # ended already (a zombie's environ is unreadable)
                continue
        if ours:
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] != 0
            except ChildProcessError:
                done = True
            if done:
                del _CHILDREN[pid]
    for pid in _CHILDREN.keys() - set(children):  # reaped by their Popen, or gone
        del _CHILDREN[pid]


def describe_exit(code: int, stopped_by_us: bool, oom: bool | None = None) -> str:
    """Human cause for a non-zero exit with no 'failed' event. `oom`: whether the kernel's
    OOM-kill counters rose over the job's life (collect/proc/oomkill.py; None: unreadable). A
    SIGKILL is blamed on the OOM killer only when the kernel says so."""
    if code < 0:
        sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        if -code == signal.SIGKILL and not stopped_by_us:
            if oom:
                return f"killed by {sig} by the kernel's OOM killer (its oom_kill count rose while the job ran)"
            if oom is False:
                return f"killed by {sig} (sent by another process)"
            return f"killed by {sig} (sent by another process, or the OOM killer: its counters " \
                   "could not be read; check `dmesg`)"
        return f"killed by {sig}"
    return f"exited with code {code}"
