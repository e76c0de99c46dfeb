"""The explain report: a versioned envelope (schema `attn-doctor/explain`, version 1), generated
from these structs (`attn-doctor explain --schema` prints its JSON Schema)."""

from __future__ import annotations

from typing import Literal, Optional

import msgspec

from .. import __version__
from ..rules.model import Remedy

SCHEMA_ID = "attn-doctor/explain"
SCHEMA_VERSION = 1

Likelihood = Literal["confirmed", "possible", "unlikely"]


class _S(msgspec.Struct, kw_only=True, omit_defaults=False):
    pass


class EvidenceLine(_S, kw_only=True):
    line: int  # 1-based line number in the input
    text: str  # the normalised line (ANSI colours and log prefixes removed), or the joined wrapped lines


class LiveCheck(_S, kw_only=True):
    """--check: the rule evaluated on this environment's live facts."""

    status: Literal["present", "absent", "unknown"]
    message: Optional[str] = None
    reason: Optional[str] = None


class Match(_S, kw_only=True):
    rule: str
    name: str
    area: str
    severity: Literal["error", "warning", "info"]
    cause: Optional[str] = None
    cause_label: str = ""
    harmless: bool = False
    title: str
    message: Optional[str] = None  # the rule's message, when the log gave every field it needs
    explanation: str = ""
    occurrences: int = 0
    evidence: list[EvidenceLine] = []
    captures: dict[str, str] = {}  # what the signatures captured (symbol, dtypes, head dim, ...), plus derived facts
    notes: list[str] = []
    likelihood: Likelihood = "possible"
    likelihood_reason: str = ""
    priority: int = 0  # the rule's signature priority: a root cause ranks before the symptoms after it
    remedies: list[Remedy] = []
    commands: list[Optional[str]] = []  # each remedy as a command line, where it has one
    links: list[str] = []
    live: Optional[LiveCheck] = None
    # no family matched: the known case of the corpus this text resembles, whose cause is offered
    # as possible
    resembles: Optional["Resemblance"] = None
    # the message is one a library's source raises (the message catalogue): where, and the family
    # its check states
    site: Optional["Site"] = None
    # the rule of the finding this match is another reading of: the same lines, a message several
    # causes give where the input does not show which (counted once, with that finding)
    alternative_to: Optional[str] = None


class Site(_S, kw_only=True):
    library: str  # the library and the releases the catalogue read ("flash-attn 2.8.4")
    at: list[str]  # "library release file:line" of the sites that raise the message
    family: str  # the cause family the site's own check states
    line: str  # the input's line
    complete: bool  # every part of the message was in the line (else a line cut short)


class Resemblance(_S, kw_only=True):
    case: str  # the corpus case's id
    source: str  # where it was reported (owner/repo#N)
    family: str  # its failure family
    score: float  # similarity, 0-100
    line: str  # the input's line
    example: str  # the case's line (normalised)


class Candidate(_S, kw_only=True):
    rule: str
    title: str
    score: float
    line: str  # the input line it resembles
    example: str  # the known message it resembles


class InputInfo(_S, kw_only=True):
    source: Literal["text", "file", "stdin"]
    path: Optional[str] = None
    bytes: int = 0
    lines: int = 0
    engine: str = ""  # aho-corasick | regex
    seconds: float = 0.0


class Summary(_S, kw_only=True):
    error: int = 0
    warning: int = 0
    info: int = 0
    harmless: int = 0
    unlikely: int = 0


class Tool(_S, kw_only=True):
    name: str = "attn-doctor"
    version: str = __version__


class ExplainReport(_S, kw_only=True):
    schema_: str = msgspec.field(default=SCHEMA_ID, name="schema")
    schema_version: int = SCHEMA_VERSION
    tool: Tool = msgspec.field(default_factory=Tool)
    created: str = ""
    command: str = "explain"
    input: InputInfo
    versions: dict[str, str] = {}  # what the log shows: package versions, CUDA, glibc, GPUs
    matches: list[Match] = []
    candidates: list[Candidate] = []  # only when nothing matched: the closest known messages
    notes: list[str] = []
    checked: bool = False  # --check ran the live probes
    summary: Summary = msgspec.field(default_factory=Summary)
    exit_code: int = 0


def mark_alternatives(matches: list[Match]) -> list[Match]:
    """Matches in their order, each merely possible one that reads the same lines as a finding
    before it marked as that finding's other reading (`alternative_to`): one line is one problem,
    whichever of its causes the input leaves open."""
    first: dict[frozenset, str] = {}
    for m in matches:
        if m.harmless or m.likelihood == "unlikely" or not m.evidence:
            continue
        lines = frozenset(e.line for e in m.evidence)
        if lines in first and m.likelihood == "possible":
            m.alternative_to = first[lines]
        else:
            first.setdefault(lines, m.rule)
    return matches


def summarise(matches: list[Match]) -> Summary:
    s = Summary()
    for m in matches:
        if m.harmless:
            s.harmless += 1
        elif m.likelihood == "unlikely":
            s.unlikely += 1
        elif m.alternative_to is None:
            setattr(s, m.severity, getattr(s, m.severity) + 1)
    return s


def explain_schema() -> dict:
    from ..schemas import json_schema

    return json_schema(ExplainReport, "explain", "attn-doctor explain report")
