"""Errors every command reports the same way: one line on stderr, no traceback, exit code 2."""


class UsageError(Exception):
    """Bad usage: printed as one line, exit code 2."""
