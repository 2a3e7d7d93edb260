"""Who a found job is: its user, start time, working directory, Slurm job, container and (for a
job another gputop-dl launched) that launch's session, read once per process.

    ident = read_identity(pid, start_ticks)      # once per (pid, start time); never raises
    ident.elapsed_s(now)                          # per tick: one subtraction

What is read, once: `/proc/PID` (its owner), `/proc/PID/cwd`, `/proc/PID/environ` (SLURM_JOB_ID,
SLURM_JOB_USER, SLURM_JOB_PARTITION, SLURM_JOB_ACCOUNT, and gputop-dl's launch marker
GPUTOP_DL_EVENTS, whose path names the session) and `/proc/PID/cgroup` (`/job_<id>/` of Slurm's
cgroup plugin, and the container: Docker, containerd/CRI, CRI-O, Podman, LXC, with a
Kubernetes pod's uid). Another user's process usually denies its environment and working
directory: the Slurm job then comes from the cgroup alone, and `note` says why the rest is
unknown. A process that vanished gives what was read before it went. A job without Slurm or a
container costs the same four reads, once, and nothing per tick.
"""

from __future__ import annotations

import functools
import os
import pwd
import re

from gputop_dl.snapshot import SlurmJob

LAUNCH_MARKER = "GPUTOP_DL_EVENTS"  # = gputop_dl.injob.channel.ENV_EVENTS
SLURM_KEYS = ("SLURM_JOB_ID", "SLURM_JOB_USER", "SLURM_JOB_PARTITION", "SLURM_JOB_ACCOUNT")

_SLURM_CG = re.compile(r"/job_(\d+)(?:/|$)")
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINERS = (  # (pattern over a cgroup path, runtime name)
    (re.compile(r"(?:^|/)docker[-/]([0-9a-f]{12,64})(?:\.scope)?(?:/|$)"), "docker"),
    (re.compile(r"cri-containerd-([0-9a-f]{12,64})\.scope"), "containerd"),
    (re.compile(r"(?:^|/)crio-([0-9a-f]{12,64})\.scope"), "cri-o"),
    (re.compile(r"libpod-([0-9a-f]{12,64})\.scope"), "podman"),
    (re.compile(r"/kubepods[^ ]*/pod[0-9a-f_-]{36}/([0-9a-f]{12,64})(?:/|$)"), "containerd"),
    (re.compile(r"(?:^|/)lxc(?:\.payload)?[./]([^/]+)"), "lxc"),
)


class Identity:
    """What was read once about a job's root process (None: not known, `note` says why)."""

    __slots__ = ("user", "started", "cwd", "slurm", "container", "launched_by", "note")

    def __init__(self, user: str | None = None, started: float | None = None,
                 cwd: str | None = None, slurm: SlurmJob | None = None,
                 container: str | None = None, launched_by: str | None = None,
                 note: str | None = None):
        self.user, self.started, self.cwd = user, started, cwd
        self.slurm, self.container, self.launched_by, self.note = slurm, container, launched_by, note

    def elapsed_s(self, now: float) -> float | None:
        return None if self.started is None else max(0.0, now - self.started)


@functools.lru_cache(maxsize=64)
def user_name(uid: int) -> str:
    """The user name of a uid, or the number where the password database has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@functools.lru_cache(maxsize=1)
def _boot_and_tick() -> tuple[float | None, int]:
    tick = os.sysconf("SC_CLK_TCK")
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return float(line.split()[1]), tick
    except OSError:
        pass
    return None, tick


def started_at(start_ticks: int | None) -> float | None:
    """A process's start (seconds since the epoch) from its start time in clock ticks after boot."""
    boot, tick = _boot_and_tick()
    if boot is None or start_ticks is None:
        return None
    return boot + start_ticks / tick


def parse_environ(data: bytes) -> dict[str, str]:
    """The variables of `/proc/PID/environ` that identity needs (Slurm's, gputop-dl's marker)."""
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        if item.startswith(b"SLURM_JOB_") or item.startswith(b"GPUTOP_DL_EVENTS="):
            k, _, v = item.decode("utf-8", "replace").partition("=")
            if k in SLURM_KEYS or k == LAUNCH_MARKER:
                out[k] = v
    return out


def slurm_of(env: dict[str, str] | None, cgroup: str) -> SlurmJob | None:
    """The Slurm job from the environment, else its id from a `/job_<id>/` cgroup path."""
    if env and env.get("SLURM_JOB_ID"):
        return SlurmJob(env["SLURM_JOB_ID"], env.get("SLURM_JOB_USER") or None,
                        env.get("SLURM_JOB_PARTITION") or None, env.get("SLURM_JOB_ACCOUNT") or None)
    m = _SLURM_CG.search(cgroup)
    return SlurmJob(m.group(1)) if m else None


def container_of(cgroup: str) -> str | None:
    """"docker 0123456789ab", "k8s pod <uid> · containerd 0123456789ab", ... from the text of
    `/proc/PID/cgroup`, or None (not in a container this recognises)."""
    pod = _POD.search(cgroup)
    runtime = None
    for pattern, name in _CONTAINERS:
        m = pattern.search(cgroup)
        if m:
            ident = m.group(1)
            runtime = f"{name} {ident[:12]}" if name != "lxc" else f"lxc {ident}"
            break
    if pod:
        uid = pod.group(1).replace("_", "-")
        return f"k8s pod {uid}" + (f" · {runtime}" if runtime else "")
    return runtime


def session_of_marker(path: str) -> str:
    """The session that launched a job, from its marker (`.../sessions/<id>/<job>.events.jsonl`)."""
    parent = os.path.dirname(path)
    return os.path.basename(parent) or path


def read_identity(pid: int, start_ticks: int | None = None, proc: str = "/proc") -> Identity:
    """Read a process's identity once; every failure becomes None with a note, never an error."""
    base = f"{proc}/{pid}"
    notes = []
    user = cwd = None
    try:
        user = user_name(os.stat(base).st_uid)
    except OSError:
        return Identity(started=started_at(start_ticks), note="process gone")
    try:
        cwd = os.readlink(f"{base}/cwd")
    except PermissionError:
        notes.append("working directory")
    except OSError:
        pass
    env: dict[str, str] | None
    try:
        with open(f"{base}/environ", "rb") as f:
            env = parse_environ(f.read())
    except PermissionError:
        env = None
        notes.append("environment")
    except OSError:
        env = None
    try:
        with open(f"{base}/cgroup", encoding="utf-8", errors="replace") as f:
            cgroup = f.read()
    except OSError:
        cgroup = ""
    marker = env.get(LAUNCH_MARKER) if env else None
    note = None
    if notes:
        note = (f"{' and '.join(notes)} not readable (a process of {user}; gputop-dl runs as "
                f"{user_name(os.getuid())})" + ("; Slurm job from its cgroup only"
                                                 if "environment" in notes else ""))
    return Identity(user=user, started=started_at(start_ticks), cwd=cwd, slurm=slurm_of(env, cgroup),
                    container=container_of(cgroup),
                    launched_by=session_of_marker(marker) if marker else None, note=note)
