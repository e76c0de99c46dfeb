"""Attention written inline (eager attention spelled out: transformers' older and encoder models,
T5, custom code): ``probs @ v`` where probs come from a softmax over ``q @ k^T``, recognised from
the op graph the tracer keeps and recorded as an attention call, judged like transformers' eager
attention."""

from __future__ import annotations

import torch

from ..calls import policy, sinks
from ..calls.autocast import AUTOCAST_DTYPE, AUTOCAST_ENABLED
from ..calls.nodes import LOWER_ELIGIBLE, NAME_TO_DTYPE, dtype_name

# Attention written out is recognised by its structure, not by the ops' names in between: scores
# made from two activations by a matrix product (matmul, @, bmm, baddbmm, einsum), normalised
# (softmax, a sigmoid), then applied to a third activation by another product; whatever sits between
# (a scale, a mask or a bias added, masked_fill, softcapping, views, casts, dropout) is walked
# through. Linear attention (k^T v first, then q @ kv, no softmax) and products of scores without a
# normaliser (retention's decay mask) are the same structure without the normaliser.
PV_OPS = frozenset(("matmul", "bmm", "einsum", "baddbmm"))
QK_OPS = frozenset(("matmul", "bmm", "baddbmm", "einsum"))
_NORMALISERS = frozenset(("softmax", "_softmax", "sigmoid"))
# A layer boundary: the walk back from one product to another never passes a projection.
_BOUNDARY = frozenset(("linear", "conv1d", "conv2d", "conv3d", "embedding", "layer_norm", "group_norm", "rms_norm"))
# Ops that keep a tensor's values where they are (reshapes, casts): kv = k^T v seen through them.
_SHAPE_ONLY = frozenset(("view", "reshape", "transpose", "permute", "contiguous", "to", "type", "type_as", "float",
                         "half", "bfloat16", "unsqueeze", "squeeze", "flatten", "unflatten", "expand", "mT",
                         "__getitem__", "clone", "detach", "t", "movedim", "swapaxes", "dropout", "mul", "__mul__",
                         "__rmul__", "div", "__truediv__"))
_PROBS_DEPTH, _SCORES_DEPTH = 8, 14


def _walk_back(node, names, depth, through=None):
    """The nearest node behind ``node`` (itself included) made by an op in ``names``, passing
    through any op (or only those in ``through``) but never a projection or another product; None
    if there is none within ``depth`` hops."""
    stack = [(node, 0)]
    seen = set()
    while stack:
        n, d = stack.pop(0)
        if n is None or id(n) in seen or d > depth:
            continue
        seen.add(id(n))
        if n.short in names:
            return n
        if n.short in _BOUNDARY or n.short in QK_OPS:
            continue
        if through is None or n.short in through:
            stack.extend((i, d + 1) for i in n.inputs)
    return None


def _activation(node):
    """Made from the model's inputs (an activation), or at least not a parameter itself."""
    return node is not None and node.kind not in ("param", "buffer")


def _from_batch(node):
    return node is not None and bool(getattr(node, "batch", False))


def _scores_op(start, tracer):
    """The product that made attention scores, behind ``start`` (a normaliser's input or the
    operand itself): two activations multiplied, not an attention output already recorded."""
    qk = start if start is not None and start.short in QK_OPS else None
    if qk is None:
        qk = _walk_back(start, QK_OPS, _SCORES_DEPTH)
    if qk is None or len(qk.inputs) < 2 or qk.seq in tracer.attention_outputs:
        return None
    a, b = qk.inputs[-2], qk.inputs[-1]
    if not (_activation(a) and _activation(b) and (_from_batch(a) or _from_batch(b))):
        return None
    return qk


def _structure(tracer, operands):
    """(kind, probs tensor, v tensor, q node, k node, normaliser node, inner node) of a product that
    applies attention weights to values, or None."""
    for probs_t, v_t in (operands, operands[::-1]):
        probs, v = tracer.nodes.get(probs_t), tracer.nodes.get(v_t)
        if probs is None or not _activation(v):
            continue
        soft = _walk_back(probs, _NORMALISERS, _PROBS_DEPTH)
        if soft is not None and soft.inputs:
            qk = _scores_op(soft.inputs[0], tracer)
            if qk is not None:
                return "softmax", probs_t, v_t, qk.inputs[-2], qk.inputs[-1], soft, qk
    for q_t, kv_t in (operands, operands[::-1]):
        q, kv = tracer.nodes.get(q_t), tracer.nodes.get(kv_t)
        if not (_from_batch(q) and _from_batch(kv)):
            continue
        inner = kv if kv.short in QK_OPS else _walk_back(kv, QK_OPS, 4, through=_SHAPE_ONLY)
        if inner is None or len(inner.inputs) < 2 or inner.seq in tracer.attention_outputs:
            continue
        k, v = inner.inputs[-2], inner.inputs[-1]
        if _from_batch(k) and _from_batch(v) and _activation(k) and _activation(v) and k is not q and v is not q:
            return "linear", None, None, q, k, None, inner
    return None


