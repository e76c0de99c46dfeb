"""The answer under a check of an environment without torch, chosen by default: where else on this
machine torch is (attn_doctor.probes.environments), each with the command that checks it."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.text import Text

from ..facts import Environments, OtherEnvironment

SHOWN_WITHOUT = 3  # environments without torch named without -v


def render_environments(console: Console, environments: Optional[Environments], verbose: bool = False,
                        here: str = "on this machine") -> None:
    """here: where they were found, as the reader knows it ("on this machine", or a recorded
    report's host)."""
    if environments is None:
        return
    # an environment whose Python the probes cannot start in gets no command: it is said apart, with why
    with_torch = [c for c in environments.candidates if c.torch and not c.left_out]
    left_out = [c for c in environments.candidates if c.torch and c.left_out]
    without = [c for c in environments.candidates if not c.torch]
    if len(with_torch) == 1:
        one = with_torch[0]
        _arrow(console, f"torch {one.torch} is in one other environment {here}: {one.python} ({_where(one)}). Check that one:")
        _command(console, one.command, "        ")
    elif with_torch:
        _arrow(console, f"torch is in {len(with_torch)} other environments {here}; check the one you train in:")
        for candidate in with_torch:
            console.print(Text(f"        torch {candidate.torch}  {candidate.python}  ({_where(candidate)})"))
            _command(console, candidate.command, "          ")
    else:
        looked = ", ".join(environments.searched)
        which = "a torch attn-doctor can check" if left_out else "torch"
        _arrow(console, f"No other environment {here} has {which} (looked at {looked}). Install torch in the "
                        f"environment you train in, and check that one: {environments.doctor} check -p /path/to/train-env/bin/python")
    for candidate in left_out:
        console.print(Text(f"      left out: torch {candidate.torch}  {candidate.python}  ({_where(candidate)}): "
                           f"{candidate.left_out}", style="dim"))
    if without:
        shown = without if verbose else without[:SHOWN_WITHOUT]
        names = ", ".join(c.python + _said(([c.found[0]] if c.found else [])
                                           + ([f"Python {c.python_version}, too old to check"] if c.left_out else []))
                          for c in shown)
        more = f", and {len(without) - len(shown)} more (-v lists them)" if len(shown) < len(without) else ""
        console.print(Text(f"      without torch: {names}{more}", style="dim"))
    if environments.error:
        console.print(Text(f"      the search {environments.error}", style="dim"))
    if verbose:
        console.print(Text(f"      found from package metadata in {environments.duration_s:.2f} s; nothing was run in them", style="dim"))


def _arrow(console: Console, text: str) -> None:
    line = Text("    → ", style="bold")
    line.append(text)
    console.print(line)


def _command(console: Console, command: str, indent: str) -> None:
    console.print(Text(indent + command), soft_wrap=True)  # one line, to copy whole


def _said(words: list[str]) -> str:
    return f" ({', '.join(words)})" if words else ""


def _where(candidate: OtherEnvironment) -> str:
    words = list(candidate.found)
    if candidate.python_version:
        words.append(f"Python {candidate.python_version}")
    return ", ".join(words)
