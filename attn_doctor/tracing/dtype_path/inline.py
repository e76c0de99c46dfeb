"""Attention written inline (eager attention spelled out: transformers' older and encoder models,
T5, custom code): ``probs @ v`` where probs come from a softmax over ``q @ k^T``, recognised from
the op graph the tracer keeps and recorded as an attention call, judged like transformers' eager
attention."""

from __future__ import annotations

import torch

from ..calls import policy, sinks
from ..calls.autocast import AUTOCAST_DTYPE, AUTOCAST_ENABLED
from ..calls.nodes import LOWER_ELIGIBLE, NAME_TO_DTYPE, dtype_name

# Inline attention: probs @ v, probs = softmax(q @ k^T [* scale] [+ mask] [softcap]) [dropout] [cast].
PV_OPS = frozenset(("matmul", "bmm", "einsum"))
QK_OPS = frozenset(("matmul", "bmm", "baddbmm", "einsum"))
_SOFTMAX_OPS = frozenset(("softmax", "_softmax"))
_BETWEEN_SOFTMAX_AND_PV = frozenset(("dropout", "to", "type", "type_as", "float", "half", "bfloat16", "contiguous",
                                     "masked_fill", "masked_fill_", "where", "nan_to_num"))
_BETWEEN_QK_AND_SOFTMAX = frozenset(("add", "add_", "__iadd__", "__add__", "__radd__", "sub", "__sub__", "mul", "mul_",
                                     "__mul__", "__rmul__", "div", "div_", "__truediv__", "__itruediv__", "tanh",
                                     "masked_fill", "masked_fill_", "where", "to", "type", "type_as", "float",
                                     "clamp", "clamp_min", "max", "maximum", "view", "reshape"))


def _walk_back(node, names, through, depth):
    """The nearest node behind ``node`` made by an op in ``names``, passing only through ops in
    ``through`` (any of their floating inputs); None if there is none within ``depth`` hops."""
    stack = [(node, 0)]
    seen = set()
    while stack:
        n, d = stack.pop()
        if n is None or id(n) in seen or d > depth:
            continue
        seen.add(id(n))
        if n.short in names:
            return n
        if n.short in through:
            stack.extend((i, d + 1) for i in reversed(n.inputs))
    return None


def inline_attention(tracer, short, args, kwargs):
    """At a matmul the tracer is about to run (``short``): record it on ``tracer`` as an attention
    call when it is ``probs @ v``. Returns (record, call_args, call_kwargs), the arguments cast
    where the call is bad and the trace goes on, or None when this matmul is not the second half
    of an attention."""
    operands = [a for a in args if isinstance(a, torch.Tensor)]
    if len(operands) == 1 and isinstance(args[-1], (list, tuple)):  # einsum(eq, [a, b])
        operands = [a for a in args[-1] if isinstance(a, torch.Tensor)]
    if len(operands) != 2 or not all(t.is_floating_point() for t in operands):
        return None
    probs_t, v_t = operands
    probs = tracer.nodes.get(probs_t)
    soft = _walk_back(probs, _SOFTMAX_OPS, _BETWEEN_SOFTMAX_AND_PV, 6)
    if soft is None:
        return None
    qk = _walk_back(soft.inputs[0] if soft.inputs else None, QK_OPS, _BETWEEN_QK_AND_SOFTMAX, 10)
    if qk is None or len(qk.inputs) < 2:
        return None
    q_node, k_node = qk.inputs[-2], qk.inputs[-1]
    shapes = qk.shapes or [None, None]
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
    widened = _softmax_widened(q_node, k_node, scores, autocast_now)
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
        "problems": problems, "via": None, "seq": tracer.seq,
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
            record["continued_with"] = name
    return record, call_args, call_kwargs


def _softmax_widened(q_node, k_node, scores, autocast_now):
    """True where q and k are half but the scores the softmax reads were promoted wider on the way
    (a float32 mask or bias added): not an explicit softmax(dtype=float32), which is on purpose."""
    from .provenance import promotions_behind

    if scores is None or autocast_now or q_node.dtype not in ("float16", "bfloat16") or k_node.dtype != q_node.dtype:
        return False
    if scores.dtype not in ("float32", "float64"):
        return False
    return bool(promotions_behind(scores))
