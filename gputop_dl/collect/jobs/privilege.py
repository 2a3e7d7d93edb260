"""What this gputop-dl may read of a job it found: root, CAP_SYS_PTRACE, Yama's ptrace rule, and the reasons and ways out where it may not.

Without root, another user's process shows its command line, state, CPU times, threads, CPU
wait (`schedstat`), memory size and cgroup to everyone, but not its memory maps, environment,
working directory, `/proc/PID/io` or open files, and py-spy may not attach to it (ptrace). Even a
user's own process may be refused to py-spy by Yama (`kernel.yama.ptrace_scope`): 1 (Ubuntu's
default) lets a process trace only its own descendants, and py-spy, started by gputop-dl, is no
ancestor of any job it looks at; 2 asks for CAP_SYS_PTRACE; 3 forbids ptrace.

`Access.read()` reads the rule once (the file path is injectable for tests); `refusal()` says
why py-spy may not attach to a process owned by a uid (None: it may), `limits()` what a job's
row lacks for it, each with why and what would unlock it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["YAMA_PATH", "Access", "ptrace_scope", "WAYS_OUT", "OTHER_USER", "box_line"]

YAMA_PATH = "/proc/sys/kernel/yama/ptrace_scope"
CAP_SYS_PTRACE = 19
# the three ways out of a ptrace refusal of one's own job
WAYS_OUT = ("run `sudo gputop-dl`; or allow ptrace of your own processes with "
            "`sudo sysctl kernel.yama.ptrace_scope=0`; or start the job with `gputop-dl launch` "
            "as a `command` workload (its start-up hook reports data stall and steps without "
            "ptrace)")
OTHER_USER = "another user's process: needs root (sudo gputop-dl)"


def ptrace_scope(path: str = YAMA_PATH) -> int | None:
    """Yama's `ptrace_scope` (0..3); None where the kernel has no Yama (no such rule)."""
    try:
        with open(path, "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _cap_sys_ptrace(status_path: str) -> bool | None:
    """Whether CAP_SYS_PTRACE is in this process's effective set (None: not readable). Root
    in a container started without it (Docker's default) lacks it."""
    try:
        with open(status_path, "rb") as f:
            for line in f:
                if line.startswith(b"CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass(frozen=True)
class Access:
    """This process's rights to trace and read other processes."""

    euid: int
    sys_ptrace: bool  # CAP_SYS_PTRACE in the effective set (root's, unless a container drops it)
    scope: int | None  # kernel.yama.ptrace_scope; None: no Yama

    @classmethod
    def read(cls, yama_path: str = YAMA_PATH, status_path: str = "/proc/self/status") -> Access:
        euid = os.geteuid()
        cap = _cap_sys_ptrace(status_path)
        return cls(euid=euid, sys_ptrace=euid == 0 if cap is None else cap,
                   scope=ptrace_scope(yama_path))

    def other(self, uid: int | None) -> bool:
        """Whether a process of `uid` is another user's, closed to this one (not root)."""
        return uid is not None and uid != self.euid and not self.sys_ptrace

    def refusal(self, uid: int | None) -> str | None:
        """Why py-spy (a child of this process, so the ancestor of no job) may not attach to a
        process of `uid`; None: it may."""
        if self.scope == 3:
            return "kernel.yama.ptrace_scope=3: ptrace is off on this machine until a reboot"
        if self.other(uid):
            return OTHER_USER
        if self.sys_ptrace:
            return None
        if self.scope == 2:
            return "kernel.yama.ptrace_scope=2: ptrace needs CAP_SYS_PTRACE (root)"
        if self.scope == 1:
            return ("kernel.yama.ptrace_scope=1: py-spy may attach only to its own "
                    "descendants, not to a job started in another shell")
        return None

    def limits(self, uid: int | None) -> tuple[tuple[str, str], ...]:
        """What a found job's row cannot show, each (what, why and what unlocks it)."""
        out = []
        refused = self.refusal(uid)
        if refused:
            why = refused if self.other(uid) else f"{refused}; {WAYS_OUT}"
            out += [("data stall", why), ("step time", why), ("loop counter", why)]
        if self.other(uid):  # /proc/PID/{io,environ,cwd} are its user's and root's only
            out += [("disk reads", OTHER_USER), ("loader pace", OTHER_USER),
                    ("working directory", OTHER_USER), ("environment and ranks", OTHER_USER)]
        return tuple(out)


def box_line(n: int) -> str:
    """The one line for the box when `n` jobs of other users are shown."""
    return (f"{n} job{'s' if n != 1 else ''} of other users: CPU and waits only; run with sudo "
            "for data stall and step times")
