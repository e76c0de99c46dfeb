"""What every command shares: the one-line usage error, the exit codes, progress on stderr."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Any, Callable, Optional

import typer

# One definition of a usage error for the CLI and the Python API (attn_doctor/options.py).
from ..options import UsageError
# The commands' one --python validation, and the naming their messages use (the CLI's flags).
from ..options import CLI, validate_python  # noqa: F401

EXIT_CODES_HELP = """\
Exit codes: 0 no errors found; 1 errors found (or warnings, with --fail-on warning);
2 usage error (bad option, unreadable --facts file, invalid recipe, --python that is not an
interpreter); 3 a probe could not run (timed out or crashed) or a check crashed.
"""

__all__ = ["CLI", "EXIT_CODES_HELP", "FailOn", "Progress", "UsageError", "emit", "fail", "note", "progress", "progress_on_terminal", "resolved", "show",
           "stderr_console", "validate_python", "warn", "write_json", "write_text", "quiet_option", "verbose_option",
           "no_color_option", "python_option", "capability_option", "json_option", "schema_option", "print_schema",
           "interrupted"]


# ---------------------------------------------------------------- the options every command spells alike
# One process runs one command, so -q is a module flag set while the options are parsed (click calls
# every option's callback, given or not, so a second command in the same process starts afresh).
_quiet = False


def _set_quiet(value: bool) -> bool:
    global _quiet
    _quiet = bool(value)
    return value


def _set_no_color(value: bool) -> bool:
    if value:  # rich only where it is asked for: check --quick --json imports none of it
        from ..render import console

        console.plain = True
        os.environ["NO_COLOR"] = "1"  # for the tools the doctor runs
    return value


def quiet_option():
    return typer.Option(False, "--quiet", "-q", callback=_set_quiet, is_eager=True,
                        help="Print only the summary line (and errors): no sections, no progress, no warnings.")


def verbose_option(help: str):
    return typer.Option(False, "--verbose", "-v", help=help)


def no_color_option():
    return typer.Option(False, "--no-color", callback=_set_no_color, is_eager=True,
                        help="No colours or styles, even where FORCE_COLOR=1 asks for them (NO_COLOR=1 turns colours off, FORCE_COLOR=1 forces them on a pipe).")


def python_option(help: str):
    return typer.Option(None, "--python", "-p", metavar="PATH", help=help)


def capability_option(help: str):
    return typer.Option(None, "--capability", metavar="MAJOR.MINOR", help=help)


def json_option(schema: str):
    return typer.Option(False, "--json", help=f"Print the result as JSON (schema {schema} v1; `--schema` prints its JSON Schema). Never changes the exit code.")


def schema_option(what: str):
    return typer.Option(False, "--schema", help=f"Print the JSON Schema of `{what} --json` and exit.")


def print_schema(name: str) -> "typer.Exit":
    """--schema: the shipped file attn_doctor/schemas/NAME.schema.json, as it is; return the Exit."""
    from ..schemas import schema_bytes

    write_json(schema_bytes(name))
    return typer.Exit(0)


def quiet() -> bool:
    return _quiet


def check_verbosity(verbose: bool) -> None:
    if _quiet and verbose:
        raise fail("give one of -q/--quiet or -v/--verbose")


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


def stderr_console():
    from ..render.console import make_console

    return make_console(stderr=True)


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print `attn-doctor: error: MESSAGE` on stderr (one line); return the Exit to raise."""
    _say("attn-doctor: error:", "bold red", message)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print `attn-doctor: warning: MESSAGE` on stderr (one line); the command goes on. Not with -q."""
    if _quiet:
        return
    _say("attn-doctor: warning:", "bold yellow", message)


def _say(label: str, style: str, message: str) -> None:
    # Text, never markup: a message quotes paths, names and values from outside as they are.
    from rich.text import Text

    stderr_console().print(Text.assemble((label, style), " " + message), highlight=False, soft_wrap=True)


def note(message: str, always: bool = False) -> None:
    """Print `attn-doctor: MESSAGE` on stderr (one line): what happened on the way, not an error.
    Not with -q, unless `always` (what state a command left the environment in)."""
    if _quiet and not always:
        return
    stderr_console().print(f"attn-doctor: {message}", markup=False, highlight=False, soft_wrap=True)


def emit(json_out: bool, as_json: Callable[[], bytes], render: Callable[[Any], None],
         summary: Optional[Callable[[Any], None]] = None) -> None:
    """Every command's one output seam: its JSON document on stdout, or its human rendering on a
    console that keeps whole lines when piped (a log must not lose evidence to 80 columns); with
    -q, only its summary line. Each is built only when asked for: the others cost nothing."""
    if json_out:
        write_json(as_json())
    elif _quiet and summary is not None:
        show(summary)
    else:
        show(render)


def write_json(document: bytes) -> None:
    """A JSON document on stdout, as its renderer encoded it (`emit`'s JSON half; --schema too)."""
    sys.stdout.buffer.write(document)
    sys.stdout.flush()


def write_text(text: str) -> None:
    """Text for another program as it is (trace --patch: a patch for `git apply`)."""
    sys.stdout.write(text)
    sys.stdout.flush()


def show(render: Callable[[Any], None]) -> None:
    """A human rendering on stdout (`emit`'s human half; also what a command shows before it asks
    for confirmation, which has no JSON form)."""
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
    """A spinner on stderr while something slow runs: every command's one progress display."""

    def __init__(self, message: str = "probing"):
        from rich.text import Text

        self._status = stderr_console().status(Text(message))
        self._status.start()

    def update(self, message: str) -> None:
        from rich.text import Text

        self._status.update(Text(message))  # Text, never markup: a message may name a host or a path from outside

    def stop(self) -> None:
        self._status.stop()


def streaming_console():
    """The console a report streams to as it forms (section by section, a live line beneath), or
    None: only where stdout is a terminal someone watches, never with -q; a pipe, a file or a
    log gets the whole report at once."""
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):
        terminal = False
    if not terminal or _quiet:
        return None
    from ..render.console import make_console

    return make_console()


