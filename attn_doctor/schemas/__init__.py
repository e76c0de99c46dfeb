"""The JSON Schemas of every command's `--json`, shipped as files beside this module
(`NAME.schema.json`) and printed as they are by `attn-doctor COMMAND --schema`, and the encoding
every document shares: the envelope (`schema` "attn-doctor/NAME", `schema_version`, `tool`,
`created`, then the payload), to_json for the documents encoded from msgspec structs (report,
explain, fleet, rules) and json_schema for their schemas, which render.json.generated builds (a
test keeps the shipped files equal to them); trace and fix build plain dicts, and their schema
files are written by hand and checked against real output by the tests.

The bottom of the layering contract (pyproject.toml): it imports nothing of attn-doctor but its
version, and only the standard library at import (the trace child builds its envelope with it in
an interpreter without attn-doctor's dependencies; msgspec is imported where it encodes).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from .. import __version__

HERE = Path(__file__).parent

# command -> its schema file's NAME
COMMANDS = {"check": "report", "explain": "explain", "fleet": "fleet", "rules": "rules", "trace": "trace", "fix": "fix"}


def path(name: str) -> Path:
    return HERE / f"{name}.schema.json"


def schema_bytes(name: str) -> bytes:
    return path(name).read_bytes()


def to_json(document: Any) -> bytes:
    """A struct-encoded document (report, explain, fleet, rules), indented, as `--json` prints it."""
    import msgspec

    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"


def json_schema(struct: type, name: str, title: str) -> dict:
    """The JSON Schema of the documents encoded from `struct`, with their $id and title."""
    import msgspec

    # $schema, $id and the title first, where a reader (and `--schema | head`) looks for them
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"https://attn-doctor.dev/schemas/{name}-1.json",
            "title": f"{title}, schema version 1", **_clean_descriptions(msgspec.json.schema(struct))}


def _clean_descriptions(node: Any) -> Any:
    """Descriptions (the structs' docstrings) as inspect.cleandoc makes them: msgspec 0.23 cleans
    them and 0.22 does not, and the shipped files must not depend on which one is installed."""
    import inspect

    if isinstance(node, dict):
        return {k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _clean_descriptions(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_clean_descriptions(v) for v in node]
    return node


def now() -> str:
    """`created`: UTC, to the second."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def envelope(name: str, payload: dict) -> dict:
    """A plain-dict document (trace, fix) in the envelope every command's JSON has: the four
    envelope keys first, then the payload (its own keys of those names are replaced). Standard
    library only: the trace child builds its report with it in an interpreter without attn-doctor's
    dependencies."""
    head = {"schema": f"attn-doctor/{name}", "schema_version": 1,
            "tool": {"name": "attn-doctor", "version": __version__}, "created": now()}
    return {**head, **{k: v for k, v in payload.items() if k not in head}}
