"""No false positives: residual adds under autocast, fp32 log-sum-exp outputs, explicit casts."""
import pytest

from conftest import toy_target


@pytest.mark.parametrize("device", ["meta", "cpu"])
@pytest.mark.parametrize("factory,autocast", [
    ("build_fp32", "bf16"), ("build_fp32", "fp16"), ("build_bf16", None), ("build_fp16", None),
    ("build_fp32_flash", "bf16"), ("build_fp32_flash", "fp16"), ("build_bf16_flash", None),
])
def test_healthy_decoder_has_no_findings(trace, device, factory, autocast):
    r = trace(toy_target("healthy_toy.py", factory), autocast=autocast, device=device)
    assert r["status"] == "ok", r["error"]
    # The flash builds fall back to SDPA without flash_attn: both routes are traced, each clean.
    assert len(r["routes"]) == (2 if "flash" in factory else 1)
    assert all(route["summary"]["sinks"] == 2 and route["verdict"] == "clean" for route in r["routes"])
    assert r["findings"] == [] and r["exit_code"] == 0
    # The trace did see promotions (fp32 residual stream, softmax(logits.float())) and judged them harmless.
    assert r["summary"]["ops"] > 50


def test_fp32_model_at_sdpa_is_one_note_for_the_run_not_a_warning_per_call(trace):
    # An fp32 model traced without autocast: its SDPA calls' float32 inputs are the precision of the
    # trace, said once with how to trace the training precision; no origins walked for them.
    r = trace(toy_target("healthy_toy.py", "build_fp32"))
    (f,) = r["findings"]
    assert (f["id"], f["severity"], f["count"]) == ("AD604", "info", 2)
    assert "--autocast bf16" in f["message"] and "--dtype bf16" in f["message"]
    assert f["chain"] == [] and f["origins"] == [] and f["patch"] is None
    assert r["exit_code"] == 0 and r["summary"]["warnings"] == 0
    # the same model traced in the precision it trains in is clean
    assert trace(toy_target("healthy_toy.py", "build_fp32"), autocast="bf16")["findings"] == []


def test_fp32_model_at_flash_attn_is_an_error_without_a_chain(trace):
    # LLaMA-Factory #7151: the whole model is fp32; nothing promoted, so no chain.
    r = trace(toy_target("healthy_toy.py", "build_fp32_flash"))
    (f,) = [f for f in r["findings"] if f["route"] == "standin"]
    assert (f["id"], f["severity"], f["chain"]) == ("AD604", "error", [])
    assert r["exit_code"] == 1
    # As installed (no flash_attn) the same model takes SDPA: fp32 there is only the slow path.
    (g,) = [f for f in r["findings"] if f["route"] == "installed"]
    assert (g["id"], g["severity"], g["sink"]["name"]) == ("AD604", "info", "F.scaled_dot_product_attention")


def test_train_mode_healthy(trace):
    r = trace(toy_target("healthy_toy.py", "build_fp32_flash"), autocast="bf16", device="cpu", train=True)
    assert r["status"] == "ok" and r["findings"] == []


def test_bf16_judged_for_a_gpu_without_native_bf16_says_so_and_flex_is_not_mentioned(trace):
    from conftest import toy_target

    r = trace(toy_target("healthy_toy.py", "build_bf16"), capability=(7, 5), routes=False)
    assert r["findings"] == []
    assert any(n.startswith("bf16 on sm75 is emulated") for n in r["notes"]), r["notes"]
    assert not any("flex_attention" in n for n in r["notes"])  # the model never calls it
