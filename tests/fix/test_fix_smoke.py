"""fix runs the GPU smoke tests once: its verification reuses the plan's results while nothing they
depend on changed, and runs them again when something did. No GPU here: the GPU boundary is the
recorded-facts approach of tests/test_gpu_child.py (probe_gpus and the GPU child script, which
counts its smoke runs); the torch probe, the check, the plan, the config edit and the verification
are the real ones, in-process through the real `fix` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from .conftest import CONFIGS

COUNTING_CHILD = Path(__file__).resolve().parents[1] / "helpers" / "counting_gpu_child.py"


@pytest.fixture
def gpu(tmp_path, monkeypatch):
    """A fake GPU at the hardware boundary; returns the list of smoke runs so far."""
    import attn_doctor.probes as probes
    from attn_doctor.facts import Gpu, GpuInfo
    from attn_doctor.probes import keys

    runs = tmp_path / "smoke-runs"
    runs.write_text("")
    monkeypatch.setenv("SMOKE_RUNS", str(runs))
    monkeypatch.setenv("ATTN_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ATTN_DOCTOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(probes, "GPU_CHILD_SCRIPT", COUNTING_CHILD)
    # attn-doctor's own files are part of the key; other work on this tree must not change it mid-test.
    stamp = keys.doctor_stamp()
    monkeypatch.setattr(keys, "doctor_stamp", lambda: stamp)
    monkeypatch.setattr(probes, "probe_gpus", lambda: GpuInfo(source="nvml", driver_version="580.159.04", cuda_driver_version="13.0",
                                                             devices=[Gpu(index=0, name="Fake GPU", capability="9.0", memory_mib=81559)]))
    return lambda: runs.read_text().split()


def fix(*args):
    from attn_doctor.cli import app

    result = CliRunner().invoke(app, ["fix", "--yes", "--json", "--no-sample", *args], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip().startswith("{") else result.output


def config(tmp_path) -> str:
    # attn_implementation flash_attention_2 without flash-attn: a config edit to verify
    path = tmp_path / "config.json"
    shutil.copyfile(CONFIGS / "model_config.json", path)
    return str(path)


def test_fix_runs_the_smoke_tests_once_even_with_no_cache(gpu, tmp_path):
    from attn_doctor.core import run_check
    from attn_doctor.options import CheckOptions

    run_check(CheckOptions(sample=False))  # an earlier check stored its smoke results
    assert gpu() == ["main"]
    code, doc = fix("--config", config(tmp_path), "--no-cache")
    assert code == 0, doc
    assert [a["status"] for a in doc["actions"]] == ["verified"]
    # --no-cache: the plan ran them afresh; the verification reused those (the edit changed no shape).
    assert gpu() == ["main", "main"]


def test_a_crashed_smoke_group_is_not_crashed_again_by_the_verification(gpu, tmp_path, monkeypatch):
    monkeypatch.setenv("SMOKE_CRASH", "1")  # never stored in the cache: only this run's plan can lend it
    code, doc = fix("--config", config(tmp_path))
    assert [a["status"] for a in doc["actions"]] == ["verified"], doc
    assert gpu() == ["main"]


def test_fix_no_smoke_runs_none(gpu, tmp_path):
    code, doc = fix("--config", config(tmp_path), "--no-smoke")
    assert code == 0 and [a["status"] for a in doc["actions"]] == ["verified"], doc
    assert gpu() == []


def test_the_verification_runs_them_again_when_a_package_or_a_shape_changed(gpu, tmp_path, wheelhouse):
    """The smoke key holds the installed code and the shapes asked: a fix that changed either is
    tested afresh. The target is a real venv whose torch is this one's (a .pth), so that a package
    can be installed into it."""
    from attn_doctor.core import run_check
    from attn_doctor.options import CheckOptions

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    here = next(p for p in sys.path if p.endswith("site-packages") and (Path(p) / "torch").is_dir())
    (site / "outer.pth").write_text(here + "\n")
    cfg = tmp_path / "model.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "torch_dtype": "bfloat16"}))
    options = CheckOptions(python=str(venv), sample=False, configs=(str(cfg),))

    first = run_check(options)
    assert first.facts.smoke.status == "ok" and gpu() == ["main"]
    assert run_check(options, previous=first).facts.smoke.cached == first.created  # nothing changed: reused
    assert gpu() == ["main"]

    uv = shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv")
    subprocess.run([uv, "pip", "install", "-q", "--offline", "--python", str(venv / "bin" / "python"),
                    str(wheelhouse / "x_transformers-1.30.1-py3-none-any.whl")], check=True, timeout=120)
    after_install = run_check(options, previous=first)
    assert after_install.facts.smoke.cached is None and gpu() == ["main", "main"]

    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "torch_dtype": "float16"}))
    after_edit = run_check(options, previous=after_install)
    assert after_edit.facts.smoke.cached is None and gpu() == ["main", "main", "main"]
