"""The flash-attn 2 stand-in's functions (flash_attn, flash_attn.flash_attn_interface; registry.py
puts them in place where flash_attn does not import): flash-attn 2's real checks with its real
messages (flash_api.cpp order: dtype, same dtype, contiguous last dim, head dim), then the attention
computed with PyTorch's SDPA so the forward pass goes on (nothing runs on ``meta``). The
architecture check is left out: the stand-in stands for the GPU. In a trace each call is an
attention call the tracer judges."""

from __future__ import annotations

import math
import os

from ..calls import sinks
from .. import state
from . import bert_padding
from .library import Library

# The flash-attn whose checks, messages and signatures the stand-in has.
STANDIN_FLASH_ATTN_VERSION = os.environ.get("ATTN_DOCTOR_STANDIN_FLASH_ATTN_VERSION", "2.8.3")


def _torch():
    import torch

    return torch


class FlashAttnError(RuntimeError):
    pass


def _check(q, k, v, max_head_dim=sinks.FA2_MAX_HEAD_DIM, alibi_slopes=None):
    torch = _torch()
    half = (torch.float16, torch.bfloat16)
    if q.dtype not in half:
        raise FlashAttnError("FlashAttention only support fp16 and bf16 data type")
    if k.dtype != q.dtype:
        raise FlashAttnError("query and key must have the same dtype")
    if v.dtype != q.dtype:
        raise FlashAttnError("query and value must have the same dtype")
    for t in (q, k, v):
        if t.stride(-1) != 1:
            raise FlashAttnError("Input tensor must have contiguous last dimension")
    if q.shape[-1] > max_head_dim:
        raise FlashAttnError("FlashAttention forward only supports head dimension at most %d" % max_head_dim)
    if alibi_slopes is not None and alibi_slopes.dtype != torch.float32:
        raise FlashAttnError("ALiBi slopes must have dtype fp32")


def attend(q, k, v, softmax_scale=None, causal=False):
    """(B, S, H, D) attention through SDPA, with flash-attn's GQA and bottom-right causal mask."""
    torch = _torch()
    F = torch.nn.functional
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    if hq != hk:
        if hq % hk:
            raise FlashAttnError("Number of heads in key/value must divide number of heads in query")
        k = k.repeat_interleave(hq // hk, dim=2)
        v = v.repeat_interleave(hq // hk, dim=2)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    mask = None
    if causal:
        # flash-attn aligns the causal mask to the bottom right when seqlen_q != seqlen_k.
        i = torch.arange(sq, device=q.device).unsqueeze(1)
        j = torch.arange(sk, device=q.device).unsqueeze(0)
        mask = j <= i + (sk - sq)
    if softmax_scale is not None and softmax_scale != 1.0 / math.sqrt(d):
        # SDPA's scale= came in torch 2.1; scaling q (by a Python number: no promotion) works on 2.0
        qt = qt * (softmax_scale * math.sqrt(d))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    return out.transpose(1, 2)


def _lse(q):
    torch = _torch()
    b, s, h, _ = q.shape
    return torch.zeros(b, h, s, dtype=torch.float32, device=q.device)


# Signatures are flash-attn 2.8.3's (flash_attn/flash_attn_interface.py): callers inspect them
# (transformers >= 5 enables softcap, window_size, ... from the parameter names).


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(q, k, v, *a, **kw):
        _check(q, k, v, alibi_slopes=kw.get("alibi_slopes"))
        out = attend(q, k, v, softmax_scale, causal)
        return (out, _lse(q), None) if return_attn_probs else out

    extra = {"alibi_slopes": alibi_slopes} if alibi_slopes is not None else {}
    return _dispatch("flash_attn_func", impl, (q, k, v), extra)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(qkv, *a, **kw):
        q, k, v = qkv.unbind(dim=2)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        out = attend(q, k, v, softmax_scale, causal)
        return (out, _lse(q), None) if return_attn_probs else out

    return _dispatch("flash_attn_qkvpacked_func", impl, (qkv,), {})


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(q, kv, *a, **kw):
        k, v = kv.unbind(dim=2)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        out = attend(q, k, v, softmax_scale, causal)
        return (out, _lse(q), None) if return_attn_probs else out

    return _dispatch("flash_attn_kvpacked_func", impl, (q, kv), {})


def attend_varlen(q, k, v, cu_q, cu_k, softmax_scale, causal):
    torch = _torch()
    if q.device.type == "meta":
        return q.new_empty(q.shape[:-1] + (v.shape[-1],))
    outs = []
    bq, bk = cu_q.tolist(), cu_k.tolist()
    for i in range(len(bq) - 1):
        qs, ks = q[bq[i]:bq[i + 1]], k[bk[i]:bk[i + 1]]
        vs = v[bk[i]:bk[i + 1]]
        outs.append(attend(qs[None], ks[None], vs[None], softmax_scale, causal)[0])
    return torch.cat(outs, 0) if outs else q.new_empty(q.shape[:-1] + (v.shape[-1],))


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    def impl(q, k, v, *a, **kw):
        _check(q, k, v, alibi_slopes=alibi_slopes)
        out = attend_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)
        return (out, None, None) if return_attn_probs else out

    return _dispatch("flash_attn_varlen_func", impl, (q, k, v), {})


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    def impl(qkv, *a, **kw):
        q, k, v = qkv.unbind(dim=1)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        return attend_varlen(q, k, v, cu_seqlens, cu_seqlens, softmax_scale, causal)

    return _dispatch("flash_attn_varlen_qkvpacked_func", impl, (qkv,), {})


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    def impl(q, kv, *a, **kw):
        k, v = kv.unbind(dim=1)
        _check(q, k, v, alibi_slopes=alibi_slopes)
        return attend_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)

    return _dispatch("flash_attn_varlen_kvpacked_func", impl, (q, kv), {})


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    # Approximation: attends over the whole cache; new k/v are checked but not appended.
    def impl(q, k_cache, v_cache, *a, **kw):
        _check(q, k_cache, v_cache, alibi_slopes=alibi_slopes)
        if k is not None and k.dtype != q.dtype:
            raise FlashAttnError("query and key must have the same dtype")
        out = attend(q, k_cache, v_cache, softmax_scale, causal)
        return (out, _lse(q)) if return_softmax_lse else out

    return _dispatch("flash_attn_with_kvcache", impl, (q, k_cache, v_cache), {})


