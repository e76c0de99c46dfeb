"""The xformers stand-in (``xformers``, ``xformers.ops``, ``xformers.ops.fmha`` and its
``attn_bias``; registry.py puts it in place where xformers is not installed, and wrappers.py runs
its computation in place of a real xformers' off CUDA tensors): ``memory_efficient_attention`` and
its forward variants with xformers 0.0.35's signatures, the checks of ``Inputs.validate_inputs``
with their messages (ValueError), the cutlass kernel's refusal of a tensor bias of another dtype
than q (the only operator that takes a tensor bias), and the attention computed with SDPA on the
[B, M, H, K] layout. The bias classes models build (LowerTriangularMask, its tensor-bias form,
BlockDiagonalMask and its causal form) are here with their constructors.
"""

from __future__ import annotations

import math

from ..calls import sinks
from ..calls.sinks import problem
from .. import state
from .library import Library

STANDIN_XFORMERS_VERSION = "0.0.35"
# bf16 needs an A100 or newer (fmha/common.py): the support matrix's row for the cutlass operator
BF16_CAPABILITY = sinks.support_matrix().kernel("xformers-cutlass").dtype_floor("bf16", STANDIN_XFORMERS_VERSION)


def judge(dtypes, head_dims, capability, extras):
    """xformers' memory_efficient_attention (0.0.32-0.0.35): validate_inputs refuses q/k/v of mixed
    dtypes; a tensor attn_bias of another dtype than q is refused by the cutlass kernel, the only
    one that takes a bias; bf16 below sm80 has no operator; fp32 runs cutlass (no flash)."""
    q, k, v = dtypes.get("q"), dtypes.get("k"), dtypes.get("v")
    problems = []
    if not (q == k == v):
        problems.append(problem(
            "AD602", "error", "same_dtype",
            "Query/Key/Value should either all have the same dtype, or (in the quantized case) Key/Value should have "
            "dtype torch.int32 (query.dtype: torch.%s, key.dtype: torch.%s, value.dtype: torch.%s)" % (q, k, v)))
    elif q not in sinks.HALF:
        problems.append(problem(
            "AD604", "warning", "dtype",
            "dtype=torch.%s (supported: {torch.float16, torch.bfloat16}) (xformers' flash operators refuse it; the "
            "cutlass kernel runs, slower)" % q))
    elif q == "bfloat16" and capability is not None and tuple(capability) < BF16_CAPABILITY:
        problems.append(problem("AD605", "error", "arch", "No operator found for `memory_efficient_attention_forward`: "
                                                           "bf16 is only supported on A100+ GPUs"))
    bias = extras.get("attn_bias")
    if bias is not None and bias != q and q in (sinks.HALF + ("float32",)):
        problems.append(problem("AD606", "error", "mask_dtype", "invalid dtype for bias - should match query's dtype"))
    return problems


def _xformers_bias(value):
    """The tensor an xformers attn_bias carries: a tensor itself, or LowerTriangularMaskWithTensorBias'
    ``_bias`` (``_subtensor`` in xformers 0.0.27-0.0.31)."""
    for attr in ("_bias", "_subtensor"):
        inner = getattr(value, attr, None)
        if inner is not None and type(inner).__name__ in ("Tensor", "Parameter"):
            return inner
    return value


SPECS = {
    name: sinks.SinkSpec("xformers.ops." + name, "xformers", "B,S,H,D", sinks.QKV_LONG,
                         extras={"attn_bias": (3, "attn_bias")}, unwrap=_xformers_bias, judge=judge)
    for name in ("memory_efficient_attention", "memory_efficient_attention_forward",
                 "memory_efficient_attention_forward_requires_grad")
}


# ---------------------------------------------------------------- attn_bias classes


class AttentionBias(object):
    """xformers.ops.fmha.attn_bias.AttentionBias"""

    def materialize(self, shape, dtype=None, device="cpu"):
        import torch

        return self._dense(shape[-2], shape[-1], dtype or torch.float32, device).expand(shape)

    def _dense(self, q_len, k_len, dtype, device):
        import torch

        return torch.zeros(q_len, k_len, dtype=dtype, device=device)


