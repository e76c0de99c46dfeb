"""Machine-readable output: versioned envelopes (`attn-doctor/report`, `/explain`, `/fleet`, each
version 1) and their JSON Schemas, generated from the structs they are encoded from."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from ..report import Report


def to_json(envelope: Any) -> bytes:
    return msgspec.json.format(msgspec.json.encode(envelope), indent=2) + b"\n"


def plain_json(document: Any) -> bytes:
    """A document of plain dicts and lists (trace's report, fix's plan), indented; a value JSON
    has no type for (a path, a dtype) as its str()."""
    return (json.dumps(document, indent=2, default=str) + "\n").encode()


def json_schema(struct: type, name: str, title: str) -> dict:
    schema = msgspec.json.schema(struct)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://attn-doctor.dev/schemas/{name}-1.json"
    schema["title"] = f"{title}, schema version 1"
    return schema


def report_schema() -> dict:
    """The JSON Schema of `check --json`."""
    return json_schema(Report, "report", "attn-doctor report")
