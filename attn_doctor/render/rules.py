"""`attn-doctor rules`: the knowledge base, listed and explained."""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..rules.model import Rule
from .console import whole_lines

SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


TITLE_MIN = 30  # narrower than this, a title column wraps into a word per line


def render_rules(rules: list[Rule], console: Console) -> None:
    rules = sorted(rules, key=lambda r: r.id)
    # A name is an identifier to copy: it stays whole on its line. Where the terminal cannot hold
    # the names and a readable title column side by side, each title goes under its name.
    fixed = sum(max((len(v) for v in values), default=0) + 2
                for values in ([r.id for r in rules], [r.severity for r in rules], [r.area for r in rules], [r.name for r in rules]))
    side_by_side = whole_lines(console) or console.width - fixed >= TITLE_MIN
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("ID", no_wrap=True)
    table.add_column("Severity", no_wrap=True)
    table.add_column("Area", no_wrap=True)
    # fold, never an ellipsis, should even a name not fit
    table.add_column("Name" if side_by_side else "Name, title", overflow="fold")
    if side_by_side:
        table.add_column("Title", overflow="fold")
    for rule in rules:
        severity = Text(rule.severity, style=SEVERITY_STYLE[rule.severity])
        if side_by_side:
            table.add_row(rule.id, severity, rule.area, rule.name, rule.title)
        else:
            table.add_row(rule.id, severity, rule.area, Text.assemble(rule.name, "\n", (rule.title, "dim")))
    console.print(table)
    render_summary(rules, console)


def render_summary(rules: list[Rule], console: Console) -> None:
    console.print(Text(f"{len(rules)} rules. `attn-doctor rules ID` shows one.", style="dim"))


def render_rule(rule: Rule, console: Console) -> None:
    console.print(Text(f"{rule.id} {rule.name}", style="bold"))
    console.print(Text(rule.title))
    console.print(Text(f"severity: {rule.severity}   area: {rule.area}", style=SEVERITY_STYLE[rule.severity]))
    console.print()
    # each paragraph as one line: the recipe's own line breaks are not the reader's width
    console.print(Text("\n\n".join(" ".join(p.split()) for p in rule.explanation.strip().split("\n\n"))))
    if rule.remedies:
        console.print()
        console.print(Text("Remedies:", style="bold"))
        for remedy in rule.remedies:
            safety = "" if remedy.safety == "safe" else f" (unsafe: {remedy.why_unsafe})"
            console.print(Text(f"  - [{remedy.kind}] {remedy.summary}{safety}"))
            if remedy.requirement:
                console.print(Text(f"      requirement: {remedy.requirement}", style="cyan"))
            if remedy.key is not None:
                console.print(Text(f"      {remedy.config}: {remedy.key} = {remedy.value}", style="cyan"))
            if remedy.command:
                # the recipe's form: `python`/`pip` become the target's interpreter when shown in a report
                console.print(Text(f"      command: {shlex.join(remedy.command)}", style="cyan"))
            if remedy.detail:
                console.print(Text(f"      {remedy.detail}", style="dim"))
    if rule.signatures:
        console.print()
        console.print(Text("Error signatures:", style="bold"))
        for sig in rule.signatures:
            if isinstance(sig, str):
                console.print(Text(f"  {sig}", style="dim"))
            else:
                extra = "".join(f"   [{k}: {v}]" for k, v in (("severity", sig.severity), ("only with", sig.context)) if v)
                console.print(Text(f"  {sig.pattern}{extra}", style="dim"))
        if rule.cause:
            console.print(Text(f"Root cause class: {rule.cause}", style="dim"))
        if rule.when is None:
            console.print(Text("Recognised from messages only: `attn-doctor explain` reports it, `check` cannot.", style="dim"))
    if rule.supersedes:
        console.print(Text(f"Supersedes {', '.join(rule.supersedes)}: where both fire on the same evidence, only {rule.id} is reported.", style="dim"))
    if rule.links:
        console.print()
        for link in rule.links:
            console.print(Text(f"see {link}", style="dim"))