def inline_attention(tracer, short, args, kwargs):
    """At a matrix product the tracer is about to run (``short``): record it on ``tracer`` as an
    attention call when it applies attention weights to values (softmax attention written out) or
    is linear attention's q @ (k^T v). Returns (record, call_args, call_kwargs), the arguments cast
    where the call is bad and the trace goes on, or None when this product is not attention."""
    operands = [a for a in args if isinstance(a, torch.Tensor)]
    if short == "einsum" and len(operands) <= 1:
        tail = args[-1] if args and isinstance(args[-1], (list, tuple)) else ()
        operands = [a for a in tail if isinstance(a, torch.Tensor)] or operands
    if short == "baddbmm" and len(operands) >= 3:
        operands = operands[-2:]
    if len(operands) != 2 or not all(t.is_floating_point() for t in operands):
        return None
    found = _structure(tracer, operands)
    if found is None:
        return None
    kind, probs_t, v_t, q_node, k_node, soft, inner = found
    if kind == "linear":
        return _linear_attention(tracer, short, args, kwargs, operands, q_node, k_node, inner)
    probs = tracer.nodes.get(probs_t)
    shapes = inner.shapes or [None, None]
    file, line = tracer.caller()
    # the attention weights are the other operand of this matmul: a float32 mask added to the
    # scores, or a softmax asked for float32 and not cast back, makes them float32 on their own
    effective = {"q": q_node.dtype, "k": k_node.dtype, "v": dtype_name(v_t.dtype),
                 "weights": dtype_name(probs_t.dtype)}
    autocast_now = None
    if AUTOCAST_ENABLED() and policy.policy_for(short) == "lower":
        # autocast casts both matmuls' inputs: the mix never reaches them
        autocast_now = dtype_name(AUTOCAST_DTYPE())
        effective = {r: (autocast_now if d in LOWER_ELIGIBLE else d) for r, d in effective.items()}
    dim = int(v_t.shape[-1]) if v_t.dim() else None
    problems = sinks.judge("eager", effective, (dim, dim), tracer.capability)
    scores = soft.inputs[0] if soft.inputs else None
    # softmax(..., dtype=torch.float32) asks for the float32 softmax itself
    widened = soft.kind != "cast" and _softmax_widened(q_node, k_node, scores, autocast_now, tracer.asked_wide)
    if widened and not problems:
        from ..calls.patch import display_path

        shape = ", ".join(str(x) for x in probs_t.shape)
        problems.append({"id": "AD620", "severity": "warning", "check": "softmax_width", "kernel_message": "",
                         "message": "eager attention (inline) at %s:%s: its softmax runs in %s, not the model's %s: the "
                                    "[%s] scores and their softmax are %s, twice the memory and time of the model's "
                                    "dtype" % (display_path(file) if file else "?", line, scores.dtype, q_node.dtype,
                                               shape, scores.dtype)})
    record = {
        "name": "eager attention (inline)", "family": "eager", "layout": "B,H,S,D", "file": file, "line": line,
        "module_path": tracer.current_module(),
        "inputs": {"q": {"dtype": q_node.dtype, "shape": shapes[-2]}, "k": {"dtype": k_node.dtype,
                                                                         "shape": shapes[-1]},
                   "v": {"dtype": dtype_name(v_t.dtype), "shape": list(v_t.shape)},
                   "weights": {"dtype": dtype_name(probs_t.dtype), "shape": list(probs_t.shape)}},
        "effective_dtypes": effective, "autocast": autocast_now, "head_dim": dim, "head_dim_v": dim,
        "problems": problems, "via": None, "seq": tracer.seq, "normaliser": soft.short,
        "_nodes": {"q": q_node, "k": k_node, "v": tracer.node_of(v_t), "weights": probs},
    }
    if widened:
        record["_scores"] = scores
    tracer.sinks.append(record)
    call_args, call_kwargs = args, kwargs
    if problems and tracer.continue_after:
        name = sinks.target_dtype(effective, tracer.expected_dtype)
        if name is not None:
            target = NAME_TO_DTYPE[name]
            call_args = tuple(a.to(target) if (a is probs_t or a is v_t) else a for a in args)
            if short == "einsum" and args and isinstance(args[-1], (list, tuple)):
                call_args = tuple(args[:-1]) + (type(args[-1])(a.to(target) if (a is probs_t or a is v_t) else a
                                                               for a in args[-1]),)
            record["continued_with"] = name
    return record, call_args, call_kwargs


