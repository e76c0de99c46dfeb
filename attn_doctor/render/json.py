"""Machine-readable output: versioned envelopes (`attn-doctor/report`, `/explain`, `/fleet`,
`/rules`, `/trace`, `/fix`, each version 1: `schema`, `schema_version`, `tool`, `created`, then the
payload) and the JSON Schemas of those encoded from structs, generated here from the structs of
every command (attn_doctor/schemas ships them all, and encodes them: to_json)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from ..report import Report, Tool, now
from ..rules.model import Rule
from ..schemas import json_schema, to_json


def plain_json(document: Any) -> bytes:
    """A document of plain dicts and lists (trace's report, fix's plan), indented; a value JSON
    has no type for (a path, a dtype) as its str()."""
    return (json.dumps(document, indent=2, default=str) + "\n").encode()


def report_schema() -> dict:
    """The JSON Schema of `check --json`."""
    return json_schema(Report, "report", "attn-doctor report")


class RulesReport(msgspec.Struct, kw_only=True):
    """`rules --json` (every rule) and `rules ID --json` (that one)."""
    schema_: str = msgspec.field(default="attn-doctor/rules", name="schema")
    schema_version: int = 1
    tool: Tool = msgspec.field(default_factory=Tool)
    created: str = ""
    rules: list[Rule] = []


def rules_json(rules: list) -> bytes:
    return to_json(RulesReport(created=now(), rules=list(rules)))


def rules_schema() -> dict:
    """The JSON Schema of `rules --json`."""
    return json_schema(RulesReport, "rules", "attn-doctor rules")


def generated(name: str):
    """The schema generated from the structs NAME is encoded from; None where it is written by hand."""
    if name == "report":
        return report_schema()
    if name == "explain":
        from ..explaining.report import explain_schema

        return explain_schema()
    if name == "fleet":
        from ..fleet.aggregate import fleet_schema

        return fleet_schema()
    if name == "rules":
        return rules_schema()
    return None
