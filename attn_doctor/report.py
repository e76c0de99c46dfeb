"""What a run produces: a result per rule, and the versioned report envelope around them.

The JSON report (`--json`) is `msgspec.json.encode(Report)`; its JSON Schema is generated from
these structs and shipped as attn_doctor/schemas/report.schema.json (a test keeps them in sync).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

import msgspec

from . import __version__
from .schemas import now  # noqa: F401 - `created`, as every envelope has it
from .facts import Facts
from .rules.model import Remedy

SCHEMA_ID = "attn-doctor/report"
SCHEMA_VERSION = 1

Status = Literal["pass", "error", "warning", "info", "skipped", "crashed"]
STATUS_ORDER = {"crashed": 0, "error": 1, "warning": 2, "info": 3, "skipped": 4, "pass": 5}


class Result(msgspec.Struct, kw_only=True):
    rule: str  # AD301
    name: str  # flash-attn-undefined-symbol
    area: str
    status: Status
    title: str
    message: Optional[str] = None  # what the rule found; for a pass, what holds
    evidence: dict[str, Any] = {}  # the facts it used
    remedies: list[Remedy] = []
    reason: Optional[str] = None  # why it was skipped
    traceback: Optional[str] = None  # when the check crashed
    links: list[str] = []


class Summary(msgspec.Struct, kw_only=True):
    error: int = 0
    warning: int = 0
    info: int = 0
    passed: int = 0
    skipped: int = 0
    crashed: int = 0
    probes_failed: int = 0


class Tool(msgspec.Struct, kw_only=True):
    name: str = "attn-doctor"
    version: str = __version__


class Report(msgspec.Struct, kw_only=True):
    schema_: str = msgspec.field(default=SCHEMA_ID, name="schema")
    schema_version: int = SCHEMA_VERSION
    tool: Tool = msgspec.field(default_factory=Tool)
    created: str = ""
    command: str = "check"
    source: Literal["probed", "facts-file"] = "probed"
    facts: Facts = msgspec.field(default_factory=Facts)
    results: list[Result] = []
    summary: Summary = msgspec.field(default_factory=Summary)
    exit_code: int = 0


def summarise(results: list[Result], facts: Facts) -> Summary:
    summary = Summary()
    for result in results:
        if result.status == "pass":
            summary.passed += 1
        else:
            setattr(summary, result.status, getattr(summary, result.status) + 1)
    summary.probes_failed = sum(1 for p in facts.probes if p.status in ("failed", "timeout"))
    return summary


def make_report(facts: Facts, results: list[Result], fail_on: str = "error", source: str = "probed") -> Report:
    """The report of one check: its results in rule order, counted, and its exit code."""
    results.sort(key=lambda r: r.rule)
    summary = summarise(results, facts)
    return Report(
        created=now(),
        source=source,
        facts=facts,
        results=results,
        summary=summary,
        exit_code=exit_code(summary, fail_on),
    )


# Exit codes (documented in the README and `attn-doctor --help`).
EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_PROBE_FAILED = 3


def exit_code(summary: Summary, fail_on: str = "error") -> int:
    """0 clean; 1 errors (or warnings with fail_on=warning); 3 a probe could not run or a check crashed."""
    if summary.error or (fail_on == "warning" and summary.warning):
        return EXIT_FINDINGS
    if summary.probes_failed or summary.crashed:
        return EXIT_PROBE_FAILED
    return EXIT_OK
