"""The shipped JSON Schema matches the report structs, and real reports validate against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from attn_doctor.core import diagnose
from attn_doctor.render.json import report_schema
from attn_doctor.schemas import to_json
from attn_doctor.rules.fixtures import build_facts
from attn_doctor.rules.loader import load_recipes

SHIPPED = Path(__file__).parents[1] / "attn_doctor" / "schemas" / "report.schema.json"
FIXTURES = Path(__file__).parent / "fixtures" / "facts"


def test_shipped_schema_is_current():
    # Regenerate it with the command in the docstring of tests/test_json_envelopes.py
    assert json.loads(SHIPPED.read_text()) == json.loads(json.dumps(report_schema())), (
        "attn_doctor/schemas/report.schema.json is stale: regenerate it (tests/test_json_envelopes.py says how)"
    )


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_reports_validate(name):
    report = diagnose(build_facts(name, FIXTURES), load_recipes())
    doc = json.loads(to_json(report))
    jsonschema.Draft202012Validator(json.loads(SHIPPED.read_text())).validate(doc)
    assert doc["schema"] == "attn-doctor/report" and doc["schema_version"] == 1


def test_schema_rejects_a_broken_report():
    report = diagnose(build_facts("h100", FIXTURES), load_recipes())
    doc = json.loads(to_json(report))
    doc["results"][0]["status"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(json.loads(SHIPPED.read_text())).validate(doc)
