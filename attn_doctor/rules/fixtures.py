"""Rule fixtures: facts documents each rule must fire on (`trigger`) and must not fire on (`pass`).

A fixture is the name of a recorded facts file (tests/fixtures/facts/NAME.json), or a table
`{ base = "NAME", set = { "dotted.path" = value }, remove = ["dotted.path"] }`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import msgspec

from ..facts import Facts
from .conditions import _MISSING, base_evidence, lookup
from . import templates
from .engine import evaluate_rule
from .loader import Recipes
from .model import Fixture, FixtureRef, Rule

FIRED = ("error", "warning", "info")


class FixtureError(Exception):
    pass


def default_fixtures_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "facts"


def _load_json(name: str, directory: Path) -> dict:
    path = directory / f"{name}.json"
    if not path.is_file():
        raise FixtureError(f"no recorded facts fixture {name!r} in {directory}")
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc.get("facts", doc) if doc.get("schema") else doc


def _set(doc: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise FixtureError(f"cannot set {path}: {part} is not a table")
    node[parts[-1]] = copy.deepcopy(value)


def _remove(doc: dict, path: str) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        node = node.get(part, {})
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def build_facts(fixture: Fixture, directory: Optional[Path] = None) -> Facts:
    directory = directory or default_fixtures_dir()
    if isinstance(fixture, str):
        return msgspec.convert(_load_json(fixture, directory), Facts)
    ref: FixtureRef = fixture
    doc = _load_json(ref.base, directory) if ref.base else {}
    for path in ref.remove:
        _remove(doc, path)
    for path, value in ref.set.items():
        _set(doc, path, value)
    try:
        facts = msgspec.convert(doc, Facts)
    except msgspec.ValidationError as exc:
        raise FixtureError(f"fixture {describe(fixture)}: {exc}") from None
    for path, value in ref.set.items():
        # A misspelt path would be dropped silently by the conversion: refuse it instead.
        found = lookup(facts, path)
        if found is _MISSING:
            raise FixtureError(f"fixture {describe(fixture)}: {path} is not a fact")
    return facts


def describe(fixture: Fixture) -> str:
    if isinstance(fixture, str):
        return fixture
    sets = ", ".join(f"{k}={v!r}" for k, v in fixture.set.items())
    return f"{fixture.base or '{}'}[{sets}]"


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
                                   "pass signature_fixtures=attn_doctor.explain.fixtures.check_signature_fixtures")]
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
