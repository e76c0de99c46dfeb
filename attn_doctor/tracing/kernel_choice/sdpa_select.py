"""Which kernel ``F.scaled_dot_product_attention`` runs on a CUDA GPU, decided off the GPU.

An emulation of torch's ``select_sdp_backend`` (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
and sdp_utils_cpp.h): the backends in their priority order, each a list of checks in torch's
order, the first backend whose checks all pass wins, and every refusal carries the message torch
warns with ``debug=True``. The checks are data (``CHECKS``, ``BACKEND_CHECKS``), each with the torch
versions it applies to, so a release that adds or drops one is a line here. On a GPU torch itself
answers (attn_doctor/tracing/kernel_choice/kernels.py); the GPU test compares the two.

Sources read: sdp_utils.cpp of pytorch main (2026: cuDNN first on sm9x/sm10x with a runtime cuDNN
above 9.15, ``TORCH_CUDNN_SDPA_DEPRIORITIZED``) and of the 2.9 era (``TORCH_CUDNN_SDPA_PREFERRED``,
cuDNN first on sm90/sm100 with cuDNN >= 9.9 at build time, no cuDNN dropout check, no GQA in the
memory-efficient kernel). Recorded on an H100 with torch 2.11.0+cu130 and cuDNN 9.19
(tests/fixtures/facts/h100.json): a causal bf16 call at head dim 128 picks cuDNN, and so does a
causal one with dropout 0.1 (tests/gpu/test_gpu_kernel_choice.py): 2.11 has no cuDNN dropout check
yet (main takes dropout in steps of 1/16 only). Version bounds not read in a tagged release are
marked [inferred] where they are set.

Standard library only: a call is described by plain dicts (``describe`` in kernels.py).
"""

from __future__ import annotations

import math
import re

from ...support import matrix as support_matrix, sm_name

LABELS = {"flash": "flash", "cudnn": "cuDNN", "mem_efficient": "mem-efficient", "math": "math"}
# torch.nn.attention.SDPBackend member of each backend (forcing one, asking _fused_sdp_choice).
MEMBERS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "mem_efficient": "EFFICIENT_ATTENTION",
           "math": "MATH"}
FUSED = ("flash", "cudnn", "mem_efficient")
HALF = ("float16", "bfloat16")
C10 = {"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float64": "double"}

# Context.h's default order; check_prefer_cudnn_attention() puts cuDNN first (select_sdp_backend).
DEFAULT_ORDER = ("flash", "mem_efficient", "math", "cudnn")
CUDNN_ORDER = ("cudnn", "flash", "mem_efficient", "math")
# From which torch cuDNN goes first on Hopper/Blackwell by default [inferred: the 2.9-era source
# has it; recorded on 2.11].
CUDNN_FIRST_FROM = (2, 9)
# sdp_utils.cpp of main gates it on the runtime cuDNN (> 9.15.0, for the seq_len % 128 fix) and
# takes any sm9x/sm10x on CUDA >= 13 [inferred from 2.12 on]; before, sm90/sm100 exactly.
CUDNN_RUNTIME_GATE_FROM = (2, 12)
# The CUDA wheels' cuDNN when the target's is unknown (meta, CPU): cu130 wheels of torch 2.11 ship 9.19.
ASSUMED_CUDNN = 91900
# Each backend's architecture range and the flash kernel's head-dim limit: the support matrix's rows
# for torch's kernels (recipes/support/matrix.toml), read from sdp_utils.cpp
FLASH_ARCHS = support_matrix().kernel("sdpa-flash").nvidia_range()
MEM_EFFICIENT_ARCHS = support_matrix().kernel("sdpa-mem-efficient").nvidia_range()
CUDNN_ARCHS = support_matrix().kernel("sdpa-cudnn").nvidia_range()
FLASH_MAX_HEAD_DIM = support_matrix().kernel("sdpa-flash").limit("head_dim_max")


