"""Rule messages and remedies never show a placeholder: an unknown fact is left out of the sentence,
and a line of its own says how to find it (attn_doctor/rules/templates.py)."""

from __future__ import annotations

import re

import pytest

from attn_doctor.rules import templates
from attn_doctor.diagnosis.engine import remedies
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
LEFTOVER = re.compile(r"\{[A-Za-z_]\w*\}|<[A-Za-z_]+>|\[\?|\?\]|(?<![\w.])\?(?![\w.])")


def test_optional_parts_and_alternatives():
    text = "Reinstall flash-attn[? {flash_attn}?] built for [?torch {torch}|the installed torch?]"
    assert templates.fill(text, {"flash_attn": "2.7.4", "torch": "2.6.0"}) == "Reinstall flash-attn 2.7.4 built for torch 2.6.0"
    assert templates.fill(text, {"flash_attn": "?", "torch": None}) == "Reinstall flash-attn built for the installed torch"


def test_an_unknown_field_is_left_out_and_a_line_says_how_to_find_it():
    text, missing = templates.render("Reinstall flash-attn {flash_attn} built for torch[? {torch}?]", {"torch": "?"})
    assert text == "Reinstall flash-attn  built for torch" and missing == {"flash_attn", "torch"}
    assert "installed" not in text  # never words standing in for the value
    lines = templates.find_lines(missing, "/envs/a/bin/python")
    assert lines == ["find the installed flash-attn with: /envs/a/bin/python -c 'import importlib.metadata as m; print(m.version(\"flash-attn\"))'",
                     "find the installed torch with: /envs/a/bin/python -c 'import torch; print(torch.__version__)'"]
    assert templates.find_lines(missing, None) == []  # no interpreter known: no bare `python`


def test_an_empty_value_is_known():
    assert templates.fill("{config}{more_configs}: x", {"config": "/tmp/cfg.yaml", "more_configs": ""}) == "/tmp/cfg.yaml: x"


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
