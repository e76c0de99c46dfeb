"""fleet --ray against a real Ray cluster on this host: a head and two worker nodes (three raylets),
one of them with another package set on its PYTHONPATH, one killed during the check.

The nodes share the realenv "ray" environment (attn-doctor and Ray installed there), as the nodes
of a cluster share an image; what differs is what each raylet was started with.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from attn_doctor.fleet.aggregate import fleet_schema

from .raycluster import RayCluster

ODD_TRITON = "3.0.0"


def _odd_folder(root: Path) -> Path:
    """A folder that puts a triton the others lack on the odd node's path (as a site-packages would)."""
    odd = root / "odd-path"
    (odd / "triton").mkdir(parents=True)
    (odd / "triton" / "__init__.py").write_text(f"__version__ = {ODD_TRITON!r}\n")
    info = odd / f"triton-{ODD_TRITON}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: triton\nVersion: {ODD_TRITON}\n")
    (info / "RECORD").write_text("")
    # what each check on this node saw of its environment, written by the check's own interpreter
    (odd / "sitecustomize.py").write_text(
        "import json, os, sys\n"
        "if 'attn_doctor' in sys.orig_argv:\n"
        "    seen = {k: os.environ.get(k) for k in ('CUDA_VISIBLE_DEVICES', 'PYTORCH_CUDA_ALLOC_CONF')}\n"
        f"    with open(os.path.join({str(root)!r}, 'seen-%d.json' % os.getpid()), 'w') as f:\n"
        "        json.dump(seen, f)\n"
    )
    return odd


def _slow_folder(root: Path) -> Path:
    """sitecustomize for the node killed in the last test: while root/slow-flag exists, its check says it
    started (root/slow-started) and sleeps; the other Python processes of the node are left alone.
    The head has it on its path too (a PYTHONPATH of its own would make the slow node differ from
    it), told apart by TEST_RAY_NODE, which no report records."""
    slow = root / "slow-path"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import os, sys, time\n"
        f"flag = {str(root / 'slow-flag')!r}\n"
        "if 'attn_doctor' in sys.orig_argv and os.path.exists(flag) and os.environ.get('TEST_RAY_NODE') == 'slow':\n"
        f"    open({str(root / 'slow-started')!r}, 'w').close()\n"
        "    time.sleep(600)\n"
    )
    return slow


@pytest.fixture(scope="module")
def cluster(realenv, tmp_path_factory):
    env = realenv.get("ray")
    root = tmp_path_factory.mktemp("ray")
    c = RayCluster(env.path, root)
    c.odd_root = root
    try:
        started = time.monotonic()
        slow = str(_slow_folder(root))
        c.start_head(env={"PYTHONPATH": slow, "TEST_RAY_NODE": "head"})
        c.add_node("odd", num_gpus=2, env={"PYTHONPATH": str(_odd_folder(root))})
        c.add_node("slow", env={"PYTHONPATH": slow, "TEST_RAY_NODE": "slow"})
        c.ids = c.node_ids(3)
        c.start_s = time.monotonic() - started
        c.venv = env.path
        yield c
    finally:
        c.stop()
        assert c.processes() == [], "processes of the test cluster left running"


