"""torch's kernels' dtypes read from its sources (benchmarks/catalogue/extract_dispatch.py) and what
explain makes of `"NAME" not implemented for 'BFloat16'` with them: a torch kernel a later release
dispatches in that dtype (upgrade torch) against an op no release has it for (run it in float32)."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
from pathlib import Path

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes
from attn_doctor.support import dispatch

ROOT = Path(__file__).resolve().parents[2]
RECIPES = load_recipes()


def _extractor():
    spec = importlib.util.spec_from_file_location("extract_dispatch", ROOT / "benchmarks" / "catalogue" / "extract_dispatch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        path = root / "aten" / "src" / "ATen" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_extractor_reads_each_macros_types_and_the_types_named_beside_it(tmp_path):
    old = _tree(tmp_path / "old", {"native/cuda/Tri.cu": (
        'void f() { AT_DISPATCH_ALL_TYPES_AND2(at::ScalarType::Half, at::ScalarType::Bool, t, "tri_cuda", [&] {\n'
        '  AT_DISPATCH_FLOATING_TYPES(u, "inner_cuda", [&] { g(); }); }); }\n')})
    new = _tree(tmp_path / "new", {
        "Dispatch_v2.h": "#define AT_FLOATING_TYPES c10::kDouble, c10::kFloat\n",
        "native/cuda/Tri.cu": ('void f() { AT_DISPATCH_ALL_TYPES_AND3(kHalf, kBFloat16, kBool, t, "tri_cuda", [&] {}); }\n'
                               'void h() { AT_DISPATCH_V2(t, "v2_cuda", AT_WRAP([&] {}), AT_EXPAND(AT_FLOATING_TYPES), kHalf); }\n'),
        "native/cpu/Op.cpp": 'void k() { AT_DISPATCH_REDUCED_FLOATING_TYPES(t, "op_cpu", [&] {}); }\n'})
    doc = _extractor().table([("1.0", old), ("2.0", new)])
    assert doc["releases"] == ["1.0", "2.0"]
    tri = doc["kernels"]["tri_cuda"]["cuda"]
    assert tri["Half"] == ["1.0", "2.0"] and tri["BFloat16"] == ["2.0"]
    # a dispatch nested in another's lambda is its own, with its own types
    assert doc["kernels"]["inner_cuda"]["cuda"] == {"read": ["1.0"], "Half": [], "BFloat16": []}
    assert doc["kernels"]["v2_cuda"]["cuda"]["Half"] == ["2.0"] and doc["kernels"]["v2_cuda"]["cuda"]["BFloat16"] == []
    assert doc["kernels"]["op_cpu"]["cpu"]["BFloat16"] == ["2.0"]


def test_the_shipped_table_knows_kernels_that_gained_bfloat16():
    assert dispatch.releases_read()[-1] == "2.6.0"
    # triu/tril gained bf16 after 1.13 (pytorch/pytorch#101932); GradScaler's unscale never has it
    assert dispatch.first_release_with("triu_tril_cuda_template", "BFloat16") == "2.6.0"
    assert dispatch.first_release_with("_amp_foreach_non_finite_check_and_unscale_cuda", "BFloat16") is None
    assert dispatch.first_release_with("ms_deform_attn_forward_cuda", "Half") is None  # an extension's
    with gzip.open(dispatch.default_path()) as fh:
        assert len(json.load(fh)["kernels"]) > 1000


def _first(text):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    return next((m for m in report.matches if not m.harmless and m.likelihood != "unlikely"), None)


def test_a_torch_kernel_a_later_release_dispatches_is_an_upgrade_an_extensions_is_float32():
    later = _first("RuntimeError: \"upsample_bilinear2d_out_frame\" not implemented for 'BFloat16'")
    assert later.rule == "AD665" and later.captures["since"] == "2.6.0"
    assert "torch>=2.6.0" in " ".join(r.detail or "" for r in later.remedies) or any("2.6.0" in (r.summary or "") for r in later.remedies)
    never = _first("RuntimeError: \"ms_deform_attn_forward_cuda\" not implemented for 'Half'")
    assert never.rule == "AD269"
    unscale = _first("RuntimeError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'")
    assert unscale.rule != "AD665"


def test_a_damaged_table_is_no_table(tmp_path, monkeypatch):
    for body in (b'{"releases": ["1", "2"], "kernels": {"x_cuda": {"cuda": {"Half": 5}}}}', b"[]", b"not json"):
        path = tmp_path / "t.json.gz"
        path.write_bytes(gzip.compress(body))
        monkeypatch.setattr(dispatch, "default_path", lambda p=path: p)
        dispatch.table.cache_clear()
        try:
            assert dispatch.first_release_with("x_cuda", "Half") is None
        finally:
            dispatch.table.cache_clear()
    monkeypatch.undo()
    dispatch.table.cache_clear()
    assert dispatch.first_release_with("triu_tril_cuda_template", "BFloat16") == "2.6.0"


def test_a_dtype_every_release_read_has_is_not_said_to_be_added_later():
    # Half in triu/tril is in 1.13.1 already: nothing read shows a release that added it
    assert dispatch.first_release_with("triu_tril_cuda_template", "Half") is None


def test_the_extractor_skips_dispatches_in_comments(tmp_path):
    tree = _tree(tmp_path / "t", {"native/cuda/Op.cu": (
        '// AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, t, "commented_cuda", [&] {});\n'
        '/* AT_DISPATCH_FLOATING_TYPES(t, "block_cuda", [&] {}); */\n'
        'void f() { AT_DISPATCH_FLOATING_TYPES(t, "real_cuda", [&] {}); }\n')})
    doc = _extractor().table([("1.0", tree)])
    assert set(doc["kernels"]) == {"real_cuda"}
