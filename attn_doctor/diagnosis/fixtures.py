"""Each rule run on its fixtures (rules/fixtures.py builds them from recorded facts): it must fire on
its `trigger` fixtures, with a message whose fields are all known, and not on its `pass` fixtures;
and the first trigger fixture, fired, is the example the rules reference shows."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..rules import templates
from ..rules.conditions import base_evidence
from ..rules.fixtures import FixtureError, build_facts, describe
from ..rules.loader import Recipes
from ..rules.model import Rule
from .engine import FIRED, evaluate_rule


@dataclass
class FixtureFailure:
    rule: str
    fixture: str
    expected: str
    got: str
    detail: str = ""

    def __str__(self) -> str:
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.rule}: fixture {self.fixture} should {self.expected} but the rule was {self.got}{extra}"


def check_rule_fixtures(rule: Rule, recipes: Recipes, directory: Optional[Path] = None,
                        signature_fixtures: Optional[Callable[[Rule, Recipes], list]] = None) -> list[FixtureFailure]:
    """signature_fixtures: what checks a signature-only rule's log snippets, its only fixtures
    (explain's check_signature_fixtures: explain runs them through its scanner, and it sits above
    the rules); without one such a rule fails here rather than pass unchecked."""
    failures = []
    if rule.when is None:
        if signature_fixtures is None:
            return [FixtureFailure(rule.id, "-", "be checked (a signature-only rule: its log snippets)", "not checked",
                                   "pass signature_fixtures=attn_doctor.explaining.fixtures.check_signature_fixtures")]
        return [FixtureFailure(rule.id, f.snippet, f.expected, f.got) for f in signature_fixtures(rule, recipes)]
    if not rule.fixtures.trigger or not rule.fixtures.pass_:
        failures.append(FixtureFailure(rule.id, "-", "exist (at least one trigger and one pass fixture)", "missing"))
    for expect, fixtures in (("trigger", rule.fixtures.trigger), ("pass", rule.fixtures.pass_)):
        for fixture in fixtures:
            try:
                facts = build_facts(fixture, directory)
            except FixtureError as exc:
                failures.append(FixtureFailure(rule.id, describe(fixture), "load", "not evaluated", str(exc)))
                continue
            result = evaluate_rule(rule, facts, recipes.data)
            if result.status == "crashed":
                failures.append(FixtureFailure(rule.id, describe(fixture), expect, "crashed", result.traceback or ""))
            elif expect == "trigger" and (
                result.status not in FIRED if rule.when.trace_finding else result.status != rule.severity
            ):
                failures.append(FixtureFailure(rule.id, describe(fixture), "trigger", result.status, result.reason or ""))
            elif expect == "pass" and result.status in FIRED:
                failures.append(FixtureFailure(rule.id, describe(fixture), "not trigger", result.status, result.message or ""))
            elif expect == "trigger":
                known = {re.sub(r"[^A-Za-z0-9_]", "_", k) for k in {**base_evidence(facts), **result.evidence}}
                texts = [rule.message] + [r.summary for r in rule.remedies] + [r.requirement or "" for r in rule.remedies]
                unknown = sorted(set().union(*(templates.required(t) for t in texts)) - known)
                if unknown:
                    failures.append(
                        FixtureFailure(rule.id, describe(fixture), "fill its message", "missing fields", ", ".join(unknown))
                    )
    return failures


@dataclass
class Example:
    """A rule fired on its first trigger fixture: the message a report shows, and the evidence its
    remedies are filled from (the rules reference words each rule this way)."""

    fixture: str
    message: str
    evidence: dict


def first_example(rule: Rule, recipes: Recipes, directory: Optional[Path] = None) -> Optional[Example]:
    """None for a signature-only rule, or where the recorded facts are not there (an installed
    wheel ships no tests/)."""
    for fixture in rule.fixtures.trigger[:1]:
        try:
            facts = build_facts(fixture, directory)
        except (FixtureError, OSError):
            return None
        result = evaluate_rule(rule, facts, recipes.data)
        if result.status in FIRED and result.message:
            return Example(describe(fixture), result.message, {**base_evidence(facts), **result.evidence})
    return None
