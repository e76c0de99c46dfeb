"""The real x-transformers on the GPU: 1.30.1 with a bf16 model raises SDPA's mixed-dtype error
(lucidrains/x-transformers#254) word for word as the tracer on --device cuda predicts it; 1.30.2
runs, and traces clean. Installed by pip from PyPI, or from ATTN_DOCTOR_WHEELHOUSE offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from attn_doctor.tracing.runs.launch import run_child

RUN = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from xt_factory import build
model, tokens = build()
model, tokens = model.cuda(), tokens.cuda()
try:
    with torch.no_grad():
        model(tokens)
    torch.cuda.synchronize()
    print(json.dumps(None))
except RuntimeError as exc:
    print(json.dumps(str(exc).splitlines()[0]))
"""


def _real_error(root, site):
    env = dict(os.environ, PYTHONPATH=site)
    proc = subprocess.run([sys.executable, "-c", RUN, str(root)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-1500:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _traced(root, site, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", site)
    return run_child("trace", {"target": str(root / "xt_factory.py") + ":build", "device": "cuda"},
                     python=sys.executable, timeout=300, cwd=str(root))


def test_x_transformers_1_30_1_fails_on_the_gpu_as_traced(x_transformers_installs, monkeypatch):
    root, dirs = x_transformers_installs
    real = _real_error(root, dirs["1.30.1"])
    assert real == ("Expected query, key, and value to have the same dtype, but got query.dtype: float "
                    "key.dtype: float and value.dtype: c10::BFloat16 instead.")
    report = _traced(root, dirs["1.30.1"], monkeypatch)
    assert report["status"] == "ok" and report["device"] == "cuda", report.get("error")
    (finding,) = report["findings"]
    assert finding["id"] == "AD601" and finding["kernel_message"] == real


def test_x_transformers_1_30_2_runs_on_the_gpu_and_traces_clean(x_transformers_installs, monkeypatch):
    root, dirs = x_transformers_installs
    assert _real_error(root, dirs["1.30.2"]) is None
    report = _traced(root, dirs["1.30.2"], monkeypatch)
    assert report["status"] == "ok" and report["findings"] == [], report.get("error") or report["findings"]
