"""Rule fixtures: facts documents each rule must fire on (`trigger`) and must not fire on (`pass`).

A fixture is the name of a recorded facts file (tests/fixtures/facts/NAME.json), or a table
`{ base = "NAME", set = { "dotted.path" = value }, remove = ["dotted.path"] }`. Running the rules
on them is the engine's (attn_doctor/diagnosis/fixtures.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Optional

import msgspec

from ..facts import Facts
from .conditions import _MISSING, lookup
from .model import Fixture, FixtureRef


class FixtureError(Exception):
    pass


def default_fixtures_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "facts"


def _load_json(name: str, directory: Path) -> dict:
    path = directory / f"{name}.json"
    if not path.is_file():
        raise FixtureError(f"no recorded facts fixture {name!r} in {directory}")
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc.get("facts", doc) if doc.get("schema") else doc


def _set(doc: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise FixtureError(f"cannot set {path}: {part} is not a table")
    node[parts[-1]] = copy.deepcopy(value)


def _remove(doc: dict, path: str) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        node = node.get(part, {})
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def build_facts(fixture: Fixture, directory: Optional[Path] = None) -> Facts:
    directory = directory or default_fixtures_dir()
    if isinstance(fixture, str):
        return msgspec.convert(_load_json(fixture, directory), Facts)
    ref: FixtureRef = fixture
    doc = _load_json(ref.base, directory) if ref.base else {}
    for path in ref.remove:
        _remove(doc, path)
    for path, value in ref.set.items():
        _set(doc, path, value)
    try:
        facts = msgspec.convert(doc, Facts)
    except msgspec.ValidationError as exc:
        raise FixtureError(f"fixture {describe(fixture)}: {exc}") from None
    for path, value in ref.set.items():
        # A misspelt path would be dropped silently by the conversion: refuse it instead.
        found = lookup(facts, path)
        if found is _MISSING:
            raise FixtureError(f"fixture {describe(fixture)}: {path} is not a fact")
    return facts


def describe(fixture: Fixture) -> str:
    if isinstance(fixture, str):
        return fixture
    sets = ", ".join(f"{k}={v!r}" for k, v in fixture.set.items())
    return f"{fixture.base or '{}'}[{sets}]"
