"""Who lacks the GPU's kernels when a text says 'no kernel image is available': torch's build
(AD105) unless the text shows it was another library (AD313): its own check's words or source
file, a call into its compiled module, or a torch named in the text whose official wheels carry
kernels for the GPU named there (recipes/data.toml's torch_wheel_kernels). Real explain on texts
as users paste them."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()


def _matches(text: str):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    first = next((m for m in report.matches if not m.harmless and m.likelihood != "unlikely"), None)
    return first, {m.rule: m for m in report.matches}, report


TORCH_OWN = [
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device",
    "[rank0]: RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "RuntimeError: cuda runtime error (209) : no kernel image is available for execution on the device at "
    "/pytorch/aten/src/THC/THCGeneral.cpp:50",
    "THCudaCheck FAIL file = / pytorch / torch / lib / THC / generic / THCTensorMathPairwise.cu line = 40 error = 48: "
    "no kernel image is available for execution on the device",
    "    cuda error: no kernel image is available for execution on the device.",
    "Windows 11 RTX 2070 - no kernel image is available for execution on the device",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 319, in _lazy_init\n'
    "    torch._C._cuda_init()\nRuntimeError: CUDA error: no kernel image is available for execution on the device",
    # a V100 is not among the capabilities every CUDA 12.8 wheel is known to carry: torch stays first
    "PyTorch Version: 2.7.1+cu128\nGPU 0: Tesla V100-SXM2-16GB\n"
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
]


@pytest.mark.parametrize("text", TORCH_OWN)
def test_torch_own_message_names_torch_first_and_the_extension_as_possible(text):
    first, by_rule, report = _matches(text)
    assert first is not None and first.rule == "AD105", (first and first.rule)
    assert "AD313" not in by_rule or by_rule["AD313"].likelihood == "possible"
    assert report.exit_code == 1


EXTENSION = [
    "CUDA kernel failed : no kernel image is available for execution on the device\n"
    "void furthest_point_sampling_kernel_wrapper(int, int, int, const float*, float*, int*) at L:231 in "
    "/src/pointnet2/_ext_src/src/sampling_gpu.cu",
    "      CUDA Error: no kernel image is available for execution on the device",
    '  File "/opt/venv/lib/python3.10/site-packages/pointops/functions.py", line 41, in forward\n'
    "    dist, idx = _C.knn_query_cuda(m, nsample, xyz, new_xyz)\n"
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "7900 XTX: Error invalid device function at line 679 in file /bitsandbytes/csrc/ops.hip",
    # ComfyUI's system report: a CUDA 12.8 wheel of torch has an RTX 3080's kernels
    "RuntimeError: CUDA error: no kernel image is available for execution on the device\n## System Information\n"
    "- **PyTorch Version:** 2.7.1+cu128\n## Devices\n- **Name:** cuda:0 NVIDIA GeForce RTX 3080 : cudaMallocAsync",
]


@pytest.mark.parametrize("text", EXTENSION)
def test_an_extension_is_named_where_the_text_shows_it(text):
    first, by_rule, report = _matches(text)
    assert first is not None and first.rule == "AD313", (first and first.rule, [m.rule for m in report.matches])
    assert report.exit_code == 1


def test_the_torch_reading_is_ruled_out_with_its_reason():
    _, by_rule, _ = _matches(EXTENSION[-1])
    assert by_rule["AD105"].likelihood == "unlikely"
    assert "torch 2.7.1+cu128" in by_rule["AD105"].likelihood_reason and "sm86" in by_rule["AD105"].likelihood_reason


# A torch named without a +cuXYZ tag (pip's default Linux wheel prints none) is any of its
# release's official CUDA wheels (data.torch_release_cudas): judged by all of them.
RELEASE_ONLY = [
    # every 2.3 wheel (CUDA 11.8, 12.1) carries sm_80: the extension's kernels are missing
    ("torch2.3.1 cuda11 A4000 or A30 or A100   error\n\n"
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "AD313", "unlikely"),
    # every 1.10 wheel (CUDA 10.2, 11.1, 11.3) runs sm_60 code on sm_61
    ("GPU: NVIDIA GeForce GTX 1080 Ti\nPyTorch: 1.10.0\n"
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "AD313", "unlikely"),
    # no 2.5 wheel (CUDA 11.8, 12.1, 12.4) has Blackwell code: torch's own build, confirmed
    ("torch 2.5.1 on an RTX 5090\n"
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "AD105", "confirmed"),
    # the 2.7 wheels differ (CUDA 11.8 and 12.6 lack sm_120, 12.8 has it): nothing is ruled out
    ("torch 2.7.0 on an RTX 5090\n"
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "AD105", "possible"),
    # a source build (+git) is no official wheel: not judged
    ("torch 2.3.0a0+git1234abc, A100\n"
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "AD105", "possible"),
]


@pytest.mark.parametrize("text,first_rule,torch_likelihood", RELEASE_ONLY)
def test_a_release_without_its_cuda_tag_is_judged_by_all_its_wheels(text, first_rule, torch_likelihood):
    first, by_rule, _ = _matches(text)
    assert first is not None and first.rule == first_rule, (first and first.rule)
    assert by_rule["AD105"].likelihood == torch_likelihood, by_rule["AD105"].likelihood_reason
