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