def fleet(c: RayCluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    environ.update(COLUMNS="200", RAY_USAGE_STATS_ENABLED="0")
    # a generous deadline: on two busy cores a Ray worker takes seconds to start
    argv = [str(c.venv / "bin" / "python"), "-m", "attn_doctor", "fleet", "--ray", "--address", c.address, "--timeout", "100", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=environ, stdin=subprocess.DEVNULL)


def test_ray_fleet_names_the_odd_node_out(cluster):
    proc = fleet(cluster, "--quick", "--json")
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(fleet_schema()).validate(doc)  # fleet's own schema, as `fleet --schema` prints it
    assert doc["schema"] == "attn-doctor/fleet" and doc["launcher"] == "ray"
    assert doc["problems"] == [] and doc["summary"]["received"] == 3 and doc["summary"]["expected"] == 3, doc["problems"]
    odd, majority = doc["groups"]
    assert [m["node"] for m in odd["members"]] == [cluster.ids["odd"]]
    assert sorted(m["node"] for m in majority["members"]) == sorted([cluster.ids["head"], cluster.ids["slow"]])
    assert majority["majority"] and not odd["majority"]
    assert odd["key_facts"]["triton"] == ODD_TRITON and "triton" not in majority["key_facts"]
    assert any(d["path"].startswith("facts.packages.triton") for d in odd["differences"]), odd["differences"]

    human = fleet(cluster, "--quick")
    lines = human.stdout.splitlines()
    assert lines[0].startswith("attn-doctor fleet") and "3 checks of 3" in lines[0] and "(ray)" in lines[0], human.stdout
    assert f"node {cluster.ids['odd'][:12]}" in lines[1] and "differs from the majority" in lines[1], human.stdout
    assert "3 of 3 checks reported, 2 distinct configurations" in human.stdout


def test_ray_fleet_per_gpu_and_runtime_env(cluster):
    # The odd node declares 2 GPUs: one check each, each seeing its GPU alone (CUDA_VISIBLE_DEVICES,
    # as recorded by the odd node's sitecustomize in every check it runs); the runtime_env's
    # variables reach the checks.
    runtime_env = cluster.odd_root / "runtime_env.yaml"
    runtime_env.write_text("# the job's runtime_env\nenv_vars:\n  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True\n")
    for old in cluster.odd_root.glob("seen-*.json"):
        old.unlink()
    proc = fleet(cluster, "--quick", "--json", "--per-gpu", "--runtime-env", str(runtime_env))
    doc = json.loads(proc.stdout)
    assert doc["problems"] == [] and doc["summary"]["received"] == 4, (doc["problems"], proc.stderr[-2000:])
    members = [m for g in doc["groups"] for m in g["members"]]
    odd = sorted((m for m in members if m["node"] == cluster.ids["odd"]), key=lambda m: m["local_rank"])
    assert [m["local_rank"] for m in odd] == [0, 1]
    assert all(m["local_rank"] is None for m in members if m["node"] != cluster.ids["odd"])
    assert doc["summary"]["groups"] == 2  # the odd node's two checks agree with each other
    seen = sorted((json.loads(p.read_text()) for p in cluster.odd_root.glob("seen-*.json")), key=lambda s: s["CUDA_VISIBLE_DEVICES"])
    assert [s["CUDA_VISIBLE_DEVICES"] for s in seen] == ["0", "1"], seen
    assert all(s["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True" for s in seen), seen



def test_unreachable_cluster_is_one_line_exit_3(cluster):
    start = time.monotonic()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    argv = [str(cluster.venv / "bin" / "python"), "-m", "attn_doctor", "fleet", "--ray", "--address", "127.0.0.1:9", "--timeout", "5", "--quick"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=environ, stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - start
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("attn-doctor: error:")]
    assert len(errors) == 1 and "127.0.0.1:9" in errors[0] and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert elapsed < 40, elapsed


def test_zz_node_killed_during_the_check_is_named(cluster):
    # Last in this module: it takes a node away. The slow node's check starts and sleeps; the node is
    # killed (its `ray start`, raylet and all); the fleet report names it and the others, in time.
    (cluster.odd_root / "slow-flag").touch()
    timeout = 45
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    environ.update(COLUMNS="200")
    argv = [str(cluster.venv / "bin" / "python"), "-m", "attn_doctor", "fleet", "--ray", "--address", cluster.address, "--quick",
            "--json", "--timeout", str(timeout)]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ, stdin=subprocess.DEVNULL)
    try:
        started = cluster.odd_root / "slow-started"
        while not started.exists():
            assert time.monotonic() - start < timeout, "the slow node's check never started"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        cluster.kill_node("slow")
        out, err = proc.communicate(timeout=timeout + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    elapsed = time.monotonic() - start
    assert elapsed < timeout + 15, elapsed
    assert proc.returncode == 3, err[-2000:]
    doc = json.loads(out)
    assert doc["summary"]["received"] == 2 and doc["summary"]["missing"] == 1
    (problem,) = doc["problems"]
    assert problem["kind"] == "missing" and problem["node"] == cluster.ids["slow"]
    assert f"node {cluster.ids['slow'][:12]}" in problem["message"]
    assert "left the cluster" in problem["message"] or "did not answer" in problem["message"] or "failed" in problem["message"], problem
