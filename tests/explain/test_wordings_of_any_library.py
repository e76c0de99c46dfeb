"""Readings of a mechanism whatever library says it: a compiled library named for the torch release
it was built for; an architecture refused in words; Triton's compile error without its module path;
a patch that found no attention class to replace; NaN output under float16; NVRTC not knowing the
GPU; fp16 refused on a CPU-only torch; code that requires FlashAttention 2; a message quoted inside
JSON; Python's own `module ... has no attribute` not read as an attention library's API.
Real explain on texts as users paste them."""

from __future__ import annotations

import io

import pytest

from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()


def _first(text: str):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    return next((m for m in report.matches if not m.harmless and m.likelihood != "unlikely"), None)


@pytest.mark.parametrize("text, rule", [
    # a package that ships one compiled library per torch release, none for this one
    ("FileNotFoundError: Cannot find DGL C++ graphbolt library at /usr/lib/python3.12/site-packages/dgl/"
     "graphbolt/libgraphbolt_pytorch_2.4.0.so", "AD312"),
    ("OSError: could not load /opt/venv/lib/python3.11/site-packages/foo/lib/libfoo_ops_torch2.6.so", "AD312"),
    ("ImportError: Cannot load Graphbolt C++ library", "AD312"),
    # a kernel library refusing the GPU's architecture in its own words
    ('RuntimeError: HSTU backward does not support sm86 or sm89', "AD317"),
    ("ValueError: fused_moe kernel doesn't support SM 75", "AD317"),
    # Triton's compile error with the kernel source after 'at LINE:COL:', module path lost in the paste
    ("CompilationError: at 10:23:\ndef flip(x, dim=None):\n    core.static_assert(-len(x.shape) <= dim)\n"
     "TypeError(\"'<=' not supported between instances of 'int' and 'NoneType'\")", "AD263"),
    # a patch for another transformers' attention classes
    ("Exception: Failed to modify the attention method of LlamaForCausalLM", "AD412"),
    ("RuntimeError: Unable to patch the attention forward of Qwen2Model", "AD412"),
    # NaN output of a model run in float16
    ("ValueError: Input contains NaN.\nThe logits contain NaN with model.half(); in float32 it is fine.", "AD660"),
    # NVRTC of a CUDA older than the GPU (torch's JIT fuser compiling at run time)
    ("RuntimeError: The following operation failed in the TorchScript interpreter.\n"
     "RuntimeError: nvrtc: error: invalid value for --gpu-architecture (-arch)", "AD105"),
    # fp16 asked of a CPU-only torch
    ("I installed pytorch cpu-only and ran training.\nValueError: FP16 Mixed precision training with AMP or APEX "
     "(`--fp16`) and FP16 half precision evaluation (`--fp16_full_eval`) can only be used on CUDA devices.", "AD106"),
    # the code's own requirement of FlashAttention 2
    ("RuntimeError: distill-capture requires flash-attention-2 for per-document attention", "AD350"),
    # a message quoted inside JSON keeps its meaning
    ('  "message": "failed: \\"_amp_foreach_non_finite_check_and_unscale_cuda\\" not implemented for \'BFloat16\'",',
     "AD654"),
    # NaN, -inf or black output in a run the text shows in float16
    ("When using `mixed_precision=True` in the config, the model is returning NaN", "AD660"),
    ("Trying to train the model using the fp16 setting, but the model outputs `-inf`'s during the forward pass.", "AD660"),
    ("When the fp16 option is set to `true`, all resulting images are just black.", "AD660"),
    # uv's hint about a package that builds against torch without declaring it
    ("      hint: This error likely indicates that `flash-attn@2.7.3` depends\n"
     "      on `torch`, but doesn't declare it as a build dependency.", "AD315"),
    # transformers refusing output_attentions under SDPA
    ("The `output_attentions` attribute is not supported when using the `attn_implementation` set to sdpa. "
     "Please set it to 'eager' instead.", "AD408"),
    # torch's older cuDNN check
    ("RuntimeError: cuDNN version mismatch: PyTorch was compiled against 7102 but linked against 7605", "AD268"),
    # a library's own CUDA source named after the message
    ("no kernel image is available for execution on the device in libfusiongpu/fusion.cu at 51", "AD313"),
    # torch's memory-efficient kernel running the oldest code of a build without this GPU
    ("FATAL: kernel `fmha_cutlassF_f32_aligned_64x64_rf_sm80` is for sm80-sm100, but was built for sm37", "AD105"),
    # no wheel of an attention library for this torch, CUDA and Python
    ("ERROR: No matching wheel (even with CUDA-minor/abi3 fallback) for SageAttention 2.2 (Torch 2.8.0, CUDA cu129, "
     "Python 3.13).", "AD312"),
    # a function another release of the attention library has
    ("cannot import name 'sageattn_qk_int8_pv_fp16_triton' from 'sageattention'", "AD311"),
    # a build that takes only the head dimensions it names
    ("RuntimeError: FLASHATTENTION_DIFFUSION_ONLY build: only head_dim=128 supported, got 64", "AD603"),
    # a config built by the caller's own code, without the attention choice transformers reads
    ("AttributeError: 'BertConfig' object has no attribute '_attn_implementation'", "AD412"),
    ("The latest version of transformers failed due to no _attn_implementation attribute.", "AD412"),
    # TensorRT's library of another major
    ("UserWarning: Cannot load onnxruntime.capi. Error: 'libnvinfer.so.5: cannot open shared object file: "
     "No such file or directory'", "AD418"),
])
def test_a_mechanism_is_read_whatever_library_says_it(text, rule):
    first = _first(text)
    assert first is not None and first.rule == rule, (text, first and first.rule)


@pytest.mark.parametrize("text", [
    # Python's own wording about any module: not an attention library's API
    "AttributeError: module trl has no attribute GRPOConfig. Did you mean: 'ORPOConfig'?",
    # Triton saying it cannot support a GPU is Triton's code generator (AD264's), not a kernel library
    "It seems that Triton cannot support sm_120.",
    # words near NaN without float16 are not an fp16 overflow
    "ValueError: Input contains NaN, infinity or a value too large for dtype('float64').",
    # a tokenizer's 'output' and 'input' words are not a symptom
    "output_data, output_ui = get_output_data(obj, input_data_all)",
])
def test_look_alikes_do_not_name_those_causes(text):
    first = _first(text)
    assert first is None or first.rule not in ("AD311", "AD317", "AD660"), (text, first.rule)


@pytest.mark.parametrize("text", [
    "After training for about 10 epochs, the loss will become nan.",
    "With a large probability, the loss came to NAN after training with few epochs.",
    "WARNING | train:669 - Skipping batch at iter 43345 (epoch 227, batch 178): non-finite loss",
])
def test_a_nan_loss_without_the_runs_precision_is_a_possible_cause_not_a_problem(text):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    first = next((m for m in report.matches if not m.harmless and m.likelihood != "unlikely"), None)
    assert first is not None and first.rule == "AD660" and first.severity == "info" and first.likelihood == "possible"
    assert report.exit_code == 0  # the text does not say the run was in float16: no problem is raised


@pytest.mark.parametrize("text", [
    "UserWarning: FALLBACK path has been taken inside: compileCudaFusionGroup. This is an indication that codegen "
    "Failed for some reason.",
    "You are using a CUDA device ('NVIDIA GeForce RTX 4090') that has Tensor Cores. To properly utilize them, you "
    "should set `torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off precision for performance.",
    "UserWarning: Cannot import apex RMSNorm, trying flash_attn RMSNorm",
    "torch/nn/modules/conv.py:605: UserWarning: Applied workaround for CuDNN issue, install nvrtc.so (Triggered "
    "internally at /opt/conda/conda-bld/pytorch_1711403388920/work/aten/src/ATen/native/cudnn/Conv_v8.cpp:80.)",
    "safetensors/torch.py:99: UserWarning: TypedStorage is deprecated. It will be removed in the future and "
    "UntypedStorage will be the only storage class.",
    "stylegan2/op/conv2d_gradfix.py:88: UserWarning: conv2d_gradfix not supported on PyTorch 2.0.1. Falling back to "
    "torch.nn.functional.conv2d().",
    # an sm_121 GPU runs the sm_120 code torch carries
    "    Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.\n    Minimum and Maximum cuda capability supported by "
    "this version of PyTorch is\n    (8.0) - (12.0)",
])
def test_a_library_taking_a_slower_path_is_harmless(text):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    assert report.matches and all(m.harmless for m in report.matches) and report.exit_code == 0, \
        [m.rule for m in report.matches]


def test_a_line_of_advice_in_a_library_message_is_not_a_cause():
    # transformers' advice line, alone in a service's JSON log: not 'a library needs another release'
    text = ('model-download | {"event": "You can update Transformers with the command `pip install --upgrade '
            'transformers`. If this does not work, and the checkpoint is very new, then there may not be a release."}')
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="text")
    assert report.exit_code == 0, [m.rule for m in report.matches]


def test_a_message_in_another_releases_punctuation_is_still_known():
    # torch 2.3 wrote "Please see, torch.nn..." without backticks; later releases quote the names
    text = ("FutureWarning: `torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager "
            "will be removed. Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with "
            "updated signature.")
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    assert report.matches and all(m.harmless for m in report.matches), [m.rule for m in report.matches]
    # the message's own words in order, not a sibling that shares its first words with it
    sibling = ("FutureWarning: `torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager "
               "will be removed. Please use something else entirely.")
    report = explain(io.BytesIO(sibling.encode("utf-8")), RECIPES, kind="stdin")
    assert not any(m.rule == "AD656" for m in report.matches), [m.rule for m in report.matches]


def test_xformers_cutlass_kernel_without_this_gpu_is_xformers_build():
    text = ("with xformers on ZLUDA, this was my error: FATAL: kernel `fmha_cutlassF_f16_aligned_32x128_gmem_sm80` "
            "is for sm80-sm100, but was built for sm37")
    first = _first(text)
    assert first is not None and first.rule == "AD313", first and first.rule


@pytest.mark.parametrize("text", [
    # code, commands and addresses printed inside a library's multi-line message are no cause
    "from unsloth import FastLanguageModel",
    '!pip install --no-deps "xformers<=0.0.27" trl peft accelerate bitsandbytes',
    "MAMBA_KEEP_CUDA_BUILD=TRUE pip install mamba-ssm --no-build-isolation",
    "def score_mod(score, b, h, q_idx, kv_idx):",
    "Install torch from https://pytorch.org/get-started/locally/ and follow the instructions that match your system.",
    # a bf16 run's NaN is not a float16 overflow; nor a safety checker's black image, nor a fully masked row's NaN
    "accelerate launch --mixed_precision bf16 train.py\nAfter a few steps the model returns NaN.",
    "with torch.autocast('cuda', dtype=torch.bfloat16):\nthe logits contain NaN",
    "pipe = StableDiffusionPipeline.from_pretrained(m, torch_dtype=torch.float16)\nPotential NSFW content was detected in "
    "one or more images. A black image will be returned instead.\nAll the images are black.",
    "Using fp16. When a row of the attention mask is fully masked, the softmax output contains NaN.",
    # a packed 8-bit weight against a float op, its comma dropped: not a precision mismatch
    "RuntimeError: self and mat2 must have the same dtype but got Float and Char",
    # torch's own broken install, a notice before a source build, a namespace package without files
    "RuntimeError: Failed to load torch._C",
    "ERROR: No matching wheel found for flash-attn==2.8.3 on this platform; building from source",
    "ImportError: cannot import name 'memory_efficient_attention' from 'xformers.ops' (unknown location)",
])
def test_texts_that_only_look_like_those_causes_raise_nothing(text):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="text")
    assert report.exit_code == 0, [m.rule for m in report.matches]


def test_a_possible_cause_said_as_a_note_does_not_hide_a_librarys_own_message():
    text = ("Epoch 3: training loss became NaN, so I restarted and then got:\n"
            "RuntimeError: cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be int32")
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="text")
    assert report.exit_code == 1
    assert report.matches[0].rule != "AD660" and report.matches[0].severity == "error"
    assert any(m.rule == "AD660" and m.severity == "info" for m in report.matches)


