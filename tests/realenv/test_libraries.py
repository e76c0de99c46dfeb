"""Attention libraries, as released, next to the pinned CPU torch: x-transformers (AD401),
flash-linear-attention old and current (AD404), fla's states_in_fp32 edit (AD402), an xformers
built for another torch (AD312), FlashAttention 4 on a CPU-only machine."""

from __future__ import annotations

import ast
import hashlib
import subprocess

import pytest
from packaging.version import Version

from .conftest import actions, assert_verdicts, fired, result
from .envs import freeze, installed_version

# ---------------------------------------------------------------- x-transformers


def _rotary_note(report):
    note = result(report, "AD622")
    assert note["status"] == "info" and "x_transformers" in note["message"], note


def test_x_transformers_1_30_1_fires_ad401_and_the_sample_sees_fp32_q_k(realenv, doctor):
    env = realenv.get("x-transformers-1.30.1")
    proc = doctor("check", "--python", env.python, "--json", env=env)
    report = proc.json()
    # AD622: x-transformers' rotary inv_freq buffer is cast with the model, so its angles are computed in
    # the model's half dtype (a library's line: a note)
    assert_verdicts(report, {"AD101", "AD401", "AD622"})
    _rotary_note(report)
    ad401 = result(report, "AD401")
    assert "x-transformers 1.30.1" in ad401["message"]
    # The sample forward pass of the real package finds the promotion itself (KNOWLEDGE 1.1): one cause,
    # one finding, so AD401 (the release, its upgrade) covers it and is as severe as the failure seen.
    seen = [f for f in report["facts"]["dtype_path"]["findings"] if f["id"] == "AD601"]
    assert seen and all(f["sample"] == "x_transformers" and "/x_transformers/" in f["sink"]["file"] for f in seen), seen
    assert ad401["status"] == "error" and ad401["evidence"]["covers"] == "AD601" and proc.returncode == 1, ad401
    assert result(report, "AD601")["reason"] == "the same cause is reported by AD401, more specifically"


def test_x_transformers_1_30_2_is_clean(realenv, doctor):
    env = realenv.get("x-transformers-1.30.2")
    report = doctor("check", "--python", env.python, "--json", env=env).json()
    assert_verdicts(report, {"AD101", "AD622"})
    _rotary_note(report)
    assert {s["name"]: s["status"] for s in report["facts"]["dtype_path"]["samples"]}["x_transformers"] == "ran"


def test_x_transformers_fix_upgrades_verifies_and_undo_restores_pip_freeze(realenv, doctor, tmp_path):
    env = realenv.get("x-transformers-1.30.1")
    patches = tmp_path / "patches"
    patches.mkdir()
    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--patch-dir", patches, env=env)
    acts = actions(dry.json())
    assert dry.returncode == 0 and acts["AD401"]["status"] == "planned", dry.stdout
    argv = acts["AD401"]["argv"]  # uv where fix finds it (the shorter window), else the target's pip
    # the smallest change that fixes: within the installed major (2.x has other APIs and dependencies)
    assert argv in ([str(env.python), "-m", "pip", "install", "--upgrade", "x-transformers>=1.30.2,<2"],
                    [argv[0], "pip", "install", "--python", str(env.python), "--upgrade-package", "x-transformers",
                     "x-transformers>=1.30.2,<2"]), argv
    assert "AD601" not in acts  # the promotion is the release's, which the upgrade fixes: no patch to its files
    assert installed_version(env.python, "x-transformers") == "1.30.1" and not list(patches.iterdir())

    before = freeze(env.python)
    run = doctor("fix", "--python", env.python, "--yes", "--json", "--patch-dir", patches, env=env)
    doc = run.json()
    acts = actions(doc)
    assert acts["AD401"]["status"] == "verified", doc
    assert Version(installed_version(env.python, "x-transformers")) >= Version("1.30.2")
    assert "AD601" not in acts and run.returncode == 0, doc
    assert not list(patches.iterdir())
    after = doctor("check", "--python", env.python, "--json", env=env).json()
    assert not fired(after) & {"AD401", "AD601"}, [(r["rule"], r["message"]) for r in after["results"] if r["rule"] in fired(after)]

    undo = doctor("fix", "--undo", doc["run"], env=env)
    assert undo.returncode == 0, undo.stderr
    assert freeze(env.python) == before
    assert not list(patches.iterdir())


