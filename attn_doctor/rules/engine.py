"""Evaluating rules against Facts: a Result per rule. Pure."""

from __future__ import annotations

import re
import string
import traceback
from typing import Any, Optional

from ..facts import Facts
from ..report import Result
from .checks import CHECKS
from .conditions import Evaluator, Unknown
from .loader import Recipes
from .model import Remedy, Rule

class _Fields(dict):
    """format_map mapping: a field the evidence lacks renders as '?' instead of raising."""

    def __missing__(self, key: str) -> str:
        return "?"


_FORMATTER = string.Formatter()


def render_template(text: str, evidence: dict[str, Any]) -> str:
    fields = _Fields({re.sub(r"[^A-Za-z0-9_]", "_", k): v for k, v in evidence.items()})
    try:
        return _FORMATTER.vformat(text, (), fields)
    except (ValueError, IndexError, KeyError, AttributeError):
        return text


def template_fields(text: str) -> set[str]:
    return {re.sub(r"[^A-Za-z0-9_]", "_", name.split(".")[0].split("[")[0]) for _, name, _, _ in _FORMATTER.parse(text) if name}


def _remedies(rule: Rule, evidence: dict[str, Any]) -> list[Remedy]:
    out = []
    for remedy in rule.remedies:
        # Templated text: a remedy may name the exact wheel or version the evidence points to.
        out.append(
            Remedy(
                **{
                    f: (render_template(v, evidence) if isinstance(v, str) else v)
                    for f in remedy.__struct_fields__
                    if (v := getattr(remedy, f)) is not None or f == "kind"
                }
            )
        )
    return out


def evaluate_rule(rule: Rule, facts: Facts, data: Optional[dict] = None, checks=None) -> Result:
    base = dict(rule=rule.id, name=rule.name, area=rule.area, title=rule.title, links=list(rule.links))
    if rule.when is None:
        return Result(status="skipped", reason="recognised from error messages only (attn-doctor explain)", **base)
    evaluator = Evaluator(facts, CHECKS if checks is None else checks, data or {})
    try:
        verdict = evaluator.evaluate(rule.when)
    except Exception:  # noqa: BLE001 - a buggy check is reported, the run goes on
        return Result(status="crashed", traceback=traceback.format_exc(), **base)
    if verdict is True:
        evidence = evaluator.evidence
        return Result(
            status=evaluator.severity or rule.severity,
            message=render_template(rule.message, {**evaluator.base, **evidence}),
            evidence=evidence,
            remedies=_remedies(rule, {**evaluator.base, **evidence}),
            **base,
        )
    if isinstance(verdict, Unknown):
        return Result(status="skipped", reason=verdict.reason, **base)
    return Result(status="pass", **base)


def evaluate(recipes: Recipes, facts: Facts) -> list[Result]:
    # Signature-only rules (no `when`) speak about messages, not facts: only explain reports them.
    return [evaluate_rule(rule, facts, recipes.data) for rule in recipes.rules if rule.when is not None]
