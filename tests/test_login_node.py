"""The login-node workflow from a machine without a GPU (this one): `check --gpu NAME` judges the job's
GPU without false errors about the doctor's own sample, and `fix --gpu NAME -c CONFIG` plans from the
same judgement: the T4's edits on a T4, FlashAttention-2 kept for an A100, and nothing changed for a
note about an environment that is not the job's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")


def _torch_version() -> str:
    import torch

    return torch.__version__

QLORA = """\
base_model: NousResearch/Llama-3.2-1B  # the job's model
load_in_4bit: true
adapter: qlora
sequence_len: 2048
micro_batch_size: 2
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
bf16: auto
tf32: true
flash_attention: true  # FlashAttention-2 on the A100 partition
"""


def _doctor(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@pytest.mark.skipif(_installed("flash_attn"), reason="flash-attn installed here: the sample runs the real one")
def test_check_gpu_t4_says_nothing_false_about_the_doctors_own_sample():
    proc = _doctor("check", "--gpu", "t4", "--json", "--no-cache")
    report = json.loads(proc.stdout)
    ad605 = next(r for r in report["results"] if r["rule"] == "AD605")
    assert ad605["status"] in ("info", "pass"), ad605
    if ad605["status"] == "info":
        assert ad605["message"].startswith("flash-attn is not installed here (judged with a stand-in): if the job installs it")
        assert "attn-doctor's sample flash_attn_block" in ad605["message"]
    # The doctor's own scratch (its sample, its stand-ins) is never shown; the interpreter it runs in is,
    # and that may itself live under a folder named attn-doctor-* (a CI's venv).
    shown = proc.stdout.replace(sys.prefix, "<venv>").replace(str(Path(sys.executable).parent), "<venv>/bin")
    assert not re.search(r"attn-doctor-(standin-)?[A-Za-z0-9_]{8}\b", shown), shown
    assert "samples.py" not in shown
    # a CPU-only torch here is itself an error for a T4 (AD106, tests/test_gates.py): the environment's, not the sample's
    cpu_only = {"AD106"} if "+cpu" in _torch_version() else set()
    assert not [r for r in report["results"] if r["status"] == "error" and r["rule"] not in cpu_only], \
        [r["rule"] for r in report["results"] if r["status"] == "error"]


def test_fix_gpu_plans_the_t4s_edits_and_keeps_flash_attention_2_for_an_a100(tmp_path):
    config = tmp_path / "qlora.yml"
    config.write_text(QLORA)
    t4 = _doctor("fix", "--gpu", "t4", "-c", str(config), "--dry-run", "--json", "--no-sample")
    plan = json.loads(t4.stdout)
    planned = {a["rule"] for a in plan["actions"]}
    assert {"AD501", "AD502", "AD509"} <= planned, plan["actions"]
    assert config.read_text() == QLORA  # a dry run
    a100 = json.loads(_doctor("fix", "--gpu", "a100", "-c", str(config), "--dry-run", "--json", "--no-sample").stdout)
    assert not [a for a in a100["actions"] if a["rule"] in ("AD502", "AD505")], a100["actions"]
    applied = _doctor("fix", "--gpu", "a100", "-c", str(config), "--yes", "--no-sample")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "flash_attention: true  # FlashAttention-2 on the A100 partition" in config.read_text()


def test_fix_gpu_with_a_report_is_a_usage_error(tmp_path):
    t4 = str(Path(__file__).resolve().parent / "fixtures" / "facts" / "t4.json")
    proc = _doctor("fix", "--gpu", "a100", "--from-report", t4, "--dry-run")
    assert proc.returncode == 2 and "--gpu" in proc.stderr and "Traceback" not in proc.stderr


def test_check_gpu_judges_the_named_gpu_against_the_architectures_torch_was_built_for():
    # the architectures a CUDA build carries are in its binary: read on a machine without a driver too
    # (CI's newest torch, a CUDA build; a V100 is sm_70, which CUDA 13 builds no longer carry)
    import torch

    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    archs = (flags() or "").split() if flags is not None else []
    if not archs:
        pytest.skip("a torch without CUDA (the CPU wheel) carries no GPU architectures")
    run = _doctor("check", "--gpu", "v100", "--json")
    report = json.loads(run.stdout)
    assert report["facts"]["torch"]["arch_list"] == archs
    results = {r["rule"]: r for r in report["results"]}
    ad105 = results["AD105"]
    assert "did not report its compiled architectures" not in (ad105.get("message") or "") + (ad105.get("reason") or "")
    if any(a in ("sm_70", "compute_70") or (a.startswith("compute_") and int(a[8:10]) <= 70) for a in archs):
        assert ad105["status"] == "pass", ad105
    else:
        assert ad105["status"] == "error" and run.returncode == 1, ad105
        assert "sm70" in ad105["message"] and "cu126" in json.dumps(ad105), ad105
