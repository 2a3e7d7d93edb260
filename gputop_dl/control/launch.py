"""Launcher: starts each workload as its own process group, so that no child outlives gputop-dl.

Each job runs in a new session (own process group) with its own environment
(CUDA_VISIBLE_DEVICES, thread counts, the event-channel path; for a `command` workload also
the start-up hook's folder first on PYTHONPATH, see gputop_dl/injob/hook). No process of a job
outlives gputop-dl:

- gputop-dl is a child subreaper (Linux), so a job's orphaned grandchild (`cmd &` in a shell,
  a double fork) is re-parented to gputop-dl, not to init, and is still found among its
  descendants;
- stopping a job (control/stop.py) reaches its group and every descendant that carries its
  events path;
- the leader gets PR_SET_PDEATHSIG, and the watchdog (gputop_dl/control/watchdog.py) cleans up every
  registered group if gputop-dl itself is killed (`kill -9` included).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeGuard


from gputop_dl.injob.channel import ENV_EVENTS, ENV_GO
from gputop_dl.child import die_with_parent
from gputop_dl.collect.extras import torchrun_for
from gputop_dl.errors import UsageError
from gputop_dl.injob.hook import ENV_HOOK, ENV_HOOK_ROOT, SITE_DIR
from gputop_dl.record.paths import create_private
from gputop_dl.control.watchdog import shared
from gputop_dl.workload import Workload

ENV_EMU_DIR = "GPUTOP_DL_EMU_DIR"  # same name as gputop_dl.injob.trainer.loop.ENV_EMU_DIR (no torch here)
LOG_CAP = 8 << 20  # a job's log file stays under this many bytes: its first LOG_HEAD bytes,
LOG_HEAD = 1 << 20  # a line saying how much was cut, and its latest output (LOG_CAP / 2)
_PR_SET_CHILD_SUBREAPER = 36
WATCHDOG = shared()  # this process's one watchdog, started with the first job
_subreaper = False


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux; idempotent)."""
    global _subreaper
    if not _subreaper:
        try:
            _subreaper = ctypes.CDLL(None, use_errno=True).prctl(
                _PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except Exception:  # not Linux: stop_jobs still walks the live leaders' trees
            pass
    return _subreaper


def nproc_for(w: Workload, cuda: bool) -> int:
    """Processes for a job: one per GPU on CUDA (DDP), `nproc` if set, else 1 on CPU fallback."""
    if w.nproc:
        return w.nproc
    return max(1, len(w.gpus)) if cuda else 1


def build_argv(w: Workload, spec_path: str, cuda: bool, env: dict[str, str] | None = None) -> list[str]:
    """The job's argv. A job across nodes (`nnodes` > 1) is this node's torchrun agent, which
    meets the other nodes' agents at the c10d rendezvous; a command job's ranks then each run
    the command (`--no-python`), under the torchrun found for the job (`env`: its environment,
    for PATH). One node with `nproc` > 1: the built-in trainer, or a command job's command
    once per rank, under a standalone torchrun (a command job's `gpus` alone start one process:
    the script may spread itself over them)."""
    own = None
    if w.command is not None:
        own = ["/bin/sh", "-c", w.command[0]] if w.shell and len(w.command) == 1 else list(w.command)
        if not w.multinode and (w.nproc or 1) <= 1:
            return own
    n = nproc_for(w, cuda)
    if own and not w.multinode:
        path = (env if env is not None else os.environ).get("PATH")
        run = torchrun_for(None if w.shell else own[0], w.cwd, path)
        if run is None:  # the workload file's check said so first (config/)
            raise UsageError(f"{w.name}: nproc = {n} needs torchrun, and there is none on the "
                             "job's PATH")
        return [*run, "--standalone", f"--nproc-per-node={n}", "--no-python", *own]
    if w.multinode:
        path = (env if env is not None else os.environ).get("PATH")
        run = (torchrun_for(None if w.shell else own[0], w.cwd, path) if own
               else [sys.executable, "-m", "torch.distributed.run"])
        if run is None:  # the workload file's check said so first (config/)
            raise UsageError(f"{w.name}: nnodes = {w.nnodes} needs torchrun, and there is none "
                             "on the job's PATH")
        return [*run, f"--nnodes={w.nnodes}", f"--nproc-per-node={n}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={w.rdzv_endpoint}", f"--rdzv-id={w.rdzv_id}",
                *(["--no-python", *own] if own else ["-m", "gputop_dl.injob.trainer", spec_path])]
    if n > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={n}", "-m", "gputop_dl.injob.trainer", spec_path]
    return [sys.executable, "-m", "gputop_dl.injob.trainer", spec_path]


def build_env(w: Workload, events_path: str, work_dir: str, cuda: bool,
              base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env[ENV_EVENTS] = events_path
    env[ENV_EMU_DIR] = work_dir
    env["PYTHONUNBUFFERED"] = "1"
    if cuda and w.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in w.gpus)
    # the synthetic model is one tiny layer: extra OpenMP threads would only spin-wait and
    # burn CPU that the calibration does not account for
    threads = w.threads or (1 if w.model == "synthetic" and not w.is_command else None)
    if threads:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[k] = str(threads)
    env.update(w.env)
    if hooked(w, env):
        env["PYTHONPATH"] = hook_pythonpath(env.get("PYTHONPATH"))
        env.pop(ENV_HOOK_ROOT, None)  # the job's first Python process is the hook's root
    return env


def hooked(w: Workload, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a command job gets the start-up hook: not where its `env` (or else the
    environment it inherits) sets GPUTOP_DL_HOOK = "0"."""
    inherited = (os.environ if environ is None else environ).get(ENV_HOOK)
    return w.is_command and w.env.get(ENV_HOOK, inherited) != "0"


def hook_pythonpath(user: str | None) -> str:
    """The start-up hook's folder first, then the user's PYTHONPATH (inherited or from `env`).

    Only the hook's `sitecustomize.py` lives there, and it runs the user's own sitecustomize
    too; a program that is not Python ignores PYTHONPATH."""
    parts = [p for p in user.split(os.pathsep) if p != SITE_DIR] if user else []
    return os.pathsep.join([SITE_DIR, *parts])


@dataclass
class JobProcess:
    """A started job: its Popen, where its log and events go."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: str
    events_path: str
    argv: list[str]
    started: float
    _log_cut: int = 0  # bytes cut out of the log so far
    _log_mark: int = 0  # length of the "cut here" line after the head

    @property
    def pid(self) -> int:
        """The leader's PID, which is also the job's process group ID."""
        return self.popen.pid

    @property
    def marker(self) -> str:
        """The environment entry every process of this job inherits (and only this job's)."""
        return f"{ENV_EVENTS}={self.events_path}"

    def poll(self) -> int | None:
        return self.popen.poll()

    def bound_log(self) -> int:
        """Keep the log under LOG_CAP (see there); returns the bytes cut now (0: none).

        The job appends (O_APPEND) and so do we, so nothing it writes while we cut lands in
        the middle of the kept tail; what it writes between our read and the truncation is
        lost with the cut part."""
        try:
            size = os.path.getsize(self.log_path)
            if size <= LOG_CAP:
                return 0
            with open(self.log_path, "rb") as f:
                f.seek(size - LOG_CAP // 2)
                tail = f.read()
            nl = tail.find(b"\n")
            tail = tail[nl + 1:] if 0 <= nl < len(tail) - 1 else tail
            cut = size - LOG_HEAD - self._log_mark - len(tail)
            self._log_cut += cut
            mark = f"\n[gputop-dl: {self._log_cut} bytes of this log cut here, LOG_CAP " \
                   f"{LOG_CAP} bytes]\n".encode()
            os.truncate(self.log_path, LOG_HEAD)
            with open(self.log_path, "ab") as f:
                f.write(mark + tail)
            self._log_mark = len(mark)
            return cut
        except OSError:
            return 0

    def log_tail(self, n: int = 12) -> list[str]:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 16384))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()][-n:]


