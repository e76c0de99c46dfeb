"""The gates a CI job relies on: `check --quick` exits as the full check does on what it knows,
`--gpu` takes a GPU's name as nvidia-smi and the driver print it, and a CPU-only torch judged for
a GPU named with --gpu is an error. Real subprocesses of the CLI on real interpreters."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from attn_doctor.gpus import lookup

try:
    TORCH = importlib.metadata.version("torch")
except importlib.metadata.PackageNotFoundError:
    TORCH = None


def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=timeout)


def report(*args: str) -> tuple[int, dict]:
    proc = run("check", "--json", "--no-cache", *args)
    assert proc.returncode in (0, 1, 3), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def fired(doc: dict) -> dict[str, tuple[str, str]]:
    return {r["rule"]: (r["status"], r["message"]) for r in doc["results"] if r["status"] in ("error", "warning")}


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """A real venv without torch (and without pip): what a training venv is before torch goes in."""
    path = tmp_path_factory.mktemp("gates") / "venv"
    venv.create(path, with_pip=False, symlinks=True)
    return path / "bin" / "python"


def test_quick_without_torch_exits_as_the_full_check_with_the_same_words(bare):
    quick_code, quick = report("--quick", "-p", str(bare))
    full_code, full = report("--no-sample", "-p", str(bare))
    assert quick["facts"]["torch"]["status"] == full["facts"]["torch"]["status"] == "missing"
    assert quick_code == full_code == 1
    assert fired(quick)["AD001"] == fired(full)["AD001"] == ("error", f"torch is not installed for {bare}; nothing here can run attention kernels.")
    # what --quick knows, it judges as the full check does: the same errors and warnings
    assert fired(quick) == fired(full)


@pytest.mark.skipif(TORCH is None or "+cpu" not in TORCH, reason="needs this venv's torch to be a CPU-only build (CI's)")
@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_a_cpu_only_torch_judged_for_a_named_gpu_is_an_error(quick):
    code, doc = report(*(["--quick"] if quick else ["--no-sample"]), "-p", sys.executable, "--gpu", "t4")
    assert code == doc["exit_code"] == 1
    status, message = fired(doc)["AD106"]
    assert status == "error"
    assert message == (f"torch {TORCH} is a CPU-only build: it has no kernels for Tesla T4 (named with --gpu) or any "
                       "other GPU, so nothing the job runs in this environment will run on the GPU.")


@pytest.mark.parametrize("name, model, capability", [
    ("Tesla V100-SXM2-16GB", "Tesla V100", "7.0"),
    ("Tesla V100-PCIE-32GB", "Tesla V100", "7.0"),
    ("NVIDIA A100-SXM4-80GB", "A100", "8.0"),
    ("NVIDIA A100-PCIE-40GB", "A100", "8.0"),
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "A100", "8.0"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "8.9"),
    ("nvidia h100 80gb hbm3", "H100", "9.0"),
    ("NVIDIA H100 80GB HBM3", "H100", "9.0"),
    ("NVIDIA H100 NVL", "H100", "9.0"),
    ("NVIDIA GH200 480GB", "GH200", "9.0"),
    ("T4", "Tesla T4", "7.5"),
    ("tesla t4", "Tesla T4", "7.5"),
])
def test_gpu_names_as_nvidia_smi_prints_them(name, model, capability):
    gpu = lookup(name)
    assert (gpu.name, gpu.capability, gpu.given) == (model, capability, name)


def test_the_name_nvidia_smi_prints_is_taken_on_the_command_line_with_its_memory(bare):
    proc = run("check", "--quick", "-p", str(bare), "--gpu", "Tesla V100-SXM2-16GB")
    assert proc.returncode == 1, proc.stderr  # AD001: no torch in the venv; not a usage error
    line = next(line for line in proc.stdout.splitlines() if line.startswith("[") and "GPU:" in line)
    assert "Tesla V100 (sm70, no native bf16) — assumed (--gpu Tesla V100-SXM2-16GB): capability 7.0" in line
    assert "16 GB as named" in line and "32 GB" not in line  # the catalogue's V100 is the 32 GB variant


def test_a_name_it_cannot_place_gets_each_suggestion_once(bare):
    # A800 is not in the catalogue; its name once drew "A100, A100, A100"
    proc = run("check", "--quick", "-p", str(bare), "--gpu", "NVIDIA A800-SXM4-80GB")
    assert proc.returncode == 2
    said = re.search(r"did you mean (.*?)\?", proc.stderr)
    assert said, proc.stderr
    names = said.group(1).split(", ")
    assert "A100" in names and len(names) == len(set(names)), names
