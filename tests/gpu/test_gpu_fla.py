"""fla's states_in_fp32 workaround, as `fix --unsafe` writes it, on the real flash-linear-attention
0.2.2 (whose GSA op passes states_in_fp32=False): the edited module imports next to this torch and
Triton, and GSA's chunk kernel runs forward and backward in bf16 on the GPU with finite results
that agree with the unedited release. The CPU matrix (tests/realenv) can only compile the edited
file: importing fla needs a Triton with a GPU driver. fla from PyPI, or ATTN_DOCTOR_WHEELHOUSE."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from attn_doctor.facts import Facts
from attn_doctor.fix.patches import fla_states_patch

# fla/__init__.py imports its models, which need the transformers of fla's time; the ops do not.
# A bare namespace for `fla` imports fla.ops.* without running it.
RUN = """
import json, sys, types, torch
site = sys.argv[1]
pkg = types.ModuleType("fla"); pkg.__path__ = [site + "/fla"]; sys.modules["fla"] = pkg
from fla.ops.gsa.chunk import chunk_gsa
torch.manual_seed(0)
B, T, H, K, V, M = 1, 128, 2, 64, 64, 16
dev, dt = "cuda", torch.bfloat16
q, k, v = (torch.randn(B, T, H, d, device=dev, dtype=dt).requires_grad_() for d in (K, K, V))
s = torch.randn(B, T, H, M, device=dev, dtype=dt).requires_grad_()
g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, M, device=dev, dtype=torch.float32)).to(dt).requires_grad_()
o, _ = chunk_gsa(q, k, v, s, g)
o.float().sum().backward()
torch.cuda.synchronize()
grads = [t.grad for t in (q, k, v, s, g)]
print(json.dumps({"finite": bool(torch.isfinite(o).all()) and all(bool(torch.isfinite(x).all()) for x in grads),
                  "o": o.float().flatten()[:4096].tolist(), "dtype": str(o.dtype)}))
"""


def _install(target) -> None:
    wheelhouse = os.environ.get("ATTN_DOCTOR_WHEELHOUSE")
    source = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *source, "--no-deps", "--target", str(target),
                           "flash-linear-attention==0.2.2"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip("could not install flash-linear-attention 0.2.2: " + proc.stderr.strip()[-300:])


def _run(site) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, str(site)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fla_states_in_fp32_edit_imports_and_runs_on_the_gpu(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _install(site)
    monkeypatch.setenv("PYTHONPATH", str(site))  # the patch finds fla as the target interpreter would
    facts = Facts()
    facts.platform.python_executable = sys.executable
    path, edited, diff = fla_states_patch(facts)
    assert path == str(site / "fla" / "ops" / "gsa" / "chunk.py") and "+" in diff and "states_in_fp32=True" in diff

    before = _run(site)
    original = open(path, "rb").read()
    with open(path, "wb") as fh:
        fh.write(edited)
    after = _run(site)

    assert before["finite"] and after["finite"] and after["dtype"] == "torch.bfloat16"
    # fp32 states only change rounding: the edited kernel agrees with the release to bf16 precision
    worst = max(abs(a - b) for a, b in zip(before["o"], after["o"]))
    scale = max(abs(a) for a in before["o"]) or 1.0
    assert worst <= 0.05 * scale, (worst, scale)
    assert original != edited