def _pinned(cpus: frozenset[int]) -> Callable[[], None]:
    """The child's set-up between fork and exec: die with the parent, run on `cpus` only."""
    def setup() -> None:
        die_with_parent()
        os.sched_setaffinity(0, cpus)  # inherited by its threads and processes
    return setup


def start_job(w: Workload, work_dir: str, cuda: bool, tag: str = "",
              go_file: str | None = None, cpus: frozenset[int] | None = None) -> JobProcess:
    """Start one workload; files go to work_dir/<name><tag>.{json,events.jsonl,log}.
    `cpus`: the CPUs it may run on (the queue's NUMA placement); None: this process's.

    With `go_file`, the built-in trainer reports "started" once its model and data are built,
    and a script under the start-up hook reports "ready" at its main loader's first pass; each
    then waits for that file to exist before its first step (the co-run start barrier)."""
    os.makedirs(work_dir, mode=0o700, exist_ok=True)
    become_subreaper()
    stem = os.path.join(work_dir, f"{w.name}{tag}")
    spec_path, events_path, log_path = stem + ".json", stem + ".events.jsonl", stem + ".log"
    for path in (spec_path, events_path, log_path):  # 0600: the job's output is its owner's
        create_private(path)
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(w.to_dict(redact=True), f)
    env = build_env(w, events_path, work_dir, cuda)
    argv = build_argv(w, spec_path, cuda, env)
    if go_file:
        env[ENV_GO] = go_file
    with open(log_path, "ab") as log:  # O_APPEND: bound_log can cut it while the job writes
        try:
            popen = subprocess.Popen(argv, cwd=w.cwd or None, env=env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True,
                                     preexec_fn=_pinned(cpus) if cpus else die_with_parent)
        except (OSError, subprocess.SubprocessError) as exc:  # exec format, permission, E2BIG
            why = f"could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}"
            why += _interpreter_note(argv[0], w.cwd, env.get("PATH"), exc)
            log.write((why + "\n").encode())
            raise StartError(why, NotStarted(w.name, log_path, events_path, argv, time.time(),
                                             why)) from None
    job = JobProcess(w.name, popen, log_path, events_path, argv, time.time())
    WATCHDOG.watch(job.pid, job.marker)
    return job


