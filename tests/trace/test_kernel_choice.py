"""Which kernel each attention call gets (attn_doctor/tracing/kernel_choice/sdpa_select.py, kernels.py), why not the
fastest (fallbacks.py, AD610-AD613, AD277) and what it costs (cost.py): the emulation against the
recorded GPU answers, the toys of issue 32 traced on meta and CPU, the patches, the CLI."""

from __future__ import annotations

import json
import os

import pytest
import torch

from attn_doctor.tracing.kernel_choice import cost, kernels, masks, sdpa_select

from conftest import REPO, cli, marker_line, toy_target

FACTS = os.path.join(REPO, "tests", "fixtures", "kernel_choice", "issue32_h100_torch211.json")
TABLE = json.load(open(FACTS))["patterns"]
TOY = "kernel_choice_toy.py"
SMALL = ["-a", "seq=64", "-a", "batch=2", "-a", "heads=4"]


def _call(pattern, grad=True):
    """The issue's call for a pattern, as meta tensors (B=4, H=16, T=2048, D=128)."""
    b, h, t = 4, 16, 2048
    d = 320 if pattern == "headdim320" else 128
    dtype = torch.float32 if pattern == "fp32" else torch.bfloat16
    q, k, v = (torch.empty(b, h, t, d, dtype=dtype, device="meta", requires_grad=grad) for _ in range(3))
    mask, dropout = None, 0.0
    if pattern == "strided":
        q = torch.empty(b, h, t, 2 * d, dtype=dtype, device="meta")[..., ::2].requires_grad_(grad)
    if pattern == "tril":
        mask = torch.empty(t, t, dtype=torch.bool, device="meta")
    if pattern == "additive":
        mask = torch.empty(t, t, dtype=dtype, device="meta")
    if pattern == "dropout":
        dropout = 0.1
    return kernels.describe(q, k, v, mask, dropout, mask is None, False, True)


@pytest.mark.parametrize("sm", ["sm90", "sm80"])
@pytest.mark.parametrize("pattern", sorted(TABLE))
def test_emulation_picks_the_recorded_kernel(pattern, sm):
    target = sdpa_select.target_for((int(sm[2]), int(sm[3])), "2.11.0+cu130", cudnn=91900, cuda_major=13)
    choice = sdpa_select.select(_call(pattern), target)
    assert choice["kernel"] == TABLE[pattern][sm]
    reason = TABLE[pattern]["flash_reason"]
    if reason:
        assert reason in choice["refused"]["flash"]
    else:
        assert "flash" not in choice["refused"]


def test_recorded_h100_smoke_choices_agree():
    # check's smoke test asked torch._fused_sdp_choice on the H100 (torch 2.11): causal, no grad
    facts = json.load(open(os.path.join(REPO, "tests", "fixtures", "facts", "h100.json")))
    target = sdpa_select.target_for((9, 0), facts["torch"]["version"], cudnn=int(facts["torch"]["cudnn"] or 0) or None)
    for recorded in facts["smoke"]["choices"]:
        dtype = getattr(torch, recorded["dtype"])
        q = torch.empty(2, 4, 256, recorded["head_dim"], dtype=dtype, device="meta")
        call = kernels.describe(q, q, q, None, 0.0, True, False, False)
        assert recorded["backend"] == {"cudnn": "cudnn_attention", "flash": "flash_attention",
                                       "mem_efficient": "efficient_attention"}[sdpa_select.select(call, target)["kernel"]]


def test_versions_change_the_order_and_the_checks():
    sm90 = (9, 0)
    old = sdpa_select.target_for(sm90, "2.6.0")
    assert sdpa_select.priority_order(old) == sdpa_select.DEFAULT_ORDER
    assert sdpa_select.select(_call("causal"), old)["kernel"] == "flash"
    # 2.11's cuDNN has no 1/16 dropout check (torch asked on an H100): dropout 0.1 stays on cuDNN;
    # later source refuses it, and flash runs
    assert sdpa_select.select(_call("dropout"), sdpa_select.target_for(sm90, "2.11.0"))["kernel"] == "cudnn"
    later = sdpa_select.select(_call("dropout"), sdpa_select.target_for(sm90, "2.12.0"))
    assert later["kernel"] == "flash" and "1/16" in later["refused"]["cudnn"]
    # a torch built without flash (Windows) says so, as torch does
    win = sdpa_select.target_for((8, 0), "2.11.0", flash_compiled=False)
    choice = sdpa_select.select(_call("causal"), win)
    assert choice["kernel"] == "mem_efficient" and choice["refused"]["flash"] == "Torch was not compiled with flash attention."
    # the user's own switches (torch.backends.cuda.enable_flash_sdp(False)) count
    off = sdpa_select.target_for((8, 0), "2.11.0", enabled={"flash": False})
    assert sdpa_select.select(_call("causal"), off)["refused"]["flash"] == "Flash attention has been runtime disabled."
    # a T4: no flash, no bf16 in the memory-efficient kernel
    t4 = sdpa_select.select(_call("causal"), sdpa_select.target_for((7, 5), "2.11.0"))
    assert t4["kernel"] == "math" and "sm80, sm121" in t4["refused"]["flash"]


