"""Fuzzing `check --from-report`: the report loader, then everything a loaded report goes through
(the rules, the human and JSON renderers). Bad input is a FactsFileError with a one-line message;
anything else that escapes would be `internal error` (exit 3) for the user."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from attn_doctor.core import diagnose
from attn_doctor.gather import FactsFileError, load_facts_file
from attn_doctor.render.human import render
from attn_doctor.schemas import to_json
from attn_doctor.rules.loader import load_recipes

from attn_doctor.facts import Facts

from .conftest import fuzz_settings
from .inert import HOSTILE, assert_inert, rendered
from .strategies import SCALARS, dumps, json_values

FACTS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
RECIPES = load_recipes()


def _report(name: str) -> dict:
    facts = load_facts_file(FACTS_DIR / f"{name}.json")
    return json.loads(to_json(diagnose(facts, RECIPES, source="facts-file")))


BASES = {name: _report(name) for name in ("t4", "h100", "dtype-promotion", "flash-attn-undefined-symbol")}


def _paths(doc, prefix=()):
    """Every path into `doc` (containers and leaves)."""
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _paths(value, prefix + (i,))


PATHS = {name: [p for p in _paths(doc) if p] for name, doc in BASES.items()}


def check_from_report(work: Path, data: bytes, name: str = "report.json") -> None:
    """What `check --from-report FILE` does after parsing its options, minus the exit."""
    path = work / name
    path.write_bytes(data)
    try:
        facts = load_facts_file(path)
    except FactsFileError as exc:
        message = str(exc)
        assert message and "\n" not in message, message
        return
    report = diagnose(facts, RECIPES, source="facts-file")
    crashed = [(r.rule, (r.traceback or "").strip().splitlines()[-1:]) for r in report.results if r.status == "crashed"]
    assert not crashed, crashed  # a check that raises on a report it accepted is a bug too
    for verbose in (False, True):
        render(report, Console(file=io.StringIO(), width=100, highlight=False), verbose=verbose)
    msgspec.json.decode(to_json(report))


@fuzz_settings(150)
@given(st.binary(max_size=2000))
def test_any_bytes(work, data):
    check_from_report(work, data)


@fuzz_settings(150)
@given(json_values(20))
def test_any_json(work, value):
    check_from_report(work, dumps(value).encode())
    check_from_report(work, dumps({"schema": "attn-doctor/report", "schema_version": 1, "facts": value}).encode())


def _set(doc, path, value):
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        if isinstance(target, dict):
            target.pop(path[-1], None)
        else:
            del target[path[-1]]
    else:
        target[path[-1]] = value


_DELETE = object()


@st.composite
def mutated_reports(draw):
    name = draw(st.sampled_from(sorted(BASES)))
    doc = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(1, 6))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        value = draw(st.one_of(st.just(_DELETE), SCALARS, json_values(6)))
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            pass
    return doc


@fuzz_settings(400)
@given(mutated_reports(), st.booleans())
def test_mutated_real_reports(work, doc, bare_facts):
    """Real reports (a T4, an H100, a dtype promotion, an undefined symbol) with values replaced,
    wrong-typed or deleted anywhere: what a hand-edited or foreign report looks like."""
    if bare_facts and isinstance(doc.get("facts"), dict):
        doc = doc["facts"]
    check_from_report(work, dumps(doc).encode())


@pytest.mark.parametrize("depth", [63, 64, 65, 999, 1000, 100_000])
def test_nesting_at_the_bound(work, depth):
    check_from_report(work, ("[" * depth + "]" * depth).encode())
    nested = '{"platform": ' + '{"a": ' * depth + "1" + "}" * depth + "}"
    check_from_report(work, nested.encode())


def _string_paths(doc):
    return [p for p in _paths(doc) if p and isinstance(_get(doc, p), str)]


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def hostile_reports(draw):
    """A real report whose strings (GPU names, versions, paths, errors, what probes printed...)
    are replaced with control characters, escape sequences, bidi controls and markup."""
    name = draw(st.sampled_from(sorted(BASES)))
    doc = copy.deepcopy(BASES[name])
    paths = _string_paths(doc["facts"])
    for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=25, unique=True)):
        _set(doc["facts"], path, draw(HOSTILE))
    return doc


@fuzz_settings(120)
@given(hostile_reports())
def test_outside_text_is_inert_on_a_terminal(work, doc):
    """Whatever a recorded report's strings carry, the terminal gets no escape sequence but the
    doctor's own styles, and no control or bidi character: each is shown escaped (JSON keeps them)."""
    path = work / "hostile.json"
    path.write_bytes(dumps(doc).encode())
    try:
        facts = load_facts_file(path)
    except FactsFileError:
        return
    report = diagnose(facts, RECIPES, source="facts-file")
    for verbose in (False, True):
        assert_inert(lambda console: render(report, console, verbose=verbose))
    assert msgspec.json.decode(to_json(report))["facts"] == msgspec.json.decode(msgspec.json.encode(facts))  # verbatim in JSON


def test_markup_in_outside_text_is_shown_as_it_is():
    doc = copy.deepcopy(BASES["t4"])
    for device in doc["facts"]["gpu"]["devices"] + doc["facts"]["torch"]["devices"]:
        device["name"] = "Tesla T4 [reverse]\x1b]0;pwned\x07\u202eevil"
    facts = msgspec.convert(doc["facts"], Facts)
    out = rendered(lambda console: render(diagnose(facts, RECIPES, source="facts-file"), console), False)
    assert "Tesla T4 [reverse]\\x1b]0;pwned\\u202eevil" in out  # no stray backslash; ESC and U+202E escaped
