"""examples/k8s validated with real validators from the registry (tests/realenv/k8s_validate.py runs
in the k8s-validators environment): core kinds strict against Kubernetes' schemas, the PyTorchJob
against the Kubeflow training operator's API models and each pod template against Kubernetes'."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples" / "k8s"


def validate(env, *files: Path) -> list[dict]:
    proc = subprocess.run([str(env.python), str(HERE / "k8s_validate.py"), *map(str, files)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module")
def validators(realenv):
    return realenv.get("k8s-validators")


def test_every_manifest_is_valid(validators):
    files = sorted(EXAMPLES.glob("*.yaml"))
    results = validate(validators, *files)
    assert {(r["kind"], r["name"]) for r in results} == {
        ("Namespace", "attn-doctor"), ("DaemonSet", "attn-doctor-node-check"), ("ConfigMap", "npd-attn-doctor"), ("PyTorchJob", "train-with-preflight"),
    }
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


@pytest.mark.parametrize("file, path, value, words", [
    ("daemonset.yaml", ["spec", "template", "spec", "containers", 0, "readinessProb"], {"exec": {"command": ["true"]}}, "readinessProb"),
    ("daemonset.yaml", ["spec", "template", "spec", "containers", 0, "readinessProbe", "periodSeconds"], "600", "'600' is not of type 'integer'"),
    ("pytorchjob.yaml", ["spec", "pytorchReplicaSpec"], {}, "pytorchReplicaSpec"),
    ("pytorchjob.yaml", ["spec", "pytorchReplicaSpecs", "Worker", "replicas"], "3", "replicas"),
    ("pytorchjob.yaml", ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "comand"], ["x"], "comand"),
])
def test_the_validators_catch_a_broken_manifest(validators, tmp_path, file, path, value, words):
    # the same manifests with one mistake each: what the validation above would have caught
    yaml = YAML()
    docs = list(yaml.load_all((EXAMPLES / file).read_text()))
    doc = next(d for d in docs if d["kind"] in ("DaemonSet", "PyTorchJob"))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    broken = tmp_path / file
    with broken.open("w") as f:
        yaml.dump_all(docs, f)
    bad = [r for r in validate(validators, broken) if not r["ok"]]
    assert len(bad) == 1 and words in bad[0]["error"], bad
