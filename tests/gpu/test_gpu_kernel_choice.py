"""Issue 32 on the GPU: which kernel each SDPA call pattern gets (torch asked, and the emulation the
CPU suite trusts compared with it), torch's reason for refusing flash, and the cost the trace
measures against a direct timing of the same two calls. Shapes are the issue's: B=4, H=16, T=2048,
D=128 (320 for the head-dim row), forward and backward.

    python -m pytest tests/gpu/test_gpu_kernel_choice.py -m gpu -v -s
"""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.nn.functional as F

from attn_doctor.tracing.kernel_choice import kernels, sdpa_select
from attn_doctor.tracing.runs.api import trace

from .conftest import marker_line, this_gpu as _this_gpu, toy_target

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FACTS = json.load(open(os.path.join(REPO, "tests", "fixtures", "kernel_choice", "issue32_h100_torch211.json")))
TABLE = FACTS["patterns"]
TOY = "kernel_choice_toy.py"
FINDING = {"causal": None, "tril": "AD610", "additive": "AD610", "fp32": "AD604", "headdim320": "AD603",
           "strided": "AD611", "dropout": None}
MARKER = {"fp32": "causal", "headdim320": "causal"}


def _issue_call(pattern):
    """The issue's call for a pattern, on the GPU, needing gradients: (q, k, v, mask, dropout, is_causal)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    d = 320 if pattern == "headdim320" else 128
    dtype = torch.float32 if pattern == "fp32" else torch.bfloat16

    def t(last=d):
        return torch.randn(4, 16, 2048, last, device="cuda", dtype=dtype, generator=gen)

    q, k, v = t(), t(), t()
    if pattern == "strided":
        q = t(2 * d)[..., ::2]
    mask = None
    if pattern == "tril":
        mask = torch.ones(2048, 2048, dtype=torch.bool, device="cuda").tril()
    if pattern == "additive":
        mask = torch.zeros(2048, 2048, device="cuda", dtype=dtype).masked_fill(
            torch.ones(2048, 2048, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    return [x.requires_grad_(True) for x in (q, k, v)] + [mask, 0.1 if pattern == "dropout" else 0.0, mask is None]


def _fix(pattern, call):
    q, k, v, mask, dropout, is_causal = call
    if pattern in ("tril", "additive"):
        return [q, k, v, None, dropout, True]
    if pattern == "strided":
        return [q.detach().contiguous().requires_grad_(True), k, v, mask, dropout, is_causal]
    if pattern == "fp32":
        return [x.detach().bfloat16().requires_grad_(True) for x in (q, k, v)] + [mask, dropout, is_causal]
    return None


def _direct_ms(call, backend=None):
    """A direct timing, written apart from attn_doctor/tracing/kernel_choice/cost.py, by the same method: forward and
    backward as a training step runs them (an upstream gradient made once, the inputs' gradients not
    accumulated, calls back to back between two CUDA events after warm-up), the median of three
    rounds' means of 20."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, mask, dropout, is_causal = call
    leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
    upstream = torch.randn(*q.shape[:-1], v.shape[-1], device="cuda", dtype=q.dtype)
    ctx = sdpa_kernel(getattr(SDPBackend, sdpa_select.MEMBERS[backend])) if backend else contextlib.nullcontext()

    def once():
        out = F.scaled_dot_product_attention(*leaves, attn_mask=mask, dropout_p=dropout, is_causal=is_causal)
        torch.autograd.grad(out, leaves, upstream)

    means = []
    with ctx:
        for _ in range(3):
            once()
        torch.cuda.synchronize()
        for _ in range(3):  # the median of three rounds, as the trace's
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                once()
            end.record()
            torch.cuda.synchronize()
            means.append(start.elapsed_time(end) / 20)
    return sorted(means)[1]


