"""Attention libraries that do not import here (xformers, FlashAttention 3's flash_attn_interface,
SageAttention, the kernels hub): the model reaches each through a stand-in that enforces the
library's own checks and messages, the report says a stand-in judged it, and the patch it suggests
makes the model clean."""
import os
import shutil
import subprocess

import pytest

from conftest import TOYS, cli, marker_line, toy_target

TOY = "libs_toy.py"

CASES = {
    # library: (sink name, the library's own message, route label)
    "xformers": ("xformers.ops.memory_efficient_attention",
                 "Query/Key/Value should either all have the same dtype, or (in the quantized case) Key/Value should "
                 "have dtype torch.int32", "with xformers 0.0.35"),
    "fa3": ("flash_attn_interface.flash_attn_func", "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type",
            "with flash_attn_interface (FlashAttention 3) 3.0.0"),
    "sage": ("sageattention.sageattn", "Input tensors must be in dtype of torch.float16 or torch.bfloat16",
             "with sageattention 2.2.0"),
    "hub": ("kernels-community/flash-attn2:flash_attn_func", "FlashAttention only support fp16 and bf16 data type",
            "with the kernels hub's kernels-community/flash-attn2 (kernels 0.16.0)"),
}
SINK_MARKERS = {"xformers": "SINK-XFORMERS", "fa3": "SINK-FA3", "sage": "SINK-SAGE", "hub": "SINK-HUB"}


@pytest.mark.parametrize("library", sorted(CASES))
def test_a_promoted_q_is_found_at_the_library_call_in_its_words_and_its_patch_makes_it_clean(
        trace, tmp_path, monkeypatch, library):
    name, message, label = CASES[library]
    shutil.copy(os.path.join(TOYS, TOY), tmp_path / "model.py")
    monkeypatch.chdir(tmp_path)
    r = trace("model.py:build_" + library, routes=False)
    (f,) = r["findings"]
    assert f["id"] == "AD601" and f["severity"] == "error"
    assert f["kernel_message"].startswith(message)
    assert f["sink"]["name"] == name and f["sink"]["line"] == marker_line(TOY, SINK_MARKERS[library])
    assert [e["line"] for e in f["chain"] if e["op"] == "Tensor.mul"] == [marker_line(TOY, "PROMOTE-Q")]
    assert f["sink"]["standin"] is True
    (sink,) = r["sinks"]
    assert sink["standin"] is True and "judged with a stand-in" in sink["kernel"]["label"]
    (route,) = r["routes"]
    assert route["label"] == label
    assert any("is not installed here; used a stand-in" in n for n in r["notes"]), r["notes"]
    # the suggested cast, applied with git, leaves nothing to find
    (tmp_path / "fix.diff").write_text(f["patch"])
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run(["git", "apply", "fix.diff"], check=True)
    r2 = trace("model.py:build_" + library, routes=False)
    assert r2["status"] == "ok" and r2["findings"] == [], r2["findings"]


@pytest.mark.parametrize("library", sorted(CASES))
def test_what_the_library_takes_traces_clean(trace, library):
    r = trace(toy_target(TOY, "build_%s_clean" % library), routes=False)
    assert r["status"] == "ok" and r["findings"] == [] and r["summary"]["sinks"] == 1


def test_an_xformers_bias_of_another_dtype_is_refused_in_xformers_words(trace):
    r = trace(toy_target(TOY, "build_xformers_fp32_bias"), routes=False)
    (f,) = r["findings"]
    assert f["id"] == "AD606" and f["kernel_message"] == "invalid dtype for bias - should match query's dtype"


def test_sage_refuses_a_head_dim_it_has_no_kernel_for_and_an_old_gpu(trace):
    # SageAttention 2.2.0: sm80, 86, 89, 90, 120, 121 only
    r = trace(toy_target(TOY, "build_sage_clean"), routes=False, capability=(7, 5))
    assert [f["id"] for f in r["findings"]] == ["AD605"]
    assert "Unsupported CUDA architecture: sm75" in r["findings"][0]["kernel_message"]


@pytest.mark.slow
def test_the_cli_on_an_xformers_model_off_the_gpu_says_it_used_a_stand_in_and_traces_both_paths():
    code, out, err = cli(toy_target(TOY, "build_xformers"), "--no-color")
    assert code == 1, out + err
    assert "note: xformers is not installed here; used a stand-in that enforces xformers 0.0.35's checks" in out
    assert "attention paths (xformers does not import here" in out
    assert "as installed: could not run" in out and "No module named 'xformers'" in out
    assert "(judged with a stand-in)" in out
    assert "flash-attn" not in out  # no other library's stand-in is named


def test_the_kernels_stand_in_lets_libraries_import_its_layer_api_and_keeps_their_layers():
    # transformers imports kernels' layer API beside get_kernel (Device, CUDAProperties, kernelize,
    # use_kernel_forward_from_hub, use_kernelized_func...): inert, every layer keeps its forward
    import types

    from attn_doctor.tracing.standins.hub import make_kernels_standin

    kernels = make_kernels_standin(lambda name, package=False: types.ModuleType(name))["kernels"]

    @kernels.use_kernel_forward_from_hub("RMSNorm")
    class RMSNorm:
        pass

    def rotate_fast(x):
        return x

    @kernels.use_kernelized_func(rotate_fast)  # a name this stand-in does not list
    def rotate(x):
        return x

    assert RMSNorm.__name__ == "RMSNorm" and rotate(3) == 3
    assert kernels.CUDAProperties(min_capability=75, max_capability=90).min_capability == 75
    assert kernels.kernelize("model", mode=kernels.Mode.INFERENCE | kernels.Mode.TORCH_COMPILE) == "model"
    assert kernels.SomeNewRepository(repo_id="x").repo_id == "x"


