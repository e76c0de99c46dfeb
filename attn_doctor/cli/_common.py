"""What every command shares: the one-line usage error, the exit codes, progress on stderr."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any, Callable

import typer

# One definition of a usage error for the CLI and the Python API (attn_doctor/options.py).
from ..options import UsageError
from ..options import validate_python  # noqa: F401 - the commands' one --python validation

EXIT_CODES_HELP = """\
Exit codes: 0 no errors found; 1 errors found (or warnings, with --fail-on warning);
2 usage error (bad option, unreadable --facts file, invalid recipe, --python that is not an
interpreter); 3 a probe could not run (timed out or crashed) or a check crashed.
"""

__all__ = ["EXIT_CODES_HELP", "FailOn", "UsageError", "emit", "fail", "progress", "resolved", "stderr_console", "validate_python", "warn"]


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


def stderr_console():
    from ..render.console import make_console

    return make_console(stderr=True)


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print `attn-doctor: error: MESSAGE` on stderr (one line); return the Exit to raise."""
    stderr_console().print(f"[bold red]attn-doctor: error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print `attn-doctor: warning: MESSAGE` on stderr (one line); the command goes on."""
    stderr_console().print(f"[bold yellow]attn-doctor: warning:[/] {message}", markup=True, highlight=False, soft_wrap=True)


def emit(json_out: bool, as_json: Callable[[], bytes], render: Callable[[Any], None]) -> None:
    """Every command's one output seam: its JSON document on stdout, or its human rendering on a
    console that keeps whole lines when piped (a log must not lose evidence to 80 columns)."""
    if json_out:
        sys.stdout.buffer.write(as_json())
    else:
        from ..render.console import make_console

        render(make_console())
    sys.stdout.flush()


def resolved(options):
    """The check options validated (attn_doctor.options.validate: the target resolved), and the
    one-line warning, before any probing, when the active environment's variable names none."""
    from ..options import validate

    options = validate(options)
    target = options.target
    if target is not None and target.ignored:
        warn(f"{target.ignored}: checking the interpreter attn-doctor runs in ({target.python})")
    return options


class Progress:
    """A spinner on stderr while something slow runs (only started on a terminal)."""

    def __init__(self, message: str = "probing"):
        self._status = stderr_console().status(message)
        self._status.start()

    def update(self, message: str) -> None:
        self._status.update(message)

    def stop(self) -> None:
        self._status.stop()


def progress() -> Progress:
    return Progress()
