"""The SageAttention stand-in (``sageattention``; registry.py puts it in place where it does not
import): ``sageattn`` and the per-architecture kernels it dispatches to, with sageattention 2.2.0's
signatures and checks in their order (q's dtype fp16/bf16, one device, one dtype: AssertionError
with its messages; head dim at most 128: ValueError), then the attention computed with SDPA in the
``tensor_layout`` given (HND [B, H, N, D] or NHD [B, N, H, D]); the output has q's shape and dtype.
Its architecture dispatch (``Unsupported CUDA architecture: sm75``) needs the GPU: the tracer judges
it where the capability is known (``--capability``, a CUDA trace).
"""

from __future__ import annotations

import math

from ..calls import sinks
from ..calls.sinks import problem
from .. import state
from .library import Library

STANDIN_SAGE_VERSION = "2.2.0"

# SageAttention 2.x's sageattn dispatches by architecture (sageattention/core.py): the architectures
# with a kernel and its head-dim limit, from the support matrix's row (recipes/support/matrix.toml)
ARCHS = sinks.support_matrix().kernel("sageattention-2").nvidia_archs()
MAX_HEAD_DIM = sinks.support_matrix().kernel("sageattention-2").limit("head_dim_max")


def judge(dtypes, head_dims, capability, extras):
    """SageAttention 2.x (sageattention 2.2.0's sageattn and its per-architecture kernels), in its
    order: the architecture (ValueError), q's dtype, the same dtype (AssertionError), head dim."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if capability is not None and tuple(capability) not in ARCHS:
        problems.append(problem("AD605", "error", "arch", "Unsupported CUDA architecture: sm%d%d" % tuple(capability)))
    if q not in sinks.HALF:
        problems.append(problem("AD604", "error", "dtype", "Input tensors must be in dtype of torch.float16 or "
                                                             "torch.bfloat16"))
    elif not (q == k == v):
        problems.append(problem("AD602", "error", "same_dtype", "All tensors must have the same dtype."))
    dq = head_dims[0]
    if dq is not None and dq > MAX_HEAD_DIM:
        problems.append(problem("AD603", "error", "head_dim", "Unsupported head_dim: %d" % dq))
    return problems


# SageAttention 2.x (sageattention): sageattn(q, k, v, tensor_layout="HND", is_causal=False, ...) and
# the per-architecture kernels it dispatches to, which check the same; layout HND [B, H, N, D] or NHD.
SPECS = {name: sinks.SinkSpec("sageattention." + name, "sage", "B,H,S,D (tensor_layout HND; NHD: B,S,H,D)",
                                    sinks.QKV, judge=judge)
        for name in ("sageattn", "sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp8_cuda",
                     "sageattn_qk_int8_pv_fp8_cuda_sm90", "sageattn_qk_int8_pv_fp16_triton")}
SPECS["sageattn_varlen"] = sinks.SinkSpec("sageattention.sageattn_varlen", "sage", "T,H,D", sinks.QKV,
                                          judge=judge)


def _check(q, k, v):
    import torch

    if q.dtype not in (torch.float16, torch.bfloat16):
        raise AssertionError("Input tensors must be in dtype of torch.float16 or torch.bfloat16")
    if not (q.device == k.device == v.device):
        raise AssertionError("All tensors must be on the same device.")
    if not (q.dtype == k.dtype == v.dtype):
        raise AssertionError("All tensors must have the same dtype.")
    if q.size(-1) > 128:
        raise ValueError("Unsupported head_dim: %d" % q.size(-1))
    if not (q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1):
        raise AssertionError("Last dim of qkv must be contiguous.")


def _attend(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False, **kwargs):
    import torch

    F = torch.nn.functional
    _check(q, k, v)
    nhd = tensor_layout == "NHD"
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v)) if nhd else (q, k, v)
    if kt.shape[1] != qt.shape[1] and qt.shape[1] % kt.shape[1] == 0:
        kt = kt.repeat_interleave(qt.shape[1] // kt.shape[1], dim=1)
        vt = vt.repeat_interleave(qt.shape[1] // vt.shape[1], dim=1)
    if sm_scale is not None and sm_scale != 1.0 / math.sqrt(q.shape[-1]):
        qt = qt * (sm_scale * math.sqrt(q.shape[-1]))
    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(is_causal))
    out = out.transpose(1, 2) if nhd else out
    if return_lse:
        lse = torch.zeros(qt.shape[0], qt.shape[1], qt.shape[2], dtype=torch.float32, device=q.device)
        return out, lse
    return out


def _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False, sm_scale=None,
            smooth_k=True, **kwargs):
    from .fa2 import attend_varlen

    _check(q, k, v)
    return attend_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, sm_scale, is_causal)


def _function(name, spec):
    runner = _varlen if name == "sageattn_varlen" else _attend

    def fn(*args, **kwargs):
        tracer = state.ACTIVE[0]
        if tracer is None:
            return runner(*args, **kwargs)
        return tracer.sink_call(spec, runner, args, kwargs, standin=True)

    fn.__name__ = name
    return fn


def functions_for(specs):
    """SageAttention's functions under these sink specs (sageattention's own, or a kernels-hub
    build's)."""
    return {name: _function(name, spec) for name, spec in specs.items()}


def make_sage_standin(module):
    top = module("sageattention", True)
    top.__version__ = STANDIN_SAGE_VERSION
    for name, fn in functions_for(SPECS).items():
        setattr(top, name, fn)
    return {"sageattention": top}


LIBRARY = Library(
    top="sageattention", family="sage", release="sageattention", version=STANDIN_SAGE_VERSION,
    label="sageattention %s" % STANDIN_SAGE_VERSION, kernel="SageAttention", make=make_sage_standin, specs=SPECS,
    real_modules=("sageattention",),
    runners=lambda: {name: _varlen if name == "sageattn_varlen" else _attend for name in SPECS},
    distribution="sageattention")
