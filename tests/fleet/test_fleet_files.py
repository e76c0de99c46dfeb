"""`attn-doctor fleet` over a folder of real `check --json` reports, in real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jsonschema
import pytest
from fleet_helpers import FACTS, doctor, last_error_lines


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    """Per-node reports written the documented way: check --output DIR/{host}.json -q, in the job log one
    line per error or warning and the summary line, the whole report in the file."""
    src = tmp_path_factory.mktemp("written")
    for name in ("h200", "v100"):
        proc = doctor("check", "--from-report", str(FACTS / f"{name}.json"), "--output", str(src / f"{name}-{{host}}.json"), "-q")
        assert proc.returncode in (0, 1), proc.stderr
        lines = proc.stdout.strip().splitlines()
        report = json.loads(next(src.glob(f"{name}-*.json")).read_text())
        problems = [r for r in report["results"] if r["status"] in ("error", "warning")]
        # the job log is not flooded: one line per problem, by its rule, then the summary
        assert len(lines) == len(problems) + 1 and "(exit code" in lines[-1], proc.stdout
        assert all(any(r["rule"] in line for line in lines[:-1]) for r in problems), proc.stdout
    (written_h200,) = src.glob("h200-*.json")
    (written_v100,) = src.glob("v100-*.json")
    return {"h200": written_h200, "v100": written_v100}


def folder(tmp_path: Path, reports: dict, layout: dict[str, str]) -> Path:
    for name, what in layout.items():
        if what in reports:
            shutil.copy(reports[what], tmp_path / name)
        else:
            (tmp_path / name).write_text(what)
    return tmp_path


def test_corrupt_and_foreign_files_are_named_and_the_rest_aggregated(tmp_path, reports):
    good = reports["h200"].read_text()
    folder(
        tmp_path,
        reports,
        {
            "node01.json": "h200",
            "node02.json": "h200",
            "node03.json": "v100",
            "node04.json": good[: len(good) // 2],  # truncated while the node died
            "node05.json": json.dumps({"schema": "something/else", "schema_version": 1}),
            "notes.txt": "not a report, not a *.json: ignored",
        },
    )
    proc = doctor("fleet", str(tmp_path), "--json")
    doc = json.loads(proc.stdout)
    proc_schema = doctor("fleet", "--schema")
    jsonschema.Draft202012Validator(json.loads(proc_schema.stdout)).validate(doc)
    assert doc["schema"] == "attn-doctor/fleet" and doc["schema_version"] == 1
    unreadable = {Path(p["file"]).name: p["message"] for p in doc["problems"] if p["kind"] == "unreadable"}
    assert set(unreadable) == {"node04.json", "node05.json"}
    assert "not valid JSON" in unreadable["node04.json"]
    assert "something/else" in unreadable["node05.json"]
    groups = doc["groups"]
    assert [g["size"] for g in groups] == [1, 2] and groups[1]["majority"]
    assert [Path(m["file"]).name for m in groups[0]["members"]] == ["node03.json"]
    diffs = {d["path"]: (d["majority"], d["value"]) for d in groups[0]["differences"]}
    assert diffs["facts.gpu.devices[0].name"] == ("NVIDIA H200", "Tesla V100-SXM2-32GB")
    assert diffs["facts.packages.torch.version"][1] == "2.4.1+cu121"
    # v100 has warnings only; the unreadable files make it 3 (the same code `check` uses when a probe could not run).
    assert proc.returncode == doc["exit_code"] == 3

    human = doctor("fleet", str(tmp_path))
    assert human.returncode == 3
    out = human.stdout
    assert "node04.json: unreadable: not valid JSON" in out and "node05.json: unreadable" in out
    # problems, the odd one (by its host name: the files are in -v and --json), the majority
    assert out.index("unreadable") < out.index("differs from the majority") < out.index("agree")
    assert "facts.gpu.devices[0].name: NVIDIA H200 -> Tesla V100-SXM2-32GB" in out


def test_fail_on_warning_and_expect(tmp_path, reports):
    folder(tmp_path, reports, {"a.json": "h200", "b.json": "h200", "c.json": "v100"})
    assert doctor("fleet", str(tmp_path)).returncode == 0  # warnings only
    strict = doctor("fleet", str(tmp_path), "--fail-on", "warning")
    assert strict.returncode == 1
    expect = doctor("fleet", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--expect", "3")
    assert expect.returncode == 3 and "1 of 3 expected reports are missing" in expect.stdout
    same = doctor("fleet", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert same.returncode == 0 and "all identical" in same.stdout


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: None, "no such file or folder"),
        (lambda d: d.mkdir(), "a folder without *.json reports"),
        (lambda d: (d.mkdir(), (d / "x.json").write_text("{")), "no readable report among"),
    ],
)
def test_usage_errors_are_one_line(tmp_path, setup, message):
    target = tmp_path / "reports"
    setup(target)
    proc = doctor("fleet", str(target))
    assert proc.returncode == 2
    lines = last_error_lines(proc.stderr)
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


def test_entries_that_are_not_regular_files_are_skipped_by_name(tmp_path, reports):
    """A FIFO would block the reader forever and /dev/zero never ends, so neither is opened; but a
    report left out without a word makes a fleet look complete when it is not."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    folder(tmp_path, reports, {"node01.json": "h200", "node02.json": "h200"})
    os.mkfifo(tmp_path / "stuck.json")  # nobody ever writes to it
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "gone.json").symlink_to(tmp_path / "deleted-long-ago.json")
    (tmp_path / "old.json").mkdir()
    (tmp_path / "latest.json").symlink_to(tmp_path / "node01.json")  # a link to a report is read (once)

    proc = doctor("fleet", str(tmp_path), "--json", timeout=60)
    doc = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(json.loads(doctor("fleet", "--schema").stdout)).validate(doc)
    skipped = {Path(p["file"]).name: p["message"] for p in doc["problems"] if p["kind"] == "skipped"}
    assert set(skipped) == {"stuck.json", "zero.json", "gone.json", "old.json"}
    assert skipped["stuck.json"].startswith("a FIFO (named pipe), not a regular file")
    assert skipped["zero.json"].startswith("a symbolic link to /dev/zero: a character device")
    assert skipped["gone.json"].startswith("a broken symbolic link")
    assert skipped["old.json"] == "a folder, not a report file"
    assert doc["summary"]["skipped"] == 4 and doc["summary"]["received"] == 2
    # the two reports agree and pass on their own; the view is incomplete, so not 0
    assert proc.returncode == doc["exit_code"] == 3

    human = doctor("fleet", str(tmp_path), timeout=60)
    assert human.returncode == 3
    for name in ("stuck.json", "zero.json", "gone.json", "old.json"):
        assert f"{tmp_path / name}: skipped: " in human.stdout, name
    assert "4 skipped" in human.stdout


def test_a_folder_of_only_unreadable_entries_names_them(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tmp_path / "stuck.json")
    proc = doctor("fleet", str(tmp_path), timeout=60)
    assert proc.returncode == 2
    (line,) = last_error_lines(proc.stderr)
    assert "no readable report among" in line and "stuck.json (a FIFO (named pipe)" in line
