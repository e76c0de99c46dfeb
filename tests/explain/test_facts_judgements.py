"""Readings that the text's own facts decide (a signature's `facts`): cuDNN's and cuBLAS's
EXECUTION_FAILED is read as torch's build lacking the GPU's code only where the text names a torch
built with CUDA before 11.0, confirmed where it also names an Ampere or newer GPU, and not at all
where it names none or names a GPU that build has code for. Also the extension readings added with
it: an extension installed without its CUDA part, a project's own ctypes library never built, a
CPU-only torch read from its own factory op, MSVC without the Windows SDK's headers."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining import builds
from attn_doctor.explaining.core import explain
from attn_doctor.rules import analyzers
from attn_doctor.rules.loader import RecipeError, load_recipes

CUDNN = "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"
CUBLAS = ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, "
          "k, &alpha, a, lda, b, ldb, &beta, c, ldc)`")


@pytest.fixture(scope="module")
def recipes():
    return load_recipes()


def _found(recipes, text: str) -> list[tuple[str, str]]:
    report = explain(io.BytesIO(text.encode()), recipes, kind="text")
    return [(m.rule, m.likelihood) for m in report.matches]


def test_the_judgements_named_by_signatures_are_the_ones_explain_runs():
    assert set(analyzers.FACT_JUDGEMENTS) == set(builds.FACT_JUDGEMENTS)


@pytest.mark.parametrize("text", [
    CUDNN,  # nothing known: a bad input or a faulty kernel give it as well
    f"torch 1.6.0 on a Tesla P100\n{CUDNN}",  # the build has the P100's code
    f"torch 2.1.0+cu121\n{CUDNN}",  # a CUDA 12 build has every GPU of its time
    f"torch 1.7.1\n{CUDNN}",  # 1.7's wheels include a CUDA 11.0 build: the CUDA is not known
    # torch 1.7.0's own conda builds (CUDA 11.0 among them) started the day before its release
    "GPU: NVIDIA A100-SXM4-40GB\n  File \"/opt/conda/conda-bld/pytorch_1603729096996/work/torch/tensor.py\", line 102\n"
    + CUBLAS,
])
def test_execution_failed_without_a_build_that_predates_the_gpu_is_not_torch_arch(recipes, text):
    assert "AD105" not in dict(_found(recipes, text))


@pytest.mark.parametrize("text, likelihood", [
    (f"my environment: pytorch: 1.5.1+cu101\n{CUDNN}", "possible"),
    (f"I followed the author to set the torch=1.6 with cuda=10.1\n{CUDNN}", "possible"),
    (f"conda install pytorch==1.7.1 cudatoolkit=10.2\n{CUBLAS}", "possible"),
    (f"torch 1.6.0 on an RTX 3090\n{CUDNN}", "confirmed"),
    (f"torch 1.4.0+cu101, GPU: NVIDIA A100-SXM4-40GB\n{CUBLAS}", "confirmed"),
    # no version written: the build's date, from torch's conda build folder in a THC path
    ("RuntimeError: cublas runtime error : the GPU program failed to execute at C:/w/1/s/tmp_conda_3.7_044431/conda/"
     "conda-bld/pytorch_1556686009173/work/aten/src/THC/THCBlas.cu:259", "possible"),
])
def test_execution_failed_with_a_build_before_cuda_11_is_torch_arch(recipes, text, likelihood):
    found = _found(recipes, text)
    assert found[0] == ("AD105", likelihood), found


def test_advice_that_names_memory_is_no_earlier_failure(recipes):
    text = ("torch 1.6.0 on an RTX 3090\nTip: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid running out "
            "of memory\n" + CUDNN)
    assert dict(_found(recipes, text))["AD105"] == "confirmed"


def test_a_conda_build_after_the_first_cuda_11_torch_is_not_read_so(recipes):
    text = ("File \"/opt/conda/conda-bld/pytorch_1659484810403/work/aten/src/ATen/native/cuda/Blas.cpp\", line 1\n"
            + CUBLAS)
    assert "AD105" not in dict(_found(recipes, text))


def test_execution_failed_after_a_device_side_assert_is_its_echo(recipes):
    failed = ("Traceback (most recent call last):\n  File \"train.py\", line 319, in train_loop\n    loss.backward()\n"
              "  File \"/opt/conda/conda-bld/pytorch_1549630534704/work/torch/tensor.py\", line 102, in backward\n" + CUDNN)
    assert dict(_found(recipes, failed))["AD105"] == "possible"
    assert "AD105" not in dict(_found(recipes, "THCudaCheck FAIL file=x/serialization.cpp line=23 error=59 : device-side "
                                                "assert triggered\n" + failed))


def test_a_signature_naming_an_unknown_judgement_is_refused(tmp_path):
    (tmp_path / "r.toml").write_text('''
[[rule]]
id = "AD999"
name = "x"
area = "gpu"
severity = "error"
title = "x"
message = "x"
explanation = "x"
signatures = [{ pattern = "CUDNN_STATUS_EXECUTION_FAILED", facts = "no_such_judgement" }]
[rule.signature_fixtures]
match = ["CUDNN_STATUS_EXECUTION_FAILED"]
no_match = ["x"]
''')
    with pytest.raises(RecipeError, match="unknown facts judgement 'no_such_judgement'"):
        load_recipes(tmp_path)


@pytest.mark.parametrize("text, rule", [
    ("RuntimeError: Not compiled with CUDA support", "AD355"),
    ("_RuntimeError: [KeOps] This KeOps shared object has been compiled without cuda support: ", "AD355"),
    ("/x/site-packages/MinkowskiEngine/__init__.py:225: UserWarning: The MinkowskiEngine was compiled with CPU_ONLY flag. "
     "If you want to compile with CUDA support, make sure `torch.cuda.is_available()` is True when you install MinkowskiEngine.",
     "AD355"),
    ("  File \"example.py\", line 5, in <module>\n    con = config.Config()\nOSError: ./release/Base.so: invalid ELF header", "AD354"),
    ("NotImplementedError: Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend. This could be because "
     "the operator doesn't exist for this backend", "AD106"),
    ("C:\\env\\include\\pyconfig.h(59): fatal error C1083: Cannot open include file: 'io.h': No such file or directory", "AD315"),
    ("RuntimeError: Detected that PyTorch and torch_scatter were compiled with different CUDA versions. PyTorch has CUDA "
     "version 10.1 and torch_scatter has CUDA version 10.2.", "AD312"),
    ("  File \"F:\\AI\\venv\\lib\\site-packages\\exllamav2\\ext.py\", line 291, in <module>\n    ext_c = exllamav2_ext\n"
     "NameError: name 'exllamav2_ext' is not defined", "AD354"),
    ("    raise child_exception_type(errno_num, err_msg, err_filename)\nFileNotFoundError: [Errno 2] No such file or "
     "directory: 'cmake'", "AD315"),
    # thrust / CUB inside an extension name the CUDA runtime's error; torch names it only in its "Search for" line
    ("RuntimeError: radix_sort: failed on 1st step: cudaErrorInvalidDeviceFunction: invalid device function", "AD313"),
    # "= 9.0" is one architecture, not a floor: a B200 (10.0) is refused as unsupported, not as too old
    ("RuntimeError: torch._grouped_mm is only supported on CUDA devices with compute capability = 9.0", "AD317"),
    ("RuntimeError: torch._grouped_mm is only supported on CUDA devices with compute capability >= 9.0", "AD110"),
    ("GPU 0: NVIDIA B200\nRuntimeError: torch._grouped_mm is only supported on CUDA devices with compute capability = 9.0", "AD317"),
])
def test_extension_build_and_architecture_readings(recipes, text, rule):
    found = _found(recipes, text)
    assert found and found[0][0] == rule, found


@pytest.mark.parametrize("text, likelihood", [
    # an exception raised with several arguments prints them as a tuple
    ("(EngineCore_DP0 pid=1014) RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min "
     "capability: 80. ', 'Current capability: 75.')", "confirmed"),
    ("RuntimeError: Quantization scheme is not supported for the current GPU. Min capability: 80. Current capability: 90.",
     "unlikely"),
])
def test_a_stated_minimum_capability_is_judged_against_the_stated_gpu(recipes, text, likelihood):
    assert dict(_found(recipes, text))["AD110"] == likelihood


@pytest.mark.parametrize("text", [
    "UserWarning: The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers are unavailable.",
    "ValueError: This CTranslate2 package was not compiled with CUDA support",
    "OSError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
    "NotImplementedError: Could not run 'aten::quantize_per_tensor' with arguments from the 'CUDA' backend.",
    "NameError: name 'make_kernel' is not defined",
    "NameError: name 'move_to_cuda' is not defined",
    "OSError: /tmp/tmpab12cd/kernel.so: cannot open shared object file: No such file or directory",
    "OSError: /home/u/.cache/numba/kernel.so: invalid ELF header",
])
def test_look_alikes_of_those_readings_are_not_them(recipes, text):
    assert not {"AD355", "AD354", "AD106"} & {r for r, _ in _found(recipes, text)}


@pytest.mark.parametrize("text", [
    "NameError: name 'file_ext' is not defined",
    "NameError: name 'use_cuda' is not defined",
    # torch's own shape check (kernel libraries repeat its words): the model's shapes, not the stack
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (128x4 and 1x128)",
    # Python's own shared library, not torch's (a known case names libc10.so in the same words)
    "ImportError: libpython3.8.so.1.0: cannot open shared object file: No such file or directory",
    # a C++ backtrace's throwing frame heads every TensorRT-LLM error, whatever the error
    "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Failed to refit transformer.layers.0.input_layernorm.bias "
    "(/opt/TensorRT-LLM/cpp/tensorrt_llm/runtime/tllmRuntime.cpp:229)\n1       0x7fcb9b2f2ee4 tensorrt_llm::common::"
    "throwRuntimeError(char const*, int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
    "const&) + 100",
])
def test_look_alikes_that_are_no_failure_of_the_stack_raise_nothing(recipes, text):
    report = explain(io.BytesIO(text.encode()), recipes, kind="text")
    assert not [m.rule for m in report.matches if not m.harmless and m.likelihood != "unlikely"]


@pytest.mark.parametrize("text, rule, likelihood", [
    # the one architecture a kernel is built for, against a newer GPU: not a GPU below a floor
    ("RuntimeError: Check failed: (12 vs. 10) :\nThis kernel requires 10.x architecture. Current device has SM 120",
     "AD317", "confirmed"),
    ("RuntimeError: This kernel requires 9.x architecture. Current device has SM 90", "AD317", "unlikely"),
])
def test_the_architectures_a_kernel_is_built_for_are_judged_against_the_stated_gpu(recipes, text, rule, likelihood):
    found = dict(_found(recipes, text))
    assert found.get(rule) == likelihood, found
    assert "AD110" not in found  # "SM 120" after the sentence's end is the GPU it has, not a floor


@pytest.mark.parametrize("text, likelihood", [
    # the exact capability, not its major: 8.6 is not 8.0
    ("RuntimeError: foo is only supported on CUDA devices with compute capability = 8.0, but current device has compute "
     "capability 8.6", "confirmed"),
    ("RuntimeError: foo is only supported on CUDA devices with compute capability = 9.0, but current device has compute "
     "capability 9.0", "unlikely"),
])
def test_an_exact_capability_is_judged_whole(recipes, text, likelihood):
    assert dict(_found(recipes, text)).get("AD317") == likelihood


@pytest.mark.parametrize("text", [
    "GPU 0: NVIDIA GeForce RTX 3090\nCUDA: System has 11.8, ONNX Runtime 1.17.0 requires 12.x",
    "RuntimeError: Logging system not yet initialized",
])
def test_a_version_or_another_system_is_no_gpu_reading(recipes, text):
    found = dict(_found(recipes, text))
    assert "AD317" not in found and "AD115" not in found, found
