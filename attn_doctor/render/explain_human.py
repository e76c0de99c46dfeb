"""`attn-doctor explain` for people: each cause with its evidence, likelihood and remedies."""

from __future__ import annotations

import textwrap

from rich.console import Console
from rich.text import Text

from ..explaining.report import ExplainReport, Match
from .console import whole_lines
from .remedy import remedy_lines

MARKS = {"error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("i", "cyan")}
LIKELIHOOD = {
    "confirmed": ("fits", "bold"),
    "possible": ("possible", ""),
    "unlikely": ("unlikely here", "dim"),
}
LIVE = {"present": ("present in this environment now", "bold red"), "absent": ("not present in this environment now", "green"), "unknown": ("cannot be checked here", "dim")}


def render(report: ExplainReport, console: Console, verbose: bool = False) -> None:
    src = report.input
    if not src.bytes:  # one line: there is nothing else to say
        console.print(Text(f"Nothing to explain: the input is empty  (exit code {report.exit_code})", style="bold"))
        return
    where = src.path or {"text": "the message", "stdin": "stdin"}[src.source]
    header = Text("attn-doctor explain ", style="bold")
    header.append(f"{where}: {src.lines} line{'s' if src.lines != 1 else ''}, {_size(src.bytes)}", style="dim")
    if verbose:
        header.append(f" in {src.seconds:.2f} s ({src.engine})", style="dim")
    console.print(header)
    for note in report.notes:
        console.print(Text(f"note: {note}", style="yellow"))
    if report.versions:
        console.print(Text("versions in the input: " + ", ".join(f"{k} {v}" for k, v in report.versions.items()), style="dim"))
    real = [m for m in report.matches if not m.harmless and m.likelihood != "unlikely"]
    unlikely = [m for m in report.matches if not m.harmless and m.likelihood == "unlikely"]
    harmless = [m for m in report.matches if m.harmless]
    for m in real:
        console.print()
        _match(console, m, verbose)
    if unlikely:
        console.print()
        console.print(Text("Also matched, but the versions in the input rule them out:", style="dim"))
        for m in unlikely:
            if verbose:
                _match(console, m, verbose)
            else:
                console.print(Text(f"  - {m.rule} {m.title}: {m.likelihood_reason}", style="dim"))
    if harmless:
        console.print()
        for m in harmless:
            line = Text("[i] ", style="bold cyan")
            line.append(f"harmless: {m.title}", style="cyan")
            line.append(f"  {m.rule}, {m.occurrences}×, first at line {m.evidence[0].line if m.evidence else '?'}", style="dim")
            console.print(line)
            if verbose:
                _explanation(console, m.explanation)
    if not report.matches:
        console.print()
        console.print(Text("No known failure signature matched.", style="bold"))
    if report.candidates:
        console.print(Text("Closest known messages:", style="bold"))
        for c in report.candidates:
            console.print(Text(f"  {c.rule} {c.title}  (similarity {c.score:.2f})"))
            console.print(Text(f"      yours: {c.line}", style="dim"))
            console.print(Text(f"      known: {c.example.splitlines()[-1] if c.example else ''}", style="dim"))
        console.print(Text("`attn-doctor rules ID` explains one; `attn-doctor check` probes this environment.", style="dim"))
    console.print()
    render_summary(report, console)


def render_summary(report: ExplainReport, console: Console) -> None:
    """The last line, and all of it with -q."""
    if not report.input.bytes:
        render(report, console)
        return
    s = report.summary
    parts = [f"{n} {label}{'s' if n != 1 and label not in ('harmless', 'ruled out') else ''}" for n, label in ((s.error, "error"), (s.warning, "warning"), (s.info, "note"), (s.harmless, "harmless"), (s.unlikely, "ruled out")) if n]
    absent = sum(1 for m in report.matches if m.live is not None and m.live.status == "absent" and not m.harmless)
    if absent:  # --check: the log's problems this environment does not show are not this environment's
        parts.append(f"{'all' if absent == len([m for m in report.matches if not m.harmless]) else absent} "
                     "not present in this environment")
    console.print(Text(f"{', '.join(parts) or 'nothing recognised'}  (exit code {report.exit_code})", style="dim"))


def _match(console: Console, m: Match, verbose: bool) -> None:
    mark, colour = MARKS[m.severity]
    head = Text(f"[{mark}] ", style=f"bold {colour}")
    head.append(("or: " if m.alternative_to else "") + m.title, style="bold")
    head.append(f"  {m.rule} {m.name}", style="dim")
    console.print(head)
    if m.alternative_to:
        console.print(Text(f"    the same line{'s' if len(m.evidence) > 1 else ''} as {m.alternative_to}, read another way: "
                           "one reading is the cause, and the input does not show which (counted once)", style=colour))
    console.print(Text(f"    cause: {m.cause_label}", style=colour))
    label, style = LIKELIHOOD[m.likelihood]
    console.print(Text(f"    {label}: {m.likelihood_reason}", style=style))
    if m.message:
        console.print(Text(f"    {m.message}"))
    if m.resembles is not None:
        r = m.resembles
        console.print(Text(f"    resembles: {r.source} ({r.family}), similarity {r.score:.0f}/100", style="cyan"))
        console.print(Text(f"      yours: {r.line}", style="dim"))
        console.print(Text(f"      known: {r.example}", style="dim"))
    else:
        shown = m.evidence if verbose else m.evidence[:3]
        count = f"{m.occurrences} occurrence{'s' if m.occurrences != 1 else ''}"
        console.print(Text(f"    evidence ({count}):", style="dim"))
        for e in shown:
            console.print(Text(f"      {e.line}: {e.text}", style="dim"))
    if m.site is not None:
        more = len(m.site.at) - 1
        console.print(Text(f"    raised by: {m.site.at[0] if m.site.at else m.site.library}"
                           + (f" (and {more} more site{'s' if more > 1 else ''})" if more > 0 else ""), style="cyan"))
    for key in ("demangled", "side", "symbol_abi", "torch_abi", "wheel"):
        if key in m.captures:
            console.print(Text(f"    {key.replace('_', ' ')}: {m.captures[key]}", style="cyan"))
    for note in m.notes:
        console.print(Text(f"    note: {note}", style="yellow"))
    if m.live is not None:
        text, style = LIVE[m.live.status]
        detail = m.live.message or m.live.reason or ""
        console.print(Text(f"    now: {text}" + (f" ({detail})" if detail else ""), style=style))
    if verbose:
        _explanation(console, m.explanation)
    else:
        _explanation(console, _lead(m.explanation.split("\n\n")[0]))
    for remedy in m.remedies:
        safety = "" if remedy.safety == "safe" else f" (unsafe: {remedy.why_unsafe})"
        console.print(Text(f"    → {remedy.summary}{safety}", style="green"))
        for line, _command in remedy_lines(remedy, "      "):
            console.print(line)
    if verbose:
        for link in m.links:
            console.print(Text(f"    see {link}", style="dim"))


def _lead(paragraph: str, limit: int = 600) -> str:
    """The paragraph's sentences up to about `limit` characters: cut between sentences, never
    inside a word, a path or a version (the rest is one `-v` away)."""
    flat = " ".join(paragraph.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(". ", 0, limit)
    return flat if cut < 0 else flat[: cut + 1] + " (more with -v)"


def _explanation(console: Console, text: str) -> None:
    flat = " ".join(text.split())
    if whole_lines(console):  # a log: one line per paragraph, as the recipe wrote it
        console.print(Text(f"    {flat}", style="dim"))
        return
    # a terminal: prose at a readable measure, split between words only (rich folds what is longer)
    width = max(40, min(console.width, 110) - 4)
    for line in textwrap.wrap(flat, width=width, break_long_words=False, break_on_hyphens=False):
        console.print(Text(f"    {line}", style="dim"))


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
