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
    (f,) = [f for f in r["findings"] if f["id"] != "AD626"]
    _half_rotary_table(r)
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
    # the promotion is fixed; the rotary table computed in bf16 (its inv_freq buffer cast with the
    # model) is not, in either release
    _half_rotary_table(r)
    assert [f["id"] for f in r["findings"]] == ["AD626"] and r["summary"]["sinks"] == 2 and r["exit_code"] == 0


def _half_rotary_table(r):
    """x-transformers' RotaryEmbedding makes its angles from its inv_freq buffer, which a bf16 model
    casts: measured against float64 at its 64 positions the table is off (AD626 at the cos line),
    naming the buffer and the line that reads it to make the angles."""
    (t,) = [f for f in r["findings"] if f["id"] == "AD626"]
    assert t["severity"] == "warning" and "bfloat16" in t["message"] and "inv_freq" in t["message"]
    places = {(os.path.basename(o["file"]), o.get("source")) for o in t["origins"]}
    assert ("x_transformers.py", "freqs = torch.einsum('i , j -> i j', t.type_as(self.inv_freq), self.inv_freq) / "
                                  "self.interpolation_factor") in places, places
