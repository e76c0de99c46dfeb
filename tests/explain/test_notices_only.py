"""The notices-only reading (AD673): a short paste made only of warnings and notices, with nothing
that failed, is said to be harmless, and nothing more. The warnings are printed by the real thing:
Python's warnings module and logging's default format in a subprocess, torch's own C++ warning
(TORCH_WARN) raised by real torch on the CPU."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.explaining.notices import notice_lines
from attn_doctor.rules.loader import load_recipes


@pytest.fixture(scope="module")
def recipes():
    return load_recipes()


def _explain(recipes, text: str):
    return explain(io.BytesIO(text.encode()), recipes, kind="text")


def _printed(code: str) -> str:
    """What a Python program prints on stderr (warnings, log lines), run for real."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_python_warnings_and_log_notices_are_harmless(recipes):
    text = _printed("""
        import logging, warnings
        logging.basicConfig(level=logging.INFO)
        logging.getLogger("spikingjelly.clock_driven.neuron").info("No module named 'lava.lib'")
        logging.warning("This caffe2 python run does not have GPU support. Will run in CPU only mode.")
        warnings.warn("the foo option is ignored when bar is set", RuntimeWarning)
    """)
    assert "INFO:spikingjelly" in text and "RuntimeWarning:" in text
    report = _explain(recipes, text)
    assert [m.rule for m in report.matches] == ["AD673"]
    (match,) = report.matches
    assert match.harmless and match.likelihood == "confirmed" and match.occurrences == 3
    assert report.exit_code == 0


def test_torchs_own_cpp_warning_is_harmless(recipes):
    pytest.importorskip("torch")
    # torch's TORCH_WARN_ONCE in ATen's TensorShape.cpp, printed by real torch on the CPU
    text = _printed("""
        import warnings, torch
        warnings.simplefilter("always")
        torch.meshgrid(torch.arange(2), torch.arange(2))
    """)
    assert "(Triggered internally at " in text
    report = _explain(recipes, text)
    assert [m.rule for m in report.matches] == ["AD673"], [m.rule for m in report.matches]
    assert report.exit_code == 0


@pytest.mark.parametrize("after", [
    "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\nRuntimeError: boom",
    "Segmentation fault (core dumped)",
    "and then the training is stuck at step 0",
    "ERROR:root:the dataloader worker died",
    "E1129 12:00:00.000000 4242 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation",
    "[E socket.cpp:860] [c10d] The client socket has timed out",
    "CRITICAL:trainer:worker lost",
    "训练报错了",
])
def test_a_line_that_failed_takes_the_reading_away(recipes, after):
    base = "/x/lib.py:12: UserWarning: the foo option is ignored when bar is set\n  warnings.warn(\n"
    assert [m.rule for m in _explain(recipes, base).matches] == ["AD673"]  # the warning alone is read
    report = _explain(recipes, base + after + "\n")
    assert "AD673" not in [m.rule for m in report.matches]


def test_a_warning_that_names_a_known_cause_is_that_cause(recipes):
    # a warning that is itself a problem attn-doctor knows keeps its own finding
    text = ("/x/torch/cuda/__init__.py:262: UserWarning: \n"
            "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
            "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n")
    report = _explain(recipes, text)
    assert report.matches and report.matches[0].rule != "AD673" and not report.matches[0].harmless


def test_prose_without_a_notice_is_not_read(recipes):
    forms = recipes.data["notices_only"]
    assert notice_lines([("I ran the training script yesterday", 1)], forms) is None
    assert notice_lines([], forms) is None
    got = notice_lines([("W1129 12:00:01.000 foo.cc:12] falling back", 1), ("ok then", 2)], forms)
    assert got == [("W1129 12:00:01.000 foo.cc:12] falling back", 1)]


def test_a_long_log_is_not_read(recipes):
    # beyond a short paste the text's end may lie outside what was read: no claim about all of it
    text = "".join(f"/x/lib.py:{i}: UserWarning: note {i}\n" for i in range(60))
    assert "AD673" not in [m.rule for m in _explain(recipes, text).matches]


