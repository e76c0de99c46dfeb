"""Every command's --json: one envelope (schema, schema_version, tool, created, then the payload),
valid against the schema the same command prints with --schema, which is the file shipped in the
package. Real subprocesses of the real CLI.

The shipped schemas of the struct-encoded documents are regenerated with:
    python -c "import json; from attn_doctor import schemas as s; from attn_doctor.render.json import generated; [s.path(n).write_text(json.dumps(generated(n), indent=2) + '\\n') for n in ('report', 'explain', 'fleet', 'rules')]"
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from attn_doctor import __version__, schemas

FIXTURES = Path(__file__).parent / "fixtures" / "facts"
ENVELOPE = ["schema", "schema_version", "tool", "created"]


def run(*args, cwd=None, env=None, input=None, timeout=240):
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, input=input, timeout=timeout)


def _valid(command: str, doc: dict) -> None:
    printed = run(command, "--schema")
    assert printed.returncode == 0, printed.stderr
    schema = json.loads(printed.stdout)
    assert schema == json.loads(schemas.path(schemas.COMMANDS[command]).read_text())  # the shipped file
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert list(doc)[:4] == ENVELOPE
    assert doc["schema"] == f"attn-doctor/{schemas.COMMANDS[command]}" and doc["schema_version"] == 1
    assert doc["tool"] == {"name": "attn-doctor", "version": __version__}
    assert doc["created"].endswith("+00:00")


@pytest.fixture(scope="module")
def check_doc(tmp_path_factory):
    proc = run("check", "--quick", "--json")
    return json.loads(proc.stdout)


def test_check(check_doc):
    _valid("check", check_doc)


def test_explain():
    proc = run("explain", "RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "--json")
    assert proc.returncode == 1
    _valid("explain", json.loads(proc.stdout))


def test_rules_list_and_one():
    listed = json.loads(run("rules", "--json").stdout)
    _valid("rules", listed)
    assert len(listed["rules"]) > 50
    one = json.loads(run("rules", "AD301", "--json").stdout)
    _valid("rules", one)
    assert [r["id"] for r in one["rules"]] == ["AD301"]


def test_fleet(tmp_path, check_doc):
    for host in ("a", "b"):
        (tmp_path / f"{host}.json").write_text(json.dumps(check_doc))
    proc = run("fleet", str(tmp_path), "--json")
    _valid("fleet", json.loads(proc.stdout))


def test_fix_plan_history_and_undo(tmp_path):
    env = dict(os.environ, ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    plan = run("fix", "--from-report", str(FIXTURES / "t4.json"),
               "--dry-run", "--json", env=env)
    assert plan.returncode == 0, plan.stderr
    _valid("fix", json.loads(plan.stdout))
    history = run("fix", "--history", "--json", env=env)
    doc = json.loads(history.stdout)
    _valid("fix", doc)
    assert doc["history"] == []


def test_trace(tmp_path):
    (tmp_path / "block.py").write_text(textwrap.dedent("""
        import torch
        import torch.nn.functional as F

        class Block(torch.nn.Module):
            def __init__(self, device=None):
                super().__init__()
                self.qkv = torch.nn.Linear(32, 96, device=device)

            def forward(self, x):
                q, k, v = self.qkv(x).view(2, 8, 3, 2, 16).permute(2, 0, 3, 1, 4)
                return F.scaled_dot_product_attention(q.float(), k, v)

        def build(device="meta"):
            return Block(device).to(torch.bfloat16), torch.randn(2, 8, 32, device=device, dtype=torch.bfloat16)
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    proc = run("trace", "./block.py:build", "--json", cwd=tmp_path, env=env)
    doc = json.loads(proc.stdout)
    _valid("trace", doc)
    assert doc["findings"] and proc.returncode == doc["exit_code"] == 1  # a real finding, validated too
    failed = json.loads(run("trace", "./block.py:nothing_here", "--json", cwd=tmp_path, env=env).stdout or "{}")
    # a usage error is one line on stderr, not a document
    assert failed == {}


def test_the_generated_schemas_are_the_shipped_files():
    from attn_doctor.render.json import generated

    for name in ("report", "explain", "fleet", "rules"):
        assert json.loads(schemas.path(name).read_text()) == json.loads(json.dumps(generated(name))), (
            f"attn_doctor/schemas/{name}.schema.json is stale: regenerate it (this file's docstring says how)")
