"""Readings of texts that look alike and differ in cause: who lacks a GPU's kernels when the text says
so in words; CPU tensors handed to a GPU-only kernel on a GPU machine against a machine without CUDA;
an xformers operator that predates the GPU against flash-attn 2's floor; the triton.language API a
kernel was written for, gone from the installed Triton (retold, or an argument a release dropped); transformers refusing TF32 below Ampere.
Real explain on texts as users paste them."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()


def _first(text: str) -> str:
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    first = next((m for m in report.matches if not m.harmless and m.likelihood != "unlikely"), None)
    return first.rule if first else None


def test_a_text_saying_torch_s_build_lacks_the_architecture_names_torch_over_a_c_check_s_enum():
    text = ("The job fails on any CUDA operation with `cudaErrorNoKernelImageForDevice`. The PyTorch build in the "
            "image (`torch 2.10.0+cu128`) does not contain kernel images for the P100's compute capability (`sm_60`).")
    assert _first(text) == "AD105"
    # the enum alone, no such words: a C++ program's or library's own check, as before
    assert _first("terminate called after throwing an instance of 'thrust::system_error'\n"
                  "  what():  parallel_for failed: cudaErrorNoKernelImageForDevice: no kernel image is available for execution on the device") == "AD313"


XFORMERS_CPU = """NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:
     query       : shape=(8, 1024, 1, 64) (torch.float32)
     key         : shape=(8, 1024, 1, 64) (torch.float32)
     value       : shape=(8, 1024, 1, 64) (torch.float32)
     attn_bias   : <class 'NoneType'>
     p           : 0.0
`cutlassF` is not supported because:
    device=cpu (supported: {'cuda'})
`flshattF` is not supported because:
    device=cpu (supported: {'cuda'})
    dtype=torch.float32 (supported: {torch.float16, torch.bfloat16})
"""


@pytest.mark.parametrize("around, rule", [
    ("My server has an A800.\n", "AD256"),                                   # CPU tensors on a GPU machine
    ("I am on a MacBook (Apple M2).\n", "AD259"),                            # no CUDA here at all
    ("", "AD256"),
])
def test_cpu_tensors_refused_by_xformers_are_the_platform_s_only_where_the_text_shows_no_cuda(around, rule):
    assert _first(around + XFORMERS_CPU) == rule


def test_torch_without_cuda_on_a_machine_run_on_the_cpu_on_purpose_is_the_platform():
    text = ("Trying to generate voice on CPU only: python demo/infer.py --device cpu\n"
            "AssertionError: Torch not compiled with CUDA enabled")
    assert _first(text) == "AD259"
    assert _first("AssertionError: Torch not compiled with CUDA enabled") == "AD106"  # a CPU build where CUDA was wanted


def test_an_xformers_operator_that_predates_the_gpu_is_not_flash_attn_2_s_floor():
    newer = XFORMERS_CPU.replace("device=cpu (supported: {'cuda'})",
                                 "requires device with capability <= (9, 0) but your GPU has capability (12, 0) (too new)")
    assert _first(newer) == "AD317"
    older = XFORMERS_CPU.replace("device=cpu (supported: {'cuda'})",
                                 "requires device with capability > (8, 0) but your GPU has capability (7, 5) (too old)")
    assert _first(older) == "AD103"


@pytest.mark.parametrize("text", [
    "AttributeError: module 'triton.language.math' has no attribute 'round'",
    'I always get "triton.language.math has no module round" with triton 3.0',
    "ModuleNotFoundError: No module named 'triton.ops'",
])
def test_a_kernel_written_for_another_triton_language_api(text):
    assert _first(text) == "AD201"  # the Triton installed is not the one the code was written for


def test_a_triton_language_call_of_an_older_release_is_the_kernels_not_the_pin():
    # tl.dot's trans_b went in Triton 2.1: the kernel needs its own Triton, which torch's pin may not be
    assert _first("TypeError(\"dot() got an unexpected keyword argument 'trans_b'\")") == "AD667"


def test_transformers_refusing_tf32_below_ampere_is_the_config_s_tf32():
    assert _first("ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7") == "AD509"
