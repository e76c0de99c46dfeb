"""FlashAttention 4 (flash-attn-4, `flash_attn.cute`) for real on the GPU: check finds and
smoke-tests it, its numbers against float64 SDPA, and the tracer's predictions (dtype, head dim)
against what it raises, on the GPU and on meta. Needs flash-attn-4 importable (skipped otherwise):
benchmarks/fa4_stage1.sh and fa4_stage2.sh install it from carried wheels and run these."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from .conftest import TOYS, load_file, marker_line, toy_target

fa4 = pytest.importorskip("flash_attn.cute", reason="flash-attn-4 (flash_attn.cute) does not import here")

TOY = "fa4_toy.py"
SAME = "q, k, v, and qv must have the same dtype"


def _toy(factory):
    return getattr(load_file(os.path.join(TOYS, TOY), "gpu_fa4_toy"), factory)(device="cuda")


def _real_error(factory):
    """Run the toy on the GPU with the real FlashAttention 4 (no tracer): what it raises, or None."""
    model, x = _toy(factory)
    try:
        with torch.no_grad():
            model(x)
        torch.cuda.synchronize()
    except AssertionError as exc:
        return str(exc)
    return None


def test_check_finds_flash_attn_4_and_smoke_tests_it(gpu_facts):
    imp = gpu_facts.imports.get("flash_attn_4")
    assert imp is not None and imp.status == "ok", imp
    results = [r for r in gpu_facts.smoke.results if r.backend == "flash_attn_4"]
    assert {r.dtype for r in results if r.status == "ok"} >= {"float16", "bfloat16"}, results
    for r in results:
        print("FA4 smoke", r.dtype, r.status, "rel_err", r.rel_err, "kernel_ms", r.kernel_ms, "total_ms", r.total_ms)
    # one group: each unit's kernels compiled ahead side by side, run where CUDA started once
    phases = gpu_facts.smoke.group_phases.get("lib:flash_attn_4", {})
    print("FA4 group", gpu_facts.smoke.group_seconds.get("lib:flash_attn_4"), phases)
    assert phases.get("units_compiled_ahead", 0) >= 2 and phases.get("units_lost") == 0, phases
    # the group loaded what the workers compiled (a miss recompiles: seconds per unit), and no compile ahead
    # started a CUDA context
    assert phases["run_s"] < phases["worker_compile_s"] and phases.get("workers_with_cuda") == 0, phases


def test_flash_attn_4_against_float64_sdpa():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 512, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out, _ = fa4.flash_attn_func(q, k, v, causal=True)
    ref = F.scaled_dot_product_attention(*(t.transpose(1, 2).double() for t in (q, k, v)), is_causal=True)
    err = (out.double() - ref.transpose(1, 2)).abs().max().item()
    print("FA4 bf16 causal (2, 512, 8, 128): max abs error against float64 SDPA", err)
    assert err < 0.03


def test_promoted_q_real_assertion_is_what_the_trace_predicts_on_gpu_and_meta():
    from attn_doctor.tracing.runs.api import trace

    assert _real_error("build") == SAME
    for device in ("cuda", "meta"):
        r = trace(toy_target(TOY, "build"), device=device)
        assert r["status"] == "ok", r["error"]
        (f,) = r["findings"]
        assert f["id"] == "AD601" and f["kernel_message"] == SAME, (device, f)
        assert f["sink"]["name"] == "flash_attn.cute.flash_attn_func"
        assert f["sink"]["line"] == marker_line(TOY, "SINK-FA4")
        assert [e["line"] for e in f["chain"] if e["op"] == "Tensor.mul"] == [marker_line(TOY, "PROMOTE-Q")]


@pytest.mark.parametrize("factory,rule", [("build_head_dim_512", "AD603"), ("build_fp32", "AD604")])
def test_what_flash_attn_4_refuses_on_this_gpu_is_what_the_trace_says(factory, rule):
    from attn_doctor.tracing.runs.api import trace

    real = _real_error(factory)
    major = torch.cuda.get_device_capability(0)[0]
    if rule == "AD603" and major not in (9, 10, 11):
        pytest.skip("FlashAttention 4 validates head dims on SM90 and SM100/SM110 only")
    assert real is not None, "FlashAttention 4 ran %s on this GPU" % factory
    r = trace(toy_target(TOY, factory), device="cuda")
    assert [f["id"] for f in r["findings"]] == [rule], r["findings"]
    assert r["findings"][0]["kernel_message"] == real
