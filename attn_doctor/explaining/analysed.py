"""Causes read from a report's structure (xformers' operator report, vLLM's backend reasons) by the
analyzer a signature names, and the single-line readings of that report they replace: once an
analyzer has weighed the report's lines, a line of it read alone (an operator's own head-dim limit)
is one operator's reason, not a second cause."""

from __future__ import annotations

from ..rules.signatures import CompiledSignature
from .scan import Evidence, SignatureHits

ANALYSED_PRIORITY = 3  # a cause read from a report's structure outranks every single-line signature


def readings(hits: SignatureHits) -> list[SignatureHits]:
    """The causes a signature's analyzer reads from the block after its match, as hits of their rules."""
    if not hits.signature.analyzer or hits.block is None:
        return []
    from ..rules.analyzers import ANALYZERS

    start, lines = hits.block
    out = []
    for finding in ANALYZERS[hits.signature.analyzer](lines):
        sig = CompiledSignature(finding.rule, hits.signature.pattern, hits.signature.regex, [], priority=ANALYSED_PRIORITY,
                                note=f"read from the report's structure ({hits.signature.analyzer})")
        out.append(SignatureHits(sig, count=1, evidence=[Evidence(start + finding.line, finding.text)],
                                 groups=dict(finding.captures), report_end=finding.end))
    return out


def report(hits: SignatureHits, derived: list[SignatureHits]) -> list[tuple[int, int, frozenset[str], set[str]]]:
    """The analysed report's extent, as (its first line, past its last, the rules its analyzer weighed,
    those it named); nothing where the analyzer named no cause."""
    if not derived or hits.block is None:
        return []
    from ..rules.analyzers import WEIGHED

    start, _ = hits.block
    end = start + max(d.report_end for d in derived)
    return [(start, end + 1, WEIGHED.get(hits.signature.analyzer, frozenset()), {d.signature.rule for d in derived})]


def drop_weighed(by_rule: dict[str, list[SignatureHits]], weighed) -> None:
    """Takes from `by_rule` the hits of a weighed rule the analyzer did not name whose every line lies
    inside its report."""
    for first, end, rules, named in weighed:
        for rule_id in rules - named:
            if rule_id not in by_rule:
                continue
            kept = [h for h in by_rule[rule_id] if not h.evidence or not all(first <= e.line < end for e in h.evidence)]
            if kept:
                by_rule[rule_id] = kept
            else:
                del by_rule[rule_id]
