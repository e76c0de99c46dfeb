"""A finding of one rule read from a text without a signature's captures (a library message of the
catalogue, a failed check's condition, a known case the text resembles): its words, its remedies
written for the environment explain speaks for."""

from __future__ import annotations

import shlex
from typing import Any, Optional

from ..diagnosis.engine import remedies as fill_remedies
from ..rules import causes, templates
from ..rules.conditions import base_evidence
from .report import Match


def rule_match(rule, facts, target, *, captures: Optional[dict] = None, priority: int, likelihood: str, reason: str,
               **fields: Any) -> Match:
    """The Match of `rule` with the facts explain has (the probed environment's, else the log's:
    their unknowns left out), the captures of the reading, and the given fields (evidence, site,
    resembles)."""
    captures = dict(captures or {})
    evidence = {k: v for k, v in dict(base_evidence(facts)).items() if v != "?" and k != "python"}
    evidence.update(captures)
    message = templates.fill(rule.message, evidence) if captures and templates.complete(rule.message, evidence) else None
    remedies = fill_remedies(rule, evidence, target)
    return Match(
        rule=rule.id, name=rule.name, area=rule.area, severity=rule.severity, cause=rule.cause,
        cause_label=causes.label(rule.cause), harmless=rule.cause == "harmless", title=rule.title, message=message,
        explanation=rule.explanation.strip(), occurrences=1, captures=captures, likelihood=likelihood,
        likelihood_reason=reason, priority=priority, remedies=remedies,
        commands=[shlex.join(r.command) if r.command else None for r in remedies], links=list(rule.links), **fields,
    )
