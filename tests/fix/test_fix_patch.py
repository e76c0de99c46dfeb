"""The tracer's source patch: written as a .patch file; applied to the source only with --apply-patch."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from attn_doctor.tracing.calls.patch import sink_patch

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


# ---------------------------------------------------------------- fla's edit proves itself

FLA_CHUNK = b"""def chunk_gsa_fwd(q, k, v, s, g):
    h = chunk_fwd_h(k=k, v=v, g=g, states_in_fp32=False)
    return h
"""


def _fla_edit_plan(tmp_path):
    from attn_doctor.fix.plan import Action, Plan

    chunk = tmp_path / "site" / "fla" / "ops" / "gsa" / "chunk.py"
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(FLA_CHUNK)
    action = Action(id=1, rule="AD402", kind="patch", summary="states_in_fp32=True", safety="unsafe", files=[str(chunk)],
                    new_bytes={str(chunk): FLA_CHUNK.replace(b"False", b"True")})
    return chunk, Plan(actions=[action], python=sys.executable)


@pytest.mark.parametrize("outcome,status", [
    ("Both operands must be same dtype. Got bf16 and fp32", "rolled-back"),  # what Triton 3.6 said on an H100
    ("", "verified"),
    (None, "unverified"),  # no GPU here
])
def test_fla_edit_is_run_on_the_gpu_and_rolled_back_when_it_fails(tmp_path, outcome, status):
    from attn_doctor.facts import Facts
    from attn_doctor.fix.apply import apply_plan

    chunk, plan = _fla_edit_plan(tmp_path)
    facts = Facts()
    facts.platform.python_executable = sys.executable
    seen = []

    def check_edit(python, fla_dir):
        seen.append((python, fla_dir, chunk.read_bytes()))
        return outcome

    journal = apply_plan(plan, facts, verify=lambda: pytest.fail("no re-check for a source edit"), command=["fix"],
                         patch_dir=tmp_path, root=tmp_path / "state", check_edit=check_edit)
    (action,) = plan.actions
    # the checker ran the edited file, from the fla folder it lives in
    assert seen == [(sys.executable, str(tmp_path / "site" / "fla"), FLA_CHUNK.replace(b"False", b"True"))]
    assert action.status == status, action.reason
    if status == "rolled-back":
        assert chunk.read_bytes() == FLA_CHUNK and "Both operands must be same dtype" in action.reason
        assert journal.data["status"] == "rolled-back"
    else:
        assert chunk.read_bytes() == FLA_CHUNK.replace(b"False", b"True")
    if status == "unverified":
        assert "no GPU here" in action.reason