# ---------------------------------------------------------------- flash-linear-attention


def test_old_fla_fires_ad404_then_fix_and_undo(realenv, doctor):
    env = realenv.get("fla-0.2.1")
    report = doctor("check", "--python", env.python, "--json", env=env).json()
    # fla needs triton, which a CPU torch does not bring: the sample cannot build its layer.
    # fla 0.2.1 without triton does not import (AD318, a missing dependency), so its sample fails too
    assert_verdicts(report, {"AD101", "AD404", "AD600", "AD318"})
    assert "flash-linear-attention 0.2.1" in result(report, "AD404")["message"]
    assert "No module named 'triton'" in result(report, "AD600")["message"]

    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env).json()
    assert actions(dry)["AD404"]["argv"][-1] == "flash-linear-attention>=0.2.2"

    before = freeze(env.python)
    run = doctor("fix", "--python", env.python, "--yes", "--json", "--no-sample", env=env)
    doc = run.json()
    assert run.returncode == 0 and actions(doc)["AD404"]["status"] == "verified", doc
    assert Version(installed_version(env.python, "flash-linear-attention")) >= Version("0.2.2")
    assert freeze(env.python) != before  # fla >= 0.3 comes as flash-linear-attention + fla-core

    undo = doctor("fix", "--undo", doc["run"], env=env)
    assert undo.returncode == 0, undo.stderr
    assert freeze(env.python) == before


def test_current_fla(realenv, doctor):
    env = realenv.get("fla-0.6.0")
    report = doctor("check", "--python", env.python, "--json", env=env).json()
    assert report["facts"]["imports"]["fla"]["status"] == "ok"
    assert_verdicts(report, {"AD101", "AD600"})  # its layers need triton, which this CPU torch lacks
    assert "No module named 'triton'" in result(report, "AD600")["message"]
    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env).json()
    assert dry["actions"] == [], dry


