"""FlashAttention 4 (flash-attn-4, `flash_attn.cute`) as a sink: where it does not import (here), a
stand-in with its dtype checks and messages; its head-dim and architecture checks judged for the
GPU's capability. The real FlashAttention 4 on a GPU: tests/gpu/test_gpu_fa4.py."""
import os

import pytest

from attn_doctor.tracing.runs.routes import ROUTE_INSTALLED
from conftest import TOYS, marker_line, toy_target

TOY = "fa4_toy.py"
SAME = "q, k, v, and qv must have the same dtype"


def _verdict(report):
    """The route that ran FlashAttention 4 (its stand-in, off the GPU) and its findings."""
    routes = {r["name"]: r for r in report.get("routes") or ()}
    route = routes.get("standin")
    assert route is not None and route["label"] == "with flash-attn-4 4.0.0b36", report.get("routes")
    return route["findings"]


# with routes, the installed path is traced too, in a child process (about 20 s): slow
@pytest.mark.parametrize("device,routes", [pytest.param("meta", True, marks=pytest.mark.slow), ("cpu", False)])
def test_promoted_q_at_flash_attn_4_is_found_with_its_own_message(trace, device, routes):
    r = trace(toy_target(TOY, "build"), device=device, routes=routes)
    (f,) = _verdict(r)
    if routes:
        # as installed (no flash_attn.cute here) the model's flash_attn_func is None: it cannot run
        installed = [x for x in r["routes"] if x["name"] == ROUTE_INSTALLED]
        assert installed and installed[0]["verdict"] == "could not run", r["routes"]
    assert f["id"] == "AD601" and f["severity"] == "error"
    assert f["kernel_message"] == SAME
    assert f["sink"]["name"] == "flash_attn.cute.flash_attn_func"
    assert f["sink"]["file"] == os.path.join(TOYS, TOY) and f["sink"]["line"] == marker_line(TOY, "SINK-FA4")
    assert (f["sink"]["q"]["dtype"], f["sink"]["k"]["dtype"], f["sink"]["v"]["dtype"]) == ("float32", "bfloat16", "bfloat16")
    assert [e["line"] for e in f["chain"] if e["op"] == "Tensor.mul"] == [marker_line(TOY, "PROMOTE-Q")]


@pytest.mark.parametrize("factory,capability,rule,message", [
    ("build_fp32", None, "AD604", "inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2"),
    ("build_head_dim_512", (9, 0), "AD603", "(head_dim, head_dim_v)=(512, 512) is not supported on SM90. head_dim and "
                                            "head_dim_v must be between 8 and 256 and divisible by 8."),
    ("build_head_dim_192", (10, 0), "AD603", "(head_dim, head_dim_v)=(192, 192) is not supported on SM100/SM110."),
    ("build_clean", (7, 5), "AD605", "Unsupported compute capability. Supported: 8.x, 9.x, 10.x, 11.x, 12.x"),
])
def test_what_flash_attn_4_refuses_is_said_in_its_words(trace, factory, capability, rule, message):
    findings = _verdict(trace(toy_target(TOY, factory), capability=capability, routes=False))
    assert [f["id"] for f in findings] == [rule], findings
    assert findings[0]["kernel_message"].startswith(message)


def test_head_dim_is_judged_for_sm90_when_the_gpu_is_unknown_and_said_so(trace):
    (f,) = _verdict(trace(toy_target(TOY, "build_head_dim_512"), routes=False))
    assert f["id"] == "AD603" and "judged for SM90; --capability sets it" in f["kernel_message"]


def test_what_flash_attn_4_takes_traces_clean(trace):
    assert _verdict(trace(toy_target(TOY, "build_clean"), capability=(9, 0), routes=False)) == []
    # (512, 512) passes on SM100 (FlashAttention 4's MLA-absorbed shape) where SM90 refuses it
    assert _verdict(trace(toy_target(TOY, "build_head_dim_512"), capability=(10, 0), routes=False)) == []


def test_the_stand_in_raises_flash_attn_4s_assertions_outside_a_trace():
    import torch

    from attn_doctor.tracing.standins.fa4 import fa4_flash_attn_func

    q = torch.randn(1, 8, 2, 64, dtype=torch.bfloat16)
    out, lse = fa4_flash_attn_func(q, q, q, causal=True)
    assert out.shape == q.shape and out.dtype == torch.bfloat16 and lse is None
    with pytest.raises(AssertionError, match=r"^q, k, v, and qv must have the same dtype$"):
        fa4_flash_attn_func(q.float(), q, q)
    with pytest.raises(AssertionError, match=r"^inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2$"):
        fa4_flash_attn_func(q.float(), q.float(), q.float())


# flash-attn-4 installs flash_attn/cute/ alone, in a namespace package `flash_attn`. It imports only
# beside a CUDA torch and triton, so this stands in for it at that boundary: its interface, which
# (like the real one) refuses tensors that are not on CUDA.
FAKE_FA4 = '''
__version__ = "4.0.0b36"


def flash_attn_func(q, k, v, causal=False, return_lse=False, **kwargs):
    assert all(t.is_cuda for t in (q, k, v)), "inputs must be on CUDA device"
    raise RuntimeError("a GPU kernel")


def flash_attn_varlen_func(q, k, v, **kwargs):
    return flash_attn_func(q, k, v, **kwargs)
'''

RUN = """
import json, sys
from attn_doctor.tracing.runs.api import trace
r = trace(sys.argv[1], device=sys.argv[2])
print(json.dumps({"findings": r["findings"], "routes": [x["name"] for x in r["routes"]], "notes": r["notes"],
                  "cute": sys.modules["flash_attn.cute"].__file__}))
"""


def test_an_installed_flash_attn_4_stays_importable_and_is_judged_off_the_gpu(tmp_path, device="meta"):
    import json
    import subprocess
    import sys

    (tmp_path / "flash_attn" / "cute").mkdir(parents=True)
    (tmp_path / "flash_attn" / "cute" / "__init__.py").write_text(FAKE_FA4)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    proc = subprocess.run([sys.executable, "-c", RUN, toy_target(TOY, "build"), device], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    # the model imported the installed flash_attn.cute (not a stand-in), whose call was judged and
    # then computed by the stand-in's SDPA: off the GPU it refuses to run
    assert r["cute"] == str(tmp_path / "flash_attn" / "cute" / "__init__.py")
    assert r["routes"] == [ROUTE_INSTALLED] and not any("flash_attn.cute" in n for n in r["notes"])
    (f,) = r["findings"]
    assert f["id"] == "AD601" and f["kernel_message"] == SAME and f["sink"]["line"] == marker_line(TOY, "SINK-FA4")
    assert f["sink"]["name"] == "flash_attn.cute.flash_attn_func"
