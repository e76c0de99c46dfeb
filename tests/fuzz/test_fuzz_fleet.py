"""Fuzzing `attn-doctor fleet`: folders of reports, some real, some mutated (values replaced,
wrong-typed, deleted), some not reports at all, through the loader, the digest, the aggregate and
both renderers (the human one printing nothing of the files but inert text). An unusable file is a named problem (or a FleetUsageError when nothing is
readable); nothing else may raise."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from attn_doctor.fleet.aggregate import to_json
from attn_doctor.fleet.files import FleetUsageError, fleet_from_files
from attn_doctor.render.fleet_human import render_fleet

from .conftest import fuzz_settings
from .strategies import dumps, json_values
from .inert import assert_inert
from .test_fuzz_reports import BASES, hostile_reports, mutated_reports

FILES = st.one_of(
    st.sampled_from(sorted(BASES)).map(lambda name: dumps(BASES[name]).encode()),
    mutated_reports().map(lambda doc: dumps(doc).encode()),
    hostile_reports().map(lambda doc: dumps(doc).encode()),  # strings of controls, escapes, bidi, markup
    json_values(10).map(lambda v: dumps({"schema": "attn-doctor/report", "schema_version": 1, "facts": v}).encode()),
    st.binary(max_size=300),
)


@fuzz_settings(120)
@given(st.lists(FILES, min_size=1, max_size=6), st.one_of(st.none(), st.integers(1, 10)), st.sampled_from(["error", "warning"]))
def test_folders_of_reports(work, files, expect, fail_on):
    folder = Path(tempfile.mkdtemp(dir=work))  # one per example, removed after it
    try:
        for i, data in enumerate(files):
            (folder / f"node{i:02d}.json").write_bytes(data)
        try:
            fleet = fleet_from_files([folder], fail_on=fail_on, expect=expect)
        except FleetUsageError as exc:
            assert "\n" not in str(exc)
            return
        assert fleet.exit_code in (0, 1, 3)
        assert fleet.summary.received + fleet.summary.unreadable == len(files)
        for problem in fleet.problems:
            assert "\n" not in problem.message, problem.message
        assert_inert(lambda console: render_fleet(fleet, console, verbose=True))  # -v prints all the plain one does, and more
        msgspec.json.decode(to_json(fleet))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
