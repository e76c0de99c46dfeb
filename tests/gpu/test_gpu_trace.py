"""The tracer on --device cuda (real CUDA autocast), the emulation against it, and SDPA's real
messages: the CPU suite's assumptions, checked on the hardware."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attn_doctor.trace import policy
from attn_doctor.trace.api import trace

from .conftest import marker_line, toy_target

HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _autocasts():
    major = torch.cuda.get_device_capability(0)[0] if torch.cuda.is_available() else 0
    return ["fp16"] + (["bf16"] if major >= 8 else [])


@pytest.mark.parametrize("autocast", _autocasts())
def test_var_pattern_under_real_cuda_autocast(autocast):
    r = trace(toy_target("var_toy.py", "build_fp32"), autocast=autocast, device="cuda")
    f = [x for x in r["findings"] if x["id"] == "AD601"][0]
    assert f["kernel_message"] == "FlashAttention only support fp16 and bf16 data type"
    assert f["sink"]["line"] == marker_line("var_toy.py", "SINK")
    lines = {(e["line"], e["op"]) for e in f["chain"]}
    assert (marker_line("var_toy.py", "PROMOTE-Q"), "F.normalize") in lines
    assert (marker_line("var_toy.py", "PROMOTE-K"), "F.normalize") in lines


@pytest.mark.parametrize("autocast", _autocasts())
def test_rwkv7_pattern_under_real_cuda_autocast(autocast):
    r = trace(toy_target("rwkv7_toy.py", "build_flash"), autocast=autocast, device="cuda")
    f = [x for x in r["findings"] if x["id"] == "AD601"][0]
    assert f["kernel_message"] == "query and key must have the same dtype"
    (entry,) = f["chain"]
    assert entry["op"] == "Tensor.addcmul" and entry["line"] == marker_line("rwkv7_toy.py", "PROMOTE")


def test_healthy_model_is_clean_on_cuda():
    for autocast in _autocasts():
        r = trace(toy_target("healthy_toy.py", "build"), autocast=autocast, device="cuda")
        assert r["findings"] == [], r["findings"]


def _sample_inputs(name, dtype):
    x = torch.randn(4, 8, device="cuda", dtype=dtype)
    if name in ("layer_norm",):
        return lambda: F.layer_norm(x, (8,))
    if name == "group_norm":
        return lambda: F.group_norm(x.view(4, 8, 1), 2)
    if name == "normalize":
        return lambda: F.normalize(x, dim=-1)
    if name == "softmax":
        return lambda: torch.softmax(x, -1)
    if name == "log_softmax":
        return lambda: torch.log_softmax(x, -1)
    if name in ("exp", "log", "rsqrt", "reciprocal", "sinh", "cosh", "tan", "expm1", "log1p", "log2", "log10"):
        return lambda: getattr(torch, name)(x.abs() + 1)
    if name == "pow":
        return lambda: torch.pow(x, 2)
    if name in ("sum", "cumsum", "prod", "cumprod"):
        return (lambda: getattr(torch, name)(x, -1)) if name != "sum" else (lambda: torch.sum(x))
    if name in ("matmul", "mm"):
        return lambda: torch.matmul(x, x.t())
    if name == "linear":
        w = torch.randn(8, 8, device="cuda", dtype=torch.float32)
        return lambda: F.linear(x, w)
    if name == "addcmul":
        return lambda: torch.addcmul(x, x, torch.randn(4, 8, device="cuda", dtype=torch.float32))
    return None


OPS = [
    "layer_norm", "group_norm", "normalize", "softmax", "log_softmax", "exp", "log", "rsqrt", "reciprocal",
    "pow", "sum", "cumsum", "prod", "matmul", "mm", "linear", "addcmul",
]


@pytest.mark.parametrize("autocast", _autocasts())
@pytest.mark.parametrize("op", OPS)
def test_emulated_policy_matches_real_cuda_autocast(op, autocast):
    # The CPU/meta trace trusts policy.py; here each op it models runs under real CUDA autocast.
    half = HALF[autocast]
    fn = _sample_inputs(op, half)
    assert fn is not None
    with torch.autocast("cuda", dtype=half):
        out = fn()
    real = str(out.dtype).replace("torch.", "")
    expected = policy.expected_output(op, str(half).replace("torch.", ""), str(half).replace("torch.", ""))
    if op == "addcmul":  # promote: the widest input wins (here an fp32 operand)
        expected = "float32"
    assert real == expected, f"{op} under {autocast} autocast: real CUDA gives {real}, the emulation says {expected}"


def test_sdpa_mixed_dtypes_real_message():
    q = torch.randn(1, 2, 16, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 2, 16, 64, device="cuda", dtype=torch.float32)
    with pytest.raises(RuntimeError) as err:
        F.scaled_dot_product_attention(q, k, q)
    assert str(err.value).startswith(
        "Expected query, key, and value to have the same dtype, but got query.dtype: c10::BFloat16 key.dtype: float and value.dtype: c10::BFloat16 instead."
    )


def test_sdpa_forced_flash_with_fp32_real_message():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 16, 64, device="cuda")
    with pytest.warns(UserWarning) as caught, pytest.raises(RuntimeError) as err:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, q, q)
    assert "No available kernel" in str(err.value)
    text = " ".join(str(w.message) for w in caught)
    assert "Flash attention kernel not used because" in text
    assert "Expected query, key and value to all be of dtype: {Half, BFloat16}" in text


def test_sdpa_head_dim_512_real_message():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 16, 512, device="cuda", dtype=torch.bfloat16)
    with pytest.warns(UserWarning) as caught, pytest.raises(RuntimeError):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, q, q)
    text = " ".join(str(w.message) for w in caught)
    assert "Flash attention requires q,k,v to have the same last dimension and to be less than or equal to 256" in text
