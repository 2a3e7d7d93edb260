"""Data directory: where sessions are kept, and keeping its files private to their user.

The directory is `$GPUTOP_DL_HOME` or the platform's user data folder, created 0700; files in
it are 0600 (sessions hold commands, logs and paths).
"""

from __future__ import annotations

import os
import pwd
import stat

import platformdirs

from gputop_dl.errors import UsageError

ENV_HOME = "GPUTOP_DL_HOME"



class StoreError(UsageError):
    """The data directory or the session database cannot be used: one line naming it, exit 2."""


def _named(d: str) -> str:
    return f"{ENV_HOME}={d}" if os.environ.get(ENV_HOME) else d


def data_dir(writable: bool = True) -> str:
    """The data directory, created if missing and `writable`; a StoreError naming it if it
    cannot be used (`writable=False`: a missing one is fine, nothing is created)."""
    d = os.environ.get(ENV_HOME) or platformdirs.user_data_dir("gputop-dl")
    if os.path.lexists(d) and not os.path.isdir(d):
        raise StoreError(f"{_named(d)}: not a directory, expected the data directory")
    try:
        if writable and not os.path.isdir(d):
            os.makedirs(d, mode=0o700)  # private: sessions hold commands, logs, paths
        elif writable:
            private(d, 0o700)
        elif not writable:
            os.stat(d)  # NotADirectoryError if a parent is a file
    except FileNotFoundError:
        if writable:
            raise StoreError(f"{_named(d)}: cannot be used as the data directory") from None
    except OSError as exc:
        raise StoreError(f"{_named(d)}: cannot be used as the data directory "
                         f"({exc.strerror or exc})") from None
    if os.path.isdir(d) and not os.access(d, os.R_OK | os.X_OK):
        raise StoreError(f"{_named(d)}: the data directory cannot be read{_whose(d)}")
    if writable and _read_only_fs(d):
        raise StoreError(f"{_named(d)}: the data directory is read-only (on a read-only file "
                         "system)")
    if writable and not os.access(d, os.W_OK | os.X_OK):
        raise StoreError(f"{_named(d)}: the data directory is not writable{_whose(d)}")
    return d


def _read_only_fs(d: str) -> bool:
    """Whether `d` is on a file system mounted read-only (no mode bit would help)."""
    try:
        return bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _whose(d: str) -> str:
    """` (another user's, mode 0700)`: why a data directory is closed to us."""
    try:
        st = os.stat(d)
    except OSError:
        return ""
    mode = f"mode {stat.S_IMODE(st.st_mode):04o}"
    if st.st_uid == os.getuid():
        return f" ({mode})"
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = f"uid {st.st_uid}"
    return f" (it is {owner}'s, {mode}: sessions are private to the user who recorded them)"


def default_db_path(writable: bool = True) -> str:
    return os.path.join(data_dir(writable), "sessions.db")


def session_work_dir(session_id: str) -> str:
    top = os.path.join(data_dir(), "sessions")
    d = os.path.join(top, session_id)
    for x in (top, d):
        os.makedirs(x, mode=0o700, exist_ok=True)
    return d


def private(path: str, mode: int = 0o600) -> None:
    """Tighten a file or folder of ours to `mode` (0600 files, 0700 folders) if it is wider;
    one we do not own, or cannot change, is left as it is."""
    try:
        st = os.stat(path)
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(path, mode)
    except OSError:
        pass


def create_private(path: str) -> None:
    """Create (or empty) a file readable by its owner only."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
