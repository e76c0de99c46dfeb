"""The numerics sweep and the trace's float64 comparison on the GPU, for real.

Where cuDNN's SDPA backward has the NaN of pytorch#196678 (an H100 with torch 2.11 and cuDNN 9.19),
`check` reports it as an error (AD704) naming the kernel, the direction, the shapes and that SDPA
picks it by default; with cuDNN taken off the top of SDPA's order (TORCH_CUDNN_SDPA_DEPRIORITIZED=1)
the same check has no error or warning about it. Elsewhere (a cuDNN without the bug) the sweep must
be clean. The healthy kernels never cross the tolerance over several seeds, and `trace --device cuda
--train` names a failing call's line and is clean on the same model at a healthy length.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from .conftest import TOYS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(TOYS, "numerics_toy.py")


def _doctor(*args, env=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p), **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, env=env, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def _check(tmp_path, name, env=None):
    code, out, err = _doctor("check", "--json", "--no-cache", "--no-sample", env=dict(env or {}, ATTN_DOCTOR_CACHE_DIR=str(tmp_path / name)))
    report = json.loads(out)
    return code, report, {r["rule"]: r for r in report["results"]}


def _cudnn_tile_bug_here() -> bool:
    """Does this GPU's cuDNN backward have the NaN of pytorch#196678? Asked directly."""
    import math

    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 1, 704, 64, device="cuda", dtype=torch.bfloat16) * 0.1
    k = torch.randn(1, 1, 704, 64, device="cuda", dtype=torch.bfloat16) * 0.1
    v = torch.randn(1, 1, 704, 64, device="cuda", dtype=torch.bfloat16)
    q[..., 0], k[..., 0] = 1.0, -120 * math.sqrt(64)
    q.requires_grad_()
    try:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(704, 704, dtype=torch.bool, device="cuda").tril())
            out.backward(torch.randn_like(out))
    except RuntimeError:
        return False
    return bool((~torch.isfinite(q.grad)).any())


def test_check_reports_cudnns_backward_nan_and_is_clean_with_cudnn_deprioritized(tmp_path):
    code, report, results = _check(tmp_path, "default")
    swept = report["facts"]["smoke"]["numerics"]
    assert swept and {r["backend"] for r in swept} >= {"sdpa-cudnn", "sdpa-mem-efficient", "sdpa-math", "sdpa-flash"}
    if not _cudnn_tile_bug_here():
        assert results["AD704"]["status"] == "pass", results["AD704"]
        return
    ad704 = results["AD704"]
    assert ad704["status"] == "error" and code == 1, ad704
    message = ad704["message"]
    assert "cuDNN" in message and "dQ" in message and "NaN or inf" in message
    assert "key length 64 mod 128" in message and "SDPA picks it by default there" in message
    assert "pytorch/pytorch#196678" in message
    assert any("enable_cudnn_sdp(False)" in r["summary"] for r in ad704["remedies"])
    assert results["AD710"]["status"] == "skipped" and "AD704" in results["AD710"]["reason"]  # one finding per cause
    # The same node with cuDNN taken off the top of SDPA's order: the sweep still measures cuDNN
    # forced (a note), and nothing the job runs is wrong.
    code, report, results = _check(tmp_path, "deprioritized", env={"TORCH_CUDNN_SDPA_DEPRIORITIZED": "1"})
    assert results["AD704"]["status"] in ("info", "pass"), results["AD704"]
    assert results["AD710"]["status"] == "pass"
    # (an attention library installed beside torch is judged on its own: its measured numbers (AD706)
    # and its known bugs (AD714, AD717) are not SDPA's)
    assert not [r for r in report["results"] if r["status"] in ("error", "warning") and r["area"] == "kernels"
                and r["rule"] not in ("AD706", "AD714", "AD717")]