def _states_args(source: bytes) -> list:
    """(line, value) of every states_in_fp32= keyword given to chunk_fwd_h."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "chunk_fwd_h":
            found += [(kw.value.lineno, kw.value.value) for kw in node.keywords if kw.arg == "states_in_fp32"]
    return sorted(found)


def test_fla_states_in_fp32_edit_is_applied_compiles_and_undo_restores_the_bytes(realenv, doctor, tmp_path):
    env = realenv.get("fla-0.2.2+triton-2.2.0")
    chunk = env.site_packages() / "fla" / "ops" / "gsa" / "chunk.py"
    original = chunk.read_bytes()
    calls = _states_args(original)
    assert calls and all(value is False for _, value in calls), calls  # the release as published

    report = doctor("check", "--python", env.python, "--json", "--no-sample", env=env, no_uv=True).json()
    # AD003: no pip in this venv and no uv on PATH: the torch upgrade cannot be installed.
    assert_verdicts(report, {"AD003", "AD101", "AD202", "AD318", "AD402"})  # AD318: this triton 2.2.0 does not import
    assert "flash-linear-attention 0.2.2 is installed with triton 2.2.0" in result(report, "AD402")["message"]

    safe = doctor("fix", "--python", env.python, "--yes", "--json", "--no-sample", env=env, no_uv=True).json()
    assert actions(safe)["AD402"]["status"] == "blocked" and "--unsafe" in actions(safe)["AD402"]["reason"]
    assert chunk.read_bytes() == original

    dry = doctor("fix", "--python", env.python, "--unsafe", "--dry-run", "--json", "--no-sample", env=env, no_uv=True).json()
    ad402 = actions(dry)["AD402"]
    assert ad402["kind"] == "patch" and ad402["status"] == "planned" and ad402["files"] == [str(chunk)], dry
    assert ad402["diff"].count("+        states_in_fp32=True") + ad402["diff"].count("+            states_in_fp32=True") == len(calls)
    assert chunk.read_bytes() == original

    run = doctor("fix", "--python", env.python, "--unsafe", "--yes", "--json", "--no-sample", env=env, no_uv=True)
    doc = run.json()
    ad402 = actions(doc)["AD402"]
    # versions are what AD402 judges: a source edit is applied but cannot be verified by a re-check
    assert ad402["status"] == "unverified", doc
    edited = chunk.read_bytes()
    assert _states_args(edited) == [(line, True) for line, _ in calls]
    old_lines, new_lines = original.splitlines(), edited.splitlines()
    assert len(old_lines) == len(new_lines)
    assert [(a, b) for a, b in zip(old_lines, new_lines) if a != b] == [
        (old_lines[line - 1], old_lines[line - 1].replace(b"False", b"True")) for line, _ in calls]
    # The edited module compiles in the environment's Python (importing it needs triton >= 3.0,
    # which is the point of the rule).
    compiled = subprocess.run([str(env.python), "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)",
                               str(chunk), str(tmp_path / "chunk.pyc")], capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr

    undo = doctor("fix", "--undo", doc["run"], env=env, no_uv=True)
    assert undo.returncode == 0, undo.stderr
    assert hashlib.sha256(chunk.read_bytes()).digest() == hashlib.sha256(original).digest()


# ---------------------------------------------------------------- compiled extensions, FA4


def test_xformers_built_for_another_torch(realenv, doctor):
    env = realenv.get("xformers-0.0.35")
    report = doctor("check", "--python", env.python, "--json", "--no-sample", env=env).json()
    assert_verdicts(report, {"AD101", "AD312"})
    message = result(report, "AD312")["message"]
    # the build it expected (its own build record) and the one found
    assert "xformers 0.0.35" in message and "built for torch 2.10.0+cu128" in message, message
    assert "This is torch 2.13.0+cpu" in message, message
    build = report["facts"]["builds"]["xformers"]
    assert build["built_for"]["torch"] == "2.10.0+cu128" and build["extensions"][0]["status"] == "error"

    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env)
    doc = dry.json()
    assert dry.returncode == 0 and doc["actions"] == [] and "AD312" in [m["rule"] for m in doc["manual"]], doc


def test_flash_attn_4_on_a_cpu_only_machine(realenv, doctor):
    env = realenv.get("flash-attn-4")
    report = doctor("check", "--python", env.python, "--json", env=env).json()
    imports = report["facts"]["imports"]
    # the bare flash_attn namespace is not FlashAttention 2; FA4 itself needs triton, absent here
    assert imports["flash_attn"]["status"] == "missing"
    assert imports["flash_attn_4"]["status"] == "error"
    assert imports["flash_attn_4"]["error"]["message"] == "No module named 'triton'"
    assert "No module named 'triton'" in result(report, "AD309")["message"]
    dry = doctor("fix", "--python", env.python, "--dry-run", "--json", "--no-sample", env=env).json()
    assert dry["actions"] == [] and "AD309" in [m["rule"] for m in dry["manual"]], dry
    # torch-c-dlpack-ext (FA4's dependency) ships one library per torch release: only one is loaded
    dlpack = report["facts"]["builds"]["torch-c-dlpack-ext"]["extensions"]
    assert {e["status"] for e in dlpack} == {"unused"}, dlpack  # none for torch 2.13: it needs none
    # the flash_attn sample runs on the stand-in, not on FA4's namespace package
    samples = {s["name"]: s for s in report["facts"]["dtype_path"]["samples"]}
    assert samples["flash_attn_block"]["status"] == "ran" and not samples["flash_attn_block"].get("reason"), samples
    assert_verdicts(report, {"AD101", "AD309"})
