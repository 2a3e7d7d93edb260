"""Why an export cannot be done: a one-line message and the exit code the CLI returns."""


class ExportError(Exception):
    """An export that cannot be done: one-line message; `exit_code` for the CLI (1)."""

    exit_code = 1


class ExportUsageError(ExportError):
    """Bad usage (unknown extension, unknown or ambiguous session id, an output path that cannot
    be written: a folder, no permission, read-only): exit code 2."""

    exit_code = 2
