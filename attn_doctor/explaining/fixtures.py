"""Signature fixtures: the log snippets a rule must recognise (`match`) and must not (`no_match`),
run through the real scanner (normalisation, wrapped lines, pre-filter) exactly as `explain` does."""

from __future__ import annotations

import io
from dataclasses import dataclass

from ..rules.model import Rule
from .scan import Scanner
from ..rules.signatures import compile_rules


@dataclass
class SignatureFixtureFailure:
    rule: str
    snippet: str
    expected: str
    got: str

    def __str__(self) -> str:
        return f"{self.rule}: log snippet {self.snippet!r} should {self.expected} but {self.got}"


def matching_rules(rules: list[Rule], text: str, data: dict | None = None) -> dict[str, int]:
    """Rule id -> occurrences, for every rule whose signatures (with their context) match `text`."""
    from .versions import gpu_table_from

    compiled = compile_rules([r for r in rules if r.signatures])
    scan = Scanner(compiled, gpu_table_from(data or {})).scan(io.BytesIO(text.encode("utf-8")))
    out: dict[str, int] = {}
    for idx, hits in scan.hits.items():
        if hits.signature.context is not None and idx not in scan.contexts_seen:
            continue
        out[hits.signature.rule] = max(out.get(hits.signature.rule, 0), hits.count)
    return out


def explained_rules(text: str, recipes) -> dict[str, str]:
    """Rule id -> likelihood in explain's final verdict on `text`, with every recipe competing."""
    from .core import explain

    report = explain(io.BytesIO(text.encode("utf-8")), recipes, kind="text")
    return {m.rule: m.likelihood for m in report.matches}


def check_signature_fixtures(rule: Rule, recipes=None) -> list[SignatureFixtureFailure]:
    """With `recipes`, each match snippet must also survive explain's final verdict (every rule
    competing, versions weighed): a regex matching its own fixture is not enough."""
    failures = []
    if rule.signatures and (not rule.signature_fixtures.match or not rule.signature_fixtures.no_match):
        failures.append(SignatureFixtureFailure(rule.id, "-", "exist (match and no_match snippets)", "there are none"))
    for snippet in rule.signature_fixtures.match:
        if rule.id not in matching_rules([rule], snippet):
            failures.append(SignatureFixtureFailure(rule.id, snippet[:120], "match", "no signature matched"))
        elif recipes is not None:
            verdict = explained_rules(snippet, recipes).get(rule.id)
            if verdict in (None, "unlikely"):
                failures.append(SignatureFixtureFailure(rule.id, snippet[:120], "be explained by it", f"explain ruled it {verdict or 'out'}"))
    for snippet in rule.signature_fixtures.no_match:
        if rule.id in matching_rules([rule], snippet):
            failures.append(SignatureFixtureFailure(rule.id, snippet[:120], "not match", "a signature matched"))
    return failures