@pytest.mark.parametrize("text", [
    "WARNING:root:NaN or Inf found in input tensor.",
    "Warning: CUDA warning: an illegal memory access was encountered",
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500",
    "WARNING: training stuck at step 0",
    "/x/amp.py:10: UserWarning: gradient overflow, skipping step",
    "[W1129 12:00:00.000 alloc.cpp:5] CUDA out of memory, retrying with a smaller batch",
])
def test_a_notice_that_tells_of_a_symptom_is_not_harmless(recipes, text):
    assert "AD673" not in [m.rule for m in _explain(recipes, text + "\n").matches]


def test_a_coloured_notice_is_read_and_shown_without_its_colour_codes(recipes):
    report = _explain(recipes, "\x1b[33mWARNING:root:optional module lava.lib missing\x1b[0m\n")
    (match,) = report.matches
    assert match.rule == "AD673" and match.evidence and "\x1b" not in match.evidence[0].text


def test_a_text_read_only_in_part_is_not_said_to_be_all_notices(recipes):
    # a line longer than the scanner keeps whole: what it holds past its cut is not read
    text = "/x/lib.py:1: UserWarning: note\n" + "x" * 70000 + " then Traceback (most recent call last) ValueError\n"
    assert "AD673" not in [m.rule for m in _explain(recipes, text).matches]


def test_a_loggers_one_letter_level_in_brackets_is_read(recipes):
    """TensorRT's logger writes its level as one letter after its tag ("[TRT] [W] "): a paste of its
    warnings is harmless; one of its errors is a failure."""
    warned = ("[05/27/2023-19:14:07] [TRT] [W] TensorRT was linked against cuDNN 8.9.0 but loaded cuDNN 8.7.0\n"
              "[05/27/2023-19:14:07] [TRT] [I] [MemUsageChange] Init CUDA: CPU +0, GPU +0, now: CPU 500, GPU 1000 (MiB)\n")
    assert [m.rule for m in _explain(recipes, warned).matches] == ["AD673"]
    failed = warned + "[05/27/2023-19:14:09] [TRT] [E] 4: [network.cpp::validate::2925] Error Code 4: Internal Error\n"
    assert "AD673" not in [m.rule for m in _explain(recipes, failed).matches]


# Level letters other loggers write: onnxruntime's before its logger's name ("[W:onnxruntime:, ...]");
# TensorFlow's and XLA's C++ lines between the timestamp and the source file ("...578885: W
# tensorflow/.../dso_loader.cc:64] ", whose notice that the CUDA runtime DLL is absent means it runs on
# the CPU). Their notices alone are harmless; one E line after them is a failure.
@pytest.mark.parametrize("noted,failure", [
    ("2025-07-01 14:55:30.4411378 [I:onnxruntime:, transformer_memcpy.cc:329 onnxruntime::TransformerMemcpyImpl] "
     "Memcpy nodes\n2025-07-01 14:55:30.4464910 [W:onnxruntime:, transformer_memcpy.cc:74 "
     "onnxruntime::MemcpyTransformer] 2 Memcpy nodes are added to the graph\n",
     "2025-07-01 14:55:31.0000000 [E:onnxruntime:, sequential_executor.cc:572 ExecuteKernel] Non-zero "
     "status code returned while running Relu node.\n"),
    ("2022-06-22 15:44:53.578885: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load "
     "dynamic library 'cudart64_110.dll'; dlerror: cudart64_110.dll not found\n",
     "2022-06-22 15:44:55.000000: E tensorflow/stream_executor/cuda/cuda_driver.cc:271] failed call to "
     "cuInit: UNKNOWN ERROR (303)\n"),
], ids=["onnxruntime", "tensorflow"])
def test_another_loggers_level_letter_is_read(recipes, noted, failure):
    assert [m.rule for m in _explain(recipes, noted).matches] == ["AD673"]
    assert "AD673" not in [m.rule for m in _explain(recipes, noted + failure).matches]


