"""`attn-doctor rules`: the rules attn-doctor knows, one in full, or the report's JSON Schema."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import emit, fail, write_json

HELP = (
        "List the rules attn-doctor knows, or show one in full (what it checks, why it matters, the remedies).\n\n"
        "Examples:\n\n  attn-doctor rules\n\n  attn-doctor rules AD301\n\n  attn-doctor rules flash-attn-undefined-symbol\n\n"
        "  attn-doctor rules --schema   (the JSON Schema of the --json report)"
)


def rules(
    rule_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="A rule id (AD301) or name (flash-attn-undefined-symbol)."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
    schema: bool = typer.Option(False, "--schema", help="Print the JSON Schema of `check --json` reports."),
    recipes: Optional[Path] = typer.Option(None, "--recipes", metavar="DIR", help="Read rules from DIR instead of the shipped recipes."),
) -> None:
    from ..rules.loader import RecipeError, load_recipes

    if schema:
        if rule_id or recipes:
            raise fail(f"--schema prints the report's JSON Schema; it does not take {'a rule ID' if rule_id else '--recipes'}")
        from ..render.json import report_schema, to_json

        write_json(to_json(report_schema()))
        raise typer.Exit(0)
    try:
        loaded = load_recipes(recipes)
    except RecipeError as exc:
        raise fail(str(exc)) from None
    from ..render.json import to_json
    from ..render.rules import render_rule, render_rules

    if rule_id:
        rule = loaded.get(rule_id)
        if rule is None:
            raise fail(f"no rule {rule_id!r}; `attn-doctor rules` lists them")
        emit(json_out, lambda: to_json(rule), lambda console: render_rule(rule, console))
        raise typer.Exit(0)
    emit(json_out, lambda: to_json(loaded.rules), lambda console: render_rules(loaded.rules, console))
