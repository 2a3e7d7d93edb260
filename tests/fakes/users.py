"""Real users for tests of what gputop-dl sees without root: two throw-away accounts, and commands run as them.

    users = Users.make()                         # None (and why) where this is not root
    p = users.popen("alice", [python, script])   # a process of gputopdl_alice
    out = users.run("bob", [gputop_dl, "--once", "--json"])
    users.close()                                # kill -9 every process started, remove the folder

The interpreter lives under a folder other users may not enter (a pyenv under /root, 0700): each
command runs in a private mount namespace of its own where that folder is covered by an empty
one other users may enter, holding only the interpreter's tree (a bind mount). Nothing outside
that namespace changes: the folder keeps its mode for everyone else.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile

NAMES = {"alice": "gputopdl_alice", "bob": "gputopdl_bob"}


def why_not() -> str | None:
    """Why real-user tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root to create users and run as them (CI runs as root)"
    missing = [t for t in ("useradd", "unshare", "setpriv", "mount") if shutil.which(t) is None]
    return f"missing {', '.join(missing)}" if missing else None


def closed_dir(path: str) -> tuple[str, str] | None:
    """(the first folder on `path` other users may not enter, its child on `path`); None: open."""
    parts = os.path.realpath(path).split(os.sep)
    for i in range(2, len(parts)):
        d = os.sep.join(parts[:i]) or os.sep
        if not os.stat(d).st_mode & 0o001:
            return d, os.sep.join(parts[:i + 1])
    return None


class Users:
    """The two accounts, a folder both may read, and the processes started as them."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="gputopdl-users-")
        os.chmod(self.dir, 0o755)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.uid = {k: self._ensure(n) for k, n in NAMES.items()}
        for who, uid in self.uid.items():  # each one's home and gputop-dl data dir
            home = os.path.join(self.dir, f"home-{who}")
            os.mkdir(home, 0o700)
            os.chown(home, uid, pwd.getpwuid(uid).pw_gid)
        self.closed = closed_dir(sys.executable)
        self._stash = os.path.join(self.dir, ".interpreter")
        os.mkdir(self._stash)

    @classmethod
    def make(cls) -> Users:
        return cls()

    @staticmethod
    def _ensure(name: str) -> int:
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            # another test run may create it at the same time: a clash is fine if it exists after
            subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                           capture_output=True, check=False)
            return pwd.getpwnam(name).pw_uid

    def argv(self, who: str, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        """`argv` as run by `who` (alice | bob), with the interpreter reachable."""
        name = NAMES[who]
        home = os.path.join(self.dir, f"home-{who}")  # its own data dir, not the caller's
        envs = [f"{k}={v}" for k, v in {"HOME": home, "GPUTOP_DL_HOME": home, **(env or {})}.items()]
        drop = ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", "--",
                "env", *envs, *argv]
        if self.closed is None:
            return drop
        closed, keep = self.closed
        inner = os.path.join(closed, os.path.basename(keep))
        script = (f'mount --bind "{keep}" "{self._stash}" && '
                  f'mount -t tmpfs -o mode=755 gputopdl "{closed}" && mkdir -p "{inner}" && '
                  f'mount --bind "{self._stash}" "{inner}" && exec "$@"')
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *drop]

    def popen(self, who: str, argv: list[str], **kw: object) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(self.argv(who, argv), start_new_session=True, cwd=self.dir,
                             **kw)  # type: ignore[call-overload]
        self.procs.append(p)
        return p

    def run(self, who: str, argv: list[str], timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(who, argv, env), capture_output=True, text=True,
                              timeout=timeout, cwd=self.dir)

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def close(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its session: the job and its workers
            except OSError:
                pass
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
