"""The messages of the 2026 stack that issue texts showed explain did not know, each to its family's
rule (the corpus, tests/corpus/held_out_4a.toml and held_out_4b.toml, holds the real threads)."""

from __future__ import annotations

import pytest

import attn_doctor


def first(text: str) -> str:
    report = attn_doctor.explain(text)
    likely = [m for m in report.matches if m.likelihood != "unlikely" and not m.harmless]
    return likely[0].rule if likely else ""


@pytest.mark.parametrize("text, rule", [
    ("ValueError: Unsupported CUDA architecture: sm75", "AD110"),
    ("FATAL: FlashAttention requires building with sm version sm80-sm90, but was built for < 8.0!", "AD110"),
    ("ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")", "AD111"),
    ("AssertionError: Device compute capability 8.9 or higher required for FP8 execution.", "AD111"),
    ("RuntimeError: Cannot find a build variant for this system in kernels-community/flash-attn2", "AD312"),
    ("    torch212-cxx11-cu126-x86_64-linux: Torch version (2.12) does not match environment Torch version (2.13)", "AD312"),
    ("RuntimeError: /te/transformer_engine/common/fused_attn/fused_attn_f16_arbitrary_seqlen.cu:227 in function operator(): "
     "cuDNN Error: [cudnn_frontend] Error: No execution plans support the graph.", "AD324"),
    ("ValueError: No dot product attention backend is available for the provided inputs.", "AD320"),
    ("UserWarning: Flash Efficient attention on Current AMD GPU is still experimental. Enable it with "
     "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1.", "AD258"),
    ("AssertionError: One of GPU archs of ['gfx908'] is invalid or not supported by Flash-Attention", "AD112"),
    ("torch.AcceleratorError: HIP error: invalid device function", "AD105"),
    ("`ckF` is not supported because:\n    device=mps (supported: {'cuda'})", "AD259"),
])
def test_each_family_is_named_first(text, rule):
    assert first(text) == rule


def test_xformers_built_for_the_same_torch_is_not_a_build_mismatch():
    # "built for: PyTorch 2.0.1 ... (you have 2.0.1)" on a Mac: the versions match, there is no CUDA
    text = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
            "    PyTorch 2.0.1 with CUDA 1106 (you have 2.0.1)\n    Python  3.10.11 (you have 3.10.12)")
    report = attn_doctor.explain(text)
    by_rule = {m.rule: m for m in report.matches}
    assert first(text) == "AD259"
    assert by_rule["AD312"].likelihood == "unlikely" and "same torch on both sides (2.0.1)" in by_rule["AD312"].likelihood_reason
    # the CUDA build of the same release against its CPU-only build: the torch is what to change
    other = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
             "    PyTorch 2.1.2+cu121 with CUDA 1201 (you have 2.1.2+cpu)")
    assert first(other) == "AD106"
    reason = {m.rule: m for m in attn_doctor.explain(other).matches}["AD312"]
    assert reason.likelihood == "unlikely" and "CPU-only build (2.1.2+cpu)" in reason.likelihood_reason
    # another release with CUDA on both sides stays a build for another torch
    assert first("xFormers was built for:\n    PyTorch 2.1.2+cu121 with CUDA 1201 (you have 2.2.0+cu121)") == "AD312"


def test_flash_attns_dtype_message_offers_both_causes_and_what_decides():
    bare = attn_doctor.explain("RuntimeError: FlashAttention only support fp16 and bf16 data type")
    assert [m.rule for m in bare.matches] == ["AD604", "AD601"]
    assert all(m.likelihood == "possible" for m in bare.matches)
    assert all("attn-doctor trace MODULE:FACTORY --autocast bf16" in " ".join(m.notes) for m in bare.matches)
    in_bf16 = attn_doctor.explain("trainer: mixed_precision bf16, torch_dtype=torch.bfloat16\n"
                                  "RuntimeError: FlashAttention only support fp16 and bf16 data type")
    assert [m.rule for m in in_bf16.matches] == ["AD601", "AD604"]