@pytest.mark.parametrize("pattern,causal", [("tril", True), ("additive", True), ("causal", False)])
def test_masks_are_followed_on_meta(pattern, causal):
    tracker = masks.MaskTracker()
    from attn_doctor.tracing.runs.mode import activate
    from attn_doctor.tracing.dtype_path.tracer import Tracer

    built = {}
    tracer = Tracer()
    with activate(tracer), torch.device("meta"):
        t = 8
        if pattern == "tril":
            built["mask"] = torch.ones(t, t, dtype=torch.bool).tril()
        elif pattern == "additive":
            built["mask"] = torch.full((t, t), float("-inf")).triu(1)
        else:
            built["mask"] = torch.ones(t, t, dtype=torch.bool).triu()  # the upper triangle: not causal
    tracker = tracer.masks
    assert masks.is_causal_mask(tracker, built["mask"], 8, 8)[0] is causal


def test_arange_comparison_is_the_causal_mask():
    # transformers' sdpa_mask: kv_idx <= q_idx over aranges
    from attn_doctor.tracing.runs.mode import activate
    from attn_doctor.tracing.dtype_path.tracer import Tracer

    tracer = Tracer()
    with activate(tracer), torch.device("meta"):
        idx = torch.arange(8)
        mask = idx[None, :] <= idx[:, None]
        shifted = idx[None, :] < idx[:, None]
    assert masks.is_causal_mask(tracer.masks, mask, 8, 8)[0]
    assert not masks.is_causal_mask(tracer.masks, shifted, 8, 8)[0]


def test_a_causal_mask_is_known_by_its_values_on_cpu():
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    assert masks.is_causal_mask(None, mask, 6, 6) == (True, "its values")
    assert masks.is_causal_mask(None, ~mask, 6, 6)[0] is False
    additive = torch.zeros(6, 6).masked_fill(~mask, torch.finfo(torch.float32).min)
    assert masks.is_causal_mask(None, additive, 6, 6)[0]
    padded = mask.clone()
    padded[:, 0] = False  # a padding mask on top: no longer the causal one
    assert not masks.is_causal_mask(None, padded, 6, 6)[0]


EXPECTED = {  # pattern -> (finding, kernel on sm90) for the small toys traced with --capability 9.0
    "causal": (None, "cudnn"), "tril": ("AD610", "cudnn"), "additive": ("AD610", "cudnn"),
    "fp32": ("AD604", "mem_efficient"), "headdim320": ("AD603", "mem_efficient"), "strided": ("AD611", "math"),
    "dropout": (None, "flash"), "mqa": ("AD613", "math"),
}


@pytest.mark.parametrize("device", ["meta", "cpu"])
@pytest.mark.parametrize("pattern", sorted(EXPECTED))
def test_each_pattern_is_found_at_its_line(trace, pattern, device):
    r = trace(toy_target(TOY, "build"), device=device, capability=(9, 0),
              factory_kwargs={"pattern": pattern, "seq": 32, "batch": 2, "heads": 4})
    finding, kernel = EXPECTED[pattern]
    (sink,) = r["sinks"]
    marker = "causal" if pattern in ("fp32", "headdim320") else pattern
    assert sink["line"] == marker_line(TOY, marker)
    assert sink["kernel"]["name"] == kernel and sink["kernel"]["source"] == "emulated"
    assert sink["kernel"]["for"].startswith("sm90, torch ")
    ids = [f["id"] for f in r["findings"]]
    if finding is None:
        assert ids == [] and r["exit_code"] == 0  # the is_causal=True model is clean
        return
    assert ids == [finding]
    (f,) = r["findings"]
    if pattern == "fp32":
        # a float32 model traced without autocast: one note for the run, naming the kernel it gets
        assert f["severity"] == "info" and f["kernel"]["runs"] == kernel and "SDPA's mem-efficient" in f["message"]
        return
    assert f["severity"] == "warning" and f["sink"]["line"] == sink["line"]
    assert f["kernel"]["runs"] == kernel
    if pattern == "headdim320":
        assert f["cost"]["why"].startswith("not measured: no call of the same head dim runs a faster kernel")
        return
    assert f["cost"] == {"measured": False, "why": "not measured: the trace ran on %s (trace --device cuda times the "
                                                   "call against the fix)" % device}


