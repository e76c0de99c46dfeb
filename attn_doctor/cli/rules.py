"""`attn-doctor rules`: the rules attn-doctor knows, one in full, or the report's JSON Schema."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import emit, fail, json_option, no_color_option, print_schema, quiet_option, schema_option, write_text

HELP = (
        "List the rules attn-doctor knows, or show one in full (what it checks, why it matters, the remedies).\n\n"
        "Examples:\n\n  attn-doctor rules\n\n  attn-doctor rules AD301\n\n  attn-doctor rules flash-attn-undefined-symbol\n\n"
        "  attn-doctor rules --json\n\n"
        "  attn-doctor rules --markdown > docs/rules.md   (the rules reference page)\n\n"
        "  attn-doctor rules --schema   (the JSON Schema of `rules --json`; `check --schema` has the report's)"
)


def rules(
    rule_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="A rule id (AD301) or name (flash-attn-undefined-symbol)."),
    json_out: bool = json_option("attn-doctor/rules"),
    schema: bool = schema_option("rules"),
    recipes: Optional[Path] = typer.Option(None, "--recipes", metavar="DIR", help="Read rules from DIR instead of the shipped recipes."),
    markdown: bool = typer.Option(False, "--markdown", help="Print every rule as one Markdown page (the rules reference, docs/rules.md)."),
    quiet: bool = quiet_option(),
    no_color: bool = no_color_option(),
) -> None:
    from ..rules.loader import RecipeError, load_recipes

    if schema:
        if rule_id or recipes:
            raise fail(f"--schema prints the JSON Schema of `rules --json`; it does not take {'a rule ID' if rule_id else '--recipes'}")
        raise print_schema("rules")
    try:
        loaded = load_recipes(recipes)
    except RecipeError as exc:
        raise fail(str(exc)) from None
    if markdown:
        if rule_id or json_out:
            raise fail(f"--markdown prints every rule as one page; it does not take {'a rule ID' if rule_id else '--json'}")
        from ..render.rules import rules_markdown
        from ..rules.checks import CHECKS
        from ..diagnosis.fixtures import first_example

        examples = {r.id: e for r in loaded.rules if (e := first_example(r, loaded)) is not None}
        write_text(rules_markdown(loaded.rules, loaded.sources, CHECKS, examples))
        raise typer.Exit(0)
    from ..render.json import rules_json
    from ..render.rules import render_rule, render_rules, render_summary

    if rule_id:
        rule = loaded.get(rule_id)
        if rule is None:
            raise fail(loaded.unknown([rule_id], "rule").replace("rule ", "", 1))
        from ..diagnosis.fixtures import first_example

        example = None if json_out else first_example(rule, loaded)  # its remedies as a report words them
        emit(json_out, lambda: rules_json([rule]), lambda console: render_rule(rule, console, example))
        raise typer.Exit(0)
    emit(json_out, lambda: rules_json(loaded.rules), lambda console: render_rules(loaded.rules, console),
         lambda console: render_summary(loaded.rules, console))
