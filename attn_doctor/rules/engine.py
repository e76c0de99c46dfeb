"""Evaluating rules against Facts: a Result per rule. Pure."""

from __future__ import annotations

import re
import traceback
from typing import Any, Optional

from ..facts import Facts
from ..report import Result
from .checks import CHECKS
from .conditions import Evaluator, Unknown
from .loader import Recipes
from . import templates
from .model import Remedy, Rule


_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def remedies(rule: Rule, evidence: dict[str, Any]) -> list[Remedy]:
    """A rule's remedies filled from a finding's evidence: the exact wheel or version it points to
    where known; where not, the words for it and the command that finds it, never a placeholder."""
    out = []
    for remedy in rule.remedies:
        values: dict[str, Any] = {}
        missing: set[str] = set()
        nameless = False  # a requirement whose distribution is unknown: no command to give
        for f in remedy.__struct_fields__:
            v = getattr(remedy, f)
            if v is None and f != "kind":
                continue
            if isinstance(v, str):
                if f == "requirement" and not templates.complete(v, evidence):
                    m = _REQ_NAME.match(v)  # no version known: the bare distribution name
                    if m is None:
                        nameless = True
                        break
                    v = m.group(1)
                else:
                    v, unknown = templates.render(v, evidence)
                    missing |= unknown
            values[f] = v
        if nameless:
            continue
        hint = templates.how_to_find(missing)
        if hint:
            values["detail"] = f"{values['detail']}\n{hint}" if values.get("detail") else hint
        out.append(Remedy(**values))
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
            message=templates.fill(rule.message, {**evaluator.base, **evidence}),
            evidence=evidence,
            remedies=remedies(rule, {**evaluator.base, **evidence}),
            **base,
        )
    if isinstance(verdict, Unknown):
        return Result(status="skipped", reason=verdict.reason, **base)
    return Result(status="pass", message=templates.fill(rule.pass_, evaluator.base) if rule.pass_ else None, **base)


def evaluate(recipes: Recipes, facts: Facts) -> list[Result]:
    # Signature-only rules (no `when`) speak about messages, not facts: only explain reports them.
    return [evaluate_rule(rule, facts, recipes.data) for rule in recipes.rules if rule.when is not None]