def test_sm80_sends_the_masks_to_the_memory_efficient_kernel(trace):
    r = trace(toy_target(TOY, "build"), capability=(8, 0), factory_kwargs={"pattern": "tril", "seq": 32, "heads": 4})
    (f,) = r["findings"]
    assert f["id"] == "AD610" and f["kernel"] == {"runs": "mem_efficient", "instead": "flash"}
    assert "runs its mem-efficient kernel" in f["message"] and "it runs flash" in f["message"]


def test_patches_make_the_change(trace, tmp_path):
    import shutil
    import subprocess

    shutil.copy(os.path.join(os.path.dirname(__file__), "toys", TOY), tmp_path / TOY)
    target = str(tmp_path / TOY) + ":build"
    for pattern, line in (("tril", "attn_mask=mask)"), ("strided", None)):
        r = trace(target, factory_kwargs={"pattern": pattern, "seq": 32, "heads": 4}, cwd=str(tmp_path))
        (f,) = r["findings"]
        assert f["patch"], f
        proc = subprocess.run(["patch", "-p1", "--dry-run"], input=f["patch"], text=True, cwd=tmp_path,
                              capture_output=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    tril = trace(target, factory_kwargs={"pattern": "tril", "seq": 32, "heads": 4})["findings"][0]["patch"]
    assert "+            return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # tril" in tril
    strided = trace(target, factory_kwargs={"pattern": "strided", "seq": 32, "heads": 4})["findings"][0]["patch"]
    assert "+            q = q.contiguous()  # attn-doctor AD611" in strided


def test_flex_attention_without_compile_is_a_warning(trace, tmp_path):
    pytest.importorskip("torch.nn.attention.flex_attention")
    from conftest import write_module

    path = write_module(tmp_path, "flexy.py", """
        import torch
        from torch.nn.attention.flex_attention import flex_attention

        compiled_flex = torch.compile(flex_attention)


        class M(torch.nn.Module):
            def __init__(self, compiled):
                super().__init__()
                self.compiled = compiled

            def forward(self, q):
                if self.compiled:
                    return compiled_flex(q, q, q)  # compiled
                return flex_attention(q, q, q)  # eager


        def build(compiled=False):
            return M(compiled), (torch.randn(1, 2, 16, 16, dtype=torch.bfloat16),)
        """)
    eager = trace(path + ":build")
    assert [f["id"] for f in eager["findings"]] == ["AD277"]
    assert eager["sinks"][0]["kernel"]["name"] == "flex_eager"
    compiled = trace(path + ":build", factory_kwargs={"compiled": True})
    assert compiled["findings"] == [] and compiled["sinks"][0]["kernel"]["name"] == "flex_compiled"


def test_cli_names_the_kernel_and_fails_on_warning_when_asked():
    code, out, err = cli(toy_target(TOY, "build"), "-a", "pattern=tril", *SMALL, "--capability", "9.0",
                         "--no-color")
    assert code == 0, out + err
    line = marker_line(TOY, "tril")
    assert "! AD610 F.scaled_dot_product_attention at" in out
    assert "kernel at each attention call:" in out
    assert ("kernel_choice_toy.py:%d  F.scaled_dot_product_attention -> SDPA cuDNN  (emulated for sm90, torch" % line
            ) in out
    assert "cost not measured: the trace ran on meta" in out
    code, out, err = cli(toy_target(TOY, "build"), "-a", "pattern=tril", *SMALL, "--fail-on", "warning", "-q")
    assert code == 1 and "1 warning(s)" in out
    code, out, err = cli(toy_target(TOY, "build"), "-a", "pattern=causal", *SMALL, "--fail-on", "warning", "-q")
    assert code == 0, out + err


def test_cost_words():
    at = [{"seq": 16, "why": "the traced size", "ms": 0.05, "fix_ms": 0.05, "ratio": 1.0},
          {"seq": 4096, "why": "the model's max_position_embeddings", "ms": 1.818, "fix_ms": 0.772, "ratio": 2.35}]
    assert cost.describe({"measured": True, "fix_kernel": "cudnn", "ratio": 1.0, "ms": 0.05, "fix_ms": 0.05,
                          "at": at, "fix_faster": True, "timed": "forward and backward", "runs": 20, "rounds": 3}) == (
        "costs against the cuDNN kernel the fix runs: 1.00x at seq 16 (the traced size: 0.050 ms against 0.050 ms); "
        "2.35x at seq 4096 (the model's max_position_embeddings: 1.818 ms against 0.772 ms) (forward and backward, "
        "median of 3 rounds of 20)")
    assert cost.describe({"measured": True, "fix_kernel": "cudnn", "ratio": 1.0, "ms": 0.05, "fix_ms": 0.05,
                          "at": at[:1], "fix_faster": False, "timed": "forward", "runs": 20, "rounds": 3}).startswith(
        "not slower than the cuDNN kernel the fix runs, so not a warning: 1.00x at seq 16")
    assert cost.describe({"measured": False, "why": "not measured: x"}) == "not measured: x"


def test_a_fix_measured_not_faster_is_info_not_a_warning(monkeypatch):
    class Q:
        device = type("D", (), {"type": "cuda"})()

    tracer = type("T", (), {"in_sink": 0})()
    for faster, severity in ((True, "warning"), (False, "info")):
        monkeypatch.setattr(cost, "measure", lambda *a, **k: {"measured": True, "fix_faster": faster})
        problem = {"severity": "warning"}
        cost.attach(problem, tracer, (Q(),), None, {})
        assert problem["severity"] == severity


def test_the_representative_size_keeps_the_calls_layout_and_causal_mask():
    import torch

    q = torch.randn(2, 4, 16, 8).transpose(-1, -2).contiguous().transpose(-1, -2)  # last dim not contiguous
    k = v = torch.randn(2, 4, 16, 8)
    mask = torch.ones(16, 16, dtype=torch.bool).tril()
    q2, k2, v2, m2, *_ = cost.scaled(torch, (q, k, v, mask, 0.0, False, False), 64)
    assert q2.shape == (2, 4, 64, 8) and q2.stride(-1) != 1 and k2.stride(-1) == 1
    assert m2.shape == (64, 64) and torch.equal(m2, torch.ones(64, 64, dtype=torch.bool).tril())
    fm = cost.scaled(torch, (k, k, v, torch.zeros(1, 1, 16, 16, dtype=torch.float16), 0.0, False, False), 32)[3]
    assert fm.shape == (1, 1, 32, 32) and fm.dtype == torch.float16 and fm[0, 0, 0, 1] == float("-inf")


def test_check_sample_reports_the_kernel_per_layer():
    from attn_doctor.tracing.runs.samples import run_sample_forward

    r = run_sample_forward(device="meta", capability=(8, 0), samples=["sdpa_block"])
    (sample,) = r["samples"]
    assert [s["kernel"] for s in sample["sinks"]] == ["SDPA flash", "SDPA flash"]  # one per layer
    (site,) = sample["kernels"]
    assert site["label"] == "SDPA flash" and site["count"] == 2 and site["for"].startswith("sm80, torch ")


@pytest.mark.parametrize("gqa", [False, True])
def test_torch_is_asked_in_its_own_signature(gqa):
    """ask_torch calls torch's private _fused_sdp_choice as the installed torch declares it (scale
    and enable_gqa keyword-only): on CPU tensors torch answers with a CPU backend, and the call
    itself must not raise, or every CUDA trace would fall back to the emulation."""
    import torch

    from attn_doctor.tracing.kernel_choice import kernels

    q = torch.randn(1, 4, 16, 8)
    kv = torch.randn(1, 2 if gqa else 4, 16, 8)
    # the choice itself, nothing swallowed: a wrong signature raises TypeError and fails here
    kernel = kernels.torch_choice(q, kv, kv, None, 0.0, True, gqa)
    assert kernel in ("flash", "mem_efficient", "math", "cudnn", "overrideable"), kernel


def test_a_representative_length_too_large_to_time_is_halved_until_it_fits(monkeypatch):
    import torch

    timed = []
    monkeypatch.setattr(cost, "time_ms", lambda torch_, run, rounds=cost.ROUNDS: 1.0)
    monkeypatch.setattr(cost, "_runner", lambda torch_, call, train, backend=None: timed.append(call[0].shape[-2]))
    q = torch.randn(1, 64, 16, 128, dtype=torch.bfloat16)
    out = cost.measure((q, q, q, None, 0.0, True, False), (q, q, q, None, 0.0, True, False), {"kernel": "cudnn"},
                       representative=(131072, "the model's max_position_embeddings"))
    (traced, big) = out["at"]
    assert traced["seq"] == 16 and 16 < big["seq"] < 131072 and cost._bytes((q, q, q, None), big["seq"]) <= cost.MAX_BYTES
    assert big["why"] == "the model's max_position_embeddings, halved to fit in 4 GiB"


def test_timing_a_call_in_training_never_reaches_into_the_models_graph():
    """A learned bias (T5's position bias) is a mask that requires grad: the doctor's own backward,
    timing the call, must neither add to the model's gradients nor free the graph its backward needs."""
    import torch

    table = torch.nn.Parameter(torch.randn(4, 16, 16))
    hidden = torch.randn(1, 4, 16, 8, requires_grad=True)
    bias = (table * 2).unsqueeze(0)  # in the model's graph, as the position bias is
    q = hidden * 1.5
    run = cost._runner(torch, (q, q, q, bias, 0.0, False, False), True)
    run()
    run()
    assert table.grad is None and hidden.grad is None
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=bias)
    out.sum().backward()  # the model's own backward: its graph is whole
    assert table.grad is not None
