"""Evaluating rules against Facts: a Result per rule, its remedies filled for the environment. Pure."""

from __future__ import annotations

import re
import traceback
from typing import Any, Callable, Optional

import msgspec

from ..facts import Facts
from ..remedies import Target, pip_command, resolve
from ..report import Result
from ..rules import templates
from ..rules.checks import CHECKS
from ..rules.conditions import Evaluator, Unknown
from ..rules.loader import Recipes
from ..rules.model import Remedy, Rule

_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def remedies(rule: Rule, evidence: dict[str, Any], target: Optional[Target] = None,
             installed: Optional[Callable[[str], Optional[str]]] = None) -> list[Remedy]:
    """A rule's remedies filled from a finding's evidence: the exact wheel or version it points to
    where known; where not, the sentence without it and a line saying how to find it, never a
    placeholder. Each command is resolved for `target` (the environment the finding is about):
    an argument list that runs as it is, or None. installed: a distribution's installed version,
    where known (an upgrade then stays within its major release)."""
    target = target or Target(None)
    if target.refuses:
        evidence = dict(evidence, target_refuses=target.refuses)
    out = []
    for remedy in rule.remedies:
        if remedy.for_target == "installable" and target.refuses or remedy.for_target == "not_installable" and target.refuses == "":
            continue  # offered for the other kind of environment
        values: dict[str, Any] = {}
        missing: set[str] = set()
        for f in remedy.__struct_fields__:
            v = getattr(remedy, f)
            if v is None and f != "kind":
                continue
            if isinstance(v, str):
                if f == "requirement" and not templates.complete(v, evidence):
                    missing |= templates.render(v, evidence)[1]
                    m = _REQ_NAME.match(v)  # no version known: the bare distribution name
                    v = m.group(1) if m else None  # no name known either: nothing to install
                else:
                    v, unknown = templates.render(v, evidence)
                    missing |= unknown
            values[f] = v
        if remedy.kind == "pip" and values.get("requirement") is None:
            continue  # a pip remedy is its requirement: without a package to name it has nothing to offer
        if remedy.kind == "pip" and installed is not None:
            values["requirement"] = within_major(values["requirement"], installed)
        if remedy.kind == "env" and not templates.complete(remedy.variable or "", evidence):
            continue  # likewise an env remedy and its variable (none exists for this release)
        filled = Remedy(**{**values, "command": None})
        command, unknown = resolve(remedy.command or pip_command(filled), evidence, target)
        missing |= unknown
        hints = templates.find_lines(missing, target.python)
        if hints:
            values["detail"] = "\n".join(([values["detail"]] if values.get("detail") else []) + hints)
        values["command"] = command
        out.append(Remedy(**values))
    return out


def within_major(requirement: str, installed: Callable[[str], Optional[str]]) -> str:
    """`NAME>=X` as the smallest change that fixes: below the next major release where the installed
    one is of X's major (x-transformers>=1.30.2 with 1.30.1 installed: 'x-transformers>=1.30.2,<2',
    not a 2.x with other APIs and dependencies). Anything else as it is."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        req = Requirement(requirement)
        (spec,) = list(req.specifier) if len(req.specifier) == 1 else (None,)
        if spec is None or spec.operator != ">=" or req.url or req.marker:
            return requirement
        floor, have = Version(spec.version), installed(req.name)
        if not have or floor.major < 1 or Version(have).major != floor.major or Version(have) >= floor:
            return requirement
    except (InvalidRequirement, InvalidVersion, ValueError):
        return requirement
    return "%s%s>=%s,<%d" % (req.name, "[%s]" % ",".join(sorted(req.extras)) if req.extras else "", spec.version,
                             floor.major + 1)


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
            remedies=remedies(rule, {**evaluator.base, **evidence}, Target.of(facts), facts.version_of),
            **base,
        )
    if isinstance(verdict, Unknown):
        return Result(status="skipped", reason=verdict.reason, **base)
    return Result(status="pass", message=templates.fill(rule.pass_, evaluator.base) if rule.pass_ else None, **base)


FIRED = ("error", "warning", "info")


def subjects(evidence: dict[str, Any]) -> set[str]:
    """The packages a finding is about (its `packages` evidence), as names."""
    return {p for p in re.split(r"[,\s]+", str(evidence.get("packages") or "")) if p}


def superseded(results: list[Result], rules: dict[str, Rule]) -> list[Result]:
    """One cause, one finding: a finding another rule supersedes (`supersedes`) and says more
    specifically for the same packages becomes a skipped result that names that rule. A finding
    that names no packages is about the environment as a whole: any firing superseder covers it.
    A superseder's packages are those it names and those whose versions it matched (a `version`
    condition's evidence is keyed by the distribution).
    A superseder is as severe as the worst finding it covers (a known-bad release is an error
    where the sample forward pass saw it fail), and names the findings it covers (`covers`)."""
    fired = [r for r in results if r.status in FIRED]
    out = []
    covered: dict[str, list[Result]] = {}
    for result in results:
        by = next((a for a in fired if result.status in FIRED and result.rule in rules[a.rule].supersedes
                   and subjects(result.evidence) <= subjects(a.evidence) | set(a.evidence)), None)
        if by is None:
            out.append(result)
            continue
        covered.setdefault(by.rule, []).append(result)
        out.append(Result(rule=result.rule, name=result.name, area=result.area, title=result.title, links=result.links,
                          status="skipped", reason=f"the same cause is reported by {by.rule}, more specifically"))
    for i, result in enumerate(out):
        if result.rule in covered and result.status in FIRED:
            status = min([result.status] + [c.status for c in covered[result.rule]], key=FIRED.index)
            evidence = dict(result.evidence, covers=" ".join(c.rule for c in covered[result.rule]))
            out[i] = msgspec.structs.replace(result, status=status, evidence=evidence)
    return out


def evaluate(recipes: Recipes, facts: Facts) -> list[Result]:
    # Signature-only rules (no `when`) speak about messages, not facts: only explain reports them.
    results = [evaluate_rule(rule, facts, recipes.data) for rule in recipes.rules if rule.when is not None]
    return superseded(results, {r.id: r for r in recipes.rules})
