"""`attn-doctor rules`: the knowledge base, listed and explained."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..rules.model import Rule

SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def render_rules(rules: list[Rule], console: Console) -> None:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("ID")
    table.add_column("Severity")
    table.add_column("Area")
    table.add_column("Name")
    table.add_column("Title")
    for rule in sorted(rules, key=lambda r: r.id):
        table.add_row(rule.id, Text(rule.severity, style=SEVERITY_STYLE[rule.severity]), rule.area, rule.name, rule.title)
    console.print(table)
    console.print(Text(f"{len(rules)} rules. `attn-doctor rules ID` shows one.", style="dim"))


def render_rule(rule: Rule, console: Console) -> None:
    console.print(Text(f"{rule.id} {rule.name}", style="bold"))
    console.print(Text(rule.title))
    console.print(Text(f"severity: {rule.severity}   area: {rule.area}", style=SEVERITY_STYLE[rule.severity]))
    console.print()
    console.print(Text(" ".join(rule.explanation.split()) if "\n\n" not in rule.explanation else rule.explanation.strip()))
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
            if remedy.detail:
                console.print(Text(f"      {remedy.detail}", style="cyan"))
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
    if rule.links:
        console.print()
        for link in rule.links:
            console.print(Text(f"see {link}", style="dim"))
