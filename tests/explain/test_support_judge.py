"""explain judges a refusal's facts against the support matrix: the kernel named (or implied by the
frames), the GPU named in the text or the log (NVIDIA and AMD), the head size, the dtype, the
feature. A fact the matrix says the kernel does not support is the reason, with the matrix's remedy;
facts it says are supported, or unknown, give no reason from the matrix."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
MATRIX_RULES = {"AD326", "AD327", "AD328", "AD329"}


def _matches(text: str):
    return explain(io.BytesIO(text.encode()), RECIPES, kind="text").matches


def _matrix(text: str):
    return [m for m in _matches(text) if m.rule in MATRIX_RULES]


@pytest.mark.parametrize(
    ("text", "rule", "reason", "remedy"),
    [
        # a consumer card newer than the release's architecture check, named by the log
        ("flash-attn==2.6.3\nGPU 0: NVIDIA GeForce RTX 5090 (UUID: GPU-1)\n"
         "RuntimeError: flash_attn_2_cuda: this GPU architecture is not supported by this build",
         "AD326", "not for this GPU's sm120", "Upgrade flash-attn to 2.7.3 or newer"),
        # an older GPU below the floor
        ("GPU 0: Tesla V100-SXM2-32GB\ncudnn_frontend error: No execution plans support the graph (cuDNN SDPA)",
         "AD326", "not for this GPU's sm70", "PyTorch SDPA's memory-efficient kernel"),
        # Composable Kernel's attention on an AMD GPU it is not built for
        ("torch 2.5.1+rocm6.2 on AMD Radeon RX 7900 XTX\nRuntimeError: ck_tile fmha fwd: this device is not supported",
         "AD326", "not for this GPU's gfx1100", "FlashAttention 2 (ROCm, Triton backend)"),
        # FlexAttention lowered on the CPU by a torch without the CPU template
        ("torch==2.5.1\nNotImplementedError: flex_attention is not supported on the CPU",
         "AD326", "not for the CPU", "Upgrade torch to 2.6 or newer"),
        # a serving engine's paged attention refusing a head size
        ('  File "/usr/lib/python3.10/site-packages/vllm/attention/ops/paged_attn.py", line 40, in forward\n'
         "ValueError: Head size 72 is not supported by PagedAttention. Supported head sizes are: [32, 64, 80, 96, 112, 120, 128, 192, 256].",
         "AD327", "72 is not one of them", "take head size 72"),
        # bf16 on a GPU without it, at a kernel that takes it only from sm80
        ("GPU 0: Tesla T4\nNotImplementedError: xformers cutlassF: bf16 is not supported on this device",
         "AD328", "not bfloat16", "Run it in float16"),
        # a feature the installed release predates
        ("flash-attn==2.5.8\nValueError: softcapping is not supported by flash_attn 2.5.8",
         "AD329", "came in flash-attn 2.6.0", "Upgrade flash-attn to 2.6.0 or newer"),
    ],
)
def test_a_fact_the_matrix_says_the_kernel_lacks_is_the_reason_with_its_remedy(text, rule, reason, remedy):
    (match,) = _matrix(text)
    assert match.rule == rule and match.likelihood == "confirmed"
    assert reason in match.message and reason in match.likelihood_reason
    assert any(remedy in r.summary for r in match.remedies), [r.summary for r in match.remedies]
    assert match.captures["support_source"].startswith("https://")


@pytest.mark.parametrize(
    "text",
    [
        # the same refusals where the matrix says the facts are supported: no reason from it
        "flash-attn==2.7.4\nGPU 0: NVIDIA GeForce RTX 5090 (UUID: GPU-1)\nRuntimeError: flash_attn_2_cuda: this GPU architecture is not supported",
        "GPU 0: NVIDIA H100 80GB HBM3\ncudnn_frontend error: No execution plans support the graph (cuDNN SDPA)",
        "AMD Instinct MI300X\nRuntimeError: ck_tile fmha fwd: this device is not supported",
        "torch==2.6.0\nNotImplementedError: flex_attention is not supported on the CPU",
        "ValueError: Head size 128 is not supported by vllm paged_attention_v2.",
        "GPU 0: NVIDIA A100-SXM4-80GB\nNotImplementedError: xformers cutlassF: bf16 is not supported on this device",
        "flash-attn==2.6.3\nValueError: softcapping is not supported by flash_attn 2.6.3",
        # facts unknown: no release shown
        "ValueError: softcapping is not supported by flash_attn",
        # no GPU named, and the refusal does not say it is the architecture
        "RuntimeError: flash_attn_2_cuda: this input is not supported",
        # a refusal of something the matrix does not speak of, though a kernel and a GPU are named
        "GPU 0: Tesla T4\nflash-attn==2.6.3\nValueError: right padding is not supported by this tokenizer",
    ],
)
def test_facts_the_matrix_says_are_supported_or_unknown_give_no_reason(text):
    assert _matrix(text) == []


@pytest.mark.parametrize(
    ("text", "built_for"),
    [
        ("RuntimeError: flash_attn_2_cuda: this GPU architecture is not supported", "sm80+"),
        ("[TensorRT-LLM][ERROR] Assertion failed: Unsupported architecture (/src/cpp/tensorrt_llm/kernels/"
         "contextFusedMultiHeadAttention/fmhaRunner.cpp:87)", "sm80+"),
        # the dtype the refusal names narrows the list to where that dtype runs
        ("[TensorRT-LLM][ERROR] Assertion failed: FP8 FMHA cannot be enabled except on Ada or Hopper or Blackwell "
         "Arch. (/code/tensorrt_llm/cpp/tensorrt_llm/common/attentionOp.cpp:2357)", "float8_e4m3fn on sm89+"),
    ],
)
def test_a_refusal_of_the_architecture_with_no_gpu_named_says_what_the_kernel_is_built_for(text, built_for):
    # the text itself says the architecture is refused; the matrix adds what the kernel is built for and
    # how to compare the GPU with it, and says the text names no GPU rather than naming one
    (match,) = _matrix(text)
    assert match.rule == "AD326"
    assert "the text names no GPU" in match.message and built_for in match.message, match.message
    assert any("compute_cap" in r.summary for r in match.remedies)


def test_flash_attn_on_an_amd_gpu_is_judged_as_its_rocm_builds():
    # the CUDA kernel's list is no reason on an AMD GPU: the ROCm backends' lists are
    assert _matrix("AMD Instinct MI300X (gfx942)\nRuntimeError: flash_attn: this GPU is not supported") == []
    assert _matrix("AMD Radeon RX 7600 (gfx1102)\nRuntimeError: flash_attn: this GPU is not supported") == []  # the Triton backend's
    (match,) = _matrix("AMD Radeon VII (gfx906)\nRuntimeError: flash_attn: this GPU is not supported")
    assert "FlashAttention 2 (ROCm, Composable Kernel backend)" in match.message and "gfx906" in match.message


def test_the_gpu_a_long_log_names_far_from_the_refusal_is_used():
    # nvidia-smi at the top, thousands of lines, then the refusal: the log's GPU judges it
    log = ("|   0  Tesla T4                       Off | 00000000:00:04.0 Off |    0 |\nflash-attn==2.6.3\n"
           + "".join(f"step {i} loss 0.5\n" for i in range(3000))
           + "NotImplementedError: xformers cutlassF: bf16 is not supported on this device\n")
    (match,) = _matrix(log)
    assert match.rule == "AD328" and "sm75" in match.message


def test_the_cli_prints_the_matrix_reason_and_remedy():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "explain", "--no-color",
                           "flash-attn==2.5.8\nValueError: softcapping is not supported by flash_attn 2.5.8"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "AD329" in proc.stdout and "logit soft-capping came in flash-attn 2.6.0; this is flash-attn 2.5.8" in proc.stdout
    assert "Upgrade flash-attn to 2.6.0 or newer" in proc.stdout