@pytest.mark.parametrize("pattern", sorted(TABLE))
def test_emulation_agrees_with_torch_on_this_gpu(pattern):
    q, k, v, mask, dropout, is_causal = _issue_call(pattern)
    asked = kernels.ask_torch(q, k, v, mask, dropout, is_causal, False)
    emulated = sdpa_select.select(kernels.describe(q, k, v, mask, dropout, is_causal, False, True), _this_gpu())
    print("\n%s: torch %s, emulated %s, issue table %s; torch refused flash: %s" % (
        pattern, asked["kernel"], emulated["kernel"], TABLE[pattern]["issue_table"], asked["refused"].get("flash")))
    assert asked["kernel"] == emulated["kernel"]
    assert sorted(asked["accepts"]) == sorted(emulated["accepts"])
    if torch.cuda.get_device_capability(0) == (9, 0):
        assert asked["kernel"] == TABLE[pattern]["sm90"]
    reason = TABLE[pattern]["flash_reason"]
    if reason:
        assert reason in asked["refused"]["flash"] and reason in emulated["refused"]["flash"]


@pytest.mark.parametrize("pattern", sorted(TABLE))
def test_trace_on_the_gpu_finds_each_pattern_and_its_cost(pattern):
    r = trace(toy_target(TOY, "build"), device="cuda", train=True, factory_kwargs={"pattern": pattern})
    assert r["status"] == "ok", r.get("error")
    (sink,) = r["sinks"]
    assert sink["line"] == marker_line(TOY, MARKER.get(pattern, pattern))
    assert sink["kernel"]["source"] == "torch"
    call = _issue_call(pattern)
    assert sink["kernel"]["name"] == kernels.ask_torch(*call, False)["kernel"]
    reason = TABLE[pattern]["flash_reason"]
    if reason:
        assert reason in sink["kernel"]["refused"]["flash"]
    expected = FINDING[pattern]
    if expected is None:
        assert r["findings"] == [] and r["exit_code"] == 0  # is_causal=True (and dropout) is clean
        return
    (f,) = [f for f in r["findings"] if f["id"] == expected]
    fix = _fix(pattern, call)
    if fix is None:  # head dim 320: no faster kernel for the same call
        assert not f["cost"]["measured"]
        return
    cost = f["cost"]
    assert cost["measured"] and cost["timed"] == "forward and backward"
    # the fix is timed as SDPA runs it: its kernel is the one torch picks for the fixed call
    fixed_kernel = kernels.ask_torch(*fix, False)["kernel"]
    assert cost["fix_kernel"] == fixed_kernel
    made, fixed = _direct_ms(call), _direct_ms(fix)
    direct = made / fixed
    print("\n%s [%s]: trace %s; direct %.2fx (%.3f ms against %.3f ms, fix on %s)" % (
        pattern, f["severity"], f["message"].rsplit("; ", 1)[-1], direct, made, fixed, fixed_kernel))
    assert abs(cost["ratio"] - direct) <= 0.25 * direct
    assert max(p["seq"] for p in cost["at"]) >= 2048  # at the traced size, and at a representative length
    assert "the %s kernel the fix runs" % sdpa_select.LABELS[fixed_kernel] in f["message"]
    if pattern == "fp32":
        # a model that computes in float32 gets one note for the run (its precision, traced without
        # autocast), which keeps the first call's figure
        assert f["severity"] == "info" and "the model computes in float32" in f["message"]
        return
    # a fix that is faster at neither size is info, else a warning
    assert f["severity"] == ("warning" if cost["fix_faster"] else "info")


def test_hf_llama_sample_reports_its_kernel_per_layer():
    pytest.importorskip("transformers")
    from attn_doctor.tracing.runs.samples import run_sample_forward

    r = run_sample_forward(device="cuda", samples=["transformers_sdpa"])
    (sample,) = r["samples"]
    assert sample["status"] == "ran", sample
    layers = [s for s in sample["sinks"] if s["name"] == "F.scaled_dot_product_attention"]
    print("\n" + "\n".join("%s %s:%s -> %s" % (s["module_path"], s["file"], s["line"], s["kernel"]) for s in layers))
    assert len(layers) == 2 and len({s["module_path"] for s in layers}) == 2  # the sample Llama has 2 layers
    assert all(s["kernel"] and s["kernel"].startswith("SDPA ") for s in layers)
    (site,) = sample["kernels"]
    assert site["source"] == "torch" and site["count"] == 2