@pytest.mark.parametrize("stated", ["torch 2.6.0+cpu", "torch==2.6.0+cu124", "PyTorch version: 2.7.1"])
def test_a_torch_kernel_added_later_is_not_claimed_where_the_text_shows_that_torch(stated):
    text = stated + "\nRuntimeError: \"upsample_bilinear2d_out_frame\" not implemented for 'BFloat16'"
    first = _first(text)
    assert first is None or first.rule != "AD665", first.rule
    older = _first("torch 2.0.1+cu118\nRuntimeError: \"upsample_bilinear2d_out_frame\" not implemented for 'BFloat16'")
    assert older.rule == "AD665"


def test_the_catalogue_matcher_stays_linear_on_long_hostile_lines():
    import time

    from attn_doctor.explaining.catalogue import loaded

    catalogue = loaded(RECIPES)
    line = "RuntimeError: MNK mismatch: M=" + "mn" * 184
    start = time.perf_counter()
    for _ in range(20):
        catalogue.match(line)
    assert time.perf_counter() - start < 2.0


def _matches(text: str):
    return explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin").matches


def test_nvrtc_of_a_torch_whose_cuda_predates_the_gpu_is_confirmed_not_ruled_out():
    # torch 1.10's sm_86 kernels run on an sm_89 GPU, but its CUDA 11.3 compiles nothing for sm_89
    text = ("RuntimeError: The following operation failed in the TorchScript interpreter. Traceback of TorchScript "
            "(most recent call last): RuntimeError: nvrtc: error: invalid value for --gpu-architecture (-arch)\n"
            "I am using RTX 4090\nCUDA 11.3\npip3 install torch==1.10.0+cu113 torchvision==0.11.1+cu113\n")
    first = _first(text)
    assert first is not None and first.rule == "AD105" and first.likelihood == "confirmed"
    assert "11.8" in first.likelihood_reason and "sm89" in first.likelihood_reason
    # the same refusal under a torch whose CUDA knows the GPU is not confirmed by the table
    newer = text.replace("1.10.0+cu113", "2.4.1+cu118").replace("0.11.1+cu113", "0.19.1+cu118").replace("CUDA 11.3", "CUDA 11.8")
    first = _first(newer)
    assert first is None or first.likelihood != "confirmed" or "compiles for it from" not in first.likelihood_reason


def test_a_catalogue_message_hard_wrapped_over_lines_is_known():
    text = ("ValueError: Transformers now supports natively BetterTransformer optimizations \n"
            "(torch.nn.functional.scaled_dot_product_attention) for the model type whisper. As such, there is no need to use \n"
            "`model.to_bettertransformers()` or `BetterTransformer.transform(model)` from the Optimum library. Please upgrade to \n"
            "transformers>=4.36 and torch>=2.1.1 to use it. Details: https://huggingface.co/docs/transformers/\n"
            "perf_infer_gpu_one#flashattention-and-memory-efficient-attention-through-pytorchs-scaleddotproductattention.\n")
    first = _first(text)
    assert first is not None and first.rule == "AD412"
    assert first.site is not None and first.site.library.startswith("optimum")
    # its first line alone says too little of the message to be known
    assert _first(text.splitlines()[0]) is None


def test_a_wrapped_line_is_not_joined_with_the_message_after_it():
    from attn_doctor.explaining import scan as scanning

    buf = (b"ValueError: Transformers now supports natively BetterTransformer optimizations\n"
           b"Traceback (most recent call last):\n  File \"x.py\", line 1\n")
    end = buf.index(b"\n")
    assert scanning._wrapped(buf, end, buf[:end].decode()) == ()
    buf2 = b"a short line\ncontinued\n"
    assert scanning._wrapped(buf2, buf2.index(b"\n"), "a short line") == ()


def test_an_extension_built_for_a_cuda_torch_next_to_a_cpu_only_torch_of_another_release_is_the_cpu_torch():
    text = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
            "PyTorch 2.0.0+cu118 with CUDA 1108 (you have 2.0.1+cpu)\n"
            "Python 3.9.13 (you have 3.9.13)\nNo supported Nvidia GPU found\n")
    matches = _matches(text)
    first = next(m for m in matches if not m.harmless and m.likelihood != "unlikely")
    assert first.rule == "AD106"
    built = next(m for m in matches if m.rule == "AD312")
    assert built.likelihood == "unlikely" and "CPU-only build (2.0.1+cpu)" in built.likelihood_reason


@pytest.mark.parametrize("text", [
    "UserWarning: TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. "
    "Consider setting `torch.set_float32_matmul_precision('high')` for better performance.",
    "skipping cudagraphs due to ['incompatible ops']",
    "Half2 support requested on hardware without native FP16 support, performance will be negatively affected.",
    "[initialize_service] Pre-Ampere CUDA detected: using float16 instead of bfloat16.",
    "Skipping import of cpp extensions due to incompatible torch version 2.7.1+cu128 for torchao version 0.15.0",
    "Warning: import flash_attn rotary fail, please install FlashAttention rotary to get higher efficiency",
    # DeepSpeed's op builders at import: an optional op that could not be built here
    " [WARNING]  sparse_attn requires a torch version >= 1.5 and < 2.0 but detected 2.1\n"
    " [WARNING]  using untested triton version (2.1.0), only 1.0.0 is known to be compatible",
    "WARNING:Exllama kernel is not installed, reset disable_exllama to True. This may because you installed auto_gptq "
    "using a pre-build wheel on Windows, in which exllama_kernels are not compiled.",
    "Warning:  multi_tensor_applier fused unscale kernel is unavailable, possibly because apex was installed without "
    "--cuda_ext --cpp_ext. Using Python fallback.  Original ImportError was: ModuleNotFoundError(\"No module named 'amp_C'\",)",
    "UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you "
    "should call them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.",
    # a backend dispatcher trying an op's implementations in order
    "[2026-05-09 10:24:16,296 TE-FL manager.py:460 WARNING] Implementation 'vendor.enflame' failed for op "
    "'get_cudnn_version': module 'migration.patches.transformer_engine.v2_9_0' has no attribute 'get_cudnn_version'",
    # Apple's MPS and remote model code
    "[transformers_modules.microsoft.Phi-3-medium-128k-instruct.modeling_phi3][WARNING] - `flash-attention` package not "
    "found, consider installing for better performance: No module named 'flash_attn'.",
    "UserWarning: The operator 'aten::nonzero' is not currently supported on the MPS backend and will fall back to run "
    "on the CPU. This may have performance implications.",
    "You are not running the flash-attention implementation, expect numerical differences.",
    "/Volumes/SSD/env/lib/python3.10/site-packages/bitsandbytes/cextension.py:33: UserWarning: The installed version of "
    "bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit multiplication, and GPU quantization are unavailable.",
])
def test_notices_of_a_slower_path_are_harmless(text):
    matches = _matches(text)
    assert matches and all(m.harmless for m in matches if m.likelihood != "unlikely")


@pytest.mark.parametrize("text, rule", [
    ("RuntimeError: s__th_addmm is not implemented for type torch.HalfTensor", "AD266"),
    ("NotImplementedError: No operator found for 'memory_efficient_attention_forward' with inputs:", "AD310"),
    ("python: /project/lib/Dialect/TritonGPU/IR/Dialect.cpp:832: Assertion `rank == 2 || (rank == 3 && isAmpere()) "
     "&& \"Unexpected rank of mma layout\"' failed.", "AD666"),
    ("Terminating with uncaught exception :  The code base should be updated for compute capability 86", "AD317"),
    # a torch or transformers older than the call
    ("ValueError: The following model_kwargs are not used by the model: ['attn_implementation'] (note: typos in the "
     "generate arguments will also show up in this list)", "AD414"),
    ("RuntimeError: User specified an unsupported autocast device_type 'mps'", "AD413"),
    # an attention library's function the caller imports, gone from this release
    ("ImportError: cannot import name 'na2d_qk_with_bias' from 'natten.functional' (/env/site-packages/natten/functional.py)",
     "AD311"),
    # macOS's loader on an extension built for another torch
    ("dlopen(/env/site-packages/libpyg.so, 0x0006): Symbol not found: __ZN3c106detail19maybe_wrap_dim_slowIxEET_S2_S2_b\n"
     "  Referenced from: <B5FD9895> /env/site-packages/libpyg.so\n  Expected in: <F2FE5CF8> /env/site-packages/torch/lib/libc10.dylib",
     "AD312"),
    # half-precision atomics compiled for a GPU before Volta
    ('hashencoder.cu(25): error: no instance of overloaded function "atomicAdd" matches the argument list\n'
     "            argument types are: (__half *, c10::Half)", "AD109"),
    # scatter's two dtypes meeting outside autocast
    ("RuntimeError: scatter(): Expected self.dtype to be equal to src.dtype", "AD651"),
    # fairseq's loss scaler at its floor; transformers' flash path without a usable flash-attn 2
    ("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.", "AD660"),
    ("NameError: name '_flash_supports_window_size' is not defined", "AD455"),
    # apex without its CUDA extensions
    ("RuntimeError: apex.optimizers.FusedAdam requires cuda extensions", "AD289"),
    # xformers' older words for CUDA inputs none of its operators takes
    ("NotImplementedError: No operator found for this attention: AttentionOpDispatch(dtype=torch.float32, "
     "device=device(type='cuda', index=0), k=80, has_dropout=False, attn_bias_type=<class 'NoneType'>)", "AD310"),
    # a framework refusing two precision settings together
    ("ValueError: At most one of fp16 and bf16 can be True, but not both", "AD286"),
    # Windows builds and runtimes, TensorRT's builder, DirectML, SDPA's GPU kernels on the CPU
    ("host_config.h(153): fatal error C1189: #error:  -- unsupported Microsoft Visual Studio version! Only the versions "
     "between 2017 and 2022 (inclusive) are supported!", "AD315"),
    ("Error[9]: IBuilder::buildSerializedNetwork: Error Code 9: API Usage Error (Target GPU SM 120 is not supported by this "
     "TensorRT release.)", "AD317"),
    ("[F302 15:36:01.000000000 dml_util.cc:118] Invalid or unsupported data type BFloat16.", "AD102"),
    ("Could not run 'aten::_scaled_dot_product_efficient_attention' with arguments from the 'CPU' backend.", "AD256"),
    # a loss that turns NaN in a float16 run, told in prose
    ("When I use the fp32 model, the step loss is not nan but with the fp16 model the loss is still nan.", "AD660"),
])
def test_more_wordings_of_known_mechanisms(text, rule):
    first = _first(text)
    assert first is not None and first.rule == rule


def test_cuda_half_tensor_wording_is_not_read_as_the_cpu():
    first = _first("RuntimeError: addmm is not implemented for type torch.cuda.HalfTensor")
    assert first is None or first.rule != "AD266"


def test_bitsandbytes_without_gpu_support_on_a_linux_gpu_box_is_not_called_harmless():
    text = ("/usr/lib/python3/site-packages/bitsandbytes/cextension.py:33: UserWarning: The installed version of bitsandbytes "
            "was compiled without GPU support. 8-bit optimizers, 8-bit multiplication, and GPU quantization are unavailable.")
    assert not any(m.harmless and m.rule == "AD664" for m in _matches(text))


def test_a_general_purpose_package_missing_is_no_attention_library():
    text = "ImportError: Using `low_cpu_mem_usage=True` or a `device_map` requires Accelerate: `pip install accelerate`"
    assert not any(m.rule == "AD353" and m.likelihood != "unlikely" for m in _matches(text))


def test_nvrtc_under_torch_2_or_later_is_not_confirmed_as_torchs_own():
    # torch 2.0 and later ask their NVRTC only for architectures it knows: the refusal is another
    # runtime compiler's (CuPy, numba, an extension's)
    text = ("cupy_backends.cuda.libs.nvrtc.NVRTCError: NVRTC_ERROR_INVALID_OPTION (5)\n"
            "nvrtc: error: invalid value for --gpu-architecture (-arch)\n"
            "GPU: NVIDIA GeForce RTX 4090\ntorch 2.0.1+cu117\n")
    first = _first(text)
    assert first is None or first.likelihood != "confirmed"


