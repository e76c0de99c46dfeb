"""The tracer on --device cuda (real CUDA autocast), the emulation against it, and SDPA's real
messages: the CPU suite's assumptions, checked on the hardware."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from attn_doctor.tracing.calls import policy
from attn_doctor.tracing.runs.api import trace

from .conftest import toy_target

HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _autocasts():
    major = torch.cuda.get_device_capability(0)[0] if torch.cuda.is_available() else 0
    return ["fp16"] + (["bf16"] if major >= 8 else [])


def _real_error(toy, factory, autocast=None):
    """Run the toy for real on the GPU (no tracer): the first line of what it raises, or None."""
    import contextlib

    from .conftest import TOYS, load_file

    model, inputs = getattr(load_file(os.path.join(TOYS, toy), "real_" + toy[:-3]), factory)()
    model, inputs = model.cuda(), inputs.cuda()
    ctx = torch.autocast("cuda", dtype=HALF[autocast]) if autocast else contextlib.nullcontext()
    try:
        with ctx, torch.no_grad():
            model(inputs)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return None


@pytest.mark.parametrize("toy,factory", [
    ("rotary_toy.py", "build_bf16"), ("rotary_toy.py", "build_fp16"),
    ("rwkv7_toy.py", "build_sdpa_bf16"), ("rwkv7_toy.py", "build_sdpa_fp16"),
])
def test_traced_kernel_message_is_the_error_the_gpu_raises(toy, factory):
    # The tracer's prediction, word for word, against the real run of the same model on this GPU.
    real = _real_error(toy, factory)
    assert real is not None and real.startswith("Expected query, key, and value to have the same dtype")
    r = trace(toy_target(toy, factory), device="cuda")
    (finding,) = [f for f in r["findings"] if f["id"] == "AD601"]
    assert finding["kernel_message"] == real


def test_traced_eager_attention_message_is_the_error_the_gpu_raises():
    # attention written out: the second matmul meets fp32 weights and a bf16 v
    real = _real_error("rotary_toy.py", "build_bf16_eager")
    assert real == "expected scalar type Float but found BFloat16"
    r = trace(toy_target("rotary_toy.py", "build_bf16_eager"), device="cuda")
    (finding,) = [f for f in r["findings"] if f["id"] == "AD601"]
    assert finding["kernel_message"] == real


@pytest.mark.parametrize("toy,factory,autocast", [
    ("rotary_toy.py", "build_fp32_eager", "bf16"),  # autocast casts both matmuls of eager attention
    ("rotary_toy.py", "build_fp32_eager", "fp16"),
    ("mha_toy.py", "build_fp32", "bf16"), ("mha_toy.py", "build_fp32", "fp16"),  # autocast casts the projections
    ("mha_toy.py", "build_bf16", None),
    ("rotary_toy.py", "build_bf16_fixed", None),   # x-transformers 1.30.2's cast back
    ("rotary_toy.py", "build_fp32", "bf16"),       # autocast casts SDPA's inputs itself
    ("norm_toy.py", "build_fp32_sdpa", "bf16"),    # the fp32 LayerNorm output is cast by SDPA's autocast rule
    ("rwkv7_toy.py", "build_sdpa_bf16_clean", None),
    ("healthy_toy.py", "build", "bf16"), ("healthy_toy.py", "build", "fp16"),
])
def test_what_traces_clean_runs_clean_on_the_gpu(toy, factory, autocast):
    assert _real_error(toy, factory, autocast) is None
    assert trace(toy_target(toy, factory), autocast=autocast, device="cuda")["findings"] == []


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


@pytest.mark.parametrize("autocast", _autocasts())
@pytest.mark.parametrize("arch", ["llama", "gemma2", "gpt_neox", "t5"])
def test_transformers_eager_attention_under_autocast_runs_and_traces_clean(arch, autocast, tmp_path):
    # fp32 weights, eager attention, CUDA autocast: q/k leave the rotary table (or T5's position
    # bias) in fp32 and v in half; autocast casts eager attention's matmuls, so nothing raises. The
    # real forward pass, the trace on cuda and the emulated trace on meta must all say so.
    transformers = pytest.importorskip("transformers")
    from .conftest import HERE, load_file

    hf_configs = load_file(os.path.join(os.path.dirname(HERE), "trace", "hf_configs.py"), "gpu_hf_configs")
    folder = hf_configs.write(tmp_path, arch)
    config = transformers.AutoConfig.from_pretrained(folder)
    auto = transformers.AutoModelForSeq2SeqLM if arch == "t5" else transformers.AutoModelForCausalLM
    model = auto.from_config(config, attn_implementation="eager").float().cuda()
    ids = torch.randint(1, 100, (1, 16), device="cuda")
    with torch.autocast("cuda", dtype=HALF[autocast]), torch.no_grad():
        model(input_ids=ids, **({"decoder_input_ids": ids} if arch == "t5" else {}))
    for device in ("cuda", "meta"):
        r = trace(hf=folder, dtype="fp32", autocast=autocast, attn_implementation="eager", device=device)
        assert r["status"] == "ok" and r["findings"] == [], (device, r.get("error"), r["findings"])
