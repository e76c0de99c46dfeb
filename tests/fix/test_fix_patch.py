"""The tracer's source patch: written as a .patch file; applied to the source only with --apply-patch."""

from __future__ import annotations

import json
import shutil

from attn_doctor.trace.patch import sink_patch

from .conftest import FACTS, REPO, cli


def _report_with_patch(tmp_path):
    src = tmp_path / "var_model.py"
    shutil.copyfile(REPO / "tests" / "trace" / "toys" / "var_toy.py", src)
    line = next(i for i, l in enumerate(src.read_text().splitlines(), 1) if "# SINK" in l)
    diff = sink_patch(str(src), line, ["flash_attn_func"], {"q": (0, "q"), "k": (1, "k"), "v": (2, "v")},
                      {"q": "float32", "k": "float32", "v": "float16"}, "float16", cwd=str(tmp_path))
    assert diff and diff.startswith("--- a/var_model.py")  # relative to where the trace ran
    report = json.loads((FACTS / "h200.json").read_text())
    facts = report.get("facts", report)
    facts["dtype_path"].update(status="ok", findings=[{
        "id": "AD601", "severity": "error", "sample": "var", "message": "q/k float32 reach flash_attn_func",
        "sink": {"file": str(src), "line": line}, "patch": diff,
    }])
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return src, path


def test_patch_is_written_and_applied_only_with_apply_patch(tmp_path):
    src, report = _report_with_patch(tmp_path)
    original = src.read_bytes()
    state, out = tmp_path / "state", tmp_path / "patches"
    out.mkdir()
    proc = cli("fix", "--from-report", str(report), "--only", "AD601", "--patch-dir", str(out), "--yes", "--json", state=state, cwd=tmp_path)
    action = json.loads(proc.stdout)["actions"][0]
    assert action["status"] == "blocked" and "--apply-patch" in action["reason"]
    assert src.read_bytes() == original
    written = out / "attn-doctor-AD601-var_model.patch"
    assert written.read_text() == action["diff"] and "+        q, k = q.to(v.dtype), k.to(v.dtype)" in written.read_text()

    proc = cli("fix", "--from-report", str(report), "--only", "AD601", "--patch-dir", str(out), "--apply-patch", "--yes", "--json", state=state, cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert doc["actions"][0]["status"] == "unverified", doc  # the tracer judged a sample: said, not claimed
    assert "q, k = q.to(v.dtype), k.to(v.dtype)  # attn-doctor AD601" in src.read_text()
    undo = cli("fix", "--undo", doc["run"], state=state)
    assert undo.returncode == 0 and src.read_bytes() == original