def _group(group, seed):
    code = ("import json, sys, torch; sys.path.insert(0, %r)\n"
            "from attn_doctor.facts import BF16_NATIVE_FROM\n"
            "from attn_doctor.probes.target.torch_probe import _load_file_module\n"
            "gc = _load_file_module('gc', %r); gc.BF16_NATIVE_FROM = tuple(BF16_NATIVE_FROM)\n"
            "print(json.dumps(gc.numerics_child().run_numerics_group(%r, gc._sdpa_backends(torch), 0, gc.bf16_native, %d)))"
            % (REPO, os.path.join(REPO, "attn_doctor", "probes", "target", "gpu_child.py"), group, seed))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_healthy_kernels_never_cross_the_tolerance(seed):
    """mem-efficient, math and flash over every case in both dtypes, three seeds: no false alarm."""
    for dtype in ("bfloat16", "float16"):
        answer = _group("num:sdpa:" + dtype, seed)
        assert answer["status"] == "ok"
        ran = [r for r in answer["numerics"] if r["status"] in ("ok", "wrong")]
        assert ran and not [r for r in ran if r["status"] == "wrong"], [r for r in ran if r["status"] == "wrong"]
        assert max(r["worst"] for r in ran) < 0.8


def _trace(seq):
    code, out, err = _doctor("trace", TOY + ":make", "--device", "cuda", "--train", "--dtype", "bf16", "-a", f"seq={seq}", "--json")
    return code, json.loads(out)


def test_trace_names_the_failing_call_and_is_clean_at_a_healthy_length():
    line = next(n for n, text in enumerate(open(TOY), 1) if text.rstrip().endswith("# SINK-MASK"))
    code, report = _trace(704)
    sink = report["sinks"][0]
    assert sink["kernel"]["source"] == "torch" and sink["numerics"]["runs"]
    if sink["kernel"]["name"] != "cudnn" or not _cudnn_tile_bug_here():
        assert not [f for f in report["findings"] if f["id"] == "AD617"]
        return
    (found,) = [f for f in report["findings"] if f["id"] == "AD617"]
    assert found["sink"]["line"] == line and found["severity"] == "error" and code == 1
    assert "dQ" in found["message"] and "NaN or inf" in found["message"] and "cuDNN" in found["message"]
    assert "enable_cudnn_sdp(False)" in found["fix"]
    # measured at the call: the known bug is not said again beside it
    assert not [f for f in report["findings"] if f["id"] == "AD710"]
    code, report = _trace(640)
    assert not [f for f in report["findings"] if f["id"] in ("AD617", "AD710")], report["findings"]
    assert report["sinks"][0]["numerics"]["runs"] and all(r["status"] == "ok" for r in report["sinks"][0]["numerics"]["runs"])


_PLAN_REUSE = """
import json, sys, torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
g = torch.Generator().manual_seed(0)
def bshd(): return torch.randn(1, 160, 2, 48, generator=g).to(torch.bfloat16).cuda().transpose(1, 2)
q, k, v, go_model = bshd(), bshd(), bshd(), bshd()
go = torch.randn(1, 2, 160, 48, generator=g).to(torch.bfloat16).cuda()
def grads(go):
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(*leaves).backward(go)
    return [t.grad.double() for t in leaves]
if sys.argv[1] == "primed":
    grads(go_model)  # the first backward of this shape in the process: the model's layout
ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
(torch.softmax(ref[0] @ ref[1].transpose(-2, -1) / 48 ** 0.5, -1) @ ref[2]).backward(go.double())
print(json.dumps(max(float((a - b.grad).abs().max()) for a, b in zip(grads(go), ref))))
"""


def test_the_grad_layout_case_finds_cudnns_backward_plan_reuse_exactly_where_it_happens():
    """cuDNN's backward for a shape first run with the output's gradient in (b, s, h, d) memory, then
    with it contiguous: where the second call's gradients differ from a fresh process's, the sweep's
    grad-layout-reuse case is wrong for cuDNN (and AD704 names it); where they agree, it is right."""
    pytest.importorskip("torch.nn.attention")
    errors = {}
    for how in ("fresh", "primed"):
        proc = subprocess.run([sys.executable, "-c", _PLAN_REUSE, how], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            pytest.skip("cuDNN SDPA does not run here: %s" % proc.stderr.strip().splitlines()[-1][:200])
        errors[how] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert errors["fresh"] < 0.1, errors  # a fresh process's backward is right
    reused_differs = errors["primed"] > 0.1
    answer = _group("num:sdpa-cudnn:bfloat16", 1)
    (row,) = [r for r in answer["numerics"] if r["case"] == "grad-layout-reuse"]
    assert row["status"] == ("wrong" if reused_differs else "ok"), (errors, row)
    healthy = _group("num:sdpa:bfloat16", 1)
    assert all(r["status"] in ("ok", "refused") for r in healthy["numerics"] if r["case"] == "grad-layout-reuse")
