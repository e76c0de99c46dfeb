"""fix --trace MODULE:FACTORY: the tracer's patches for the user's model as fix steps — a diff with
--dry-run, applied with a copy in the journal, verified by tracing the model again in a fresh
process, undone by --undo. Real files, the real CLI, the real tracer."""

from __future__ import annotations

import json
import shutil

from .conftest import REPO, cli

TOYS = REPO / "tests" / "trace" / "toys"
FAST = ("--no-smoke", "--no-sample")  # the check's own GPU smoke tests and sample: not what is tested here


def _model(tmp_path, toy="var_toy.py"):
    src = tmp_path / "model.py"
    shutil.copyfile(TOYS / toy, src)
    return src


def test_dry_run_shows_the_patch_and_changes_nothing(tmp_path):
    src = _model(tmp_path)
    before = src.read_bytes()
    proc = cli("fix", "--trace", "model.py:build_fp32", "--autocast", "bf16", "--dry-run", *FAST, state=tmp_path / "s",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "AD601 patch" in proc.stdout and "+        q, k = q.to(v.dtype), k.to(v.dtype)" in proc.stdout
    assert src.read_bytes() == before and not list(tmp_path.glob("*.patch"))


def test_yes_applies_verifies_by_tracing_again_and_undo_restores(tmp_path):
    src = _model(tmp_path)
    before = src.read_bytes()
    state = tmp_path / "s"
    proc = cli("fix", "--trace", "model.py:build_fp32", "--autocast", "bf16", "--yes", "--json", *FAST, state=state,
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (action,) = [a for a in doc["actions"] if a["rule"] == "AD601"]
    assert action["kind"] == "patch" and action["status"] == "verified", action
    assert action["reason"] == "traced again: no AD601 at the patched lines"
    assert "q, k = q.to(v.dtype), k.to(v.dtype)  # attn-doctor AD601" in src.read_text()
    # the patched model traces clean, as a user would check it
    trace = cli("trace", "model.py:build_fp32", "--autocast", "bf16", "--json", state=state, cwd=tmp_path)
    assert trace.returncode == 0 and json.loads(trace.stdout)["findings"] == []
    undo = cli("fix", "--undo", state=state, cwd=tmp_path)
    assert undo.returncode == 0, undo.stderr
    assert src.read_bytes() == before


def test_findings_without_a_patch_give_no_patch_step(tmp_path):
    _model(tmp_path)
    proc = cli("fix", "--trace", "model.py:build_fp32", "--dry-run", "--json", *FAST, state=tmp_path / "s", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not [a for a in json.loads(proc.stdout)["actions"] if a["kind"] == "patch"]


def test_trace_options_without_trace_and_bad_targets_are_one_line(tmp_path):
    _model(tmp_path)
    for args, code, needle in [
        (("--autocast", "bf16"), 2, "--autocast go with --trace MODULE:FACTORY"),
        (("--trace", "model.py:build_fp32", "--from-report", str(REPO / "tests/fixtures/facts/h100.json")), 2,
         "does not go with --from-report"),
        (("--trace", "model.py:nope"), 2, "--trace model.py:nope: "),
        (("--trace", "model.py:build_fp32", "-a", "=1"), 2, "KEY=VALUE"),
    ]:
        proc = cli("fix", *args, "--dry-run", *FAST, state=tmp_path / "s", cwd=tmp_path)
        assert proc.returncode == code, (args, proc.stdout, proc.stderr)
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
