"""The recorded sessions: export (Markdown, JSON, TensorBoard), the listing, and the JSON outputs' schemas."""

from __future__ import annotations

import signal
import sys
from types import FrameType

from gputop_dl.text.console import console


def export_for_tui(session_id: str, path: str, store_path: str | None = None) -> str:
    """The TUI's `e` key: the session as Markdown (runs in a worker thread)."""
    from gputop_dl.present.report import export_session

    return export_session(session_id, path, store_path=store_path)


def run_export(session_id: str | None, out: str, tensorboard: bool = False,
               shared: bool = False) -> int:
    """`gputop-dl export OUT.md|OUT.json [--session ID]`; `export DIR --tensorboard`."""
    from gputop_dl.present.report import ExportError, export_session

    interrupt_on_term()
    if tensorboard:
        return run_export_tensorboard(session_id, out)
    try:
        path = export_session(session_id, out, shared=shared)
    except ExportError as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {path}")
    return 0


def interrupt_on_term() -> None:
    """TERM (and HUP) end an export like Ctrl-C: KeyboardInterrupt, exit 130, and the file
    being written is removed (write_atomic), never left half-written."""
    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def run_export_tensorboard(session_id: str | None, out: str) -> int:
    """`gputop-dl export DIR --tensorboard [--session ID]`: one TensorBoard run per job."""
    from gputop_dl.present.report import ExportError
    from gputop_dl.present.report.export import export_tensorboard_session

    try:
        runs = export_tensorboard_session(session_id, out)
    except ExportError as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    for path, n in runs:
        print(f"wrote {path} ({n} scalars)")
    if not runs:
        print(f"the session has no jobs: nothing written to {out}")
    else:
        print(f"open with: tensorboard --logdir {out}")
    return 0


def run_sessions(as_json: bool = False) -> int:
    """`gputop-dl sessions [--json]`."""
    from gputop_dl.present.report import list_sessions, sessions_table
    from gputop_dl.record.paths import default_db_path

    rows = list_sessions()
    if as_json:  # for scripts: the rows as they are (schema gputop-dl.sessions/1)
        import json

        print(json.dumps({"schema": "gputop-dl.sessions/1", "sessions": rows}, indent=1))
        return 0
    if not rows:
        print(f"no sessions recorded yet (in {default_db_path(writable=False)}): run "
              "`gputop-dl launch FILE.toml` first")
        return 0
    console().print(sessions_table(rows))
    return 0


def run_compare(a: str, b: str, as_json: bool = False) -> int:
    """`gputop-dl compare A B [--json]`: one line and exit 2 for an unknown session or the
    same one twice."""
    from gputop_dl.present.report import ExportError
    from gputop_dl.present.report.compare import compare_sessions, comparison_table

    try:
        doc = compare_sessions(a, b)
    except ExportError as exc:
        print(f"gputop-dl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if as_json:
        import json

        from gputop_dl.present.report.export import finite

        print(json.dumps(finite(doc), indent=1))
    else:
        console().print(comparison_table(doc))
    return 0


def run_schema(name: str | None, list_names: bool = False) -> int:
    """`gputop-dl schema NAME`: the JSON Schema of one JSON output, as JSON; `schema --list`:
    the names and what each describes. No name, or one not shipped: a UsageError (exit 2)
    naming them."""
    import json

    from gputop_dl import schemas
    from gputop_dl.errors import UsageError

    names = schemas.names()
    if list_names:
        if name is not None:
            raise UsageError("schema: give NAME or --list, not both")
        for n in names:
            print(f"{n:<11} {schemas.raw(n).get('title', '')}")
        return 0
    key = name.removeprefix("gputop-dl.").split("/", 1)[0] if name else None
    if key not in names:
        what = f"unknown schema {name!r}" if name else "give a NAME"
        raise UsageError(f"schema: {what}; one of {', '.join(names)}")
    print(json.dumps(schemas.load(key), indent=1, ensure_ascii=False))
    return 0
