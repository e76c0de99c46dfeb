"""The FlashAttention 4 stand-in's functions (flash_attn.cute; standins.py puts them in place where
it is not installed, and wrappers.py runs them in place of the real one off CUDA tensors).

flash-attn-4 compiles CuTe DSL kernels for NVIDIA GPUs: it runs nowhere else (`inputs must be on
CUDA device`). These enforce its dtype checks with its messages (AssertionError, flash_attn/cute/
interface.py of 4.0.0b36: v's dtype first, then q and k against v) and compute the attention with
SDPA, as the flash-attn 2 stand-in does. Its head-dim and architecture checks depend on the GPU:
the tracer judges those.
"""

from __future__ import annotations

from ..calls import sinks
from .. import state
from .fa2 import attend, attend_varlen

STANDIN_FLASH_ATTN_4_VERSION = "4.0.0b36"


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
        return tracer.sink_call(sinks.FLASH_ATTN4[name], runner, args, kwargs, standin=True)

    fn.__name__ = name
    fn.__wrapped__ = runner  # inspect.signature sees flash-attn-4's parameters
    return fn