@pytest.mark.parametrize("text", [
    # WSL and Git Bash paths are Windows machines, not Macs
    "/mnt/c/Users/me/venv/lib/python3.10/site-packages/bitsandbytes/cextension.py:33: UserWarning: The installed version "
    "of bitsandbytes was compiled without GPU support. 8-bit optimizers are unavailable.",
    "/c/Users/me/venv/Lib/site-packages/bitsandbytes/cextension.py:33: UserWarning: The installed version "
    "of bitsandbytes was compiled without GPU support. 8-bit optimizers are unavailable.",
    # no GPU at all is no 'GPU without native bf16'
    "No CUDA GPUs are available, using float32 instead of bfloat16",
])
def test_notices_are_not_called_harmless_outside_what_they_are_about(text):
    assert not any(m.harmless and m.rule == "AD664" for m in _matches(text))


def test_mps_autocast_on_a_torch_that_has_it_is_not_confirmed_as_too_old():
    text = "torch 2.6.0\nRuntimeError: User specified an unsupported autocast device_type 'mps'"
    first = _first(text)
    assert first is None or first.rule != "AD413" or first.likelihood != "confirmed"
    first = _first("torch 2.3.1\nRuntimeError: User specified an unsupported autocast device_type 'mps'")
    assert first is not None and first.rule == "AD413" and "2.5" in (first.message or "")


def test_a_wrapped_join_stops_at_a_blank_line_and_at_a_carriage_return():
    from attn_doctor.explaining import scan as scanning

    head = b"ValueError: Transformers now supports natively BetterTransformer optimizations"
    buf = head + b"\n\nnext paragraph, another message\n"
    assert scanning._wrapped(buf, len(head), head.decode()) == ()
    buf = head + b"\r\n(torch.nn.functional.scaled_dot_product_attention) for the model\r\n"
    assert scanning._wrapped(buf, len(head), head.decode())[0].endswith("for the model")
    buf = head + b"\n" + b"x" * 5000 + b"\n"  # a line longer than any wrapped part of a message
    assert scanning._wrapped(buf, len(head), head.decode()) == ()


@pytest.mark.parametrize("text", [
    "With fp16 the loss is not nan anymore after lowering the learning rate.",
    "In fp16 training the loss isn't nan, but accuracy is low.",
])
def test_a_loss_said_not_to_be_nan_is_no_overflow(text):
    assert not any(m.rule == "AD660" and m.severity == "error" for m in _matches(text))


# harvest 34 (projects by area)
HARVEST_34 = [
    # ptxas's refusal retold with double quotes
    ('Error: "Feature "bf16" requires .target sm_80 or higher', "AD260"),
    # autocast's input/bias mismatch cut before 'should be the same'
    ("RuntimeError: Input type (float) and bias type (c10::BFloat16)'", "AD651"),
    # a kernel library's own launch check retelling the CUDA error
    ("RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device", "AD313"),
    # a model class without a causal / bidirectional switch
    ("TypeError: GemmaModel.forward() received an unexpected keyword argument 'is_causal'", "AD408"),
]


# harvest 34: full-precision runs and float/double mixes are not the stack
HARVEST_34_LOOK_ALIKES = [
    # float against double: the user's data, not the stack's precision
    "RuntimeError: expected dtype Double but got dtype Float (validate_dtype at "
    "/pytorch/aten/src/ATen/native/TensorIterator.cpp:143)",
    # a NaN loss of a run with mixed precision turned off
    "I set num_workers=8, batch_size = 8, make 'use_amp=False' (cause I don't install Apex)\n"
    "Did you have this situation? 'loss=nan' problem only came out when I train damage segmentation.",
    "trainer: amp: false\nafter 50 epochs the loss became nan",
]


def test_a_nan_loss_with_fp16_on_is_still_read():
    first = _first("use_amp=True, fp16\nafter 50 epochs the loss became nan")
    assert first is not None and first.rule == "AD660"


def test_a_tuple_assignment_of_a_traceback_is_no_key_line():
    from attn_doctor.explaining.neighbours import informative
    assert not informative("output_data, output_ui = get_output_data(obj, input_data_all)")
    assert informative("RuntimeError: Input type (float) and bias type (c10::Half) should be the same")


# harvest 35 (torch's, Triton's, build and GPU messages)
HARVEST_35 = [
    # a library's Triton kernel written for Triton 2.0's tl.dot: not torch's pin
    ("TypeError: dot() got an unexpected keyword argument 'trans_b'", "AD667"),
    # no Triton on Windows: its own family, not a triton off torch's pin
    ('  File "D:\\ComfyUI\\execution.py", line 151, in recursive_execute\n'
     "RuntimeError: Cannot find a working triton installation. More information on installing Triton can be found at "
     "https://github.com/openai/triton", "AD668"),
    # ... while on Linux it is the pin's
    ("RuntimeError: Cannot find a working triton installation. Either the package is not installed or it is too old.",
     "AD201"),
    # torch 1.0's wording of the cuDNN check
    ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled against 7401 but linked against 7301", "AD268"),
    # torch's THC check with the CUDA runtime's error 8
    ("RuntimeError: cuda runtime error (8) : invalid device function at "
     "c:\\anaconda2\\conda-bld\\pytorch_1519496000060\\work\\torch\\lib\\thc\\generic/THCTensorMathPointwise.cu:301", "AD105"),
    # the rocBLAS of torch's ROCm build without this AMD GPU's target
    ("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU "
     "arch : gfx1031", "AD105"),
    # FlexAttention's template with no valid configuration
    ("NoValidChoicesError: No choices to select, please consider adding ATEN into max_autotune_gemm_backends config "
     "(defined in torch/_inductor/config.py) to allow at least one choice.\n  target: flex_attention_backward", "AD669"),
    # xformers' report flattened onto one line: the reason of the general operator, not smallkF's head dim
    ("No operator found for `memory_efficient_attention_forward` with inputs: query : shape=(24, 7456, 1, 128) "
     "(torch.bfloat16) key : shape=(24, 7456, 1, 128) (torch.bfloat16) value : shape=(24, 7456, 1, 128) "
     "(torch.bfloat16) attn_bias : <class 'NoneType'> p : 0.0 `cutlassF` is not supported because: bf16 is only "
     "supported on A100+ GPUs `smallkF` is not supported because: max(query.shape[-1] != value.shape[-1]) > 32 "
     "bf16 is only supported on A100+ GPUs unsupported embed per head: 128", "AD102"),
]


# xformers' report for a bf16 query on a GPU before the A100: its general operator's reason, then smallkF's
XFORMERS_BF16_REPORT = ("NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n"
                        "     query       : shape=(24, 7456, 1, 128) (torch.bfloat16)\n"
                        "`cutlassF` is not supported because:\n    bf16 is only supported on A100+ GPUs\n"
                        "`smallkF` is not supported because:\n")


def test_an_operators_own_reason_is_not_a_second_cause_once_the_report_is_weighed():
    text = XFORMERS_BF16_REPORT + "    max(query.shape[-1] != value.shape[-1]) > 32\n    unsupported embed per head: 128\n"
    report = explain(io.BytesIO(text.encode()), RECIPES, kind="stdin")
    rules = [m.rule for m in report.matches]
    assert rules[0] == "AD102" and "AD603" not in rules, rules


def test_a_triton_pointer_check_is_no_triton_api_mismatch():
    text = ('File "/opt/conda/lib/python3.10/site-packages/triton/runtime/jit.py", line 425, in run\n'
            "ValueError: Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)")
    first = _first(text)
    assert first is None or first.rule != "AD201"


# harvest 36 (NaN and loss scaling, backends, CUDA driver)
HARVEST_36 = [
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
     "driver from http://www.nvidia.com/Download/index.aspx\n运行这一步时我使用的是cpu，请问有办法规避这个报错吗？", "AD259"),
    ("I am new to pytorch, and already installed pytorch in my Mac laptop.\n"
     "AssertionError: Torch not compiled with CUDA enabled", "AD259"),
    ("RuntimeError: nvrtc: error: failed to open libnvrtc-builtins.so.11.1.\n"
     "  Make sure that libnvrtc-builtins.so.11.1 is installed correctly.\nnvrtc compilation failed:", "AD418"),
    ("RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False.", "AD106"),
    ("I found that some activation values in the model exceeded the maximum value of torch.float16", "AD660"),
    ('Hello, when I set use_amp to true I am getting "SILog is NaN, Stopping training" after some batch\n'
     "`Nan SILog loss", "AD660"),
    # still torch's error where the run needs the GPU
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
     "driver from http://www.nvidia.com/Download/index.aspx", "AD101"),
]


@pytest.mark.parametrize("text", [
    # a warning of torch's first CUDA query on a machine meant for the CPU
    "When I use it on a machine with no GPU I still see the following warning message\n```\n"
    "/home/u/envs/x/lib/python3.8/site-packages/torch/autograd/__init__.py:130: UserWarning: CUDA initialization: "
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from "
    "http://www.nvidia.com/Download/index.aspx (Triggered internally at  /pytorch/c10/cuda/CUDAFunctions.cpp:100.)",
    # DeepSpeed's loss scaler finding its scale
    "Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    # fairseq's
    "2021-01-26 03:02:32 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 64.0",
    "2021-01-26 03:02:32 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss "
    "scale to: 32.0",
    "| WARNING: overflow detected, setting loss scale to: 16.0",
])
def test_notices_of_a_cpu_run_and_of_a_loss_scale_search_are_harmless(text):
    report = explain(io.BytesIO(text.encode()), RECIPES, kind="stdin")
    assert report.matches and all(m.harmless or m.likelihood == "unlikely" for m in report.matches), \
        [(m.rule, m.harmless) for m in report.matches]


# harvest 36: the training loop's bugs and a file's line number, not the stack
HARVEST_36_LOOK_ALIKES = [
    # GradScaler's calls out of order: the training loop's bug, not a precision limit
    'AssertionError: Attempted step but _scale is None.  This may indicate your script did not use '
    'scaler.scale(loss or outputs) earlier in the iteration.',
    '  File ".../site-packages/torch/cuda/amp/grad_scaler.py", line 337, in step\n'
    '    assert len(optimizer_state["found_inf_per_device"]) > 0, "No inf checks were recorded for this optimizer."',
    # a file's line number is no compute capability ("logging.cc:361")
    "(Actor pid=11471)     @ ... and at least 3 more frames\n"
    "(Actor pid=11471) [2022-10-21 17:56:19,050 E 11471 11471] logging.cc:361: *** SIGABRT received at "
    "time=1666400179 on cpu 14 ***",
]


# harvest 37 (quantized kernels, trainers, Hub remote code, apps)
HARVEST_37 = [
    ("CUDA Setup failed despite GPU being available. Please run the following command to get more information:\n"
     "bin D:\\gpt\\venv\\lib\\site-packages\\bitsandbytes\\libbitsandbytes_cuda123.dll\nCUDA SETUP: Detected CUDA version 123",
     "AD312"),
    ("The installed version of bitsandbytes was compiled without GPU support. CUDA is required but not available for "
     "bitsandbytes. Please consider installing the multi-platform enabled version of bitsandbytes", "AD259"),
    ('raise RuntimeError("No GPU found. A GPU is needed for quantization.") RuntimeError: No GPU found. A GPU is '
     "needed for quantization.", "AD259"),
    ("ValueError: The current PyTorch version does not support the `scaled_dot_product_attention` function.", "AD413"),
    ("RuntimeError: expected backend CUDA and dtype Float but got backend CUDA and dtype Half", "AD651"),
    ("RuntimeError: Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype", "AD652"),
    ("max(query.shape[-1] != value.shape[-1]) > 32\ndtype=torch.bfloat16 (supported: {torch.float32})\n"
     "bf16 is only supported on A100+ GPUs\nunsupported embed per head: 112", "AD102"),
    ("ImportError: Please install RoPE kernels: pip install "
     "git+https://github.com/HazyResearch/flash-attention.git#subdirectory=csrc/rotary", "AD319"),
    ("An error occurred in a PyTorch Upscale Image node:\n\"slow conv2d cpu\" not implemented for 'Half'", "AD266"),
    ("ModuleNotFoundError: No module named 'xformers'\n\nxformers is not compatible for mac procssors", "AD259"),
    ("`nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9`", "AD107"),
]


