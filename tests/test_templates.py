"""Rule messages and remedies never show a placeholder: an unknown fact is said in words, with the
command that finds it (attn_doctor/rules/templates.py)."""

from __future__ import annotations

import re

import pytest

from attn_doctor.rules import templates
from attn_doctor.rules.engine import remedies
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
LEFTOVER = re.compile(r"\{[A-Za-z_]\w*\}|<[A-Za-z_]+>|\[\?|\?\]|(?<![\w.])\?(?![\w.])")


def test_optional_parts_and_alternatives():
    text = "Reinstall flash-attn[? {flash_attn}?] built for [?torch {torch}|the installed torch?]"
    assert templates.fill(text, {"flash_attn": "2.7.4", "torch": "2.6.0"}) == "Reinstall flash-attn 2.7.4 built for torch 2.6.0"
    assert templates.fill(text, {"flash_attn": "?", "torch": None}) == "Reinstall flash-attn built for the installed torch"


def test_an_unknown_field_is_said_in_words_with_the_command_that_finds_it():
    text, missing = templates.render("pip install torch --index-url https://download.pytorch.org/whl/cu{cuda_xy}", {})
    assert "{" not in text and missing == {"cuda_xy"}
    assert "torch.version.cuda" in templates.how_to_find(missing)


def test_required_fields_ignore_optional_parts():
    assert templates.required("a {x}[? {y}?][?{z}|w?]") == {"x"}
    assert templates.complete("a {x}[? {y}?]", {"x": "1"}) and not templates.complete("a {x}", {"x": "?"})


@pytest.mark.parametrize("rule", [r for r in RECIPES.rules if r.remedies], ids=lambda r: r.id)
def test_remedies_with_no_facts_at_all_show_no_placeholder(rule):
    # what explain shows for a bare message: the log gave no version, no GPU, no capture
    for remedy in remedies(rule, {}):
        for field in ("summary", "detail", "requirement"):
            text = getattr(remedy, field) or ""
            assert not LEFTOVER.search(text), f"{rule.id} {field}: {text!r}"