class LowerTriangularMask(AttentionBias):
    def __init__(self, *args, device=None, **kwargs):  # "not used, only here for backward compatibility"
        pass

    def _dense(self, q_len, k_len, dtype, device):
        import torch

        keep = torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril()
        return torch.zeros(q_len, k_len, dtype=dtype, device=device).masked_fill(~keep, -math.inf)

    def add_bias(self, bias):
        return LowerTriangularMaskWithTensorBias(bias)

    def to(self, device):
        return self


class LowerTriangularMaskWithTensorBias(LowerTriangularMask):
    def __init__(self, bias):
        self._bias = bias

    def to(self, device):
        return LowerTriangularMaskWithTensorBias(self._bias.to(device))


class BlockDiagonalMask(AttentionBias):
    """Sequences packed in one batch row: each attends to itself only (batch 1)."""

    _causal = False

    def __init__(self, q_seqstart, k_seqstart):
        self.q_seqstart, self.k_seqstart = list(q_seqstart), list(k_seqstart)

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_seqlen=None, *, device=None):
        def starts(lengths):
            out = [0]
            for n in lengths:
                out.append(out[-1] + int(n))
            return out

        return cls(starts(q_seqlen), starts(kv_seqlen if kv_seqlen is not None else q_seqlen))

    def make_causal(self):
        return BlockDiagonalCausalMask(self.q_seqstart, self.k_seqstart)

    def make_causal_from_bottomright(self):
        return BlockDiagonalCausalMask(self.q_seqstart, self.k_seqstart)

    def _dense(self, q_len, k_len, dtype, device):
        import torch

        keep = torch.zeros(q_len, k_len, dtype=torch.bool, device=device)
        for i in range(len(self.q_seqstart) - 1):
            q0, q1 = self.q_seqstart[i], self.q_seqstart[i + 1]
            k0, k1 = self.k_seqstart[i], self.k_seqstart[i + 1]
            block = torch.ones(q1 - q0, k1 - k0, dtype=torch.bool, device=device)
            keep[q0:q1, k0:k1] = block.tril() if self._causal else block
        return torch.zeros(q_len, k_len, dtype=dtype, device=device).masked_fill(~keep, -math.inf)


class BlockDiagonalCausalMask(BlockDiagonalMask):
    _causal = True


def _bias_module(make):
    mod = make("xformers.ops.fmha.attn_bias")
    for cls in (AttentionBias, LowerTriangularMask, LowerTriangularMaskWithTensorBias, BlockDiagonalMask,
                BlockDiagonalCausalMask):
        setattr(mod, cls.__name__, cls)
    return mod


# ---------------------------------------------------------------- the checks


def _validate(query, key, value, attn_bias, p):
    """Inputs.validate_inputs (xformers 0.0.32-0.0.35), in its order; ValueError like it."""
    qkv = (query, key, value)
    if query.ndim not in (3, 4, 5) or any(x.ndim != query.ndim for x in qkv):
        raise ValueError("Query/Key/Value should all have BMGHK, BMHK or BMK shape.\n  query.shape: %s\n  key.shape  : "
                         "%s\n  value.shape: %s" % (query.shape, key.shape, value.shape))
    if any(x.device != query.device for x in qkv):
        raise ValueError("Query/Key/Value should all be on the same device")
    if not all(x.dtype == query.dtype for x in qkv):
        raise ValueError(
            "Query/Key/Value should either all have the same dtype, or (in the quantized case) Key/Value should have "
            "dtype torch.int32\n  query.dtype: %s\n  key.dtype  : %s\n  value.dtype: %s"
            % (query.dtype, key.dtype, value.dtype))
    if isinstance(attn_bias, BlockDiagonalMask) and any(x.shape[0] != 1 for x in qkv):
        raise ValueError("Expected batch_size=1 when using block-diagonal bias\n  query.shape: %s\n  key.shape  : %s\n"
                         "  value.shape: %s" % (query.shape, key.shape, value.shape))
    if p < 0.0 or p > 1.0:
        raise ValueError("Invalid dropout probability: p=%s" % p)


def _tensor_bias(attn_bias):
    import torch

    if isinstance(attn_bias, torch.Tensor):
        return attn_bias
    return getattr(attn_bias, "_bias", None)