# harvest 37: a model too big for the GPU is not attention on the CPU
HARVEST_37_LOOK_ALIKES = [
    # a model bigger than the GPU, offloaded by accelerate's device map: memory, not the stack
    "ValueError: Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU RAM to fit the "
    "quantized model.",
]


def test_a_web_uis_notice_without_xformers_is_harmless():
    report = explain(io.BytesIO(b"`no module 'xformers'. Processing without...`\n"), RECIPES, kind="stdin")
    assert report.matches and all(m.harmless for m in report.matches)


# harvest 38 (torch.compile, extension builds, SDPA masks) and a review of the change
HARVEST_38_AND_REVIEW = [
    ("torch._inductor.exc.InductorError: RuntimeError: Compiler: cl is not found.", "AD315"),
    ("RuntimeError: Could not find MSVC/GCC/CLANG installation on this computer.", "AD315"),
    ("C:\\Users\\u\\envs\\x\\lib\\site-packages\\torch\\utils\\cpp_extension.py:274: UserWarning: Error checking compiler "
     "version for cl: [WinError 2] The system cannot find the file specified\nbuilding 'yolox._C' extension\n"
     "error: Microsoft Visual C++ 14.0 or greater is required.", "AD315"),
    ("/usr/include/c++/11/bits/std_function.h:435:145: error: parameter packs not expanded with '...':", "AD315"),
    ('gemm_bias_act.h(317): error: identifier "__hmul2" is undefined', "AD315"),
    ("error:ValueError: Unknown CUDA arch (8.9) or GPU not supported", "AD315"),
    ("No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'\n"
     "/usr/local/lib/python3.7/dist-packages/torch/utils/cpp_extension.py in _get_cuda_arch_flags(cflags)\n"
     "-> 1606         arch_list[-1] += '+PTX'\nIndexError: list index out of range", "AD259"),
    ("AssertionError: Data types for parameters must match when outside of autocasted region.  Found input dtype: "
     "thunder.dtypes.float32 and 'weight' dtype: thunder.dtypes.bfloat16", "AD651"),
    ("在 Windows 系统中,如果直接使用 pip 安装,会报错如下:\nModuleNotFoundError: No module named 'triton'", "AD668"),
    # a capability glued to 'cc'
    ("RuntimeError: this kernel requires cc8.0 or newer", "AD110"),
    # AMP on, compared with a run without it: still float16's overflow
    ("python train.py --amp\nepoch 3: loss is nan\nWithout AMP it trains fine.", "AD660"),
    ("config: use_amp=True, half=False\nepoch 3: loss is nan", "AD660"),
]


@pytest.mark.parametrize("text", [
    "RuntimeError: The shape of the 2D attn_mask is torch.Size([77, 77]), but should be (3, 3).",
    "nvcc warning : The 'compute_20' architectures are deprecated\nnvcc fatal   : Don't know what to do with ''",
    "[  6%] Building NVCC (Device) object src/x.cu.o\nnvcc fatal   : redefinition of argument 'std'",
    "(pid=114618) No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'",
    # bitsandbytes loading its binary is no failure
    "CUDA SETUP: Detected CUDA version 117\nCUDA SETUP: Loading binary C:\\AI\\env\\lib\\site-packages\\bitsandbytes\\"
    "libbitsandbytes_cuda117.dll...",
    # a torch too old for weights_only, next to a triton pin: no Triton kernel
    "triton==2.1.0\ntorch==2.0.1\nTypeError: load() got an unexpected keyword argument 'weights_only'",
    # a Linux log's sliding windows are no Windows
    '  File "/home/u/venv/lib/python3.10/site-packages/torch/_inductor/codecache.py", line 1\n'
    "ModuleNotFoundError: No module named 'triton'\nUsing sliding windows of 4096 tokens",
    # a caution, not an overflow that happened
    "UserWarning: values may exceed the range of fp16 for this model; consider using bf16.",
    "Weights larger than the max value of fp16 are clamped to 65504.",
])
def test_build_script_and_caller_mistakes_and_notices_are_not_the_stacks(text):
    first = _first(text)
    assert first is None or first.rule not in ("AD282", "AD315", "AD312", "AD667", "AD668", "AD660"), first.rule


def test_an_error_after_an_xformers_report_keeps_its_own_finding():
    text = (XFORMERS_BF16_REPORT + "    unsupported embed per head: 128\n\nRetrying in float32...\n"
            "RuntimeError: FlashAttention forward only supports head dimension at most 256\n")
    report = explain(io.BytesIO(text.encode()), RECIPES, kind="stdin")
    by_rule = {m.rule: m for m in report.matches}
    assert report.matches[0].rule == "AD102"
    assert [e.line for e in by_rule["AD603"].evidence] == [9]


def test_a_conda_prompt_named_after_torch_is_no_torch_version():
    report = explain(io.BytesIO(b"(torch2.1) user@box:~$ python x.py\nRuntimeError: CUDA error: no kernel image is "
                                b"available for execution on the device\n"), RECIPES, kind="stdin")
    assert "torch" not in report.versions


def test_an_untagged_pre_release_of_torch_is_no_official_wheel():
    from attn_doctor.explaining import builds
    from attn_doctor.facts import Facts, Gpu, GpuInfo, TorchInfo
    facts = Facts()
    facts.torch = TorchInfo(version="2.4.0a0")
    facts.gpu = GpuInfo(source="log", devices=[Gpu(index=0, name="A100", capability="8.0")])
    rule = RECIPES.get("AD105")
    assert builds.torch_has_the_kernels(rule, {}, facts, RECIPES.data) is None


# harvest 39 (MPS, ROCm, multi-GPU, notebooks)
HARVEST_39 = [
    ("> ocBLAS error: Cannot read C:\\Program Files\\AMD\\ROCm\\6.2\\bin\\/rocblas/library/TensileLibrary.dat: No such "
     "file or directory for GPU arch : gfx1201", "AD105"),
    ("`rocBLAS error: Cannot read /home/u/venv/lib/python3.11/site-packages/torch/lib/rocblas/library/"
     "TensileLibrary.dat: Illegal seek`", "AD105"),
    ('AssertionError: Ulysses Attention and Ring Attention requires xfuser package.', "AD353"),
    ("Symbol not found: _torch_library_impl", "AD312"),
    ('it states "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a '
     'driver" but I have a RX570 GPU.', "AD259"),
]


# harvest 39: a compiler's error count and a quantized model's placement
HARVEST_39_LOOK_ALIKES = [
    # a compiler's count of its errors names no cause, not even as a known case's line
    "1 error generated when compiling for gfx900.",
    # a quantized model's placement over devices, not its precision
    "ValueError: You can't train a model that has been loaded in 8-bit precision on a different device than the one "
    "you're training on.",
]


# pending batches: a transformers helper and a CPU library's kernel, named for what they are
PENDING_READINGS = [
    # transformers' rotary helper called with another release's arguments
    ("TypeError: apply_rotary_pos_emb_flashatt() missing 2 required positional arguments: 'cos' and 'sin'", "AD412"),
    # a CPU library's kernel name refusing half
    ("RuntimeError: \"baddbmm__mkl\" not implemented for 'Half'", "AD266"),
]


# harvest 40: torchvision's own CUDA check, a native runtime's build, transformers' attention flags, cuDNN's
# and cuBLAS's architecture floors, float8 storage computed on, a NaN image cast by an app's own code
HARVEST_40 = [
    ("RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA versions. PyTorch has CUDA "
     "Version=11.7 and torchvision has CUDA Version=11.8. Please reinstall the torchvision that matches your PyTorch "
     "install.", "AD312"),
    ("/env/lib/python3.8/site-packages/torch/utils/cpp_extension.py:782: UserWarning: The detected CUDA version (11.7) "
     "has a minor version mismatch with the version that was used to compile PyTorch (11.3).\n"
     "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA versions. PyTorch has CUDA "
     "Version=11.3 and torchvision has CUDA Version=11.7.", "AD314"),
    ("ggml_cuda_compute_forward: IM2COL failed\nCUDA error: no kernel image is available for execution on the device",
     "AD313"),
    ("AttributeError: 'Florence2ForConditionalGeneration' object has no attribute '_supports_sdpa'", "AD412"),
    ("`Error: CUDNN_STATUS_ARCH_MISMATCH`", "AD110"),
    ("cudnnGraphNotSupportedError: CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH", "AD110"),
    ("ERROR (VoskAPI:AddMatMat():cu-matrix.cc:1329) cublasStatus_t 8 : \"CUBLAS_STATUS_ARCH_MISMATCH\" returned from "
     "'cublas_gemm(GetCublasHandle(), m, n, k)'", "AD110"),
    # a generated image's NaN cast to bytes: float16's overflow most often in these pipelines (a possible cause)
    ("nodes.py:1534: RuntimeWarning: invalid value encountered in cast\n"
     "  img = Image.fromarray(np.clip(i, 0, 255).astype(np.uint8))", "AD660"),
    ("Error occurred when executing AttentionCouple|cgem156:\n\"sum_cuda\" not implemented for 'Float8_e4m3fn'", "AD670"),
    ("RuntimeError: addmm_cuda is not implemented for Float8_e4m3fn", "AD670"),
]



# harvest 41: torch's CUDA half of c10 missing, the newer scalar-type wording, diffusers' fp16 pipeline on the
# CPU, an opening typographic quote only, CMake without a compiler
HARVEST_41 = [
    ("ImportError: libc10_cuda.so: cannot open shared object file: No such file or directory", "AD106"),
    ("    sparsified_delta = torch.where(mask.to(device), sparsified_delta.to(device), merged_a.to(device))\n"
     "RuntimeError: expected scalar type float but found c10::Half", "AD651"),
    ("Pipelines loaded with `dtype=torch.float16` cannot run with `cpu` device. It is not recommended to move them to "
     "`cpu` as running them will fail.", "AD266"),
    ("Running `demo_page_hf.py` on CPU fails with: \u201cslow_conv2d_cpu not implemented for 'Half'\u201d.", "AD266"),
    ("Building wheel for llama-cpp-python (pyproject.toml) ... error\nCMake Error at CMakeLists.txt:3 (project):\n"
     "No CMAKE_C_COMPILER could be found.", "AD315"),
]

# harvest 41: torch's builder saying what it builds with, and TensorFlow's cudart notice on one line
HARVEST_41_LOOK_ALIKES = [
    "/env/lib/python3.10/site-packages/torch/utils/cpp_extension.py:414: UserWarning: The detected CUDA version (11.5) "
    "has a minor version mismatch with the version that was used to compile PyTorch (11.8). Most likely this shouldn't "
    "be a problem.",
    "/venv/lib/python3.9/site-packages/torch/utils/cpp_extension.py:820: UserWarning: There are no x86_64-linux-gnu-g++ "
    "version bounds defined for CUDA version 11.6",
    "2023-04-06 08:12:21.949785: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic "
    "library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file or directory "
    "2023-04-06 08:12:21.949815: I tensorflow/stream_executor/cuda/cudart_stub.cc:29] Ignore above cudart dlerror if you "
    "do not have a GPU set up on your machine.",
]


# harvest 42: an infinite loss in half precision, lerp's dtype wording, Ascend's fused attention given fp32,
# a backend without bf16, torch's capability range outside the GPU's
HARVEST_42 = [
    ("python main.py --model EDSR --scale 2 --precision half\nSkip this batch 2! (Loss: inf)", "AD660"),
    ("RuntimeError: expected dtype float for end but got dtype c10::BFloat16.", "AD651"),
    ("EZ9999: Cannot find bin of op FlashAttentionScore, integral key 0/1/|float/ND/float/ND/float/ND/float/ND/.", "AD604"),
    ("RuntimeError: Unsupported tensor dtype: c10::BFloat16", "AD102"),
    ("    Found GPU0 NVIDIA GeForce GTX 1080 which is of cuda capability 6.1.\n    Minimum and Maximum cuda capability "
     "supported by this version of PyTorch is\n    (7.0) - (12.0)", "AD105"),
]


# harvest 43: a run said to be on the CPU, a cuDNN binding's arch mismatch, THC's invalid device function
HARVEST_43 = [
    ("When I test my image. Run in cpu But got the error Found no NVIDIA driver on your system. Please check that you",
     "AD259"),
    ("16-Mar 23:11:13:INFO:root:Initializing CuDNN backend...\nERROR: Arch mismatch\n in create at "
     "/home/b/.julia/v0.3/Mocha/src/cuda/cudnn.jl:43", "AD110"),
    ("with my old graphics card (GeForce GM630m => cuda capability 2.1), I always get the `cuda runtime error (8) : "
     "invalid device function` error", "AD105"),
]


