"""The four real patterns, as toy models: the finding names the right file, line and operand.
On meta and the CPU with CUDA's autocast policy emulated; on a GPU (the `cuda` parameters, in the
GPU suite) under real CUDA autocast, which is how the emulation stays honest."""
import os

import pytest

from conftest import CUDA, TOYS, marker_line, toy_target

DEVICES = ["meta", "cpu", CUDA]


def only(report, rule="AD601"):
    # A toy that calls flash_attn_func is traced on two paths where flash-attn does not import; on
    # cuda the installed one is the verdict, so the flash-attn path's finding is under routes.
    routes = {r["name"]: r for r in report.get("routes") or ()}
    findings = report["findings"]
    if "standin" in routes:
        assert routes["standin"]["status"] == "ok", routes["standin"]["error"]
        findings = routes["standin"]["findings"]
    else:
        assert report["status"] == "ok", report["error"]
    ids = [f["id"] for f in findings]
    assert ids == [rule], findings
    return findings[0]


def lines_of(chain, op=None):
    return [(e["line"], e["op"]) for e in chain if op is None or e["op"] == op]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast", ["bf16", "fp16"])
def test_var_scale_mul_and_normalize_under_autocast(trace, device, autocast):
    r = trace(toy_target("var_toy.py", "build_fp32"), autocast=autocast, device=device)
    f = only(r)
    half = {"bf16": "bfloat16", "fp16": "float16"}[autocast]
    assert f["severity"] == "error"
    assert f["kernel_message"] == "FlashAttention only support fp16 and bf16 data type"
    assert f["sink"]["name"] == "flash_attn_func"
    assert f["sink"]["file"] == os.path.join(TOYS, "var_toy.py")
    assert f["sink"]["line"] == marker_line("var_toy.py", "SINK")
    assert (f["sink"]["q"]["dtype"], f["sink"]["k"]["dtype"], f["sink"]["v"]["dtype"]) == ("float32", "float32", half)
    assert f["count"] == 2 and f["module_paths"] == ["blocks.0.attn", "blocks.1.attn"]
    # CUDA autocast runs F.normalize in fp32 (emulated here), then the fp32 scale_mul parameter.
    q_line, k_line = marker_line("var_toy.py", "PROMOTE-Q"), marker_line("var_toy.py", "PROMOTE-K")
    assert (q_line, "F.normalize") in lines_of(f["chain"]) and (k_line, "F.normalize") in lines_of(f["chain"])
    mul = [e for e in f["chain"] if e["op"] == "Tensor.mul"][0]
    assert mul["line"] == q_line and mul["operand"] == "scale_mul"
    assert mul["operand_origin"]["kind"] == "parameter"
    assert mul["operand_origin"]["name"] == "blocks.0.attn.scale_mul_1H11"
    assert mul["operand_origin"]["via"]["line"] == marker_line("var_toy.py", "ORIGIN")
    assert f["chain"][0]["kind"] == "autocast"
    assert "scale_mul" in f["message"] and "var_toy.py:%d" % q_line in f["message"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("factory,half", [("build_bf16_fp32_scale", "bfloat16"), ("build_fp16_fp32_scale", "float16")])
def test_var_half_model_with_fp32_parameter_no_autocast(trace, device, factory, half):
    f = only(trace(toy_target("var_toy.py", factory), device=device))
    assert f["kernel_message"] == "FlashAttention only support fp16 and bf16 data type"
    assert [e["line"] for e in f["chain"]] == [marker_line("var_toy.py", "PROMOTE-Q")]
    assert f["chain"][0]["kind"] == "promotion" and f["chain"][0]["feeds"] == ["q"]
    assert f["chain"][0]["operand_origin"]["name"] == "blocks.0.attn.scale_mul_1H11"
    assert f["sink"]["k"]["dtype"] == half


def flash_path(report):
    """The flash-attn path's report: the stand-in route where there are two, else the report."""
    routes = {r["name"]: r for r in report.get("routes") or ()}
    return routes.get("standin", report)


@pytest.mark.parametrize("device", DEVICES)
def test_var_pure_half_model_is_clean(trace, device):
    for factory in ("build_bf16", "build_fp16"):
        r = flash_path(trace(toy_target("var_toy.py", factory), device=device))
        assert r["findings"] == [] and r["summary"]["sinks"] == 2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast,half", [("fp16", "float16"), ("bf16", "bfloat16")])
def test_rwkv7_addcmul_with_fp32_k_a_under_autocast(trace, device, autocast, half):
    f = only(trace(toy_target("rwkv7_toy.py", "build_flash"), autocast=autocast, device=device))
    assert f["kernel_message"] == "query and key must have the same dtype"
    assert f["sink"]["line"] == marker_line("rwkv7_toy.py", "SINK-FLASH")
    (entry,) = f["chain"]
    assert entry["op"] == "Tensor.addcmul" and entry["line"] == marker_line("rwkv7_toy.py", "PROMOTE")
    assert entry["source"] == "k = k.addcmul(k * (a - 1), self.k_a)  # PROMOTE"
    assert entry["operand"] == "layers.0.k_a" and entry["operand_origin"]["kind"] == "parameter"
    assert entry["feeds"] == ["k"]
    assert f["sink"]["q"]["dtype"] == half and f["sink"]["k"]["dtype"] == "float32"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("factory", ["build_sdpa_bf16", "build_sdpa_fp16"])
def test_rwkv7_half_model_sdpa_mixed_dtypes(trace, device, factory):
    f = only(trace(toy_target("rwkv7_toy.py", factory), device=device))
    assert f["kernel_message"].startswith("Expected query, key, and value to have the same dtype, but got query.dtype: c10::")
    assert "key.dtype: float and" in f["kernel_message"]
    assert f["sink"]["line"] == marker_line("rwkv7_toy.py", "SINK-SDPA")
    assert f["chain"][0]["line"] == marker_line("rwkv7_toy.py", "PROMOTE")


def test_rwkv7_clean_when_k_a_follows_the_model(trace):
    assert trace(toy_target("rwkv7_toy.py", "build_sdpa_bf16_clean"))["findings"] == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("factory,half", [("build_bf16", "bfloat16"), ("build_fp16", "float16")])
def test_rotary_with_autocast_disabled_and_float_table(trace, device, factory, half):
    f = only(trace(toy_target("rotary_toy.py", factory), device=device))
    assert f["sink"]["name"] == "F.scaled_dot_product_attention"
    assert f["sink"]["line"] == marker_line("rotary_toy.py", "SINK-SDPA")
    assert f["sink"]["v"]["dtype"] == half and f["sink"]["q"]["dtype"] == "float32"
    first = f["chain"][0]
    assert first["line"] == marker_line("rotary_toy.py", "PROMOTE") and sorted(first["feeds"]) == ["k", "q"]
    # The fp32 table comes from the .float() a few lines up.
    assert first["operand_origin"]["kind"] == "explicit_cast"
    assert first["operand_origin"]["line"] == marker_line("rotary_toy.py", "ORIGIN")


def test_rotary_fixed_version_is_clean(trace):
    assert trace(toy_target("rotary_toy.py", "build_bf16_fixed"))["findings"] == []


@pytest.mark.parametrize("device", DEVICES)
def test_rotary_under_autocast_sdpa_is_fine_but_flash_is_not(trace, device):
    # CUDA autocast casts SDPA's inputs (KNOWLEDGE 1.1); flash_attn_func gets no such help.
    assert trace(toy_target("rotary_toy.py", "build_fp32"), autocast="bf16", device=device)["findings"] == []
    f = only(trace(toy_target("rotary_toy.py", "build_fp32_flash"), autocast="bf16", device=device))
    assert f["chain"][0]["line"] == marker_line("rotary_toy.py", "PROMOTE")
    assert f["chain"][0]["operand"] == "rotary.inv_freq"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast", ["bf16", "fp16"])
def test_rotary_under_autocast_eager_attention_is_fine(trace, device, autocast):
    # Autocast casts both matmuls of attention written out, so the fp32 q/k and the half v meet in
    # one dtype: no kernel raises (Gemma2's eager default under fp16 autocast, transformers 5.24).
    r = trace(toy_target("rotary_toy.py", "build_fp32_eager"), autocast=autocast, device=device)
    assert r["status"] == "ok" and r["findings"] == [], r["findings"]
    assert {s["name"] for s in r["sinks"]} == {"eager attention (inline)"}
    half = {"bf16": "bfloat16", "fp16": "float16"}[autocast]
    assert {s["effective_dtypes"]["q"] for s in r["sinks"]} == {half}
    # what the model hands over: q from the fp32 rotary table, v from the autocast linear
    assert {(s["inputs"]["q"]["dtype"], s["inputs"]["v"]["dtype"]) for s in r["sinks"]} == {("float32", half)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast", ["bf16", "fp16"])
def test_torch_attention_modules_under_autocast_are_fine(trace, device, autocast):
    # nn.MultiheadAttention's fp32 projections under autocast: each linear inside is cast, as on the GPU.
    r = trace(toy_target("mha_toy.py", "build_fp32"), autocast=autocast, device=device)
    assert r["status"] == "ok" and r["findings"] == [], (r["error"], r["findings"])
    half = {"bf16": "bfloat16", "fp16": "float16"}[autocast]
    assert [s["effective_dtypes"]["q"] for s in r["sinks"]] == [half, half]


@pytest.mark.parametrize("device", DEVICES)
def test_rotary_without_autocast_eager_attention_raises(trace, device):
    # Without autocast the same mix reaches the second matmul as it is: fp32 weights, bf16 v.
    f = only(trace(toy_target("rotary_toy.py", "build_bf16_eager"), device=device), rule="AD601")
    assert f["sink"]["line"] == marker_line("rotary_toy.py", "SINK-EAGER")
    assert f["kernel_message"] == "expected scalar type Float but found BFloat16"
    assert f["chain"][0]["line"] == marker_line("rotary_toy.py", "PROMOTE")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast", ["bf16", "fp16"])
def test_cuda_autocast_layer_norm_promotion_is_emulated(trace, device, autocast):
    f = only(trace(toy_target("norm_toy.py", "build_fp32"), autocast=autocast, device=device))
    assert [(e["line"], e["kind"]) for e in f["chain"]] == [
        (marker_line("norm_toy.py", "PROMOTE-Q"), "autocast"), (marker_line("norm_toy.py", "PROMOTE-K"), "autocast")]
    assert f["chain"][0]["op"] == "F.layer_norm" and f["chain"][0]["module_path"] == "0.q_norm"


def test_layer_norm_promotion_needs_the_cuda_policy(trace):
    # Without the CUDA policy (emulation off), nothing promotes: CPU/meta alone would miss it.
    r = trace(toy_target("norm_toy.py", "build_fp32"), autocast="bf16", emulate_autocast=False)
    assert r["autocast_mode"] == "cuda"
    assert r["findings"] == [] or all(f["id"] != "AD601" for f in r["findings"])
    assert trace(toy_target("norm_toy.py", "build_bf16"))["findings"] == []
    assert trace(toy_target("norm_toy.py", "build_fp32_sdpa"), autocast="bf16")["findings"] == []


def test_one_run_finds_every_bad_site(trace):
    # Both layers are reported although the first bad sink would have raised on the GPU.
    r = trace(toy_target("rwkv7_toy.py", "build_flash"), autocast="fp16")
    assert [s["ok"] for s in r["sinks"]] == [False, False]
    assert r["findings"][0]["count"] == 2 and r["findings"][0]["continued_with"] == "float16"


def test_train_mode_runs_backward(trace):
    r = trace(toy_target("rwkv7_toy.py", "build_flash"), autocast="fp16", device="cpu", train=True)
    assert r["status"] == "ok" and r["train"] is True
    assert r["findings"][0]["id"] == "AD601"
