"""The FlashAttention 4 stand-in's functions (flash_attn.cute; registry.py puts them in place where
it is not installed, and wrappers.py runs them in place of the real one off CUDA tensors).

flash-attn-4 compiles CuTe DSL kernels for NVIDIA GPUs: it runs nowhere else (`inputs must be on
CUDA device`). These enforce its dtype checks with its messages (AssertionError, flash_attn/cute/
interface.py of 4.0.0b36: v's dtype first, then q and k against v) and compute the attention with
SDPA, as the flash-attn 2 stand-in does. Its head-dim and architecture checks depend on the GPU:
the tracer judges those.
"""

from __future__ import annotations

from ..calls import sinks
from ..calls.sinks import problem
from .. import state
from .fa2 import attend, attend_varlen
from .library import Library

STANDIN_FLASH_ATTN_4_VERSION = "4.0.0b36"
DTYPES = sinks.HALF + ("float8_e4m3fn", "float8_e5m2")


def fa4_head_dim_refusal(dq, dv, major, dtype):
    """FlashAttention 4's head-dim check (flash_attn/cute/interface.py, _validate_head_dims, as of
    4.0.0b36): its message, or None where the dims pass. It validates SM90 and SM100/SM110 only."""
    if dq is None or dv is None:
        return None
    align = 16 if str(dtype).startswith("float8") else 8  # 16 bytes / element size
    aligned = dq % align == 0 and dv % align == 0
    if major == 9:
        if 8 <= dq <= 256 and 8 <= dv <= 256 and aligned:
            return None
        return ("(head_dim, head_dim_v)=(%d, %d) is not supported on SM90. head_dim and head_dim_v must be between "
                "8 and 256 and divisible by %d." % (dq, dv, align))
    if major in (10, 11):
        ok = ((8 <= dq <= 128 and 8 <= dv <= 128) or (dq, dv) in ((192, 128), (256, 256))
              or ((dq == 64 or dq == dv) and dv == 512))
        if ok and aligned:
            return None
        return ("(head_dim, head_dim_v)=(%d, %d) is not supported on SM100/SM110. head_dim and head_dim_v must be "
                "between 8 and 128 and divisible by %d, or (192, 128) for DeepSeek, or (256, 256) for hd256."
                % (dq, dv, align))
    return None