# harvest 44: TensorFlow's cuDNN mismatch wording, FA3 on a non-Hopper GPU, a setup.py's CUDA floor
HARVEST_44 = [
    ("<code> Loaded runtime CuDNN library: 5103 (compatibility version 5100) but source was compiled with 4007 "
     "(compatibility version 4000).", "AD268"),
    ("FA3 kernels crash on RTX 5090 (Blackwell, SM 12.0): `no kernel image is available for execution on the device`",
     "AD316"),
    ("  File \"ABot-World/SageAttention/setup.py\", line 131, in <module>\n"
     "    raise RuntimeError(\"CUDA 12.0 or higher is required to build the package.\")\n"
     "RuntimeError: CUDA 12.0 or higher is required to build the package.", "AD315"),
]

# harvest 44: a quantized model's placement, not its precision
HARVEST_44_LOOK_ALIKES = [
    "Error loading models: `.to` is not supported for `4-bit` or `8-bit` bitsandbytes models. Please use the model as it "
    "is, since the model has already been set to the correct devices and casted to the correct `dtype`.",
]


# harvest 45: an attention processor or a replaced attention forward of another signature, a flag assertion
# that flash-attn imported, NVRTC without CUDA's headers, CTranslate2's int8_float16, optional kernels' notices
HARVEST_45 = [
    ("TypeError: JointAttnProcessor2_0.__call__() got an unexpected keyword argument 'encoder_attention_mask'", "AD412"),
    ("TypeError: ring_attn_forward() takes from 4 to 5 positional arguments but 6 were given", "AD412"),
    ('  File "models/attention.py", line 40, in flash_attention\n    assert FLASH_ATTN_2_AVAILABLE\nAssertionError', "AD350"),
    ('default_program(1): catastrophic error: cannot open source file "cuda_fp16.h"', "AD315"),
    ("ValueError: Requested int8_float16 compute type, but the target device or backend do not support efficient "
     "int8_float16 computation.", "AD109"),
    ('#include "cuda.hpp"\nfatal error: cuda_runtime.h: No such file or directory', "AD315"),
    ("GPU: NVIDIA GeForce RTX 3090\nwhisper/transcribe.py:114: UserWarning: FP16 is not supported on CPU; using FP32 instead",
     "AD106"),
]

# harvest 46: a library's registered operator raising 'no kernel image' through torch's dispatch, ONNX
# Runtime's CUDA provider without its CUDA, diffusers' xformers check on a machine without CUDA
HARVEST_46 = [
    ('  File "/venv/lib/python3.11/site-packages/flash_attn/flash_attn_interface.py", line 91, in _flash_attn_forward\n'
     '    out, softmax_lse, S_dmask, rng_state = torch.ops.flash_attn._flash_attn_forward(\n'
     '  File "/venv/lib/python3.11/site-packages/torch/_ops.py", line 1116, in __call__\n'
     '    return self._op(*args, **(kwargs or {}))\n'
     'RuntimeError: CUDA error: no kernel image is available for execution on the device', "AD313"),
    ("onnxruntime::python::CreateExecutionProviderInstance CUDA_PATH is set but CUDA wasn't able to be loaded. "
     "Please install the correct version of CUDA and cuDNN", "AD418"),
    ("ValueError: torch.cuda.is_available() should be True but is False. xformers' memory efficient attention is only "
     "available for GPU", "AD259"),
]

# harvests 46 and 47: a resolver's header line resembles no known case on its words alone; a model config's
# divisibility and a recurrent layer's backward in eval mode are not the stack's
HARVEST_46_LOOK_ALIKES = [
    "ValueError: hidden_size must be divisible by num_heads (got `hidden_size`: 3224 and `num_heads`: 28).",
    "RuntimeError: cudnn RNN backward can only be called in training mode",
    "[info]    x No solution found when resolving dependencies:\n[info]  \n  `-> Because there is no version of "
    "torch==2.9.1+cu130 and you require\n      torch==2.9.1+cu130, we can conclude that your requirements are\n"
    "      unsatisfiable.",
]

# harvest 47: torch 1.0's wording of two floating types meeting
HARVEST_47 = [
    ("    out = weight * mask\nRuntimeError: expected type torch.cuda.HalfTensor but got torch.cuda.FloatTensor", "AD651"),
]

# harvest 48: XLA's cuDNN check (a colon before the version), TensorRT's words for CUDA error 35, a
# torch binding symbol (THPVariable_Wrap) undefined, in Linux's and macOS's words
HARVEST_48 = [
    ("E0614 09:34:18.652694   35835 cuda_dnn.cc:522] Loaded runtime CuDNN library: 9.5.1 but source was compiled with: "
     "9.8.0.  CuDNN library needs to have matching major version and equal or higher minor version.", "AD268"),
    ("[01/22/2025-15:27:47] [TRT] [W] CUDA initialization failure with error: 35. Please check your CUDA installation:  "
     "http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html\n"
     "TypeError: pybind11::init(): factory function returned nullptr", "AD107"),
    ("ImportError: dlopen(/x/site-packages/layoutparser/_C.so, 2): Symbol not found: __Z16THPVariable_WrapN2at6TensorE",
     "AD312"),
    ("ImportError: /x/site-packages/ext/_C.so: undefined symbol: _Z16THPVariable_WrapN2at10TensorBaseE", "AD312"),
    ("    elif torch.backends.mps.is_available():\nAttributeError: module 'torch.backends' has no attribute 'mps'", "AD413"),
]

# harvest 49: ONNX Runtime's provider loader in its own words, torch._C's CUDA functions missing (a CPU-only
# torch), a CUDA kernel's shared memory request refused, xformers' own modules missing, torch's headers
# refusing an old host compiler
HARVEST_49 = [
    ("2026-04-02 17:50:37.6978610 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:1099 onnxruntime::python::"
     "CreateExecutionProviderFactoryInstance] Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*, "
     "and the latest MSVC runtime.", "AD418"),
    ("[E:onnxruntime:Default, provider_bridge_ort.cc:2223 onnxruntime::TryGetProviderInfo_TensorRT] [ONNXRuntimeError] : 1 : "
     "FAIL : Error loading \"C:\\venv\\Lib\\site-packages\\onnxruntime\\capi\\onnxruntime_providers_tensorrt.dll\" which "
     "depends on \"cublas64_12.dll\" which is missing. (Error 126: \"The specified module could not be found.\")", "AD418"),
    ("Failed to load model: module 'torch._C' has no attribute '_cuda_resetPeakMemoryStats'", "AD106"),
    ("ERROR: CUDA RT call \"cudaFuncSetAttribute(&monarch_conv_cuda_32_32_32_kernel<32, 8, 32768, 2, 16, false, 2, 8, 8>, "
     "cudaFuncAttributeMaxDynamicSharedMemorySize, 135168)\" in line 969 of file /tmp/x/fwd_bf16.cu failed with invalid "
     "argument (1).", "AD262"),
    ("ModuleNotFoundError: No module named 'xformers._flash_attn'", "AD312"),
    ("/x/torch/include/ATen/ATen.h:4:2: error: #error C++14 or later compatible compiler is required to use ATen.", "AD315"),
]

# harvest 50: StyleGAN's custom ops and torch's extension builds failing, CUDA headers not found, an
# engine's fp16 refusal, NVRTC's builtins library, ggml's CUDA check
HARVEST_50 = [
    ('Setting up PyTorch plugin "bias_act_plugin"... Failed!', "AD315"),
    ("ImportError: No module named bias_act_plugin", "AD315"),
    ('/usr/include/cudnn.h:63:26: fatal error: driver_types.h: No such file or directory\n #include "driver_types.h"', "AD315"),
    ('  File "/c/lib/python3.7/site-packages/torch/utils/cpp_extension.py", line 283, in check_compiler_abi_compatibility\n'
     "    if not check_compiler_ok_for_platform(compiler):", "AD315"),
    ("terminate called after throwing an instance of 'lczero::Exception'\n  what():  Your GPU doesn't support FP16", "AD109"),
    ("RuntimeError: nvrtc: error: failed to open nvrtc-builtins64_117.dll. Make sure that nvrtc-builtins64_117.dll is "
     "installed correctly.", "AD418"),
    ("CUDA error 13 at /home/z/PowerInfer/ggml-cuda.cu:9619: invalid device symbol", "AD313"),
]

# harvest 51: nvcc's refusal without its prefix, flash-attn's csrc kernel named by transformers' import check,
# torch's cuBLAS without bf16 matrix multiply
HARVEST_51 = [
    ("i met error 'Unsupported gpu architecture 'compute_86''.", "AD315"),
    ("ImportError: This modeling file requires the following packages that were not found in your environment: "
     "rotary_emb. Run `pip install rotary_emb`", "AD319"),
    ("The error is: RuntimeError: at::cuda::blas::gemm: not implemented for struct c10::BFloat16", "AD102"),
    ("RuntimeError: at::cuda::blas::bgemm: not implemented for N3c108BFloat16E", "AD102"),
    ("ImportError: This modeling file requires the following packages that were not found in your environment: einops, "
     "dropout_layer_norm. Run `pip install einops dropout_layer_norm`", "AD319"),
    ("AttributeError: module 'torch.backends.cuda' has no attribute 'sdp_kernel'", "AD413"),
    ("[ONNXRuntimeError] : 1 : FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: "
     "libcublasLt.so.11: cannot open shared object file: No such file or directory", "AD418"),
    ("[ONNXRuntimeError] : 1 : FAIL : LoadLibrary failed with error 126 \"\" when trying to load "
     "\"C:\\venv\\Lib\\site-packages\\onnxruntime\\capi\\onnxruntime_providers_cuda.dll\"", "AD418"),
    ("/x/torch/include/c10/util/C++17.h:13:2: error: #error \"You're trying to build PyTorch with a too old version of "
     "GCC. We need GCC 9 or later.\"", "AD315"),
    ("/x/torch/include/torch/all.h:4:2: error: #error C++17 or later compatible compiler is required to use PyTorch.",
     "AD315"),
]

HARVEST_52 = [
    ("  File \"/data/streaming-llm/streaming_llm/pos_shift/modify_llama.py\", line 87, in llama_pos_shift_attention_forward\n"
     "    kv_seq_len += past_key_value[0].shape[-2]\n"
     "KeyError: 'Cache only has 0 layers, attempted to access layer with index 0'", "AD412"),
    ("  File \"python3.9/site-packages/transformers/models/llama/modeling_llama.py\", line 402, in forward\n"
     "    kv_seq_len += past_key_value.get_usable_length(kv_seq_len, self.layer_idx)\n"
     "AttributeError: 'list' object has no attribute 'get_usable_length'", "AD412"),
    ("ModuleNotFoundError: No module named 'block_sparse_seer_attn'", "AD353"),
    ("ModuleNotFoundError: No module named 'sparse_dl.attn_cuda'", "AD353"),
    ('RuntimeError: handle_0 INTERNAL ASSERT FAILED at "../c10/cuda/driver_api.cpp":15, please report a bug to PyTorch.',
     "AD671"),
    ("2023/06/09 23:47:22 - mmengine - INFO - Exp name: mae_vit-base-p16_8xb512-amp-coslr-1600e_pathology_20230609\n"
     "2023/06/09 23:49:56 - mmengine - INFO - Epoch(train) [166][100/351] lr: 2.3620e-03 memory: 48596 loss: nan", "AD660"),
    ("    Running setup.py install for apex ... error\n"
     "      File \"/opt/venv/lib/python3.8/site-packages/torch/utils/cpp_extension.py\", line 1561, in _get_cuda_arch_flags\n"
     "        arch_list[-1] += '+PTX'\n    IndexError: list index out of range", "AD315"),
    ("ValueError: Your GPU (Tesla T4) does not support bfloat16. Use fp16 instead.", "AD102"),
    ("numba.cuda.cudadrv.error.CudaAPIError: [209] Call to cuModuleLoadDataEx results in CUDA_ERROR_NO_BINARY_FOR_GPU", "AD313"),
]

