"""fleet --ray without a cluster: Ray missing, --runtime-env parsing, and what a node sends back
judged as untrusted data. The real cluster is in tests/realenv/test_ray.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fleet_helpers import FACTS, doctor, env, last_error_lines

from attn_doctor.fleet.rayfleet import TASK_ENV, Target, judge, load_runtime_env, RayUsageError, targets, task_runtime_env
from attn_doctor.boundary.inputs import REPORT_MAX_BYTES

T = Target(node="ab" * 28, address="10.0.0.7")


@pytest.fixture(scope="module")
def report_bytes() -> bytes:
    proc = doctor("check", "--from-report", str(FACTS / "h200.json"), "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.encode()


def test_without_ray_one_line_exit_2():
    # Ray made unimportable in the doctor's own process, whatever this environment has
    code = "import sys; sys.modules['ray'] = None; sys.argv = ['attn-doctor', 'fleet', '--ray']; from attn_doctor.cli import entry; entry()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env())
    assert proc.returncode == 2
    assert last_error_lines(proc.stderr) == ["attn-doctor: error: fleet --ray needs Ray in the environment attn-doctor runs in: pip install ray"]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, words", [
    (["fleet", "--ray", "x.json"], "takes no report files"),
    (["fleet", "--per-gpu", "x.json"], "go with --ray"),
    (["fleet", "--ray", "--runtime-env", "[1, 2]"], "a runtime_env is a mapping"),
    (["fleet", "--ray", "--runtime-env", "{env_vars: {A: 1}}"], "env_vars must map names to strings"),
    (["fleet", "--ray", "--runtime-env", "{pip: [unclosed"], "YAML syntax error"),
    (["fleet", "--ray", "--runtime-env", "no/such/runtime_env.yaml"], "no such file"),
])
def test_usage_errors_are_one_line_exit_2(args, words):
    proc = doctor(*args)
    lines = last_error_lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_runtime_env_from_a_yaml_file_with_comments_or_inline_json(tmp_path):
    f = tmp_path / "runtime_env.yaml"
    f.write_text("# verl's workers\npip:\n  - attn-doctor  # the doctor in the job's env\nenv_vars:\n  NCCL_DEBUG: WARN\n")
    assert load_runtime_env(str(f)) == {"pip": ["attn-doctor"], "env_vars": {"NCCL_DEBUG": "WARN"}}
    assert load_runtime_env('{"env_vars": {"A": "1"}}') == {"env_vars": {"A": "1"}}
    assert load_runtime_env(None) is None
    # the task's own variables come first; the user's win where they name the same
    merged = task_runtime_env({"pip": ["x"], "env_vars": {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "0", "A": "1"}})
    assert merged["pip"] == ["x"] and merged["env_vars"]["A"] == "1" and merged["env_vars"]["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] == "0"
    assert task_runtime_env(None) == {"env_vars": TASK_ENV}
    with pytest.raises(RayUsageError, match="a mapping"):
        load_runtime_env("- a\n- b\n")


def test_targets_one_per_alive_node_or_per_gpu():
    nodes = [
        {"NodeID": "b" * 56, "NodeManagerAddress": "10.0.0.2", "Alive": True, "Resources": {"CPU": 8.0, "GPU": 2.0}},
        {"NodeID": "a" * 56, "NodeManagerAddress": "10.0.0.1", "Alive": True, "Resources": {"CPU": 8.0}},
        {"NodeID": "c" * 56, "NodeManagerAddress": "10.0.0.3", "Alive": False, "Resources": {"GPU": 8.0}},
    ]
    assert [(t.address, t.gpu) for t in targets(nodes, per_gpu=False)] == [("10.0.0.1", None), ("10.0.0.2", None)]
    assert [(t.address, t.gpu) for t in targets(nodes, per_gpu=True)] == [("10.0.0.1", None), ("10.0.0.2", 0), ("10.0.0.2", 1)]


def test_a_nodes_report_is_validated_as_a_report_file_is(report_bytes):
    doc, why = judge(T, {"python": "/env/bin/python", "returncode": 0, "stdout": report_bytes, "stderr": ""})
    assert why is None and doc["schema"] == "attn-doctor/report"


@pytest.mark.parametrize("result, words", [
    ("not a dict", "returned str"),
    ({"python": "/x/python", "error": "its check did not finish within 25 s (stopped)"}, "did not finish within 25 s"),
    ({"python": "/x/python", "returncode": 1, "stdout": b"", "stderr": "/x/python: No module named attn_doctor\n"},
     "attn-doctor is not installed in the node's Python (/x/python)"),
    ({"python": "/x/python", "returncode": -9, "stdout": b"", "stderr": "Killed\n"}, "printed no report (exit -9"),
    ({"python": "/x/\npython", "error": "two\nlines"}, "two lines (/x/ python)"),
    ({"python": "/x/python", "returncode": 0, "stdout": "text, not bytes"}, "printed no report"),
    ({"python": "/x/python", "returncode": 0, "stdout": b'{"schema": "someone/else"}'}, "not an attn-doctor report"),
    ({"python": "/x/python", "returncode": 0, "stdout": b"[" * 100 + b"]" * 100}, "not an attn-doctor report (not a JSON object"),
    # deep where the schema leaves values free-form (the tracer's findings): the depth bound holds there
    ({"python": "/x/python", "returncode": 0, "stdout": b'{"schema": "attn-doctor/report", "schema_version": 1, '
      b'"facts": {"dtype_path": {"findings": [{"x": ' + b"[" * 100 + b"]" * 100 + b'}]}}}'}, "nested deeper"),
    ({"python": "/x/python", "returncode": 0, "stdout": b"{" + b" " * REPORT_MAX_BYTES}, "not a report"),
    ({"python": "/x/python", "returncode": 0, "stdout": b'{"schema": "attn-doctor/report", "schema_version": 99}'}, "newer than"),
])
def test_what_a_node_sends_back_is_untrusted(result, words):
    doc, why = judge(T, result)
    assert doc is None and words in why and why.startswith(f"node {T.node[:12]} (10.0.0.7)"), why
    assert "\n" not in why
