"""The lines under a remedy's summary, the same in check and explain: the command that does it
(an argument list for the target, shown shell-quoted), or the setting it asks for; then its
explanation and how to find what was unknown, in words, never shown as a command."""

from __future__ import annotations

import shlex

from rich.text import Text

from ..remedies import edit_line
from ..rules.model import Remedy


def remedy_lines(remedy: Remedy, indent: str) -> list[tuple[Text, bool]]:
    """(line, is_command): the caller decides whether a command may fold on a terminal; prose does."""
    lines = []
    if remedy.command:
        lines.append((Text(f"{indent}{shlex.join(remedy.command)}", style="cyan"), True))
    else:
        edit = edit_line(remedy)
        if edit:
            lines.append((Text(f"{indent}{edit}", style="cyan"), True))
    for line in (remedy.detail or "").splitlines():
        if line.strip():
            lines.append((Text(f"{indent}{line}", style="dim"), False))
    return lines