HARVEST_53 = [
    ("When I am doing \"python3 server.py --ip '0.0.0.0' --port 60808\"\n"
     "I face the problem of \"AssertionError: Torch not compiled with CUDA enabled\"\n"
     "I am Mac pro on M2, could i run the mini-omnion CPU? thanks.", "AD259"),
    ("python -m moshi.server --device cpu --hf-repo kyutai/moshika-pytorch-bf16\n\n"
     "\"RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
     "driver from http://www.nvidia.com/Download/index.aspx\"", "AD259"),
    ('Error: DriverError(CUDA_ERROR_NOT_FOUND, "named symbol not found") when loading cast_f32_bf16', "AD102"),
]

HARVEST_54 = [
    ("ERROR: Could not find a version that satisfies the requirement triton==2.1.0 (from -r requirements.txt (line 36)) "
     "(from versions: none) ERROR: No matching distribution found for triton==2.1.0", "AD668"),
    ("pair_nequip.cpp:(.text+0xb7): undefined reference to `c10::detail::torchCheckFail(char const*, char const*, "
     "unsigned int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)'", "AD312"),
    ("python: symbol lookup error: /x/site-packages/torch/lib/libtorch_python.so: undefined symbol: PySlice_Unpack", "AD312"),
    ("ModuleNotFoundError: No module named 'mmcv._ext'", "AD354"),
    ("ImportError: cannot import name '_C' from 'groundingdino' (/x/groundingdino/__init__.py)", "AD354"),
    ("ModuleNotFoundError: No module named 'MultiScaleDeformableAttention'", "AD354"),
]

HARVEST_55 = [
    ("E   RuntimeError: Backend 'cuda' failed to initialize: Unable to use CUDA because of the following issues with CUDA "
     "components:\nE   Outdated cuDNN installation found.\nE   Version JAX was built against: 8907", "AD268"),
    ("Could not load library libcudnn_cnn_train.so.8. Error: /usr/lib/x86_64-linux-gnu/libcudnn_cnn_train.so.8: undefined "
     "symbol: _ZTIN10cask_cudnn14BaseKernelInfoE, version libcudnn_cnn_infer.so.8", "AD268"),
    ("  File \"C:\\x\\torch\\_ops.py\", line 643, in load_library\n    ctypes.CDLL(path)\n"
     "OSError: [WinError 127] the specified procedure could not be found", "AD312"),
    ("RuntimeError: Cannot find CUDA_HOME. CUDA must be available to build the package.", "AD315"),
    ("AttributeError: module 'torch.library' has no attribute 'register_fake'", "AD419"),
    ("ModuleNotFoundError: No module named 'torch.profiler'", "AD419"),
]

HARVEST_57 = [
    # Composable Kernel defines its buffer descriptor only for the gfx targets it supports
    ("ck/utility/amd_buffer_addressing.hpp:33:48: error: use of undeclared identifier 'CK_BUFFER_RESOURCE_3RD_DWORD'", "AD112"),
    ("include/ck/utility/amd_buffer_addressing.hpp:35:5: error: 'CK_BUFFER_RESOURCE_3RD_DWORD' was not declared in this scope", "AD112"),
    # the symbol version with or without the quotes around it
    ("ImportError: /usr/lib/libstdc++.so.6: version GLIBCXX_3.4.26 not found", "AD352"),
    # the runtime's number for 'no kernel image', printed by a library's own check
    ("CUDA error 209 at /src/plugin/PReLUPlugin/PReLUPlugin.cu:183", "AD313"),
    ("CUDA error: 209 in /opt/lib/kernels/scan.cpp:41", "AD313"),
    # a program checking the driver itself
    ("Your current NVIDIA GPU driver version is not supported. Required: driver version >= 580 (CUDA >= 13.0) "
     "Detected: 540.4.0 (CUDA 12.6)", "AD107"),
    # CUDA's crt/host_config.h for each host compiler
    ("/opt/cuda/7.5/include/host_config.h:115:2: error: #error -- unsupported GNU version! gcc versions later than 4.9 are not supported!", "AD315"),
    ("host_config.h(164): fatal error C1189: #error:  -- unsupported Microsoft Visual Studio version! Only the versions between "
     "2017 and 2022 (inclusive) are supported!", "AD315"),
    ("crt/host_config.h:151:2: error: -- unsupported clang version! clang version must be less than 16 and greater than 3.2 .", "AD315"),
    # a kernel library's floor in its own words
    ("[2020-09-08 11:15:32] GPU #0: FATAL: the 't' kernel requires 5.0 capability!", "AD110"),
    # torch's CUDA assertion where the text says the GPU is AMD's
    ("I have AMD GPU I get this error \"Torch not compiled with CUDA enabled\"", "AD259"),
    ("AssertionError: Torch not compiled with CUDA enabled\n(my card is a Radeon RX 7900 XTX)", "AD259"),
]

HARVEST_58 = [
    # torch 2.13's own check at CUDA initialisation (torch/cuda/__init__.py, _warn_unsupported_code)
    ("UserWarning: Found GPU0 NVIDIA GeForce RTX 5060 Ti which is of compute capability (CC) 12.0.\n"
     "The following list shows the CCs this version of PyTorch was built for and the hardware CCs it supports:\n"
     "- 9.0 which supports hardware CC >=9.0,<10.0\n"
     "Your installed torch==2.13.0+cu126 does not include kernels for this GPU. Reinstall the same version against a "
     "CUDA build that does, e.g.:", "AD105"),
    ("No published PyTorch CUDA builds for release 2.13.0+cu126 support this GPU. Visit https://pytorch.org/get-started/locally/ "
     "to find a compatible release.", "AD105"),
    # a compiled module that was never built: bare, published only as source, JIT-built by torch
    ("    import _ext as _backend\nModuleNotFoundError: No module named '_ext'", "AD354"),
    ("    import tinycudann as tcnn\nModuleNotFoundError: No module named 'tinycudann'", "AD354"),
    ("    from diff_gaussian_rasterization import GaussianRasterizationSettings\nModuleNotFoundError: No module named 'diff_gaussian_rasterization'", "AD354"),
    ("  File \"/x/torch/utils/cpp_extension.py\", line 1701, in _import_module_from_library\n    file, path = imp.find_module(module_name, [path])\n"
     "  File \"/x/imp.py\", line 297, in find_module\n    raise ImportError(_ERR_MSG.format(name), name=name)\nImportError: No module named 'knn'", "AD354"),
    ("ImportError: cannot import name '_ext' from 'pointnet2_ops' (unknown location)", "AD354"),
    ("出现了这个提示：No module named 'monotonic_align.monotonic_align'", "AD354"),
    # Windows' CUDA library names carry their major
    ("Could not locate cublas64_11.dll. Please make sure it is in your library path!", "AD418"),
    # the extension's source includes a torch header the build's torch lacks
    ("/x/src/cuda/dcn_v2_cuda.cu:4:10: fatal error: ATen/ceil_div.h: No such file or directory", "AD315"),
    ("'CUDA Kernel failed: invalid deveice function'", "AD313"),
    ("\"PyTorch is not linked with support for CUDA devices\"", "AD106"),
    # FSDP: one dtype per wrapped unit
    ("ValueError: Must flatten tensors with uniform dtype but got torch.bfloat16 and torch.float32", "AD420"),
    ("AssertionError: FSDP expects uniform original parameter dtype but got {torch.bfloat16, torch.float32}", "AD420"),
]

HARVEST_59 = [
    ("rocBLAS error: Could not load C:\\Program Files\\AMD\\ROCm\\6.2\\bin\\/rocblas/library/TensileLibrary_lazy_gfx1036.dat\n"
     "rocBLAS error: Could not initialize Tensile library", "AD105"),
    ("  File \"C:\\x\\detectron2\\layers\\deform_conv.py\", line 11, in <module>\n    from detectron2 import _C\n"
     "ImportError: DLL load failed while importing _C: The specified module could not be found.", "AD354"),
    ("Loading extension module wkv_512...\nImportError: DLL load failed while importing wkv_512: 找不到指定的模块。", "AD354"),
    ("Reason for failure: The minimum Omniverse RTX requirement on Linux\nInstalled driver: 535.18\n"
     "The unsupported driver range: [0.0, 535.129)", "AD107"),
    ("    out, x, *rest = selective_scan_cuda_oflex_rh.fwd(u, delta, A, B, D, delta_bias, delta_softplus, 1, True)\n"
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "AD313"),
    ("jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed. Look at the errors "
     "above for more details.", "AD268"),
]

HARVEST_60 = [
    ("    import _polyiou\nModuleNotFoundError: No module named '_polyiou'", "AD354"),
    ("  File \"/x/polyiou.py\", line 20, in swig_import_helper\n    import _polyiou\nModuleNotFoundError: No module named '_polyiou'", "AD354"),
    ("NameError: name 'deform_conv_ext' is not defined", "AD354"),
    ("FileNotFoundError: Could not find: cublas64_10.dll. Is it on your PATH?", "AD418"),
    ("ImportError: /x/roi_align/_C.so: undefined symbol: __cudaPopCallConfiguration", "AD314"),
    ("RuntimeError: CuDNN error: CUDNN_STATUS_SUCCESS", "AD105"),
]

HARVEST_61 = [
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=383 error=8 : invalid device function", "AD105"),
    ("    return mc.mcubes_cuda(vol, thresh)\nAttributeError: module 'torchmcubes_module' has no attribute 'mcubes_cuda'", "AD354"),
    ("ImportError: /x/mlperf_loadgen.cpython-36m-x86_64-linux-gnu.so: undefined symbol: "
     "_ZNSt15__exception_ptr13exception_ptr10_M_releaseEv", "AD352"),
]

HARVEST_62 = [
    # c10's type promotion refuses float8 on either side (the message as torch 2.13 raises it on the CPU)
    ("!!! Exception during processing !!! Promotion for Float8 Types is not supported, attempted to promote "
     "Float8_e4m3fn and BFloat16", "AD670"),
    ("RuntimeError: Promotion for Float8 Types is not supported, attempted to promote Float and Float8_e5m2", "AD670"),
    # torch before 2.2 refuses torch.compile on Windows outright
    ("RuntimeError: Windows not yet supported for torch.compile", "AD668"),
    ("RuntimeError: Windows not yet supported for inductor", "AD668"),
    # a GPU the text says was added since: a CPU-only torch, not a machine without CUDA
    ("Until last week I didn't have a GPU; now I installed an RTX 3060 and get\n"
     "AssertionError: Torch not compiled with CUDA enabled", "AD106"),
    # Triton's CUDA backend is active only where torch sees a CUDA GPU; a text that says there is none
    ("RuntimeError: 0 active drivers ([]). There should only be one.", "AD101"),
    # a text that says it has GPUs is not a machine without one
    ("we have GPUs, and a forked worker says RuntimeError: 0 active drivers ([]). There should only be one.", "AD101"),
    # stable-diffusion-webui's start check: torch sees no CUDA GPU; a Mac named in the text is no CUDA platform
    ("AssertionError: Torch is not able to use GPU; add --skip-torch-cuda-test to COMMANDLINE_ARGS variable to disable this check",
     "AD101"),
    ("MacBook Pro M2\nAssertionError: Torch is not able to use GPU; add --skip-torch-cuda-test to COMMANDLINE_ARGS variable to "
     "disable this check", "AD259"),
    ("I have an AMD GPU\nRuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. "
     "If you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu')", "AD259"),
    ("没有GPU 运行 R1。trenton 出错： RuntimeError: 0 active drivers ([]). There should only be one.", "AD259"),
    ("I do not have CUDA or any GPU available. When I load my own saved model, I get the error \"Torch not compiled "
     "with CUDA enabled\"", "AD259"),
    # bitsandbytes' own search for cudart before it names the binary this release lacks
    ("CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup paths...\n"
     "CUDA SETUP: PyTorch settings found: CUDA_VERSION=130, Highest Compute Capability: 12.0.\n"
     "CUDA SETUP: Required library version not found: libbitsandbytes_cuda130.so. Maybe you need to compile it from source?",
     "AD312"),
    # a serving engine's kernel library of another release than its pin
    ("AttributeError: module 'deep_gemm' has no attribute 'm_grouped_bf16_gemm_nt_masked'. Did you mean: "
     "'m_grouped_fp8_fp4_gemm_nt_masked'?", "AD311"),
]