# docs/development.md's recipe, followed for a made-up library: one module in standins/ and one
# entry in registry.LIBRARIES, in a copy of the package. The trace must then put its stand-in in
# place, judge its call by its rules in its words, name it in the note and the route, and find the
# line that promoted q, with nothing else of the tracer touched.
TOY_LIBRARY = '''"""toyattn 1.0, a made-up attention library: fp16 and bf16 only."""
from ..calls import sinks
from ..calls.sinks import problem
from .. import state
from .library import Library

STANDIN_TOYATTN_VERSION = "1.0"


def judge(dtypes, head_dims, capability, extras):
    if dtypes.get("q") not in sinks.HALF or len(set(dtypes.values())) > 1:
        return [problem("AD604", "error", "dtype", "toyattn: q, k and v must all be fp16 or all bf16")]
    return []


SPECS = {"toy_attn": sinks.SinkSpec("toyattn.toy_attn", "toyattn", "B,S,H,D", sinks.QKV, judge=judge)}


def _attend(q, k, v):
    import torch

    if q.dtype not in (torch.float16, torch.bfloat16) or not q.dtype == k.dtype == v.dtype:
        raise TypeError("toyattn: q, k and v must all be fp16 or all bf16")
    o = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return o.transpose(1, 2)


def toy_attn(q, k, v):
    tracer = state.ACTIVE[0]
    if tracer is None:
        return _attend(q, k, v)
    return tracer.sink_call(SPECS["toy_attn"], _attend, (q, k, v), {}, standin=True)


def make_toyattn_standin(module):
    top = module("toyattn", True)
    top.__version__ = STANDIN_TOYATTN_VERSION
    top.toy_attn = toy_attn
    return {"toyattn": top}


LIBRARY = Library(
    top="toyattn", family="toyattn", release="toyattn", version=STANDIN_TOYATTN_VERSION,
    label="toyattn %s" % STANDIN_TOYATTN_VERSION, kernel="ToyAttention", make=make_toyattn_standin, specs=SPECS,
    real_modules=("toyattn",), runners=lambda: {"toy_attn": _attend}, distribution="toyattn")
'''

TOY_MODEL = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(64, 192)
        self.register_buffer("q_scale", torch.ones(16), persistent=False)

    def forward(self, x):
        from toyattn import toy_attn

        q, k, v = self.qkv(x).view(2, 32, 3, 4, 16).unbind(2)
        q = q * self.q_scale  # PROMOTE-Q
        return toy_attn(q, k, v)  # SINK-TOY


def build():
    model = Block().to(torch.bfloat16)
    model.q_scale = model.q_scale.float()
    return model, torch.randn(2, 32, 64, dtype=torch.bfloat16)
'''


def test_a_new_library_is_one_module_and_one_registry_entry(tmp_path):
    import sys

    from conftest import REPO

    shutil.copytree(os.path.join(REPO, "attn_doctor"), tmp_path / "attn_doctor",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(REPO, "recipes"), tmp_path / "recipes")
    standins = tmp_path / "attn_doctor" / "tracing" / "standins"
    (standins / "toyattn.py").write_text(TOY_LIBRARY)
    registry = standins / "registry.py"
    text = registry.read_text()
    entry = "sage.LIBRARY, hub.LIBRARY)"
    assert text.count(entry) == 1 and text.count("from . import fa2, fa3, fa4, hub, sage, xformers\n") == 1
    registry.write_text(text.replace(entry, "sage.LIBRARY, hub.LIBRARY, toyattn.LIBRARY)").replace(
        "from . import fa2, fa3, fa4, hub, sage, xformers\n", "from . import fa2, fa3, fa4, hub, sage, toyattn, xformers\n"))
    (tmp_path / "model.py").write_text(TOY_MODEL)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "trace", "model.py:build", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=600)
    import json

    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    (f,) = report["findings"]
    lines = TOY_MODEL.splitlines()
    assert f["id"] == "AD601" and f["kernel_message"].startswith("toyattn: q, k and v must all be fp16 or all bf16")
    assert f["sink"]["name"] == "toyattn.toy_attn" and f["sink"]["standin"] is True
    assert f["sink"]["line"] == next(i for i, s in enumerate(lines, 1) if "SINK-TOY" in s)
    assert [e["line"] for e in f["chain"] if e["op"] == "Tensor.mul"] == [
        next(i for i, s in enumerate(lines, 1) if "PROMOTE-Q" in s)]
    assert "toyattn is not installed here; used a stand-in that enforces toyattn 1.0's checks and messages" in \
        report["notes"], report["notes"]
    (route,) = [r for r in report["routes"] if r["name"] == "standin"]
    assert route["label"] == "with toyattn 1.0" and route["attention"] == ["ToyAttention"], route
    assert route["libraries"] == "toyattn" and route["verdict"] == "fails"