def _linear_attention(tracer, short, args, kwargs, operands, q_node, k_node, inner):
    """q @ (k^T v): linear attention. Its k^T v sums the whole sequence: in float16 (max 65504) a
    long sequence overflows to inf (AD625); bf16 and float32 hold it."""
    from ..calls.patch import display_path

    file, line = tracer.caller()
    v_node = inner.inputs[-1]
    shapes = inner.shapes or [None, None]
    q_t = next((t for t in operands if tracer.nodes.get(t) is q_node), None)
    q_shape = list(q_t.shape) if q_t is not None else None
    kv_dtype = inner.dtype
    effective = {"q": q_node.dtype, "k": k_node.dtype, "v": v_node.dtype}
    autocast_now = None
    if AUTOCAST_ENABLED() and policy.policy_for(short) == "lower":
        autocast_now = dtype_name(AUTOCAST_DTYPE())
        effective = {r: (autocast_now if d in LOWER_ELIGIBLE else d) for r, d in effective.items()}
        kv_dtype = autocast_now if kv_dtype in LOWER_ELIGIBLE else kv_dtype
    problems = sinks.judge("eager", effective, (None, None), tracer.capability)
    if not problems and kv_dtype == "float16":
        where = "%s:%s" % (display_path(inner.file), inner.line) if inner.file else "?"
        problems.append({"id": "AD625", "severity": "warning", "check": "linear_attention_fp16", "kernel_message": "",
                         "fix_line": {"file": inner.file, "line": inner.line},
                         "message": "linear attention at %s:%s computes k^T v in float16 at %s: that product sums "
                                    "over the whole sequence, and float16 overflows past 65504, so long sequences "
                                    "give inf (then NaN); compute k^T v in float32 (k.float().transpose(-1, -2) @ "
                                    "v.float(), cast back after) or train in bf16" % (
                                        display_path(file) if file else "?", line, where)})
    record = {
        "name": "linear attention (inline)", "family": "linear", "layout": None, "file": file, "line": line,
        "module_path": tracer.current_module(),
        "inputs": {"q": {"dtype": q_node.dtype, "shape": q_shape}, "k": {"dtype": k_node.dtype, "shape": shapes[-2]},
                   "v": {"dtype": v_node.dtype, "shape": shapes[-1]}},
        "effective_dtypes": effective, "autocast": autocast_now, "head_dim": None, "head_dim_v": None,
        "problems": problems, "via": None, "seq": tracer.seq, "normaliser": None,
        "_nodes": {"q": q_node, "k": k_node, "v": v_node},
    }
    tracer.sinks.append(record)
    return record, args, kwargs


def _softmax_widened(q_node, k_node, scores, autocast_now, asked_wide=()):
    """True where q and k are half but the scores the softmax reads were promoted wider on the way
    (a float32 mask or bias added): not an explicit softmax(dtype=float32), which is on purpose."""
    from .provenance import promotions_behind

    if scores is None or autocast_now or q_node.dtype not in ("float16", "bfloat16") or k_node.dtype != q_node.dtype:
        return False
    if scores.dtype not in ("float32", "float64") or _asked_wide(scores, asked_wide):
        return False
    return bool(promotions_behind(scores))


def _asked_wide(scores, asked_wide, depth=6):
    """The code upcast the scores itself on their way to the softmax (``scores.float().softmax(-1)``,
    ``.to(torch.float32)``): the float32 softmax is on purpose, whatever promoted them before."""
    n = scores
    while n is not None and depth > 0:
        if (n.kind == "cast" and n.dtype in ("float32", "float64")) or n.seq in asked_wide:
            return True
        if n.kind != "op" or n.short not in _SHAPE_ONLY or not n.inputs:
            return False
        n, depth = n.inputs[0], depth - 1
    return False
