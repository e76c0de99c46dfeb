"""The one place that decides how output is laid out: every command's console comes from here.

On a terminal, lines follow its width (COLUMNS when set, else the terminal's size) and wrap at
words; a token longer than the width (a path, a tensor shape, a version) folds onto the next line
and is never cut. Anywhere else (a pipe, a file, a Slurm log, CI) there is no width at all: each
line is printed whole, whatever COLUMNS the job inherited, so a log keeps every character of the
evidence. Renderers ask ``whole_lines(console)`` rather than ``console.is_terminal``: FORCE_COLOR
makes a CI log a "terminal" for colour, not for width.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.text import Text

# Wide enough for any line a report holds; renderables that pad to the full width (Syntax,
# expanding Padding, Panel) are not used on such a console.
UNBOUNDED = 1_000_000


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or replaced streams (pytest, daemons)
        return False


def _columns() -> Optional[int]:
    """COLUMNS when it is a positive number: rich reads it too, but only here is it decided."""
    value = os.environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


# --no-color: no escape sequences at all (NO_COLOR alone leaves bold and dim, as its convention says)
plain = False


def make_console(stderr: bool = False, *, terminal: Optional[bool] = None) -> Console:
    """The console for stdout (or stderr). ``terminal`` overrides the detection (tests)."""
    stream = sys.stderr if stderr else sys.stdout
    styles = {"color_system": None} if plain else {}
    if terminal if terminal is not None else _isatty(stream):
        return Console(stderr=stderr, highlight=False, width=_columns(), force_terminal=True if terminal else None, **styles)
    # soft_wrap: Text is never wrapped or cropped; the width covers trees and tables
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=UNBOUNDED, **styles)


def whole_lines(console: Console) -> bool:
    """True where the console has no width to fit (a log): print each line as it is."""
    return console.width >= UNBOUNDED


_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def diff_renderable(diff: str, whole: bool, indent: int = 4) -> RenderableType:
    """A unified diff, indented, each line coloured by its kind. Not rich's Syntax: it crops a
    line longer than the width (a `--- a/long/path` header), where Text folds it."""
    lines = diff.rstrip("\n").splitlines()
    text = Text()
    for number, line in enumerate(lines):
        style = next((s for prefix, s in _DIFF_STYLES if line.startswith(prefix)), "")
        text.append((" " * indent if whole else "") + line, style=style)
        if number < len(lines) - 1:
            text.append("\n")
    # on a terminal Padding indents the folded continuation lines too
    return text if whole else Padding(text, (0, 0, 0, indent), expand=False)
