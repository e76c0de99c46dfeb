"""One trace in this process (attn_doctor/tracing/runs/run.py), for real through the API and the CLI:
a forward pass that reaches no attention call judges nothing, options that do not go together,
autocast regions named after the trace device, the CPU retry where meta cannot run the forward,
and example inputs moved to the trace device."""
import json
import os

from conftest import cli, toy_target, write_module

TOY = "heldout_toy.py"


def test_no_attention_call_is_no_pass():
    code, out, err = cli(toy_target(TOY, "build_no_attention"))
    assert code == 3, out + err
    assert "nothing judged" in out and "no dtype problems" not in out and "✓" not in out
    code, out, _ = cli(toy_target(TOY, "build_no_attention"), "--json")
    report = json.loads(out)
    assert code == 3 and report["status"] == "no_attention" and report["exit_code"] == 3
    assert "reached no attention call" in report["error"]["message"]


def test_attn_implementation_without_hf_is_a_usage_error():
    code, out, err = cli(toy_target(TOY, "build_sized"), "--attn-implementation", "eager")
    assert code == 2 and "--attn-implementation goes with --hf" in (out + err).replace("\n", " ")


def test_autocast_region_named_after_the_trace_device_runs_on_meta(trace):
    # `torch.autocast(device_type=x.device.type, enabled=False)` (transformers' rotary code) raises on
    # meta in plain torch; in a trace it stands for the GPU's CUDA region.
    r = trace(toy_target(TOY, "build_fallback"), autocast="bf16")
    assert r["status"] == "ok", r["error"]
    assert r["device"] == "meta"


def test_item_on_meta_falls_back_to_cpu(trace, tmp_path):
    path = write_module(tmp_path, "itemy.py", """
        import torch, torch.nn as nn, torch.nn.functional as F
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Linear(16, 48)
                self.k_scale = nn.Parameter(torch.ones(16))
            def forward(self, x):
                if x.abs().max().item() > 1e6:
                    x = x / 1e6
                q, k, v = self.w(x).view(1, 4, 3, 1, 16).unbind(2)
                k = k * self.k_scale
                return F.scaled_dot_product_attention(q, k, v)
        def build():
            m = M().to(torch.bfloat16)
            m.k_scale.data = m.k_scale.data.float()
            return m, torch.randn(1, 4, 16, dtype=torch.bfloat16)
        """)
    r = trace(path + ":build")
    assert r["status"] == "ok" and r["device"] == "cpu"
    assert any("meta cannot run" in n and "retried on CPU" in n for n in r["notes"])
    assert r["findings"][0]["id"] == "AD601" and r["findings"][0]["chain"][0]["operand"] == "k_scale"


def test_inputs_on_the_wrong_device_are_moved(trace, tmp_path):
    path = write_module(tmp_path, "cpu_inputs.py", """
        import torch
        def build():
            m = torch.nn.MultiheadAttention(16, 2, batch_first=True)
            x = torch.randn(1, 4, 16, device="cpu")
            return m, (x, x, x)
        """)
    r = trace(path + ":build", device="meta")
    assert r["status"] == "ok", r["error"]
    assert any("example inputs were on cpu; moved them to meta" in n for n in r["notes"])
    assert r["summary"]["sinks"] >= 1


def test_a_library_modules_attention_is_named_after_the_callers_frame_never_the_tracers(trace):
    # MultiheadAttention calls SDPA inside torch and the model has no code of its own: the sink is
    # named at torch's MultiheadAttention.forward (the model's outermost forward), never after the
    # tracer's files (api.py, run.py, ...) nor what called the trace (this test; a CLI's typer).
    import torch

    m = torch.nn.MultiheadAttention(16, 2, batch_first=True)
    x = torch.randn(1, 4, 16)
    r = trace(model=m, inputs=(x, x, x), device="meta")
    assert r["status"] == "ok", r["error"]
    assert {os.path.basename(s["file"]) for s in r["sinks"]} == {"activation.py"}
