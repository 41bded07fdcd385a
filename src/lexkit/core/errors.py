"""Errors a user can cause. The CLI prints them as one ``error: ...`` line and exits 2."""


class LexkitError(Exception):
    """Bad input from a user (a path, a run directory, a flag value): a message, no traceback."""


class DataError(LexkitError, ValueError):
    """A corpus that cannot serve the request (missing path, empty corpus, documents too short)."""


class RunError(LexkitError, ValueError):
    """A run directory that is missing, not a run, corrupt, or in the way."""
