"""Readings that name a cause from what the text measures or names rather than one library's sentence:
flash-attn's separately built fused kernels (the csrc/ folder that builds each); an undefined symbol
that is the C++ runtime's own; any cuDNN library a GPU library cannot open; an out-of-memory at an
attention call whose capacity was cut off; float16 told as a symptom; a guarded flash-attn import's
assert; transformers' renamed availability helpers; ptxas's bf16 refusal retold; the RTX PRO 6000 as
users shorten it; a library's wrapper around another error (not a cause of its own).
Real explain on texts as users paste them."""

from __future__ import annotations

import io
import subprocess
import sys

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()


def _report(text: str):
    return explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")


def _first(text: str):
    report = _report(text)
    return next((m for m in report.matches if not m.harmless and m.likelihood != "unlikely"), None)


def test_flash_attn_fused_kernels_name_the_folder_that_builds_each():
    for module, folder in (("dropout_layer_norm", "layer_norm"), ("rotary_emb", "rotary"), ("xentropy_cuda_lib", "xentropy")):
        first = _first(f"  File \"/x/flash_attn/ops/layer_norm.py\", line 4, in <module>\n    import {module}\n"
                       f"ModuleNotFoundError: No module named '{module}'")
        assert first is not None and first.rule == "AD319", module
        assert first.captures.get("folder") == folder
        assert any(f"subdirectory=csrc/{folder}" in (c or "") for c in first.commands)
    stale = _first("AttributeError: module 'dropout_layer_norm' has no attribute 'dropout_add_ln_fwd'")
    assert stale is not None and stale.rule == "AD319"
    # the attention extension itself stays AD302; a look-alike module name matches nothing
    assert _first("ModuleNotFoundError: No module named 'flash_attn_2_cuda'").rule == "AD302"
    assert _first("ModuleNotFoundError: No module named 'dropout_layer_norm_v2'") is None


def test_an_undefined_symbol_of_the_cxx_runtime_is_libstdcxx_not_a_torch_abi_mismatch():
    so = "/env/lib/python3.12/site-packages/dropout_layer_norm.cpython-312-x86_64-linux-gnu.so"
    assert _first(f"ImportError: {so}: undefined symbol: __cxa_call_terminate").rule == "AD352"
    assert _first(f"ImportError: {so}: undefined symbol: _ZSt28__throw_bad_array_new_lengthv").rule == "AD352"
    # a torch symbol stays the build mismatch it was
    torch_symbol = _first(f"ImportError: {so}: undefined symbol: _ZN3c104cuda9SetDeviceEi")
    assert torch_symbol is not None and torch_symbol.rule != "AD352"


def test_any_cudnn_library_a_gpu_library_cannot_open_is_the_cudnn_major_it_needs():
    text = ("[E:onnxruntime:Default, provider_bridge_ort.cc:1862 TryGetProviderInfo_CUDA] Failed to load library "
            "libonnxruntime_providers_cuda.so with error: libcudnn_adv.so.9: cannot open shared object file: No such file or directory")
    assert _first(text).rule == "AD418"
    assert _first("loaded libcudnn_adv.so.9 from /usr/lib") is None


