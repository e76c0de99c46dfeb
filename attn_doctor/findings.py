"""The findings preflight() judges (results.Finding), made from the reports it gathers: a trace's
(and a forward pass that raised), a check's, a fleet's; and the severity order fail_on compares
them by."""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any, Optional

from .fleet.aggregate import FleetReport
from .report import Report
from .results import Finding, Severity, TraceReport


def from_trace(traced: TraceReport) -> list[Finding]:
    """A trace's findings, each at the attention call it is about, with its fix: the tracer's
    patch line where it has one, else the rule's remedy."""
    findings = []
    for f in traced.findings:
        sink = f.get("sink") or {}
        where = f"{sink.get('file')}:{sink.get('line')}" if sink.get("file") else None
        message = str(f.get("message") or "")
        if f.get("id") == "AD621" and message:
            message += ": training stops there at its first step"  # the model's own raise, met at step one
        findings.append(Finding(source="trace", rule=str(f.get("id")), severity=severity_of(f.get("severity")),
                                title=str(f.get("message") or f.get("id")), message=message,
                                where=where, remedies=_trace_remedies(f, where)))
    return findings


@functools.lru_cache(maxsize=1)
def _recipes():
    from .rules.loader import load_recipes

    return load_recipes()


def _trace_remedies(finding: dict, where: Optional[str]) -> tuple[str, ...]:
    out = []
    patch = str(finding.get("patch") or "")
    added = _first_added(patch)
    if added:
        out.append("at %s: %s (attn-doctor trace --patch writes the diff; attn-doctor fix --trace applies it)" % added)
    try:
        rule = _recipes().get(str(finding.get("id") or ""))
    except Exception:  # noqa: BLE001 - the finding stands without its remedy text
        rule = None
    if finding.get("fix") and not out:
        # the finding's own fix names what to change (the mask, the table, the operand that does not fit)
        out.append(str(finding["fix"]) + (" (at %s)" % where if where else ""))
    if rule is not None and not out:
        out.extend(r.summary for r in rule.remedies[:2])
    return tuple(out)


def _first_added(patch: str) -> Optional[tuple[str, str]]:
    """(file:line, text) of a unified diff's first added line: where the patch changes the code (the
    line a mask is cast at, which need not be the attention call's)."""
    path, number = None, None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip()
            path = path[2:] if path.startswith("b/") else path
        elif line.startswith("@@"):
            m = re.search(r"\+(\d+)", line)
            number = int(m.group(1)) if m else None
        elif number is not None:
            if line.startswith("+"):
                return "%s:%d" % (path, number), line[1:].strip()
            if not line.startswith("-"):
                number += 1
    return None


def forward_crash(report: Optional[TraceReport]) -> Optional[Finding]:
    """The model's own forward pass raised (before attention, or after it): training raises the
    same at its first step, so it is an error, named with the line it raised at. A failure of the
    trace itself (a meta-device limitation, a factory that did not build) is not."""
    error = (report.error or {}) if report is not None else {}
    message = " ".join(str(error.get("message") or "").split())
    if error.get("kind") != "forward" or not message or "meta" in message.lower():
        return None
    if any(f.get("id") == "AD621" for f in report.findings or ()):
        return None  # the trace named the line that raised and the operand: that finding is the crash
    tb = str(error.get("traceback") or "")
    where = _raising_line(tb)
    last = (tb.strip().splitlines() or [""])[-1].strip()
    raised = " ".join(last.split())[:300] if last and not last.startswith("File ") else message
    when = "after reaching attention" if report.status == "partial" else "before reaching attention"
    return Finding(source="trace", rule="trace:forward", severity="error", title="the forward pass raises",
                   message=f"the model's forward pass raised {raised}" + (f" at {where}" if where else "")
                   + f" ({when}): training stops there at its first step", where=where)


def _raising_line(traceback_text: str) -> Optional[str]:
    """file:line of the innermost frame outside torch and attn-doctor: where the model raised."""
    import re

    skip = [os.path.dirname(os.path.abspath(__file__))]
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        skip.append(os.path.dirname(os.path.abspath(torch.__file__)))
    where = None
    for path, line in re.findall(r'File "([^"]+)", line (\d+)', traceback_text):
        if path.startswith("<") or any(path == d or path.startswith(d + os.sep) for d in skip):
            continue
        where = f"{path}:{line}"
    return where


def from_check(report: Report) -> list[Finding]:
    """A check report's findings: what fired, checks that crashed, probes that could not run."""
    from .remedies import command_line

    out = []
    for r in report.results:
        if r.status in ("error", "warning", "info"):
            remedies = tuple(filter(None, (_remedy_text(m, report.facts, command_line) for m in r.remedies)))
            out.append(Finding(source="check", rule=r.rule, severity=r.status, title=r.title,
                               message=r.message or r.title, remedies=remedies))
        elif r.status == "crashed":
            last = (r.traceback or "").strip().splitlines()[-1:]
            out.append(Finding(source="check", rule=r.rule, severity="warning", title=r.title,
                               message=f"the check crashed ({last[0] if last else 'no traceback'}): not judged"))
    for probe in report.facts.probes:
        if probe.status in ("failed", "timeout"):
            out.append(Finding(source="check", rule=f"probe:{probe.name}", severity="warning",
                               title=f"the {probe.name} probe could not run",
                               message=f"the {probe.name} probe {probe.status}: {probe.error or 'no detail'}; what it "
                                       "covers was not judged"))
    return out


def _remedy_text(remedy: Any, facts: Any, command_line: Any) -> Optional[str]:
    from .remedies import edit_line

    try:
        command = command_line(remedy, facts) or edit_line(remedy)
    except Exception:  # noqa: BLE001 - a remedy without a command still has its summary
        command = None
    summary = getattr(remedy, "summary", None) or getattr(remedy, "title", None)
    if summary and command:
        return f"{summary} -- {command}"
    return summary or command


def from_fleet(fleet: FleetReport) -> list[Finding]:
    """A fleet report's findings, each with the ranks it is about: ranks not checked, what fired
    on a group of ranks, ranks that differ from the majority."""
    out = []
    for problem in fleet.problems:
        out.append(Finding(source="fleet", rule=f"fleet:{problem.kind}", severity="warning",
                           title=f"rank {problem.rank} not checked", message=problem.message,
                           ranks=(problem.rank,) if problem.rank is not None else ()))
    for group in fleet.groups:
        ranks = tuple(group.ranks)
        for f in group.findings:
            severity = "warning" if f.status == "crashed" else severity_of(f.status)
            out.append(Finding(source="fleet", rule=f.rule, severity=severity, title=f.name,
                               message=f.message or f.name, ranks=ranks))
        if group.differences:
            diffs = "; ".join(f"{d.path}: {d.value} (majority: {d.majority})" for d in group.differences[:8])
            out.append(Finding(source="fleet", rule="fleet:differs", severity="warning",
                               title="ranks differ from the majority", message=f"differs from the majority: {diffs}",
                               ranks=ranks))
    return out


SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def at_or_above(severity: str, fail_on: str) -> bool:
    return SEVERITY_ORDER.get(severity, 2) <= SEVERITY_ORDER[fail_on]


def fails(findings: list[Finding], fail_on: str) -> bool:
    return any(at_or_above(f.severity, fail_on) for f in findings)


def severity_of(value: Any) -> Severity:
    return value if value in ("error", "warning", "info") else "warning"