def version_tuple(text):
    """(major, minor) of a torch version string ("2.11.0+cu130" -> (2, 11)); (0, 0) if unreadable."""
    m = re.match(r"(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _t(call, role):
    return call.get(role) or {}


def _dtype_list(names):
    return "{" + ", ".join(names) + "}"


# ---------------------------------------------------------------- the checks (torch's messages)


def check_tensor_shapes(call, target):
    dims = [len(_t(call, r).get("shape", ())) for r in ("q", "k", "v")]
    if not (dims[0] == dims[1] == dims[2] == 4):
        return ("All fused kernels requires query, key and value to be 4 dimensional, but got Query dim: %d, "
                "Key dim: %d, Value dim: %d instead." % tuple(dims))
    return None


def check_for_attn_mask(call, target):
    if call.get("mask") is not None:
        return "Flash Attention does not support non-null attn_mask."
    return None


def check_head_dim_size_flash(call, target):
    dq, dk, dv = (_t(call, r)["shape"][-1] for r in ("q", "k", "v"))
    if not (dq == dk == dv and dq <= FLASH_MAX_HEAD_DIM):
        return ("Flash attention requires q,k,v to have the same last dimension and to be less than or equal to "
                "%d. Got Query.size(-1): %d, Key.size(-1): %d, Value.size(-1): %d instead." % (FLASH_MAX_HEAD_DIM, dq, dk, dv))
    return None


def _sm_in(capability, low, high):
    return tuple(low) <= tuple(capability) <= tuple(high)


def check_flash_hardware(call, target):
    cap = target["capability"]
    if not _sm_in(cap, *FLASH_ARCHS):
        return ("Flash attention only supports gpu architectures in the range [%s, %s]. Attempting to run on a "
                "sm %d.%d gpu." % (sm_name(FLASH_ARCHS[0]), sm_name(FLASH_ARCHS[1]), *cap))
    return None


def check_mem_efficient_hardware(call, target):
    cap = target["capability"]
    if not _sm_in(cap, *MEM_EFFICIENT_ARCHS):
        return ("Mem Efficient Attention only supports gpu architectures in the range [%s, %s]. Attempting to "
                "run on a sm %d.%d gpu." % (sm_name(MEM_EFFICIENT_ARCHS[0]), sm_name(MEM_EFFICIENT_ARCHS[1]), *cap))
    return None


def check_cudnn_hardware(call, target):
    cap = target["capability"]
    if not _sm_in(cap, *CUDNN_ARCHS):
        return ("cuDNN MHA only supports gpu architectures in the range [%s, %s]. Attempting to run on a sm "
                "%d.%d gpu." % (sm_name(CUDNN_ARCHS[0]), sm_name(CUDNN_ARCHS[1]), *cap))
    return None


def input_requires_grad(call):
    return bool(call.get("grad_mode")) and any(_t(call, r).get("requires_grad") for r in ("q", "k", "v"))


def _training_head_dim_refusal(call, target, wording):
    """flash's refusal to train with head_dim in (192, 224] (or (224, 256] with dropout) on
    sm86-89/sm120-121, worded as the release does (``wording``), or None."""
    cap = target["capability"]
    if not (_sm_in(cap, (8, 6), (8, 9)) or _sm_in(cap, (12, 0), (12, 1))) or not input_requires_grad(call):
        return None
    d = _t(call, "q")["shape"][-1]
    dropout = float(call.get("dropout") or 0.0)
    if d <= 192 or (dropout <= 0.0 and d > 224):
        return None
    return wording + "Attempting to run with dropout set to: %sand head_dim: %d on a sm %d.%d gpu." % (
        dropout, d, cap[0], cap[1])


def check_training_head_dim_sm86_89_120(call, target):
    return _training_head_dim_refusal(call, target, "Flash attention currently doesn't support training with head_dim "
                                                    "∈ (192, 224] or (head_dim ∈ (224, 256] and dropout > 0.0) on gpu "
                                                    "architectures in the range[sm86, sm89].")


def check_training_head_dim_sm86_89_or_120_121(call, target):
    # the same check, reworded in torch 2.15 (libtorch_cuda.so) to name the sm120 range it already enforced
    return _training_head_dim_refusal(call, target, "Flash attention currently doesn't support training with head_dim "
                                                    "∈ (192, 224] or (head_dim ∈ (224, 256] and dropout > 0.0) on "
                                                    "SM86-SM89 or SM120-SM121.")


def check_flash_causal_non_square(call, target):
    sq, sk = _t(call, "q")["shape"][-2], _t(call, "k")["shape"][-2]
    if call.get("is_causal") and sq != sk:
        return ("Flash attention does not support the is_causal flag when seqlen_q != seqlen_k. Got seqlen_q: %d "
                "seqlen_k: %d. If you would like to use causal attention with non-square masks, please see "
                "CausalAttnMask." % (sq, sk))
    return None


def _tensor_dtype_check(call, allowed):
    q, k, v = (_t(call, r).get("dtype") for r in ("q", "k", "v"))
    if q == k == v and q in allowed:
        return None
    names = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float"}
    return ("Expected query, key and value to all be of dtype: %s. Got Query dtype: %s, Key dtype: %s, and Value "
            "dtype: %s instead." % (_dtype_list([names[a] for a in allowed]), C10.get(q, q), C10.get(k, k),
                                    C10.get(v, v)))


def check_dtypes_low_precision(call, target):
    return _tensor_dtype_check(call, HALF if target["capability"][0] >= 8 else ("float16",))


def check_dtypes_mem_efficient(call, target):
    allowed = ("float16", "float32", "bfloat16") if target["capability"][0] >= 8 else ("float16", "float32")
    return _tensor_dtype_check(call, allowed)


def check_heads(supports_gqa):
    def check(call, target):
        q, k, v = (_t(call, r)["shape"] for r in ("q", "k", "v"))
        if not (q[0] == k[0] == v[0]):
            return ("For dense inputs, both fused kernels require query, key and value to have the same batch_size. "
                    "Query.sizes(): %s, Key.sizes(): %s, Value.sizes(): %s instead. To broadcast dense inputs, try "
                    "using unsqueeze and expand_to before passing them into the kernel." % (q, k, v))
        if call.get("enable_gqa") and supports_gqa(target):
            if k[-3] != v[-3]:
                return ("Both fused kernels require key and value to have the same num_heads and batch_size but got: "
                        "Key sizes: %s, Value sizes: %s, Query sizes: %s instead." % (k, v, q))
            if q[-3] % k[-3]:
                # worded so in torch 2.13 and 2.14 (libtorch_cpu.so); "FlashAttentionV2 only supports
                # grouped query attention, where ..." before
                return ("The number of heads in key/value must divide number of heads in query.Got input Key "
                        "sizes(): %d, Value sizes(): %d, Query sizes(): %d instead." % (k[-3], v[-3], q[-3]))
            return None
        if not (q[-3] == k[-3] == v[-3]):
            return ("For dense input, both fused kernels require query, key and value to have the same num_heads. "
                    "Query.sizes(): %s, Key sizes(): %s, Value sizes(): %s instead. To broadcast dense inputs, try "
                    "using unsqueeze and expand_to before passing them into the kernel." % (q, k, v))
        return None

    return check


def check_nonzero_seq_lens(call, target):
    if _t(call, "q")["shape"][-2] == 0 or _t(call, "k")["shape"][-2] == 0:
        return "All fused kernels do not support zero seq_len_q or seq_len_kv."
    return None


def check_last_dim_stride(ignore_singleton):
    def check(call, target):
        strides = [_t(call, r)["stride"][-1] for r in ("q", "k", "v")]
        ok = all(s == 1 for s in strides) or (ignore_singleton and _t(call, "q")["shape"][-1] == 1)
        mask = call.get("mask")
        if ok and (mask is None or mask["stride"][-1] == 1 or mask["shape"][-1] == 1):
            return None
        tail = (", Attn_mask.stride(-1): %d" % mask["stride"][-1]) if mask is not None else ""
        return ("All fused kernels require the last dimension of the input to have stride 1. Got Query.stride(-1): "
                "%d, Key.stride(-1): %d, Value.stride(-1): %d%s instead." % (strides[0], strides[1], strides[2], tail))
    return check


def _gemm_alignment(call, target):
    is_half = _t(call, "q").get("dtype") in HALF
    major = target["capability"][0]
    use_tc = major >= 8 or (major >= 7 and is_half)
    align = 4 if major >= 8 else 1
    return max(align, 128 // (16 if is_half else 32)) if use_tc else align


def check_head_dim_mem_efficient(call, target):
    dq, dk, dv = (_t(call, r)["shape"][-1] for r in ("q", "k", "v"))
    a = _gemm_alignment(call, target)
    if dq == dk and dq % a == 0 and dq > 0 and dv % a == 0 and dv > 0:
        return None
    return ("Mem efficient attention requires last dimension of inputs to be divisible by %d. Got Query.size(-1): %d, "
            "Key.size(-1): %d, Value.size(-1): %d instead." % (a, dq, dk, dv))


def check_data_ptr_alignment_mem_efficient(call, target):
    if target["capability"][0] < 8:
        return None
    bytes_ = _gemm_alignment(call, target) * _t(call, "q").get("itemsize", 2)
    offsets = [_t(call, r).get("offset", 0) * _t(call, r).get("itemsize", 2) for r in ("q", "k", "v")]
    if all(o % bytes_ == 0 for o in offsets):
        return None
    return ("Mem efficient attention on sm80 or newer requires q, k, and v storage offsets * element_size to be "
            "aligned to %d bytes. Got query.storage_offset() * element_size %% alignment_bytes: %d, key.storage_offset()"
            " * element_size %% alignment_bytes: %d, value.storage_offset() * element_size %% alignment_bytes: %d."
            % ((bytes_,) + tuple(o % bytes_ for o in offsets)))


def check_attn_mask_shape(call, target):
    mask = call.get("mask")
    if mask is None:
        return None
    q, k = _t(call, "q")["shape"], _t(call, "k")["shape"]
    shape = mask["shape"]
    fine = not mask.get("requires_grad") and len(shape) >= 2 and shape[-2] in (q[-2], 1) and shape[-1] in (k[-2], 1)
    if fine and (len(shape) == 2 or (len(shape) == 4 and shape[0] in (1, q[0]) and shape[1] in (1, q[1]))):
        return None
    return ("Please use the following attn mask shapes: 2d - ({Q_seq_len, 1}  x {KV_seq_len, 1}); 4d - ({Batch, 1} x "
            "{Num_heads, 1} x {Q_seq_len, 1}  x {KV_seq_len, 1})")


def check_cudnn_dropout(call, target):
    p = float(call.get("dropout") or 0.0)
    if p * 16.0 != math.floor(p * 16.0):
        return ("cuDNN dropout probability resolution is limited to 1/16.Use a dropout probability that is a multiple "
                "of 1/16 to select the cuDNN backend")
    return None


def check_cudnn_batch_heads(call, target):
    q = _t(call, "q")["shape"]
    if q[0] > 65535 or q[1] > 65535:
        return ("cuDNN SDPA does not support batch size or num_heads greater than 65535. Got batch size: %d, "
                "num_heads: %d" % (q[0], q[1]))
    return None


def check_cudnn_tensor_shapes(call, target):
    q, k, v = (_t(call, r)["shape"] for r in ("q", "k", "v"))
    cudnn = target.get("cudnn") or ASSUMED_CUDNN
    cap = target["capability"]
    sm90_or_10x = (cap[0] == 9 and cap[1] == 0) or cap[0] == 10
    limit = 128
    if target["torch"] >= CUDNN_RUNTIME_GATE_FROM:
        if sm90_or_10x and cudnn > 92200:
            limit = 256
        elif sm90_or_10x and cudnn >= 91100 and q[-1] == 192 and v[-1] == 128:
            limit = 192
    elif cudnn >= 91000 and cap == (9, 0):
        limit = 256
    if q[-1] > limit or v[-1] > limit:
        return "head_dim should be no more than %d" % limit
    if q[-1] % 8 or v[-1] % 8:
        return "head_dim should be a multiple of 8"
    if k[-2] == 1:
        return "cudnn SDPA does not support key/value sequence length 1."
    if float(call.get("dropout") or 0.0) != 0.0 and q[-2] == 1:
        return "cudnn SDPA does not support query sequence length 1 with dropout."
    return None


def check_cudnn_d256_backward(call, target):
    if not input_requires_grad(call):
        return None
    cap = target["capability"]
    if not ((cap[0] == 9 and cap[1] == 0) or cap[0] == 10) or (target.get("cudnn") or ASSUMED_CUDNN) <= 92200:
        return None
    dq, dv = _t(call, "q")["shape"][-1], _t(call, "v")["shape"][-1]
    if (dq <= 128 and dv <= 128) or (dq, dv) in ((192, 128), (256, 256)):
        return None
    return ("cuDNN SDPA on SM 9.0/10.x does not support backward with these head dimensions. Got d_qk: %d, d_v: %d"
            % (dq, dv))


def _disabled(backend, text):
    def check(call, target):
        return None if target.get("enabled", {}).get(backend, True) else text
    return check


def _not_compiled(call, target):
    return None if target.get("flash_compiled", True) else "Torch was not compiled with flash attention."


def _always_gqa(target):
    return True


def _mem_efficient_gqa(target):
    return target["torch"] >= (2, 12)  # [inferred: main has it, the 2.9-era source does not]


# name -> (function, first torch version it applies to or None, last or None)
CHECKS = {
    "not_compiled_flash": (_not_compiled, None, None),
    "runtime_disabled_flash": (_disabled("flash", "Flash attention has been runtime disabled."), None, None),
    "runtime_disabled_mem_efficient": (_disabled("mem_efficient", "Memory Efficient attention has been runtime "
                                                                   "disabled."), None, None),
    "runtime_disabled_cudnn": (_disabled("cudnn", "cuDNN attention has been runtime disabled."), None, None),
    "tensor_shapes": (check_tensor_shapes, None, None),
    "for_attn_mask": (check_for_attn_mask, None, None),
    "head_dim_size_flash": (check_head_dim_size_flash, None, None),
    "flash_hardware": (check_flash_hardware, None, None),
    "training_head_dim_sm86_89_120": (check_training_head_dim_sm86_89_120, None, (2, 14)),
    "training_head_dim_sm86_89_or_120_121": (check_training_head_dim_sm86_89_or_120_121, (2, 15), None),
    "flash_causal_non_square": (check_flash_causal_non_square, None, None),
    "dtypes_low_precision": (check_dtypes_low_precision, None, None),
    "heads_gqa": (check_heads(_always_gqa), None, None),
    "heads_mem_efficient": (check_heads(_mem_efficient_gqa), None, None),
    "nonzero_seq_lens": (check_nonzero_seq_lens, None, None),
    "last_dim_stride_ignore_singleton": (check_last_dim_stride(True), None, None),
    "last_dim_stride": (check_last_dim_stride(False), None, None),
    "mem_efficient_hardware": (check_mem_efficient_hardware, None, None),
    "head_dim_mem_efficient": (check_head_dim_mem_efficient, None, None),
    "data_ptr_alignment_mem_efficient": (check_data_ptr_alignment_mem_efficient, (2, 12), None),  # [inferred]
    "dtypes_mem_efficient": (check_dtypes_mem_efficient, None, None),
    "cudnn_hardware": (check_cudnn_hardware, None, None),
    "attn_mask_shape": (check_attn_mask_shape, None, None),
    # in main's source; torch 2.11.0 on an H100 picks cuDNN for dropout 0.1 [inferred: from 2.12]
    "cudnn_dropout": (check_cudnn_dropout, (2, 12), None),
    # absent from torch 2.11.0's libtorch_cuda.so, present in 2.14.1's [from 2.12 inferred]
    "cudnn_batch_heads": (check_cudnn_batch_heads, (2, 12), None),
    "cudnn_tensor_shapes": (check_cudnn_tensor_shapes, None, None),
    "cudnn_d256_backward": (check_cudnn_d256_backward, (2, 12), None),  # [inferred]
}

# Each backend's checks in torch's order (general constraints, then the dense ones).
BACKEND_CHECKS = {
    "flash": ("not_compiled_flash", "runtime_disabled_flash", "tensor_shapes", "for_attn_mask", "head_dim_size_flash",
              "flash_hardware", "training_head_dim_sm86_89_120", "training_head_dim_sm86_89_or_120_121",
              "flash_causal_non_square", "dtypes_low_precision",
              "heads_gqa", "nonzero_seq_lens", "last_dim_stride_ignore_singleton"),
    "mem_efficient": ("runtime_disabled_mem_efficient", "mem_efficient_hardware", "tensor_shapes",
                      "head_dim_mem_efficient", "data_ptr_alignment_mem_efficient", "nonzero_seq_lens",
                      "last_dim_stride", "heads_mem_efficient", "dtypes_mem_efficient"),
    "cudnn": ("runtime_disabled_cudnn", "tensor_shapes", "dtypes_low_precision", "attn_mask_shape", "cudnn_hardware",
              "cudnn_dropout", "nonzero_seq_lens", "last_dim_stride_ignore_singleton", "heads_gqa",
              "cudnn_batch_heads", "cudnn_tensor_shapes", "cudnn_d256_backward"),
}


def _applies(entry, version):
    _, since, until = entry
    return (since is None or version >= since) and (until is None or version <= until)


def refusal(backend, call, target):
    """torch's reason for refusing ``backend`` for this call, or None where it accepts it."""
    if backend == "math":
        return None if target.get("enabled", {}).get("math", True) else "Math attention has been runtime disabled."
    if backend == "cudnn" and target.get("cudnn") is False:
        return "Torch was not compiled with cuDNN attention."
    for name in BACKEND_CHECKS[backend]:
        entry = CHECKS[name]
        if not _applies(entry, target["torch"]):
            continue
        reason = entry[0](call, target)
        if reason:
            return reason
    return None


def priority_order(target):
    """The order SDPA tries its backends in on this GPU with this torch."""
    if target.get("order"):
        return tuple(target["order"])
    cap, version = target["capability"], target["torch"]
    if version >= CUDNN_FIRST_FROM and target.get("cudnn") is not False:
        if version >= CUDNN_RUNTIME_GATE_FROM:
            cuda13 = (target.get("cuda_major") or 13) >= 13
            preferred = ((target.get("cudnn") or ASSUMED_CUDNN) > 91500 and cap[0] in (9, 10)
                         and (cuda13 or cap[1] in (0, 3)))
        else:
            preferred = cap[0] in (9, 10) and cap[1] == 0
        if preferred:
            return CUDNN_ORDER
    return DEFAULT_ORDER


def select(call, target):
    """{"kernel", "order", "refused": {backend: reason}, "accepts": [fused backends that take it]}.
    ``kernel`` is None where every allowed backend refuses (SDPA raises "No available kernel")."""
    order = priority_order(target)
    refused, accepts, kernel = {}, [], None
    for backend in FUSED + ("math",):
        reason = refusal(backend, call, target)
        if reason:
            refused[backend] = reason
        elif backend != "math":
            accepts.append(backend)
    for backend in order:
        if backend not in refused:
            kernel = backend
            break
    return {"kernel": kernel, "order": list(order), "refused": refused, "accepts": accepts}


def target_for(capability, torch_version, cudnn=None, cuda_major=None, flash_compiled=True, enabled=None,
               order=None):
    """The GPU and torch a call is judged for: capability (major, minor), torch's version string."""
    return {"capability": tuple(int(x) for x in capability), "torch": version_tuple(torch_version),
            "cudnn": cudnn, "cuda_major": cuda_major, "flash_compiled": flash_compiled, "enabled": enabled or {},
            "order": order}
