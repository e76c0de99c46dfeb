"""The real x-transformers: 1.30.1 sends fp32 q/k to SDPA from its rotary code, 1.30.2 is clean
(lucidrains/x-transformers#254, fixed in e527057). Installed from PyPI into a temp folder; skipped
when pip cannot fetch it."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

FACTORY = textwrap.dedent("""
    import torch
    from x_transformers import TransformerWrapper, Decoder

    def build():
        model = TransformerWrapper(num_tokens=256, max_seq_len=64,
                                   attn_layers=Decoder(dim=64, depth=2, heads=4, rotary_xpos=True, attn_flash=True))
        return model.to(torch.bfloat16), torch.zeros(1, 16, dtype=torch.long)
    """)


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    root = tmp_path_factory.mktemp("xt")
    dirs = {}
    for version in ("1.30.1", "1.30.2"):
        target = root / version
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--no-deps", "--target", str(target), "x-transformers==" + version, "einops"],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            pytest.skip("pip could not fetch x-transformers %s: %s" % (version, proc.stderr.strip()[-300:]))
        dirs[version] = str(target)
    (root / "xt_factory.py").write_text(FACTORY)
    return root, dirs


def _trace_with(root, site, monkeypatch):
    from attn_doctor.trace.launch import run_child

    monkeypatch.setenv("PYTHONPATH", site)
    return run_child("trace", {"target": str(root / "xt_factory.py") + ":build"}, python=sys.executable,
                     timeout=300, cwd=str(root))


def test_x_transformers_1_30_1_rotary_finding(installs, monkeypatch):
    root, dirs = installs
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


def test_x_transformers_1_30_2_is_clean(installs, monkeypatch):
    root, dirs = installs
    r = _trace_with(root, dirs["1.30.2"], monkeypatch)
    assert r["status"] == "ok", r.get("error")
    assert r["findings"] == [] and r["summary"]["sinks"] == 2