def test_a_compiler_check_warning_is_a_cause_only_where_the_build_then_fails(recipes):
    """torch's extension builder warns that it could not run cl to read its version, then builds
    anyway: alone, or before the build's success, the warning is a notice; before a failure it is
    the build environment's (AD315)."""
    warned = ("C:\\env\\lib\\site-packages\\torch\\utils\\cpp_extension.py:316: UserWarning: Error checking compiler "
              "version for cl: [WinError 2] The system cannot find the file specified\n"
              "  warnings.warn(f'Error checking compiler version for {compiler}: {error}')\n")
    matches = _explain(recipes, warned).matches
    assert matches and all(m.harmless for m in matches), [(m.rule, m.harmless) for m in matches]
    built = warned + "copying build\\lib.win-amd64-3.7\\support\\_C.cp37-win_amd64.pyd -> support\nFinished processing dependencies for support==0.1\n"
    assert all(m.harmless for m in _explain(recipes, built).matches)
    failed = warned + "building 'model._C' extension\nerror: Microsoft Visual C++ 14.0 or greater is required.\n"
    assert "AD315" in [m.rule for m in _explain(recipes, failed).matches if not m.harmless]


# NCCL's own lines (NCCL_DEBUG=INFO: "host:pid:tid [device] NCCL INFO ..."), recorded from a real H200 node:
# its INFO lines, and a WARN that names no failure, are notices; a WARN that failed is not one
def test_nccls_info_lines_and_a_warning_without_a_failure_are_notices(recipes):
    info = ("msm-h200-2:4009:4009 [0] NCCL INFO cudaDriverVersion 12040\n"
            "msm-h200-2:4009:4009 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
            "No such file or directory No plugin found (libnccl-net.so), using internal implementation\n"
            "msm-h200-2:4009:4557 [0] NCCL INFO Using network IB\n")
    assert [m.rule for m in _explain(recipes, info).matches] == ["AD673"]
    assert [m.rule for m in _explain(recipes, "nid001:12:12 [1] misc/ibvwrap.cc:173 NCCL WARN lib wrapper not initialized.\n").matches] == ["AD673"]
    for failure in ("msm-h200-2:4009:4557 [0] NCCL WARN Call to connect returned Connection refused, retrying\n",
                    "msm-h200-2:4009:4557 [0] NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000\n",
                    "msm-h200-2:4009:4557 [0] NCCL INFO misc/socket.cc:484 -> 6\n"):
        assert "AD673" not in [m.rule for m in _explain(recipes, info + failure).matches], failure


# TensorFlow's start-up lines as it prints them (tensorflow/stream_executor, 2.x)
_TF_PROBE = (
    "2023-02-14 11:37:10.700086: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic "
    "library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file or directory\n"
    "2023-02-14 11:37:10.700103: I tensorflow/stream_executor/cuda/cudart_stub.cc:29] Ignore above cudart dlerror if you "
    "do not have a GPU set up on your machine.\n"
)
_TF_GPU = ("2021-08-28 11:45:41.068597: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1720] Found device 0 with "
           "properties:\npciBusID: 0000:00:04.0 name: Tesla V100-SXM2-16GB computeCapability: 7.0\n")


def test_tensorflows_cuda_probe_on_a_machine_without_a_gpu_is_its_own_notice(recipes):
    report = _explain(recipes, _TF_PROBE)
    assert [m.rule for m in report.matches if not m.harmless and m.likelihood != "unlikely"] == []
    assert any(m.harmless for m in report.matches)


def test_tensorflows_cuda_probe_where_it_lists_a_gpu_is_the_missing_runtime(recipes):
    report = _explain(recipes, _TF_PROBE + _TF_GPU)
    assert "AD418" in [m.rule for m in report.matches if not m.harmless]


def test_tensorflows_cuda_probe_is_the_missing_runtime_where_the_text_names_a_gpu_or_goes_on(recipes):
    # a GPU in the writer's words, or nvidia-smi's table: the user who has a GPU and lacks the runtime
    named = "I have an RTX 3090 but tensorflow says Num GPUs Available: 0\n" + _TF_PROBE
    assert "AD418" in [m.rule for m in _explain(recipes, named).matches if not m.harmless]
    # a long log, whose device list may lie past what the guard reads: the load failure stays the cause
    long = _TF_PROBE + "".join(f"step {i}: loss 0.{i:03d}\n" for i in range(60))
    assert "AD418" in [m.rule for m in _explain(recipes, long).matches if not m.harmless]
