"""The FlashAttention 3 stand-in's functions (module ``flash_attn_interface``, FA3's hopper/ build;
registry.py puts them in place where it does not import): FA3's checks with its messages
(hopper/flash_api.cpp, mha_fwd, as of 3.0.0: Ampere and newer, fp16/bf16/fp8_e4m3, q/k/v of one
dtype, contiguous last dimension, head dim at most 256 and a multiple of 8), its signatures and its
return values (``out``, or ``(out, softmax_lse)`` with ``return_attn_probs=True``), then the
attention computed with SDPA. ``vllm_flash_attn_func`` and friends are the kernels hub's
vllm-flash-attn3 build, which always returns ``(out, softmax_lse)``.
"""

from __future__ import annotations

from ..calls import sinks
from ..calls.sinks import problem
from .. import state
from .fa2 import attend, attend_varlen
from .library import Library

STANDIN_FA3_VERSION = "3.0.0"
_FP8 = ("float8_e4m3fn",)
DTYPES = sinks.HALF + _FP8
# FA3's floor, its fp8 floor and its head-dim limit: the support matrix's row (recipes/support/matrix.toml)
_ROW = sinks.support_matrix().kernel("flash-attn-3")
MAX_HEAD_DIM = _ROW.limit("head_dim_max")
MIN_CAPABILITY = _ROW.nvidia_range()[0]
FP8_CAPABILITY = _ROW.dtype_floor("fp8_e4m3")


