"""The machine-readable report: a versioned envelope (schema `attn-doctor/report`, version 1)."""

from __future__ import annotations

import msgspec

from ..report import Report


def to_json(report: Report) -> bytes:
    return msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n"


def report_schema() -> dict:
    """The JSON Schema of the report, generated from the structs it is encoded from."""
    schema = msgspec.json.schema(Report)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://attn-doctor.dev/schemas/report-1.json"
    schema["title"] = "attn-doctor report, schema version 1"
    return schema
