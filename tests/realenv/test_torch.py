"""torch itself: the pinned CPU build, the oldest supported release (a CUDA build from PyPI), the
newest (a CUDA build on a machine without a driver: a cluster's login node), and a triton that
is not the one torch pins."""

from __future__ import annotations

import re

import pytest

from .conftest import actions, assert_verdicts, result
from .envs import freeze, installed_version


def test_pinned_cpu_build(realenv, doctor):
    env = realenv.get("torch-2.13-cpu")
    report = doctor("check", "--python", env.python, "--json", env=env).json()
    assert report["facts"]["torch"]["version"] == "2.13.0+cpu" and not report["facts"]["torch"].get("cuda")
    assert_verdicts(report, {"AD101"})
    samples = {s["name"]: s for s in report["facts"]["dtype_path"]["samples"]}
    assert samples["sdpa_block"]["status"] == "ran" and not samples["sdpa_block"].get("reason")

    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env)
    doc = dry.json()
    assert dry.returncode == 0 and doc["actions"] == [] and [m["rule"] for m in doc["manual"]] == ["AD101"], doc


def test_oldest_supported_torch(realenv, doctor):
    # torch 2.0.1 lacks what newer probes use (torch.nn.attention, SDPA's scale=, enable_gqa):
    # every probe must still run.
    env = realenv.get("torch-2.0.1")
    report = doctor("check", "--python", env.python, "--json", env=env).json()
    torch_facts = report["facts"]["torch"]
    assert torch_facts["version"].startswith("2.0.1") and torch_facts["cuda"] == "11.7", torch_facts
    assert report["facts"]["packages"]["triton"]["version"] == "2.0.0"
    assert "triton 2.0.0" in result(report, "AD202")["message"]

    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env).json()
    acts = actions(dry)
    assert set(acts) == {"AD202"} and acts["AD202"]["status"] == "blocked" and "--unsafe" in acts["AD202"]["reason"], dry
    # every sample forward pass that ran finished (the doctor's own code raised nowhere)
    stopped = {s["name"]: s["reason"] for s in report["facts"]["dtype_path"]["samples"] if s["status"] == "ran" and s.get("reason")}
    assert not stopped, stopped
    assert_verdicts(report, {"AD101", "AD202"})


def test_triton_that_torch_does_not_pin_then_fix_and_undo(realenv, doctor, tmp_path):
    env = realenv.get("torch-2.0.1+triton-2.1.0")
    report = doctor("check", "--python", env.python, "--json", "--no-sample", env=env).json()
    assert_verdicts(report, {"AD101", "AD201", "AD202"})
    assert "torch 2.0.1 pins triton 2.0.0, but triton 2.1.0 is installed" in result(report, "AD201")["message"]

    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env).json()
    acts = actions(dry)
    assert acts["AD201"]["status"] == "planned" and acts["AD201"]["argv"][-1] == "triton==2.0.0", dry
    assert acts["AD202"]["status"] == "blocked"  # a torch upgrade: unsafe
    assert installed_version(env.python, "triton") == "2.1.0"

    before = freeze(env.python)
    run = doctor("fix", "--python", env.python, "--yes", "--json", "--no-sample", env=env)
    doc = run.json()
    acts = actions(doc)
    assert acts["AD201"]["status"] == "verified" and acts["AD202"]["status"] == "blocked", doc
    assert run.returncode == 1  # something stayed blocked
    assert installed_version(env.python, "triton") == "2.0.0"
    after_fix = doctor("check", "--python", env.python, "--json", "--no-sample", env=env).json()
    assert_verdicts(after_fix, {"AD101", "AD202"})

    undo = doctor("fix", "--undo", doc["run"], env=env)
    assert undo.returncode == 0, undo.stderr
    assert freeze(env.python) == before


def test_newest_torch_cuda_build_without_a_driver(realenv, doctor):
    env = realenv.get("torch-newest")
    report = doctor("check", "--python", env.python, "--json", env=env).json()
    torch_facts = report["facts"]["torch"]
    assert torch_facts["cuda"] and "+cu" in torch_facts["version"], torch_facts  # PyPI's default build
    assert report["facts"]["imports"]["triton"]["status"] == "ok"  # the pin comes with it
    assert_verdicts(report, {"AD101"})
    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env)
    doc = dry.json()
    assert dry.returncode == 0 and doc["actions"] == [] and [m["rule"] for m in doc["manual"]] == ["AD101"], doc


def test_newest_torch_with_a_triton_it_does_not_pin(realenv, doctor):
    # The pin is read from torch's own Requires-Dist (triton~=3.9.0 for 2.15), so a torch newer than
    # any table still has its triton judged, and the fix reinstalls the pin without touching torch.
    env = realenv.get("torch-newest+triton-3.6.0")
    pin = _torch_triton_pin(env.python)  # from the wheel's own metadata
    assert pin and pin != "3.6.0", f"the newest torch pins triton {pin!r}: pick another triton for this environment"
    report = doctor("check", "--python", env.python, "--json", "--no-sample", env=env).json()
    assert_verdicts(report, {"AD101", "AD201"})
    ad201 = result(report, "AD201")
    assert pin in ad201["message"] and "but triton 3.6.0 is installed" in ad201["message"], ad201
    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env).json()
    acts = actions(dry)
    assert acts["AD201"]["status"] == "planned" and acts["AD201"]["argv"][-1].startswith("triton") \
        and pin in acts["AD201"]["argv"][-1], dry
    assert installed_version(env.python, "triton") == "3.6.0"

    before, torch_before = freeze(env.python), installed_version(env.python, "torch")
    run = doctor("fix", "--python", env.python, "--yes", "--json", "--no-sample", env=env)
    doc = run.json()
    assert actions(doc)["AD201"]["status"] == "verified" and run.returncode == 0, doc
    assert installed_version(env.python, "triton").startswith(pin.rsplit(".", 1)[0])  # ~= pin: same minor
    assert installed_version(env.python, "torch") == torch_before  # torch untouched
    assert_verdicts(doctor("check", "--python", env.python, "--json", "--no-sample", env=env).json(), {"AD101"})
    undo = doctor("fix", "--undo", doc["run"], env=env)
    assert undo.returncode == 0, undo.stderr
    assert freeze(env.python) == before


def _torch_triton_pin(python) -> str:
    import subprocess

    code = ("import importlib.metadata as m\n"
            "print(next((r for r in m.requires('torch') or [] if r.startswith('triton')), ''))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60).stdout
    match = re.search(r"[=~]=\s*([\w.]+)", out)  # triton==3.1.0 up to 2.14, triton~=3.9.0 since
    return match.group(1) if match else ""