def judge(dtypes, head_dims, capability, extras):
    """FlashAttention 3 (hopper/flash_api.cpp, mha_fwd, as of 3.0.0 and since 2025-01: Ampere and
    newer), its checks in their order: architecture, q's dtype (fp8 on Hopper only), k and v
    against q, head dim at most 256 and a multiple of 8 (16 for fp8)."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if capability is not None and tuple(capability) < MIN_CAPABILITY:
        problems.append(problem("AD605", "error", "arch", "FlashAttention only supports Ampere GPUs or newer."))
    if q not in DTYPES:
        problems.append(problem("AD604", "error", "dtype", "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type"))
    elif q not in sinks.HALF and capability is not None and tuple(capability) < FP8_CAPABILITY:
        problems.append(problem("AD605", "error", "arch", "FlashAttention on Ampere/Ada cards only supports fp16 and bf16 "
                                                           "data type"))
    elif k != q:
        problems.append(problem("AD602", "error", "same_dtype", "query and key must have the same dtype"))
    elif v != q:
        problems.append(problem("AD602", "error", "same_dtype", "query and value must have the same dtype"))
    dq, dv = head_dims
    if dq is not None and dq > MAX_HEAD_DIM:
        problems.append(problem("AD603", "error", "head_dim", "FlashAttention forward only supports head dimension at most %d"
                                % MAX_HEAD_DIM))
    elif dq is not None:
        align = 16 if q == "float8_e4m3fn" else 8
        if dq % align:
            problems.append(problem("AD603", "error", "head_dim", "head_size should be a multiple of %d" % align))
    return problems


# Its public functions, with the (q, k, v, ...) leading arguments of flash-attn 2's.
SPECS = {
    "flash_attn_func": sinks.SinkSpec("flash_attn_interface.flash_attn_func", "flash_attn3", "B,S,H,D", sinks.QKV,
                                      judge=judge),
    "flash_attn_varlen_func": sinks.SinkSpec("flash_attn_interface.flash_attn_varlen_func", "flash_attn3", "T,H,D",
                                             sinks.QKV, judge=judge),
    "flash_attn_qkvpacked_func": sinks.SinkSpec(
        "flash_attn_interface.flash_attn_qkvpacked_func", "flash_attn3", "B,S,3,H,D",
        {"q": (0, "qkv"), "k": (0, "qkv"), "v": (0, "qkv")}, judge=judge),
    "flash_attn_with_kvcache": sinks.SinkSpec(
        "flash_attn_interface.flash_attn_with_kvcache", "flash_attn3", "B,S,H,D",
        {"q": (0, "q"), "k": (1, "k_cache"), "v": (2, "v_cache")}, judge=judge),
}


class FlashAttn3Error(RuntimeError):
    pass


def _check(q, k, v):
    import torch

    allowed = (torch.float16, torch.bfloat16) + tuple(getattr(torch, n) for n in _FP8 if hasattr(torch, n))
    if q.dtype not in allowed:
        raise FlashAttn3Error("FlashAttention only supports fp16, bf16, and fp8_e4m3 data type")
    if k.dtype != q.dtype:
        raise FlashAttn3Error("query and key must have the same dtype")
    if v.dtype != q.dtype:
        raise FlashAttn3Error("query and value must have the same dtype")
    for t in (q, k, v):
        if t.stride(-1) != 1:
            raise FlashAttn3Error("Input tensor must have contiguous last dimension")
    if q.shape[-1] > MAX_HEAD_DIM:
        raise FlashAttn3Error("FlashAttention forward only supports head dimension at most %d" % MAX_HEAD_DIM)
    align = 16 if str(q.dtype).endswith("float8_e4m3fn") else 8
    if q.shape[-1] % align:
        raise FlashAttn3Error("head_size should be a multiple of %d" % align)
    if q.shape[-2] % k.shape[-2]:
        raise FlashAttn3Error("Number of heads in key/value must divide number of heads in query")


def _compute(q, k, v, softmax_scale, causal):
    import torch

    # fp8 in, bf16 out (FA3's out_type); the stand-in computes in bf16
    if not q.dtype.is_floating_point or q.element_size() == 1:
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    return attend(q, k, v, softmax_scale, causal)


def _lse(q):
    import torch

    b, s, h, _ = q.shape
    return torch.zeros(b, h, s, dtype=torch.float32, device=q.device)


def _dispatch(spec, impl, args, kwargs):
    tracer = state.ACTIVE[0]
    if tracer is None:
        return impl(*args, **kwargs)
    return tracer.sink_call(spec, impl, args, kwargs, standin=True)


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1, pack_gqa=None,
                    deterministic=False, sm_margin=0, return_attn_probs=False):
    def impl(q, k, v, *a, **kw):
        _check(q, k, v)
        out = _compute(q, k, v, softmax_scale, causal)
        return (out, _lse(q)) if return_attn_probs else out

    return _dispatch(SPECS["flash_attn_func"], impl, (q, k, v), {})


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                           v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False):
    def impl(q, k, v, *a, **kw):
        _check(q, k, v)
        out = attend_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)
        if return_attn_probs:
            import torch

            return out, torch.zeros(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device)
        return out

    return _dispatch(SPECS["flash_attn_varlen_func"], impl, (q, k, v), {})


def flash_attn_qkvpacked_func(qkv, softmax_scale=None, causal=False, q_descale=None, k_descale=None, v_descale=None,
                              window_size=(-1, -1), attention_chunk=0, softcap=0.0, deterministic=False,
                              num_heads_q=None, sm_margin=0, return_attn_probs=False):
    def impl(qkv, *a, **kw):
        q, k, v = qkv.unbind(dim=-3) if qkv.dim() == 5 else qkv.split(
            [num_heads_q, (qkv.shape[2] - num_heads_q) // 2, (qkv.shape[2] - num_heads_q) // 2], dim=2)
        _check(q, k, v)
        out = _compute(q, k, v, softmax_scale, causal)
        return (out, _lse(q)) if return_attn_probs else out

    return _dispatch(SPECS["flash_attn_qkvpacked_func"], impl, (qkv,), {})


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False):
    # Approximation, as the flash-attn 2 stand-in's: attends over the whole cache.
    def impl(q, k_cache, v_cache, *a, **kw):
        if k_cache.stride(-1) != 1:
            raise AssertionError("k_cache must have contiguous last dimension")
        if v_cache.stride(-1) != 1:
            raise AssertionError("v_cache must have contiguous last dimension")
        _check(q, k_cache, v_cache)
        if k is not None and k.dtype != q.dtype:
            raise FlashAttn3Error("query and key must have the same dtype")
        out = _compute(q, k_cache, v_cache, softmax_scale, causal)
        return (out, _lse(q)) if return_softmax_lse else out

    return _dispatch(SPECS["flash_attn_with_kvcache"], impl, (q, k_cache, v_cache), {})


STANDIN_FUNCTIONS = (flash_attn_func, flash_attn_varlen_func, flash_attn_qkvpacked_func, flash_attn_with_kvcache)


def functions_for(specs, always_lse=False):
    """The FA3 functions under other sink specs (a kernels-hub build of FA3): the same checks and
    outputs; ``always_lse``: vllm-flash-attn3's flash_attn_func / varlen return (out, lse) always."""
    out = {}
    for fn in STANDIN_FUNCTIONS:
        name = fn.__name__
        spec = specs.get(name)
        if spec is None:
            continue

        def make(fn=fn, spec=spec, name=name):
            def hub_fn(*args, **kwargs):
                if always_lse and name in ("flash_attn_func", "flash_attn_varlen_func"):
                    kwargs["return_attn_probs"] = True
                tracer = state.ACTIVE[0]
                if tracer is None:
                    return fn(*args, **kwargs)
                # record the call under the hub's name; the inner stand-in call is not recorded twice
                return tracer.sink_call(spec, fn, args, kwargs, standin=True)

            hub_fn.__name__ = name
            hub_fn.__wrapped__ = fn
            return hub_fn

        out[name] = make()
    return out


def make_fa3_standin(module):
    mod = module("flash_attn_interface")
    for fn in STANDIN_FUNCTIONS:
        setattr(mod, fn.__name__, fn)
    mod.__version__ = STANDIN_FA3_VERSION
    return {"flash_attn_interface": mod}


LIBRARY = Library(
    top="flash_attn_interface", family="flash_attn3", release="flash_attn_interface (FlashAttention 3)",
    version=STANDIN_FA3_VERSION, label="FlashAttention 3 (flash_attn_interface %s)" % STANDIN_FA3_VERSION,
    kernel="FlashAttention 3", make=make_fa3_standin, specs=SPECS, real_modules=("flash_attn_interface",),
    runners=lambda: {fn.__name__: fn for fn in STANDIN_FUNCTIONS}, distribution="flash_attn_3")
