"""Every signature recognises its log snippets and ignores its near misses; the knowledge base
covers every root-cause class; bad signatures are refused at load time."""

from __future__ import annotations

import pytest

from attn_doctor.rules.causes import CAUSES
from attn_doctor.explaining.fixtures import check_signature_fixtures, matching_rules
from attn_doctor.rules.signatures import SignatureError, anchors_of, normalise
from attn_doctor.rules.loader import RecipeError, load_recipes
from attn_doctor.rules.model import CauseClass

RECIPES = load_recipes()
SIG_RULES = [r for r in RECIPES.rules if r.signatures]


@pytest.mark.parametrize("rule", SIG_RULES, ids=lambda r: f"{r.id}-{r.name}")
def test_signature_fixtures(rule):
    failures = check_signature_fixtures(rule, RECIPES)
    assert not failures, "\n".join(map(str, failures))


def test_every_cause_class_has_a_rule_signature_and_remedy():
    import typing

    classes = set(typing.get_args(CauseClass))
    assert classes == set(CAUSES)
    for cause in classes:
        rules = [r for r in SIG_RULES if r.cause == cause]
        catalogued = [r for r in RECIPES.rules if r.catalogue and r.cause == cause]
        assert rules or catalogued, f"no rule with signatures, nor a catalogue rule, for {cause}"
        assert all(r.signature_fixtures.match and r.signature_fixtures.no_match for r in rules)
        if cause not in ("harmless",):
            assert any(r.remedies for r in rules + catalogued), f"no remedy for {cause}"
    for rule in SIG_RULES:
        assert rule.cause, f"{rule.id} has signatures but no cause"
        if rule.cause == "harmless":
            assert rule.severity == "info" and not rule.remedies, rule.id


def test_each_known_message_is_recognised_only_by_the_rules_meant_for_it():
    # The no_match snippets of one rule must not be swallowed by an unrelated rule of the same class
    # of message; the match snippets of harmless rules must not trigger an error rule.
    # (judged as explain reports it: a generic reading of the same line is superseded by the rule
    # that knows the message)
    import attn_doctor

    for rule in SIG_RULES:
        if rule.cause != "harmless":
            continue
        for snippet in rule.signature_fixtures.match:
            report = attn_doctor.explain(snippet)
            errors = [m.rule for m in report.matches if not m.harmless and m.severity == "error" and m.likelihood != "unlikely"]
            assert not errors, f"harmless {rule.id} snippet also explained as {errors}"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("[rank3]: RuntimeError: boom", "RuntimeError: boom"),
        ("\x1b[1;31mRuntimeError\x1b[0m: boom", "RuntimeError: boom"),
        ("E1122 10:01:02.123456 4242 train.cc:88] RuntimeError: boom", "RuntimeError: boom"),
        ("[2026-11-22 10:01:02,123] ERROR RuntimeError: boom", "RuntimeError: boom"),
        ("[INFO|modeling_utils.py:1234] 2026-11-22 10:01:02,123 >> boom", "boom"),
        ("11/22/2026 10:01:02 - WARNING - transformers.modeling_utils - boom", "boom"),
        ("(WorkerDict pid=8238) boom", "boom"),
        ("3: [rank3]: boom", "boom"),
        ("[W1122 10:01:02.123 123 sdp_utils.cpp:45] Warning: boom", "Warning: boom"),
    ],
)
def test_normalise_strips_launcher_and_logger_prefixes(line, expected):
    assert normalise(line) == expected


@pytest.mark.parametrize(
    "prefix",
    ["", "[rank7]: ", "\x1b[31m", "E1122 10:01:02.123 4242 x.py:1] ", "[2026-11-22 10:01:02,123] ERROR ", "  File \"x.py\", line 3\n"],
)
def test_a_message_is_found_whatever_the_log_adds_around_it(prefix):
    text = f"{prefix}RuntimeError: FlashAttention only support fp16 and bf16 data type\x1b[0m (at /x/y.py:12)"
    assert "AD604" in matching_rules(SIG_RULES, text)


def test_a_wrapped_message_is_joined():
    text = "ImportError: /opt/venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-g\nnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    assert "AD301" in matching_rules(SIG_RULES, text)


def test_substrings_of_unrelated_text_do_not_match():
    unrelated = "\n".join(
        [
            "MyFlashAttention only supports Ampere GPUs or newerish",  # no word boundary
            "docs: grep 'undefined symbol' when an import fails",
            "No module named 'flash_attn_2_cuda_helpers'",
            "version GLIBC_2.32 is installed",
        ]
    )
    assert matching_rules(SIG_RULES, unrelated) == {}


@pytest.mark.parametrize(
    "body, message",
    [
        ("signatures = ['(unclosed']", "invalid regular expression"),
        ("signatures = ['a|b']", "needs a literal text"),
        ("signatures = ['(?i)flashattention only']", "case-insensitive"),
        ("signatures = ['FlashAttention exploded']", "signature_fixtures"),
    ],
)
def test_bad_signatures_are_recipe_errors_naming_file_and_rule(tmp_path, body, message):
    (tmp_path / "bad.toml").write_text(
        f'[[rule]]\nid = "AD990"\nname = "x"\narea = "torch"\nseverity = "error"\ntitle = "t"\nmessage = "m"\nexplanation = "e"\n{body}\n'
    )
    with pytest.raises(RecipeError) as err:
        load_recipes(tmp_path)
    assert "bad.toml: rule AD990" in str(err.value) and message in str(err.value)


def test_a_rule_without_when_needs_signatures(tmp_path):
    (tmp_path / "r.toml").write_text('[[rule]]\nid = "AD991"\nname = "x"\narea = "torch"\nseverity = "error"\ntitle = "t"\nmessage = "m"\nexplanation = "e"\n')
    with pytest.raises(RecipeError, match="without `when` must have `signatures`"):
        load_recipes(tmp_path)


def test_signature_only_rules_are_not_reported_by_check():
    from attn_doctor.diagnosis.engine import evaluate
    from attn_doctor.rules.fixtures import build_facts

    results = {r.rule for r in evaluate(RECIPES, build_facts("h100"))}
    only = {r.id for r in RECIPES.rules if r.when is None}
    assert only and not (only & results)


def test_anchor_derivation():
    assert anchors_of(r"x_transformers|x-transformers") == ["x-transformers", "x_transformers"]
    assert anchors_of(r"(?P<k>Flash attention|Memory efficient) kernel not used because") == [" kernel not used because"]
    with pytest.raises(SignatureError):
        anchors_of(r"\d+\.\d+")


def test_a_rule_superseded_on_every_line_before_its_turn_takes_nothing():
    """A supersedes B, B supersedes C: A takes B's only line first, so B, gone, has nothing to take
    from C (reading B's lines then raised KeyError: explain's internal error on a notice's text)."""
    import re as _re
    from types import SimpleNamespace

    from attn_doctor.explaining.core import _supersede
    from attn_doctor.explaining.scan import Evidence, SignatureHits

    signature = SimpleNamespace(priority=0, regex=_re.compile("x"), guard=None)

    def hits(*lines):
        return [SignatureHits(signature, count=len(lines), evidence=[Evidence(n, "x") for n in lines])]

    rules = {rid: SimpleNamespace(supersedes=sup, cause="c", severity="warning")
             for rid, sup in (("A", ["B"]), ("B", ["C"]), ("C", []))}
    by_rule = {"A": hits(1), "B": hits(1), "C": hits(1, 2)}
    _supersede(by_rule, rules)
    assert sorted(by_rule) == ["A", "C"] and [e.line for e in by_rule["C"][0].evidence] == [1, 2]
