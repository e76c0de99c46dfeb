"""What goes wrong in a trace, as the package passes it around: TraceError (a kind and one line
naming the cause), the one-line form of an exception and its kept traceback, and the exit codes a
trace report carries. Standard library only."""

from __future__ import annotations

import traceback

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3


class TraceError(Exception):
    """A failure with a one-line message. kind: usage | import | factory | forward | environment."""

    def __init__(self, kind, message, exc=None):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message
        self.exc = exc


def _one_line(exc):
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0][:400] if text else "")


def _tb(exc):
    if exc is None:
        return None
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]
