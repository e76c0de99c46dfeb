"""FlexAttention as a sink, traced on meta and the CPU without compiling it, and models wrapped by
torch.compile (traced eagerly through the model they wrap)."""
import os
import subprocess
import sys

import pytest

from conftest import CUDA, REPO, TOYS, marker_line, toy_target

TOY = "flex_toy.py"
MIXED = ("Mixed query, key, and value dtype is not supported on this platform, got query.dtype: torch.float32, "
         "key.dtype: torch.bfloat16, and value.dtype: torch.bfloat16.")


def _finding(report):
    """The one dtype finding; flex_attention called eagerly is also AD277 (it runs unfused)."""
    assert report["status"] == "ok", report["error"]
    (f,) = [f for f in report["findings"] if f["id"] != "AD277"]
    return f


@pytest.mark.parametrize("device", ["meta", "cpu", CUDA])
@pytest.mark.parametrize("factory", ["build", "build_compiled"])
def test_fp32_scale_promoting_q_before_flex_attention_is_found(trace, device, factory):
    # build_compiled: the block holds torch.compile(flex_attention), made before the trace wrapped it
    f = _finding(trace(toy_target(TOY, factory), device=device))
    assert f["id"] == "AD601" and f["severity"] == "error"
    assert f["sink"]["name"] == "flex_attention"
    assert f["sink"]["file"] == os.path.join(TOYS, TOY) and f["sink"]["line"] == marker_line(TOY, "SINK-FLEX")
    assert (f["sink"]["q"]["dtype"], f["sink"]["k"]["dtype"], f["sink"]["v"]["dtype"]) == ("float32", "bfloat16", "bfloat16")
    mul = [e for e in f["chain"] if e["op"] == "Tensor.mul"]
    assert mul and mul[0]["line"] == marker_line(TOY, "PROMOTE-Q")
    assert f["kernel_message"].startswith(MIXED)


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_flex_attention_without_promotion_traces_clean(trace, device):
    r = trace(toy_target(TOY, "build_clean"), device=device)
    assert r["status"] == "ok" and [s["name"] for s in r["sinks"]] == ["flex_attention"]
    # no dtype problem; called without torch.compile, it runs unfused: a warning, exit 0
    assert [(f["id"], f["severity"]) for f in r["findings"]] == [("AD277", "warning")] and r["exit_code"] == 0
    assert any(n.startswith("flex_attention runs as SDPA in the trace") for n in r["notes"])


@pytest.mark.slow  # compiles flex_attention with Inductor (C++): about 20 s on 2 cores
def test_the_traced_message_is_what_compiled_flex_attention_raises_on_cpu():
    # The real thing, no tracer: Inductor's CPU lowering of flex_attention refuses the same inputs.
    code = (
        "import sys, warnings, torch; warnings.simplefilter('ignore'); sys.path.insert(0, %r)\n"
        "import flex_toy\n"
        "model, x = flex_toy.build_compiled()\n"
        "try:\n"
        "    with torch.no_grad(): model(x)\n"
        "except Exception as exc: print('RAISED', str(exc))\n" % TOYS
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert "RAISED" in out.stdout, out.stdout + out.stderr
    assert MIXED in out.stdout


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_torch_compiled_model_is_traced_through_the_model_it_wraps(trace, device):
    r = trace(toy_target(TOY, "build_compiled_model"), device=device)
    f = _finding(r)
    assert f["id"] == "AD601" and f["sink"]["line"] == marker_line(TOY, "SINK-FLEX")
    assert any("torch.compile'd (OptimizedModule); traced the model it wraps (_orig_mod, Sequential) eagerly" in n
               for n in r["notes"]), r["notes"]


def test_trace_cli_says_it_traced_the_compiled_model_eagerly():
    out = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", toy_target(TOY, "build_compiled_model")],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "note: the model is torch.compile'd (OptimizedModule); traced the model it wraps" in out.stdout
    assert "AD601" in out.stdout and "flex_toy.py:%d" % marker_line(TOY, "SINK-FLEX") in out.stdout