def progress(message: str = "probing") -> Progress:
    return Progress(message)


class LineProgress:
    """Progress for a stderr that is no terminal (a pipe, a log): no spinner, whose redraws would fill
    it, but a line when the stage changes, from the moment the work has run a couple of seconds, and
    at most one every few seconds for a stage that counts (tracing: N ops)."""

    AFTER_S, EVERY_S = 2.0, 5.0

    def __init__(self, message: str = "probing"):
        import time

        self._clock = time.monotonic
        self._start = self._last = self._clock()
        self._pending, self._said = message, None

    def update(self, message: str) -> None:
        self._pending = message
        now = self._clock()
        stage = message.split(":", 1)[0]
        if now - self._start < self.AFTER_S:
            return
        if self._said is not None and stage == self._said.split(":", 1)[0] and now - self._last < self.EVERY_S:
            return
        if message == self._said:
            return
        self._said, self._last = message, now
        # one plain line; the message may carry a path from outside: control characters dropped
        text = "".join(ch for ch in message if ch.isprintable())
        sys.stderr.write("attn-doctor: %s (%.0f s)\n" % (text, now - self._start))
        sys.stderr.flush()

    def stop(self) -> None:
        pass


def progress_on_terminal(json_out: bool, message: str = "probing", lines: bool = False) -> "Progress | None":
    """A Progress where someone watches (stderr a terminal, human output); None elsewhere: a
    spinner's redraws would fill a log, and --json output is read by a program. ``lines``: on a
    stderr that is no terminal, a line per stage instead (a long trace in a pipe or a job's log)."""
    if json_out or _quiet:
        return None
    if sys.stderr.isatty():
        return Progress(message)
    return LineProgress(message) if lines else None


def interrupted(what: str) -> "typer.Exit":
    """Ctrl-C during a command that changes nothing: one line on stderr saying so; the Exit (130)
    to raise. A command that changes things (fix) says what state it left instead."""
    sys.stderr.write(f"attn-doctor: {what} interrupted; nothing was changed\n")
    sys.stderr.flush()
    return typer.Exit(130)
