"""Session reports: the JSON document (document.py), its Markdown (markdown.py), the export
to a file (export.py) and the sessions listing (sessions.py)."""

from gputop_dl.present.report.document import SESSION_SCHEMA, session_json
from gputop_dl.present.report.errors import ExportError, ExportUsageError
from gputop_dl.present.report.export import export_session
from gputop_dl.present.report.markdown import render_markdown
from gputop_dl.present.report.sessions import list_sessions, sessions_table

__all__ = ["SESSION_SCHEMA", "ExportError", "ExportUsageError", "export_session",
           "list_sessions", "render_markdown", "session_json", "sessions_table"]
