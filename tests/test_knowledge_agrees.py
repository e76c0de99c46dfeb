"""One piece of knowledge, one verdict: the probe's classification of an import failure
(attn_doctor/failures.py) and the rules that read it (their `import_error` kinds) agree with the
signatures `explain` uses for the same messages."""

from __future__ import annotations

import pytest

from attn_doctor.explain.fixtures import matching_rules
from attn_doctor.failures import classify
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
# rules whose condition is an import-error kind of flash_attn, and whose signatures name the message
KIND_RULES = [r for r in RECIPES.rules if r.when is not None and r.when.import_error.get("flash_attn") and r.signatures]


@pytest.mark.parametrize("rule", KIND_RULES, ids=lambda r: r.id)
def test_messages_a_rule_explains_are_classified_as_the_kind_it_fires_on(rule):
    kinds = rule.when.import_error["flash_attn"]
    for message in rule.signature_fixtures.match:
        last = message.strip().splitlines()[-1]
        error_type, _, text = last.partition(": ")
        assert classify(error_type, text).kind in kinds, f"{rule.id}: {last!r} is classified {classify(error_type, text).kind}"


@pytest.mark.parametrize("module", ["flash_attn_2_cuda", "flash_attn_cuda", "flash_attn_3_cuda", "flash_attn_gpu"])
def test_every_missing_extension_the_probe_reports_is_explained_by_the_same_rule(module):
    message = f"No module named '{module}'"
    kind = classify("ModuleNotFoundError", message).kind
    fired = {r.id for r in KIND_RULES if kind in r.when.import_error["flash_attn"]}
    explained = set(matching_rules(RECIPES.rules, f"ModuleNotFoundError: {message}"))
    assert fired and fired <= explained, (kind, fired, explained)
