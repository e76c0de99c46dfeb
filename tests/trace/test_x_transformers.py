"""The real x-transformers: 1.30.1 sends fp32 q/k to SDPA from its rotary code, 1.30.2 is clean
(lucidrains/x-transformers#254, fixed in e527057). Installed from PyPI into a temp folder; skipped
when pip cannot fetch it."""
import os
import sys

import pytest

pytestmark = pytest.mark.slow


def _trace_with(root, site, monkeypatch):
    from attn_doctor.tracing.runs.launch import run_child

    monkeypatch.setenv("PYTHONPATH", site)
    return run_child("trace", {"target": str(root / "xt_factory.py") + ":build"}, python=sys.executable,
                     timeout=300, cwd=str(root))


def test_x_transformers_1_30_1_rotary_finding(x_transformers_installs, monkeypatch):
    root, dirs = x_transformers_installs
    r = _trace_with(root, dirs["1.30.1"], monkeypatch)
    assert r["status"] == "ok", r.get("error")
    (f,) = r["findings"]
    assert f["id"] == "AD601" and f["severity"] == "error"
    assert f["sink"]["name"] == "F.scaled_dot_product_attention"
    assert f["sink"]["file"].endswith(os.path.join("x_transformers", "attend.py"))
    assert (f["sink"]["q"]["dtype"], f["sink"]["k"]["dtype"], f["sink"]["v"]["dtype"]) == (
        "float32", "float32", "bfloat16")
    rotary = [e for e in f["chain"] if e["file"].endswith(os.path.join("x_transformers", "x_transformers.py"))]
    assert rotary, f["chain"]
    sources = [e["source"] for e in rotary]
    assert "t = (t * freqs.cos() * scale) + (rotate_half(t) * freqs.sin() * scale)" in sources
    assert f["count"] == 2


def test_x_transformers_1_30_2_is_clean(x_transformers_installs, monkeypatch):
    root, dirs = x_transformers_installs
    r = _trace_with(root, dirs["1.30.2"], monkeypatch)
    assert r["status"] == "ok", r.get("error")
    assert r["findings"] == [] and r["summary"]["sinks"] == 2