HARVEST_64 = [
    # a torch-ngp style backend imported by its leading-underscore name and never built
    ("    import _raymarching_face as _backend\nModuleNotFoundError: No module named '_raymarching_face'", "AD354"),
    # Deformable DETR's op: Mask2Former's own message, and the name resolving to mmcv's class instead of the op
    ("ModuleNotFoundError: \n\nPlease compile MultiScaleDeformableAttention CUDA op with the following commands:", "AD354"),
    ("type object 'MultiScaleDeformableAttention' has no attribute 'ms_deform_attn_forward'", "AD354"),
    # a project's op built without its .cu files: its own launcher (a global function, no torch namespace)
    ("ImportError: /w/ops/voxel_pooling/voxel_pooling_ext.cpython-38-x86_64-linux-gnu.so: undefined symbol: "
     "_Z37voxel_pooling_forward_kernel_launcheriiiiiiPKiPKfPfPiP11CUstream_st", "AD422"),
    # dlib's CUDA check: its source file, then the runtime's error 8
    ("RuntimeError: Error while calling cudaOccupancyMaxPotentialBlockSize(&num_blocks,&num_threads,K) in file "
     "c:\\dlib\\dnn\\cuda_utils.h:155. code: 8, reason: invalid device function", "AD313"),
    # PaddlePaddle's loader names the CUDA library of its build
    ("PreconditionNotMetError: The third-party dynamic library (cudnn64_7.dll) that Paddle depends on is not configured "
     "correctly. (error code is 126)", "AD418"),
    # the log states a CPU-only torch and an NVIDIA driver
    ("INFO - separator - PyTorch Version: 2.4.1+cpu\n| NVIDIA-SMI 566.14                 Driver Version: 566.14         "
     "CUDA Version: 12.7     |", "AD106"),
]

HARVEST_65 = [
    # a package's import-time check of the torch build its compiled library was made for (fairseq2's variants)
    ("RuntimeError: fairseq2n requires a CUDA 12.1 build of PyTorch 2.4.1, but the installed version is a CUDA 12.6 "
     "build of PyTorch 2.6.0.", "AD312"),
    ("ImportError: mykernels was built for PyTorch 2.5.1, but the installed version is 2.7.0", "AD312"),
    # a per-CUDA wheel index with no build of the package
    ("Looking in indexes: https://wheels.example.org/whl/cu128\nERROR: Could not find a version "
     "that satisfies the requirement somekernel-cu (from versions: none)\nERROR: No matching distribution found for somekernel-cu", "AD312"),
    # the CUDA runtime's error name: an old driver; said of a CPU-only machine: CUDA code where there is no CUDA
    ("pipeline.cc:120 | CUDA runtime API error cudaErrorInsufficientDriver (35)", "AD107"),
    ("On our CPU-only servers the backend fails with: CUDA runtime API error cudaErrorInsufficientDriver (35)", "AD259"),
]

HARVEST_65_LOOK_ALIKES = [
    # a library the driver provides (NVDEC's), not a package built for another torch
    "Assert on \"lib_handle_\" failed: Failed to load libnvcuvid.so, needed by the VideoReader operator.",
    # the same torch on both sides of the check: no mismatch to name
    "RuntimeError: fairseq2n requires a CUDA 12.1 build of PyTorch 2.4.1, but the installed version is a CUDA 12.1 build of PyTorch 2.4.1.",
]

HARVEST_66 = [
    # a package that ships one compiled library per torch release, with none for this torch
    ("ImportError: Trying to load featomic-torch with torch v2.8.0+cu128, we found builds for torch v2.5, v2.6, v2.7; "
     "which are not ABI compatible.", "AD312"),
    ("ImportError: libfeatomic_torch.so is not compatible with the current PyTorch installation.", "AD312"),
    # DeepSpeed's CPU optimizer whose op never loaded, and its op builder without torch's CUDA
    ("AttributeError: 'DeepSpeedCPUAdagrad' object has no attribute 'ds_opt_adagrad'", "AD354"),
    ("[WARNING]  cpu_adagrad cuda is missing or is incompatible with installed torch, only cpu ops can be compiled!", "AD314"),
    # a kernel compiler without a target for this GPU: below its floor, or newer than its release
    ("LLVM ERROR: Cannot find option named 'sm_70'!", "AD110"),
    ("ValueError: Unsupported target for this release: -arch=sm_121", "AD317"),
    ("ptxas /tmp/k.ptx, line 88; error   : Instruction 'wgmma.fence' not supported on .target 'sm_89'", "AD317"),
]

HARVEST_66_NOTICES = [
    # Inductor's autotuner dropping a choice that does not fit shared memory, in torch's log format
    ("AUTOTUNE mm(64x4096, 4096x4096)\nW1102 10:00:01.000000 4242 torch/_inductor/select_algorithm.py:1517] [0/0] out of "
     "resource: shared memory, Required: 196608, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.", "AD265"),
]

HARVEST_64_NOTICES = [
    # onnxruntime's optional TensorRT provider without TensorRT, and the session retrying without it
    ("[E:onnxruntime:Default, provider_bridge_ort.cc:1532 TryGetProviderInfo_TensorRT] FAIL : Failed to load library "
     "libonnxruntime_providers_tensorrt.so with error: libnvinfer.so.8: cannot open shared object file: No such file or "
     "directory\nFalling back to ['CUDAExecutionProvider', 'CPUExecutionProvider'] and retrying.", "AD664"),
]

HARVEST_64_LOOK_ALIKES = [
    # a CPU-only torch the text runs on the CPU by choice, with no NVIDIA GPU or driver named
    "a CPU-only torch by choice: torch 2.1.0+cpu, running on the CPU as asked",
    # pip's lines that replace a CPU-only torch, beside the driver
    "Found existing installation: torch 2.1.0+cpu\nUninstalling torch-2.1.0+cpu:\nSuccessfully installed torch-2.1.0+cu121\n"
    "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |",
    # prose that holds a refusal's words, and a refusal's generic first sentence
    "Thanks for the fix! I checked the docs: the input must be contiguous, so I now call .contiguous() before the kernel.",
    "For faster inference, please install xformers.",
    "RuntimeError: failed to allocate memory.",
]


@pytest.mark.parametrize("text, rule", [*HARVEST_64_NOTICES, *HARVEST_66_NOTICES])
def test_notices_of_harvest_64_are_harmless(text, rule):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    assert _first(text) is None and [m.rule for m in report.matches if m.harmless][:1] == [rule]


def test_the_known_case_search_does_not_offer_a_line_that_quotes_other_names():
    from attn_doctor.explaining.neighbours import Index

    index = Index([{"id": "a-1", "source": "o/a#1", "family": "torch-too-old-api", "rules": ["AD413"],
                    "lines": ["ModuleNotFoundError: No module named 'torch.nn.attention'"]},
                   {"id": "b-2", "source": "o/b#2", "family": "ssm-kernels-missing", "rules": ["AD415"],
                    "lines": ["NameError: name 'selective_scan_cuda' is not defined"]}])
    # another module's name is another failure, however alike the words
    assert index.nearest(["ModuleNotFoundError: No module named 'mmcv'"]) is None
    # a name common to every codebase ties nothing: 'use_cuda' is not the selective scan's
    assert index.nearest(["NameError: name 'use_cuda' is not defined"]) is None
    # names that share a part of their own are one op's
    near = index.nearest(["NameError: name 'selective_scan_fn' is not defined"])
    assert near is not None and near.case == "b-2"


HARVEST_62_NOTICES = [
    ("W0526 21:31:55.259000 140707784318976 torch/_dynamo/convert_frame.py:357] torch._dynamo hit config.cache_size_limit (8)",
     "AD664"),
    ("/opt/dgl/src/runtime/tensordispatch.cc:43: TensorDispatcher: dlopen failed: libtorch_cuda.so: cannot open shared "
     "object file: No such file or directory", "AD664"),    ("THCudaCheck FAIL file=/opt/conda/conda-bld/pytorch_1544174967633/work/aten/src/THC/THCGeneral.cpp line=405 error=11 : "
     "invalid argument", "AD656"),
]

@pytest.mark.parametrize("text, rule", HARVEST_62_NOTICES)
def test_notices_of_harvest_62_are_harmless(text, rule):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    assert _first(text) is None and [m.rule for m in report.matches if m.harmless][:1] == [rule]


def test_a_title_holding_the_first_sentence_of_a_longer_message_is_that_message():
    # DeepSpeed's loss-scale notice (logged at INFO) quoted up to its first sentence
    report = explain(io.BytesIO(b"[deepspeed] fp16 dynamic loss scale overflow!\n"), RECIPES, kind="stdin")
    assert _first("[deepspeed] fp16 dynamic loss scale overflow!") is None
    assert [m.harmless for m in report.matches][:1] == [True]


HARVEST_61_LOOK_ALIKES = [
    # FFmpeg's libraries of two builds mixed: a versioned C symbol of FFmpeg, not a torch extension's
    "OSError: /lib/aarch64-linux-gnu/libavfilter.so.7: undefined symbol: av_timecode_make_smpte_tc_string2, version LIBAVUTIL_56",
    # a module of the user's own without a CUDA-named attribute it never had
    "AttributeError: module 'my_utils' has no attribute 'to_cuda'",
]


def test_an_apu_named_in_the_text_does_not_make_the_nvidia_machine_a_non_cuda_platform():
    # collect_env of a laptop with a Ryzen's integrated Radeon and an NVIDIA GPU, under a CPU-only torch
    text = ("PyTorch version: 2.3.0+cpu\nGPU 0: NVIDIA GeForce RTX 3070 Laptop GPU\n"
            "Model name: AMD Ryzen 7 5800H with Radeon Graphics\nAssertionError: Torch not compiled with CUDA enabled")
    first = _first(text)
    assert first is not None and first.rule == "AD106", first and first.rule


HARVEST_60_LOOK_ALIKES = [
    # a name torch.distributed binds by importing typing_extensions' helper, in code written for torch 1.0
    "AttributeError: module 'torch.distributed' has no attribute 'deprecated'",
    # Python's own compiled modules missing: the interpreter's build, not a project's extension
    "    import _lzma\nModuleNotFoundError: No module named '_lzma'",
    "    import _ctypes\nModuleNotFoundError: No module named '_ctypes'",
    "    import _sha256\nModuleNotFoundError: No module named '_sha256'",
    # cffi's backend and TensorFlow's SWIG wrapper: their own installs (the DLL error above it says why)
    "    import _cffi_backend\nModuleNotFoundError: No module named '_cffi_backend'",
    "  File \"x/pywrap_tensorflow_internal.py\", line 20, in swig_import_helper\n    import _pywrap_tensorflow_internal\n"
    "ModuleNotFoundError: No module named '_pywrap_tensorflow_internal'",
    # a user's own undefined variable named like a compiled module
    "NameError: name 'use_cuda' is not defined",
    "NameError: name 'file_ext' is not defined",
    # an extension's own source using THC's macro, in a folder named after it
    "THCudaCheck FAIL file=/home/u/proj/THCDeform/deform.cu line=12 error=8 : invalid device function",
    # a name torch.library imports from typing
    "AttributeError: module 'torch.library' has no attribute 'Sequence'",
]


HARVEST_59_LOOK_ALIKES = [
    # a launcher's pointer to more detail under a configuration error of the user's
    "Error executing job with overrides: ['task_name=open_box']\nError in call to target 'm.ConditionalUnet1D':\n"
    "TypeError(\"ConditionalUnet1D.__init__() got an unexpected keyword argument 'use_dropout'\")\n"
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.",
    # the reporter's own words before a build log of a source bug
    "I encountered the following error:\n      simple_knn.cu(90): error: identifier \"FLT_MAX\" is undefined",
    # torch's own warning string formatted in its CUDA check is no extension's operator
    "  warnings.warn(matched_cuda_warn.format(matched_arches))",
]


