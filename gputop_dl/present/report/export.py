"""`gputop-dl export OUT.md | OUT.json`: a recorded session to a file, written atomically."""

from __future__ import annotations

import errno
import json
import math
import os
import sqlite3
from typing import NoReturn

from gputop_dl.present.report.document import session_json
from gputop_dl.present.report.errors import ExportError, ExportUsageError
from gputop_dl.present.report.markdown import render_markdown
from gputop_dl.record.paths import default_db_path
from gputop_dl.record.store import Store
from gputop_dl.record.store_read import SessionRow
from gputop_dl.text.markdown import write_atomic

FORMATS = {".md": "md", ".markdown": "md", ".json": "json"}


def _finite(obj: object) -> object:
    """NaN and infinities (invalid JSON) become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _open_store(store_path: str | None) -> Store:
    path = store_path or default_db_path(writable=False)
    if not os.path.exists(path):
        raise ExportUsageError(f"no sessions recorded yet (no {path}): run `gputop-dl launch "
                               "FILE.toml` first")
    return Store(path, readonly=True)


def _resolve(store: Store, session_id: str | None) -> str:
    if session_id is None:
        row = store.session(None)
        if row is None:
            raise ExportUsageError("no sessions recorded yet: run `gputop-dl launch FILE.toml` first")
        return row.id
    matches = [s.id for s in store.sessions() if s.id.startswith(session_id)]
    if session_id in matches:
        return session_id
    if not matches:
        raise ExportUsageError(f"no session {session_id!r} (see `gputop-dl sessions`)")
    if len(matches) > 1:
        raise ExportUsageError(f"session id {session_id!r} is ambiguous: "
                               + ", ".join(matches[:5]) + (" ..." if len(matches) > 5 else ""))
    return matches[0]


# public names for the other readers of recorded sessions (compare.py, runner)
finite, open_store, resolve_session = _finite, _open_store, _resolve


def export_session(session_id: str | None, path: str, store_path: str | None = None,
                   shared: bool = False) -> str:
    """Write session `session_id` (None: the latest) to `path` (.md or .json); returns the path.

    The file is private to its user (0600): a report holds each job's command line and
    settings. `shared` (`export --shared`): outside the data directory, readable as the umask
    lets a new file be (0644 with the usual umask 022); in the data directory always 0600."""
    fmt = FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise ExportUsageError(f"{path}: unknown report format, expected a .md or .json file name")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ExportUsageError(f"{path}: no such directory {d}")
    store = _open_store(store_path)
    try:
        sid = _resolve(store, session_id)
        row = store.session(sid)
        assert row is not None  # resolved just now
        if row.kind == "sweep":
            text = _sweep_text(store, sid, row, fmt)
        else:
            data = session_json(store, sid)
            text = (render_markdown(data) if fmt == "md"
                    else json.dumps(_finite(data), indent=2, ensure_ascii=False) + "\n")
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a damaged page found while reading
        raise ExportUsageError(f"{store.path}: cannot read the session database ({exc})") from None
    finally:
        store.close()
    try:
        private = not shared or _in_data_dir(path, store.path)
        write_atomic(path, text, mode=0o600 if private else None)
    except OSError as exc:
        _write_failed(path, exc)
    return path


def _in_data_dir(path: str, db_path: str) -> bool:
    """Whether `path` lies in the data directory (the database's folder): what is written
    there is private to its user (0600), like everything else in it."""
    top = os.path.realpath(os.path.dirname(os.path.abspath(db_path)))
    return os.path.commonpath([top, os.path.realpath(os.path.abspath(path))]) == top


def _write_failed(path: str, exc: OSError) -> NoReturn:
    """The path given cannot be written: a folder there, no permission, a read-only file system
    is the user's to change (exit 2); a full disk or an I/O error is a failure (exit 1)."""
    why = f"cannot write {path}: {exc.strerror or exc}"
    if isinstance(exc, (PermissionError, IsADirectoryError, NotADirectoryError)) or \
            exc.errno == errno.EROFS:
        raise ExportUsageError(why) from None
    raise ExportError(why) from exc


def _sweep_text(store: Store, sid: str, row: SessionRow, fmt: str) -> str:
    """A recorded `gputop-dl sweep`: the same report the sweep wrote (no torch imported)."""
    from gputop_dl.lab import sweep, sweep_report

    res = sweep.result_from_store(store, sid)
    if fmt == "md":
        return sweep_report.markdown(res, row.command or "", row.environment)
    data = dict(res.to_json(), id=sid, state=row.state, environment=row.environment)
    return json.dumps(_finite(data), indent=2, ensure_ascii=False) + "\n"


def check_tensorboard_target(out_dir: str) -> None:
    """What `launch --tensorboard DIR` checks before the run: DIR can be a folder and the
    tensorboard package is there (a UsageError, exit 2, otherwise)."""
    import importlib.util

    from gputop_dl.errors import UsageError
    from gputop_dl.present.report.tensorboard import INSTALL_HINT

    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"--tensorboard {out_dir}: not a directory (it gets a folder of event "
                         "files)")
    if importlib.util.find_spec("tensorboard") is None:
        raise UsageError(INSTALL_HINT)


def export_tensorboard_session(session_id: str | None, out_dir: str,
                               store_path: str | None = None) -> list[tuple[str, int]]:
    """`export DIR --tensorboard`: session `session_id` (None: the latest) as TensorBoard event
    files under `out_dir` (created); returns (run folder, scalars) per run."""
    from gputop_dl.present.report.tensorboard import export_tensorboard

    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ExportUsageError(f"{out_dir}: not a directory (--tensorboard writes a folder of "
                               "event files)")
    store = _open_store(store_path)
    try:
        sid = _resolve(store, session_id)
        try:
            return export_tensorboard(store, sid, out_dir)
        except OSError as exc:
            _write_failed(out_dir, exc)
    finally:
        store.close()