def _attend(query, key, value, attn_bias=None, p=0.0, scale=None, op=None, output_dtype=None):
    """The computation: SDPA on (B, H, M, K), the bias made dense; the output [B, Mq, H, Kv]."""
    import torch

    F = torch.nn.functional
    _validate(query, key, value, attn_bias, p)
    squeeze = query.ndim == 3
    q, k, v = (t.unsqueeze(2) if squeeze else t for t in (query, key, value))
    if q.ndim == 5:  # BMGHK: fold the groups into the heads
        q, k, v = (t.flatten(2, 3) for t in (q, k, v))
    dense = _tensor_bias(attn_bias)
    if dense is not None and dense.dtype != q.dtype:
        if state.ACTIVE[0] is None:  # outside a trace: what cutlass says (the tracer judged it already)
            raise RuntimeError("invalid dtype for bias - should match query's dtype")
        dense = dense.to(q.dtype)
    mask = None
    if isinstance(attn_bias, AttentionBias):
        mask = attn_bias._dense(q.shape[1], k.shape[1], q.dtype, q.device)
    if dense is not None:
        mask = dense if mask is None else mask + dense
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    if kt.shape[1] != qt.shape[1] and qt.shape[1] % kt.shape[1] == 0:
        kt = kt.repeat_interleave(qt.shape[1] // kt.shape[1], dim=1)
        vt = vt.repeat_interleave(qt.shape[1] // vt.shape[1], dim=1)
    if scale is not None and scale != 1.0 / math.sqrt(q.shape[-1]):
        qt = qt * (scale * math.sqrt(q.shape[-1]))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask).transpose(1, 2)
    if squeeze:
        out = out.squeeze(2)
    elif query.ndim == 5:
        out = out.unflatten(2, query.shape[2:4])
    return out.to(output_dtype) if output_dtype is not None else out


def _lse(query):
    import torch

    b, m = query.shape[0], query.shape[1]
    h = query.shape[2] if query.ndim >= 4 else 1
    return torch.zeros(b, h, m, dtype=torch.float32, device=query.device)


RUNNERS = {
    "memory_efficient_attention": _attend,
    "memory_efficient_attention_forward": _attend,
    "memory_efficient_attention_forward_requires_grad":
        lambda query, key, value, attn_bias=None, p=0.0, scale=None, op=None, output_dtype=None: (
            _attend(query, key, value, attn_bias, p, scale, output_dtype=output_dtype), _lse(query)),
}


def _function(name):
    runner = RUNNERS[name]

    def fn(query, key, value, attn_bias=None, p=0.0, scale=None, *, op=None, output_dtype=None):
        args, kwargs = (query, key, value, attn_bias, p, scale), {"output_dtype": output_dtype}
        tracer = state.ACTIVE[0]
        if tracer is None:
            return runner(*args, **kwargs)
        return tracer.sink_call(SPECS[name], runner, args, kwargs, standin=True)

    fn.__name__ = name
    return fn


def make_xformers_standin(module):
    """The stand-in's modules, made by ``module(name, is_package=False)``: name -> module."""
    top = module("xformers", True)
    top.__version__ = STANDIN_XFORMERS_VERSION
    ops = module("xformers.ops", True)
    fmha = module("xformers.ops.fmha", True)
    bias = _bias_module(module)
    for name in RUNNERS:
        fn = _function(name)
        setattr(ops, name, fn)
        setattr(fmha, name, fn)
    for cls in (AttentionBias, LowerTriangularMask, LowerTriangularMaskWithTensorBias, BlockDiagonalMask,
                BlockDiagonalCausalMask):
        setattr(fmha, cls.__name__, cls)
    ops.LowerTriangularMask, ops.AttentionBias = LowerTriangularMask, AttentionBias
    ops.fmha, fmha.attn_bias, top.ops = fmha, bias, ops
    return {"xformers": top, "xformers.ops": ops, "xformers.ops.fmha": fmha, "xformers.ops.fmha.attn_bias": bias}


LIBRARY = Library(
    top="xformers", family="xformers", release="xformers", version=STANDIN_XFORMERS_VERSION,
    label="xformers %s" % STANDIN_XFORMERS_VERSION, kernel="xformers", make=make_xformers_standin, specs=SPECS,
    real_modules=("xformers.ops", "xformers.ops.fmha"), runners=lambda: RUNNERS, import_tested=False,
    distribution="xformers")