def judge(dtypes, head_dims, capability, extras):
    """FlashAttention 4's forward checks in its order (v's dtype, then q/k against v, then the
    architecture, then the head dims for it), with its AssertionError messages. An unknown
    capability (meta, CPU) is judged for SM90, the Hopper GPU FlashAttention 4 targets first."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if v not in DTYPES:
        problems.append(problem("AD604", "error", "dtype", "inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2"))
    elif q != v or k != v:
        problems.append(problem("AD602", "error", "same_dtype", "q, k, v, and qv must have the same dtype"))
    major = int(capability[0]) if capability is not None else None
    if major is not None and major not in (8, 9, 10, 11, 12):
        problems.append(problem("AD605", "error", "arch",
                                 "Unsupported compute capability. Supported: 8.x, 9.x, 10.x, 11.x, 12.x"))
        return problems
    refusal = fa4_head_dim_refusal(head_dims[0], head_dims[1], 9 if major is None else major, v)
    if refusal:
        problems.append(problem("AD603", "error", "head_dim", refusal + (
            " (the GPU's capability is unknown here: judged for SM90; --capability sets it)" if major is None else "")))
    return problems


# flash_attn.cute, defined in flash_attn.cute.interface: flash-attn 2's (q, k, v, ...) leading arguments.
SPECS = {
    "flash_attn_func": sinks.SinkSpec("flash_attn.cute.flash_attn_func", "flash_attn4", "B,S,H,D", sinks.QKV,
                                      judge=judge),
    "flash_attn_varlen_func": sinks.SinkSpec("flash_attn.cute.flash_attn_varlen_func", "flash_attn4", "T,H,D",
                                             sinks.QKV, judge=judge),
}


def _check_fa4(q, k, v):
    import torch

    allowed = [torch.float16, torch.bfloat16] + [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2")
                                                 if hasattr(torch, n)]
    if v.dtype not in allowed:
        raise AssertionError("inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2")
    if q.dtype != v.dtype or k.dtype != v.dtype:
        raise AssertionError("q, k, v, and qv must have the same dtype")
    if q.shape[-2] % k.shape[-2]:
        raise AssertionError("num_head must be divisible by num_head_kv")


def _fa4_lse(q, want):
    # FlashAttnFunc returns (out, lse); lse is only computed when asked for or for a backward
    if not want:
        return None
    import torch

    return torch.zeros(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32, device=q.device)


def fa4_flash_attn_func(q, k, v, qv=None, gather_kv_indices=None, softmax_scale=None, causal=False,
                        window_size=(None, None), learnable_sink=None, softcap=0.0, num_splits=1, pack_gqa=None,
                        deterministic=False, score_mod=None, score_mod_bwd=None, mask_mod=None, aux_tensors=None,
                        aux_scalars=None, block_sparse_tensors=None, block_sparse_tensors_bwd=None,
                        return_lse=False, gather_bwd_recompute_p=False, gather_bwd_token_chunk=None):
    _check_fa4(q, k, v)
    out = attend(q, k, v, softmax_scale, causal)
    return out, _fa4_lse(q, return_lse or any(t.requires_grad for t in (q, k, v)))


def fa4_flash_attn_varlen_func(q, k, v, qv=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                               max_seqlen_k=None, min_seqlen_k=None, seqused_q=None, seqused_k=None,
                               gather_kv_indices=None, page_table=None, softmax_scale=None, causal=False,
                               window_size=(None, None), learnable_sink=None, softcap=0.0, num_splits=1,
                               pack_gqa=None, deterministic=False, score_mod=None, score_mod_bwd=None, mask_mod=None,
                               block_sparse_tensors=None, aux_tensors=None, aux_scalars=None, return_lse=False,
                               scheduler_metadata=None, seqlen_k_per_split=None, disable_scheduler_metadata=False,
                               gather_bwd_recompute_p=False, gather_bwd_token_chunk=None):
    _check_fa4(q, k, v)
    if q.dim() == 4:
        return fa4_flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, return_lse=return_lse)
    out = attend_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)
    lse = None
    if return_lse or any(t.requires_grad for t in (q, k, v)):
        import torch

        lse = torch.zeros(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device)
    return out, lse


FA4_RUNNERS = {"flash_attn_func": fa4_flash_attn_func, "flash_attn_varlen_func": fa4_flash_attn_varlen_func}


def fa4_standin(name):
    runner = FA4_RUNNERS[name]

    def fn(*args, **kwargs):
        tracer = state.ACTIVE[0]
        if tracer is None:
            return runner(*args, **kwargs)
        return tracer.sink_call(SPECS[name], runner, args, kwargs, standin=True)

    fn.__name__ = name
    fn.__wrapped__ = runner  # inspect.signature sees flash-attn-4's parameters
    return fn


def make_flash_attn_4_standin(module):
    cute = module("flash_attn.cute", True)
    iface = module("flash_attn.cute.interface")
    cute.__version__ = STANDIN_FLASH_ATTN_4_VERSION
    for name in FA4_RUNNERS:
        fn = fa4_standin(name)
        setattr(cute, name, fn)
        setattr(iface, name, fn)
    cute.interface = iface
    return {"flash_attn.cute": cute, "flash_attn.cute.interface": iface}


LIBRARY = Library(
    top="flash_attn.cute", family="flash_attn4", release="flash-attn-4", version=STANDIN_FLASH_ATTN_4_VERSION,
    label="flash-attn-4 %s" % STANDIN_FLASH_ATTN_4_VERSION, kernel="FlashAttention 4", make=make_flash_attn_4_standin,
    specs=SPECS, real_modules=("flash_attn.cute", "flash_attn.cute.interface"), runners=lambda: FA4_RUNNERS)