HARVEST_58_LOOK_ALIKES = [
    # a CUDA call failing with error 2 (cudaErrorMemoryAllocation): memory
    "/spconv/src/spconv/indice.cu 125 cuda execution failed with error 2",
    # a module named like a compiled one, outside any JIT build or compiled-package list
    "ModuleNotFoundError: No module named 'knn'",
    "ModuleNotFoundError: No module named 'utils_ext'",
]


HARVEST_57_LOOK_ALIKES = [
    # an allocation failing in a program's own CUDA check: memory, not the stack
    "[node-1] CUDA error at corner_detector.cpp:97 code=2(cudaErrorMemoryAllocation) \"cudaMalloc((void**)&d_x, n)\"",
    # 209 MiB is a size, and the number alone names no source
    "CUDA error 209",
    # tiny-cuda-nn built for an older GPU than this one: slower, it says, not a failure
    "UserWarning: tinycudann was built for lower compute capability (86) than the system's (89). Performance may be suboptimal.",
]


HARVEST_54_LOOK_ALIKES = [
    # a library of torch's own missing resembles an extension's missing CUDA runtime only in its words
    "  File \"/.venv/lib/python3.12/site-packages/torch/__init__.py\", line 405, in <module>\n"
    "    from torch._C import *  # noqa: F403\n"
    "ImportError: libcusparseLt.so.0: cannot open shared object file: No such file or directory",
    # names every torch release read has, or none has: no question of the torch's age
    "AttributeError: module 'torch' has no attribute 'cuda'",
    "ModuleNotFoundError: No module named 'torch._six'",
    # a CUDA library's status that its documentation puts on memory or on the caller's values
    "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, "
    "a, lda, b, ldb, &beta, c, ldc)`",
    # SAM 2's own warning: its _C is optional, the post-processing step is skipped
    "WARNING:root:cannot import name '_C' from 'sam2' (/x/segment-anything-2/sam2/__init__.py)",
    "  File \"/x/cnstd/yolov7/torch_utils.py\", line 90, in select_device\n"
    "    assert torch.cuda.is_available(), f'CUDA unavailable, invalid device {device} requested'\n"
    "AssertionError: CUDA unavailable, invalid device cuda requested",
]

HARVEST_53_NOTICES = [
    ("/x/torch_geometric/utils/_scatter.py:91: UserWarning: The usage of `scatter(reduce='max')` can be accelerated via the "
     "'torch-scatter' package, but it was not found", "AD664"),
    ("UserWarning: The given NumPy array is not writable, and PyTorch does not support non-writable tensors. This means "
     "writing to this tensor will result in undefined behavior.", "AD664"),
    ("2022-08-23 16:07:04.0932943 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:509 onnxruntime::python::"
     "CreateExecutionProviderInstance] Failed to create TensorrtExecutionProvider. Please reference "
     "https://onnxruntime.ai/docs/execution-providers/TensorRT-ExecutionProvider.html#requirements to ensure all "
     "dependencies are met.", "AD664"),
    ("[W NNPACK.cpp:64] Could not initialize NNPACK! Reason: Unsupported hardware.", "AD664"),
    ("None of PyTorch, TensorFlow >= 2.0, or Flax have been found. Models won't be available and only tokenizers, "
     "configuration and file/data utilities can be used.", "AD664"),
    ("/x/torch/nn/utils/weight_norm.py:30: UserWarning: torch.nn.utils.weight_norm is deprecated in favor of "
     "torch.nn.utils.parametrizations.weight_norm.", "AD672"),
    ("import error: No module named 'triton'\nWARNING:xformers:A matching Triton is not available, some optimizations "
     "will not be enabled\nTraceback (most recent call last):\n"
     "  File \"D:\\echomimic\\lib\\site-packages\\xformers\\__init__.py\", line 57, in _is_triton_available\n"
     "    import triton  # noqa\nModuleNotFoundError: No module named 'triton'", "AD655"),
]


# harvest 52: timm's Block missing an attribute, through nn.Module's own __getattr__ raise line
HARVEST_52_LOOK_ALIKES = [
    "  File \"D:\\Python\\lib\\site-packages\\torch\\nn\\modules\\module.py\", line 1185, in __getattr__\n"
    "    raise AttributeError(\"'{}' object has no attribute '{}'\".format(\n"
    "AttributeError: 'Block' object has no attribute 'drop_path1'. Did you mean: 'drop_path'?",
    "ModuleNotFoundError: No module named 'models.attention'",
    # harvest 53: a ComfyUI error report whose only other line is its template's exception type
    "# ComfyUI Error Report\n## Error Details\n- **Node Type:** ExpressionEditor\n- **Exception Type:** RuntimeError\n"
    "- **Exception Message:** CUDA error: operation not supported",
]

# harvest 52: notices the run goes on after, each said as a notice
HARVEST_52_NOTICES = [
    # stable-diffusion-webui's memory monitor quoting the assertion it caught (harvest 59)
    ("Warning: caught exception 'Torch not compiled with CUDA enabled', memory monitor disabled", "AD664"),
    ("C:\\ai\\venv\\lib\\site-packages\\setuptools\\command\\easy_install.py:144: EasyInstallDeprecationWarning: "
     "easy_install command is deprecated. Use build and pip and other standards-based tools.", "AD672"),
    ("2024-08-08 13:34:00.440696: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:8454] Unable to register cuDNN "
     "factory: Attempting to register factory for plugin cuDNN when one has already been registered", "AD664"),
    # torch's cuDNN plan warning, wrapped by a terminal in the middle of a word
    ("/home/u/miniconda3/lib/python3.12/site-packages/torch/autograd/graph.py:744: UserWarning: Plan failed with a cu\n"
     "dnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUP\n"
     "PORTED (Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)", "AD664"),
]


@pytest.mark.parametrize("text, rule", [*HARVEST_52_NOTICES, *HARVEST_53_NOTICES])
def test_notices_of_harvests_52_and_53_are_harmless(text, rule):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    assert _first(text) is None and [m.rule for m in report.matches if m.harmless][:1] == [rule]


# harvest 51: an out-of-memory followed by torch's lines after every CUDA error, which say nothing of it
HARVEST_51_LOOK_ALIKES = [
    # an application's own fallback notice, not a refusal
    "Your GPU does not support FP16, falling back to FP32",
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API call,so the "
    "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
]

# harvest 50: a missing file whose path (blanked for the comparison) was all it said
HARVEST_50_LOOK_ALIKES = [
    "FileNotFoundError: [Errno 2] No such file or directory: './config/text_sentiment_classifier/Textbased_Bart_b32.json'",
]

# harvest 49: ptxas refusing an architecture in a CMake / nvcc build, Triton nowhere in the text: the
# toolkit dropped the architecture the build asks for (build-env's family), not Triton's ptxas (AD264)
@pytest.mark.parametrize("text", [
    "    /usr/bin/nvcc     -x cu -c /home/m/altis/CMakeFiles/CMakeTmp/main.cu -o CMakeFiles/cmTC_a1746.dir/main.cu.o\n"
    "    ptxas fatal   : Value 'sm_30' is not defined for option 'gpu-name'",
    # an nvcc build's ptxas in a log whose pip step installed triton: not Triton's ptxas
    "Collecting triton==3.1.0\n    ptxas fatal   : Value 'sm_30' is not defined for option 'gpu-name'",
])
def test_a_toolkits_compiler_refusing_the_builds_architecture_is_the_build_environment(text):
    assert _first(text).rule == "AD315"


def test_tensorflows_ptxas_fallback_notice_raises_nothing():
    text = ("W asm_compiler.cc:235] Your CUDA software stack is old. We fallback to the NVIDIA driver for some "
            "compilation. Update your CUDA version to get the best performance. The ptxas error was: ptxas fatal   : "
            "Value 'sm_86' is not defined for option 'gpu-name'")
    assert _first(text) is None

# harvest 48: a forked process that cannot start CUDA, a missing attribute of a module outside the stack
HARVEST_48_LOOK_ALIKES = [
    "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
    "'spawn' start method",
    "AttributeError: module 'PIL.Image' has no attribute 'ANTIALIAS'",
    # LLVM's words for an architecture it does not know, from a compiler outside the stack (Numba, Taichi)
    "'sm_110' is not a recognized processor for this target (ignoring processor)\n"
    "LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.barrier.sync",
]

# harvests 45 and 47 to 50: optional kernels' notices, said as notices
HARVEST_45_NOTICES = [
    "torch_harmonics/convolution.py:515: UserWarning: couldn't find CUDA extension, falling back to slow PyTorch implementation",
    "Failed to import PyTorch Correlation, For better efficiency, please install it.",
    "UserWarning: enable_nested_tensor is True, but self.use_nested_tensor is False because encoder_layer.self_attn."
    "batch_first was not True(use batch_first for better inference performance)",
    "2020-07-13 19:17:18.151914: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:30] Cannot dlopen some TensorRT "
    "libraries. If you would like to use Nvidia GPU with TensorRT, please make sure the missing libraries mentioned above "
    "are installed properly.",
    "2021-02-27 01:33:51.779607: W external/org_tensorflow/tensorflow/stream_executor/gpu/asm_compiler.cc:235] Your CUDA "
    "software stack is old. We fallback to the NVIDIA driver for some compilation. Update your CUDA version to get the best "
    "performance. The ptxas error was: ptxas fatal   : Value 'sm_86' is not defined for option 'gpu-name'",
    "2024-03-30 17:12:30.174784: I external/local_xla/xla/stream_executor/cuda/cuda_executor.cc:901] successful NUMA node "
    "read from SysFS had negative value (-1), but there must be at least one NUMA node, so returning NUMA node zero.",
    "hqq_aten package not installed. HQQBackend.ATEN backend will not work unless you install the hqq_aten lib",
    "`fused_layer_norm_cuda` module not found. fused layer norm disabled.",
    "Triton is not available. Falling back to the PyTorch implementation of the fused kernel.",
    "UserWarning: There is a performance drop because we have not yet implemented the batching rule for aten::_flash_attention_forward.",
]


@pytest.mark.parametrize("text", HARVEST_45_NOTICES)
def test_notices_the_fresh_harvests_showed_are_harmless(text):
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="stdin")
    assert _first(text) is None and [m.rule for m in report.matches if m.harmless] == ["AD664"]


# the wordings each fresh harvest showed (and a review of the change found), read as their mechanism
@pytest.mark.parametrize("text, rule", [*HARVEST_34, *HARVEST_35, *HARVEST_36, *HARVEST_37, *HARVEST_38_AND_REVIEW,
                                         *HARVEST_39, *HARVEST_40, *HARVEST_41, *HARVEST_42, *HARVEST_43, *HARVEST_44, *HARVEST_45, *HARVEST_46, *HARVEST_47, *HARVEST_48, *HARVEST_49, *HARVEST_50, *HARVEST_51, *HARVEST_52, *HARVEST_53, *HARVEST_54, *HARVEST_55, *HARVEST_57, *HARVEST_58, *HARVEST_59, *HARVEST_60, *HARVEST_61, *HARVEST_62, *HARVEST_64, *HARVEST_65, *HARVEST_66, *PENDING_READINGS])
def test_wordings_the_fresh_harvests_showed(text, rule):
    first = _first(text)
    assert first is not None and first.rule == rule, (first and first.rule)


@pytest.mark.parametrize("text", [*HARVEST_34_LOOK_ALIKES, *HARVEST_36_LOOK_ALIKES, *HARVEST_37_LOOK_ALIKES,
                                  *HARVEST_39_LOOK_ALIKES, *HARVEST_41_LOOK_ALIKES, *HARVEST_44_LOOK_ALIKES, *HARVEST_46_LOOK_ALIKES,
                                  *HARVEST_48_LOOK_ALIKES,
                                  *HARVEST_50_LOOK_ALIKES, *HARVEST_51_LOOK_ALIKES, *HARVEST_52_LOOK_ALIKES, *HARVEST_54_LOOK_ALIKES, *HARVEST_57_LOOK_ALIKES, *HARVEST_58_LOOK_ALIKES, *HARVEST_59_LOOK_ALIKES, *HARVEST_60_LOOK_ALIKES, *HARVEST_61_LOOK_ALIKES, *HARVEST_64_LOOK_ALIKES, *HARVEST_65_LOOK_ALIKES])
def test_look_alikes_the_fresh_harvests_showed_raise_nothing(text):
    assert _first(text) is None