def _interpreter_note(prog: str, cwd: str | None, path_var: str | None,
                      exc: BaseException) -> str:
    """For ENOENT on a program file that is there: its `#!` line names a missing interpreter."""
    if getattr(exc, "errno", None) != errno.ENOENT:
        return ""
    path = shutil.which(prog, path=path_var) if os.sep not in prog else \
        os.path.join(cwd or "", prog)
    try:
        with open(path or "", "rb") as f:
            first = f.readline(256)
    except OSError:
        return ""
    if not first.startswith(b"#!"):
        return ""
    line = first[2:].decode("utf-8", "replace").strip()
    return f" (the interpreter of its #! line, {line!r}, is not there)"


def has_pid(job: Job) -> TypeGuard[JobProcess]:
    """A job with a process of its own: never signal or wait on a PID of None, 0 or below
    (killpg(0) is our own group, kill(-1) every process we may signal)."""
    pid = getattr(job, "pid", None)
    return isinstance(pid, int) and pid > 0


@dataclass
class NotStarted:
    """A job whose process could not be started: it has no PID and nothing to signal (never
    hand it to stop_jobs: a PID of None, 0 or -1 would reach our own group, or every process)."""

    name: str
    log_path: str
    events_path: str
    argv: list[str]
    started: float
    reason: str
    pid = None

    def poll(self) -> int:
        return 127

    def bound_log(self) -> int:
        return 0

    def log_tail(self, n: int = 12) -> list[str]:
        return [self.reason]


Job = JobProcess | NotStarted  # a job of a session: started, or not (no PID, nothing to signal)


class StartError(Exception):
    """start_job could not start the job's process; `.job` stands in for it."""

    def __init__(self, why: str, job: NotStarted):
        super().__init__(why)
        self.job = job