def _dispatch(name, impl, args, kwargs):
    tracer = state.ACTIVE[0]
    if tracer is None:
        return impl(*args, **kwargs)
    return tracer.sink_call(sinks.FLASH_ATTN2[name], impl, args, kwargs, standin=True)


STANDIN_FUNCTIONS = (
    flash_attn_func, flash_attn_qkvpacked_func, flash_attn_kvpacked_func, flash_attn_varlen_func,
    flash_attn_varlen_qkvpacked_func, flash_attn_varlen_kvpacked_func, flash_attn_with_kvcache,
)


def make_flash_attn_standin(module):
    pkg = module("flash_attn", True)
    iface = module("flash_attn.flash_attn_interface")
    padding = module("flash_attn.bert_padding")
    pkg.__version__ = STANDIN_FLASH_ATTN_VERSION
    for fn in STANDIN_FUNCTIONS:
        setattr(pkg, fn.__name__, fn)
        setattr(iface, fn.__name__, fn)
    for fn in (bert_padding.index_first_axis, bert_padding.unpad_input, bert_padding.pad_input):
        setattr(padding, fn.__name__, fn)
    pkg.flash_attn_interface = iface
    pkg.bert_padding = padding
    return {"flash_attn": pkg, "flash_attn.flash_attn_interface": iface, "flash_attn.bert_padding": padding}


# Its rules are sinks.judge's (transformers' flash path reaches them too); off CUDA the real
# flash-attn runs and raises its own error.
LIBRARY = Library(
    top="flash_attn", family="flash_attn2", release="flash-attn", version=STANDIN_FLASH_ATTN_VERSION,
    label="flash-attn %s" % STANDIN_FLASH_ATTN_VERSION, kernel="flash-attn 2", make=make_flash_attn_standin,
    specs=sinks.FLASH_ATTN2, real_modules=("flash_attn", "flash_attn.flash_attn_interface"), distribution="flash_attn")