def test_an_out_of_memory_at_an_attention_call_without_the_capacity_is_the_score_matrix():
    at_sdpa = ('  File "wan/models/transformer3d.py", line 203, in attention\n'
               "    out = torch.nn.functional.scaled_dot_product_attention(\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 62.02 GiB.")
    assert _first(at_sdpa).rule == "AD280"
    # a small allocation, or one raised elsewhere, is no attention matrix
    assert _first(at_sdpa.replace("62.02 GiB", "2.00 GiB")) is None
    elsewhere = ('  File "model.py", line 20, in forward\n    x = self.proj(x)\n'
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 62.02 GiB.")
    assert _first(elsewhere) is None
    # the capacity on the same line: 10 of 79 GiB at the scores' matmul is the matrix too, said with its ratio
    with_capacity = ('  File "/home/u/train.py", line 88, in forward\n'
                     "    attn_weights = torch.matmul(query, key.transpose(2, 3))\n"
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.00 GiB. GPU 0 has a total capacity of "
                     "79.15 GiB of which 3.10 GiB is free.")
    first = _first(with_capacity)
    assert first.rule == "AD280" and first.captures.get("ratio") == "0.13"
    assert "capacity not in the text" not in " ".join(first.notes)
    # 10 GiB of 79 raised elsewhere (a projection) is not read as one
    assert _first(with_capacity.replace("attn_weights = torch.matmul(query, key.transpose(2, 3))", "x = self.proj(x)")) is None
    # a file named attention.py is no attention call: its code line decides
    ffn = ('  File "/env/diffusers/models/attention.py", line 1200, in forward\n    hidden_states = self.net(hidden_states)\n'
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB.")
    assert _first(ffn) is None


def test_float16_told_as_a_symptom():
    black = ("If I changed to use Cogvideox-1.5-5B, the output is black video.\nI only changed this line:\n"
             '`pipe = CogVideoXPipeline.from_pretrained("THUDM/CogVideoX-5b", torch_dtype=torch.float16)`.')
    assert _first(black).rule == "AD660"
    assert _first("the output is black video") is None  # no float16 in the text: many causes
    amp = ("在训练时，loss和decode.loss_ce变成了nan。\n"
           "python tools/train.py configs/upernet_512x512.py --work-dir out --amp")
    assert _first(amp).rule == "AD660"
    assert _first("在训练时，loss和decode.loss_ce变成了nan。") is None


def test_a_guarded_flash_attn_import_and_renamed_helpers():
    assert _first('the problem happend "assert flash attn_func is not None".').rule == "AD350"
    renamed = ("NameError: name 'is_flash_attn_available' is not defined. Did you mean: 'is_flash_attn_2_available'?")
    assert _first(renamed).rule == "AD412"
    assert _first("NameError: name 'is_available' is not defined") is None


def test_ptxas_bf16_refusal_retold_and_the_rtx_pro_6000_shortened():
    assert _first("我的显卡好像不支持bf16计算'.bf16' requires .target sm_80 or higher").rule == "AD260"
    pro = ("On the pro6000 GPU platform I get:\n"
           "RuntimeError: FlashAttention only supports Ampere GPUs or newer.")
    assert _first(pro).rule == "AD104"  # a Blackwell card: the release predates it
    assert _first(pro.replace("pro6000", "NVIDIA Pro 6000")).rule == "AD104"


def test_a_library_s_wrapper_around_another_error_is_not_a_cause_of_its_own():
    text = ("RuntimeError: Failed to import transformers.modeling_utils because of the following error (look up to see its traceback):\n"
            "Failed to import transformers.generation.utils because of the following error (look up to see its traceback):\n"
            "cannot import name 'builder' from 'google.protobuf.internal'")
    report = _report(text)
    assert not [m for m in report.matches if not m.harmless and m.likelihood != "unlikely"]


def test_a_single_argument_naming_a_file_is_read_as_the_file(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    done = subprocess.run([sys.executable, "-m", "attn_doctor", "explain", str(log), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "AD103" in done.stdout
    # a path that does not exist stays the text it is (nothing matches it)
    done = subprocess.run([sys.executable, "-m", "attn_doctor", "explain", str(tmp_path / "missing.log")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_torch_wheel_whose_cuda_cannot_build_for_the_gpu_confirms_torch_s_build():
    # CUDA 13 builds nothing before sm_75: a +cu130 torch on a GTX 1080 Ti is torch's own build
    cu130 = ("Worker error: GVM failed for 'clip': CUDA error: no kernel image is available for execution on the device\n"
             "Search for `cudaErrorNoKernelImageForDevice' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
             "- **PyTorch:** 2.9.1+cu130\n- **GPU:** NVIDIA GeForce GTX 1080 Ti\n")
    first = _first(cu130)
    assert first.rule == "AD105" and first.likelihood == "confirmed" and "CUDA 13" in first.likelihood_reason
    # a +cu113 wheel carries sm_60 code (run by sm_61): the kernels missing are an extension's
    cu113 = ("CUDA error: no kernel image is available for execution on the device\n"
             "PyTorch version: 1.12.1+cu113\nCUDA used to build PyTorch: 11.3\nGPU models and configuration: GPU 0: NVIDIA GeForce GTX 1080 Ti\n")
    assert _first(cu113).rule == "AD313"
    # torch's own 'Search for `cudaError...`' line is not a C++ program's check
    bare = ("CUDA error: no kernel image is available for execution on the device\n"
            "Search for `cudaErrorNoKernelImageForDevice' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.")
    assert _first(bare).rule == "AD105"


def test_a_build_that_carries_the_architecture_yet_has_no_code_for_the_kernel_is_the_kernel_s_floor():
    floor = ("ggml-cuda.cu:1412: ERROR: CUDA kernel vec_dot_q4_K_q8_1_impl_vmmq has no device code compatible with "
             "CUDA arch 600. ggml-cuda.cu was compiled for: 500,600,700,800,900")
    assert _first(floor).rule == "AD110"
    assert _first(floor.replace("500,600,700", "500,700")).rule == "AD313"


def test_ctranslate2_s_cuda_libraries_and_its_float16_on_the_cpu():
    for text in ("RuntimeError: Library libcublas.so.11 is not found or cannot be loaded",
                 "RuntimeError: Library cublas64_12.dll is not found or cannot be loaded"):
        assert _first(text).rule == "AD418", text
    refusal = "ValueError: Requested float16 compute type, but the target device or backend do not support efficient float16 computation."
    assert _first(refusal).rule == "AD109"  # alone: a GPU before Volta
    assert _first(refusal + "\nwhisperx /Users/me/Downloads/a.mp3 --language fr").rule == "AD266"


def test_platforms_without_cuda_and_kernels_refusing_the_gpu():
    mac_build = ("Preparing metadata (setup.py) ... error\n"
                 "  /private/var/folders/8b/T/pip-install-x/flash-attn_1/setup.py:78: UserWarning: flash_attn was requested, "
                 "but nvcc was not found.  Are you sure your environment has nvcc available?")
    assert _first(mac_build).rule == "AD259"
    assert _first(mac_build.replace("/private/var/folders/8b/T", "/tmp")).rule == "AD315"  # not a Mac: install nvcc
    arc = "product: DG2 [Arc A770]\nvendor: Intel Corporation\nAssertionError: Torch not compiled with CUDA enabled"
    assert _first(arc).rule == "AD259"
    assert _first("xformers: RuntimeError: No such operator xformers::efficient_attention_forward_cutlass - did you "
                  "forget to build xformers with `python setup.py develop`?").rule == "AD312"
    assert _first("UserWarning: Tesla V100-SXM2-32GB does not support bfloat16 compilation natively, skipping").rule == "AD102"
    ck = ("RuntimeError: DeviceGroupedMultiheadAttentionForward_Xdl_CShuffle_V2<256, 128, 128, 32, 8, 8, 128, 128, 32, 2, "
          "Default, ASpecDefault, B0SpecDefault, B1SpecDefault, CSpecDefault, MaskUpperTriangleFromTopLeft> does not support this problem")
    assert _first(ck).rule == "AD112"
    fp8 = ("When running fp8 models on Ampere architecture I get these errors:\n"
           "max/kernels/src/linalg/fp8_quantization.mojo:73:10: note: call expansion failed\n"
           "stdlib/builtin/constrained.mojo:58:6: note: constraint failed: this kernel is only supported on sm90 or newer")
    assert _first(fp8).rule == "AD111"


def test_a_position_table_cast_to_fp32_told_in_prose():
    text = ("When trying to train with mixed precision, the pos embedding gets casted to fp32 and not bf16, "
            "causing an error later on in the attention.forward call")
    assert _first(text).rule == "AD601"
    assert _first("the pos embedding gets casted to fp32") is None  # no attention in the text


def test_a_text_saying_one_attention_library_fails_where_another_runs_names_the_failing_one():
    text = ("CUDA error: no kernel image is available for execution on the device\n"
            "Edit: this happens only if I choose sageattn in wan video model loader, if I use flash_attn_2 it does not error.")
    assert _first(text).rule == "AD313"


def test_a_library_announcing_the_slower_path_it_takes_is_harmless():
    for text in ("Warning, cannot find cuda-compiled version of RoPE2D, using a slow pytorch version instead",
                 "WARNING: System CUDA not found, falling back to PyTorch softsplat. This will be a bit slower.",
                 "AMP: checks failed ❌. Anomalies were detected with AMP on your system that may lead to NaN losses or "
                 "zero-mAP results, so AMP will be disabled during training.",
                 "ReproducibilityWarning: TensorFloat-32 (TF32) has been disabled as it might lead to reproducibility issues and lower accuracy.",
                 "UserWarning: Plan failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize "
                 "Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED (Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)",
                 "Triton is not available, some optimizations will not be enabled.\nThis is just a warning: triton is not available"):
        report = _report(text)
        assert report.matches and all(m.harmless for m in report.matches), (text, [m.rule for m in report.matches])


def test_half_kernels_missing_told_with_a_quote_lost_or_retyped():
    assert _first("ms_deform_attn_forward_cuda\" not implemented for 'BFloat16").rule == "AD269"
    assert _first("I got this problem 'addmm_impl_cpu_\" not implemented for 'Half'.").rule == "AD266"


def test_readings_of_harvest_22s_platform_and_dtype_texts():
    assert _first("RuntimeError: TCNN was not compiled with half-precision support.\nNVIDIA TITAN Xp").rule == "AD109"
    amd = ('"RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver"\n'
           "I have AMD GPU - RX 7800 XT. Does it not work with AMD?")
    assert _first(amd).rule == "AD259"
    assert _first("RuntimeError: Found no NVIDIA driver on your system.").rule == "AD101"  # no other GPU named
    fa2 = ("FlashAttention only support fp16 and bf16 data type You are attempting to use Flash Attention 2.0 "
           "without specifying a torch dtype. This might lead to unexpected behaviour")
    assert _first(fa2).rule == "AD604"
    candle = 'GPU: NVIDIA Tesla T4\nError: DriverError(CUDA_ERROR_NOT_FOUND, "named symbol not found")'
    assert _first(candle).rule == "AD102"
    assert _first('Error: DriverError(CUDA_ERROR_NOT_FOUND, "named symbol not found")') is None
