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


# a sentence cut short where a value was dropped: "... libraries for CUDA ", "built for torch"
DANGLING = re.compile(r"(?:\s|(?<!\)):|\b(?:for|with|to|of|at|by|from|than))$")


def _recorded_reports():
    from pathlib import Path

    from attn_doctor.gather import load_facts_file

    folder = Path(__file__).resolve().parent / "fixtures" / "facts"
    return [(p.stem, load_facts_file(p)) for p in sorted(folder.glob("*.json"))]


@pytest.mark.parametrize("name,facts", _recorded_reports(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_remedy_over_every_recorded_report_reads_whole(name, facts):
    # what check shows on the recorded machines: each finding's remedies filled from its evidence
    from attn_doctor.diagnosis.engine import evaluate

    for result in evaluate(RECIPES, facts):
        for remedy in result.remedies or ():
            for field in ("summary", "detail", "requirement", "value"):
                text = str(getattr(remedy, field) or "")
                assert not LEFTOVER.search(text), f"{name} {result.rule} {field}: {text!r}"
                assert "  " not in text.strip(), f"{name} {result.rule} {field}: {text!r}"
            assert not DANGLING.search(remedy.summary or ""), f"{name} {result.rule}: {remedy.summary!r}"


@pytest.mark.parametrize("rule", [r for r in RECIPES.rules if r.remedies], ids=lambda r: r.id)
def test_a_remedy_with_a_fact_unknown_is_a_whole_sentence(rule):
    # each fact a report or a log may lack (templates.HOW_TO_FIND: the environment's, not what a check
    # computes) left unknown in turn: the sentence must not end where the value was
    for remedy in rule.remedies:
        fields = {m.group(1) for m in re.finditer(r"\{([A-Za-z_]\w*)\}", remedy.summary or "")}
        for field in fields & set(templates.HOW_TO_FIND):
            known = {f: "X" for f in fields if f != field}
            text, _ = templates.render(remedy.summary, known)
            assert not DANGLING.search(text), f"{rule.id} without {field}: {text!r}"


@pytest.mark.parametrize("rule", RECIPES.rules, ids=lambda r: r.id)
def test_the_rules_reference_shows_no_placeholder(rule):
    # `attn-doctor rules ID`: the remedies as its example words them, or their fields described
    from rich.console import Console

    from attn_doctor.diagnosis.fixtures import first_example
    from attn_doctor.render.rules import render_rule

    for example in (None, first_example(rule, RECIPES)):
        console = Console(record=True, width=200)
        render_rule(rule, console, example)
        text = console.export_text().split("Error signatures:")[0]  # the signatures are regexes: braces are theirs
        assert not re.search(r"\{[A-Za-z_]\w*\}", text), f"{rule.id}: {text}"
