"""Precision faults that raise no error where the trace runs, each named at its line:

- AD622: a rotary or position table computed in half precision: ``cos``/``sin`` of positions times
  frequencies in float16 or bfloat16 (a frequency buffer cast with the model, positions made in the
  model's dtype). bf16 holds integers exactly only up to 256 and float16 up to 2048, and a frequency
  keeps 8 or 11 bits: past a few hundred positions the angles are off by radians. The line that
  makes the angles, and the buffer's or the positions' maker.
- AD623: a mask fill value the dtype cannot hold: ``masked_fill``/``full``/``fill_`` with
  ``torch.finfo(torch.float32).min`` (or -1e9) on a float16 or bfloat16 tensor raises "value cannot be
  converted to type c10::Half without overflow" on CPU and GPU (meta lets it through); a float32 mask
  holding such a value cast down becomes -inf, and a row that is all mask gives NaN after softmax.
- AD624: a boolean mask added to float scores: ``scores + mask`` adds 1 and 0 where the mask meant
  "attend" and "do not", so nothing is masked.

Each is a record like a sink's (family "op"), merged per line, with the line to change and, where
one line fixes it, a patch."""

from __future__ import annotations

import linecache
import re

import torch

from ..calls.nodes import HALF_DTYPES, dtype_name
from .inline import _scores_op

_FILLS = frozenset(("masked_fill", "masked_fill_", "fill_", "full", "full_like", "new_full", "fill"))
_ADDS = frozenset(("add", "add_", "__add__", "__radd__", "__iadd__", "sub", "sub_", "__sub__", "__rsub__", "rsub",
                   "__isub__"))
_TRIG = frozenset(("cos", "sin", "cos_", "sin_", "polar"))
_CASTS = frozenset(("to", "half", "bfloat16", "type", "type_as"))
_LIMIT = {torch.float16: torch.finfo(torch.float16).max, torch.bfloat16: torch.finfo(torch.bfloat16).max}
_C10 = {torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16"}
_FINFO32 = re.compile(r"-\s*torch\.finfo\(\s*torch\.float(?:32)?\s*\)\.max|torch\.finfo\(\s*torch\.float(?:32)?\s*\)\.min")


def _scalar(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return None


def _fill_value(short, args, kwargs):
    if short in ("masked_fill", "masked_fill_"):
        return _scalar(args[2] if len(args) > 2 else kwargs.get("value"))
    if short in ("fill_", "fill"):
        return _scalar(args[1] if len(args) > 1 else kwargs.get("value"))
    if short in ("full", "new_full", "full_like"):
        return _scalar(args[1] if len(args) > 1 else kwargs.get("fill_value"))
    return None


def _fill_dtype(short, args, kwargs):
    if short in ("masked_fill", "masked_fill_", "fill_", "fill", "full_like", "new_full"):
        dtype = kwargs.get("dtype")
        if dtype is None and args and isinstance(args[0], torch.Tensor):
            dtype = args[0].dtype
        return dtype
    if short == "full":
        return kwargs.get("dtype") or torch.get_default_dtype()
    return None


def before_op(tracer, func, short, args, kwargs):
    """AD623 for a fill the dtype cannot hold: found before the op runs (meta would let it pass)."""
    if short not in _FILLS or tracer.in_sink:
        return
    value = _fill_value(short, args, kwargs)
    dtype = _fill_dtype(short, args, kwargs)
    if value is None or dtype not in _LIMIT or value != value or abs(value) == float("inf"):
        return
    if abs(value) <= _LIMIT[dtype]:
        return
    file, line = tracer.caller()
    message = "value cannot be converted to type %s without overflow" % _C10[dtype]
    receiver = None
    source = linecache.getline(file, line) if file else ""
    m = re.search(r"([A-Za-z_][\w.]*)\s*\.\s*masked_fill_?\(", source)
    if m:
        receiver = m.group(1)
    fix = ("torch.finfo(%s.dtype).min" % receiver) if receiver else "torch.finfo(<the tensor>.dtype).min"
    chosen = _value_chosen(file, line, source)  # the fill is a variable: the line that chose its value
    _record(tracer, "AD623", "error", file, line, func, {"a": args[0] if args and isinstance(args[0], torch.Tensor)
                                                              else None}, message,
            "%s at %s fills a %s tensor with %g, which %s cannot hold: on CPU and GPU it raises \"%s\" (meta lets "
            "it through)%s; use the dtype's own limit, %s, or -inf where the softmax sees at least one key per row"
            % (tracer.display(func), _loc(file, line), dtype_name(dtype), value, dtype_name(dtype), message,
               "; the value is chosen at %s: `%s`" % (_loc(file, chosen), linecache.getline(file, chosen).strip())
               if chosen else "", fix),
            patch=_finfo_patch(file, chosen or line, receiver, tracer),
            fix_line={"file": file, "line": chosen, "op": "the fill value", "feeds": ["the fill"],
                      "dtype": "%g" % value} if chosen else None)
    tracer.overflow_lines.add((file, line))


def after_op(tracer, func, short, args, kwargs, out):
    """AD624 (a bool mask added), AD623 (a mask cast down to -inf), AD622 (cos/sin of positions in half)."""
    if tracer.in_sink:
        return
    if short in _ADDS:
        _bool_added(tracer, func, short, args, kwargs, out)
    elif short in _CASTS and isinstance(out, torch.Tensor) and out.dtype in _LIMIT and args and \
            isinstance(args[0], torch.Tensor) and args[0].dtype in (torch.float32, torch.float64):
        _cast_overflow(tracer, func, args[0], out)
    elif short in _TRIG and tracer.shadow is None and isinstance(out, torch.Tensor) and args and \
            isinstance(args[0], torch.Tensor) and args[0].dtype in HALF_DTYPES:
        # recognised where nothing measures it; the float64 shadow measures every spelling (measured.py)
        _half_angles(tracer, func, args[0])


# An additive mask masks with a large negative number (-1e4, finfo.min, -inf): one whose most negative
# value is above this leaves a masked score more than e^-MASKING of its weight.
MASKING = 20


def zero_one(t):
    """A floating mask of small whole numbers, two values at least, none below -MASKING (a boolean made
    numbers: 0 and 1; region ids subtracted, not filled): it shifts scores, it masks nothing. Known
    where the trace device has values."""
    if not t.is_floating_point() or t.device.type == "meta" or t.dim() < 2 or t.numel() > (1 << 24):
        return False
    lo, hi = (float(v) for v in t.detach().aminmax())
    if not (-MASKING < lo < hi <= MASKING):
        return False
    return bool((t == t.round()).all())


def _bool_added(tracer, func, short, args, kwargs, out):
    tensors = [a for a in list(args[:2]) + [kwargs.get("other")] if isinstance(a, torch.Tensor)]
    # scores: made by a product of two activations (q by k) a few ops back; a boolean added to another
    # float (a recurrent gate's `reset + ~reset * x`, a position table) is not a mask applied
    # a floating mask counts where a cast made it numbers (a boolean or integer made float): a product
    # of activations plus an identity matrix holds 0 and 1 too, and is no mask
    masks = [t for t in tensors if t.dim() >= 2 and (t.dtype == torch.bool or (
        zero_one(t) and _cast_made(tracer.nodes.get(t)) is not None))]
    if not masks:
        return
    scores = [t for t in tensors if t.is_floating_point() and all(t is not m for m in masks) and _scores_op(
        tracer.nodes.get(t), tracer) is not None]
    if not scores:
        return
    file, line = tracer.caller()
    numbers_mask(tracer, func, file, line, masks[0], scores[0], "adds %s to %s")


def numbers_mask(tracer, func, file, line, mask, scores, how):
    """AD624: a mask of 1 and 0 (boolean, or a boolean made numbers) added to scores as they are: the
    line that made it numbers and the boolean's maker are where it is fixed."""
    origins = []
    spread = 1.0
    if mask.dtype == torch.bool:
        maker = tracer.made_at.get(mask)
        what = "a boolean mask bool%s" % list(mask.shape)
        if maker is not None and maker.file:
            origins.append({"kind": "created", "op": maker.op, "file": maker.file, "line": maker.line,
                            "feeds": ["mask"], "dtype": "bool%s" % list(mask.shape),
                            "source": linecache.getline(maker.file, maker.line).strip() or None})
    else:
        node = tracer.nodes.get(mask)
        lo, hi = (float(v) for v in mask.detach().aminmax())
        spread = hi - lo
        what = ("a mask of only 0 and 1 (%s%s)" % (dtype_name(mask.dtype), list(mask.shape)) if (lo, hi) == (0, 1)
                else "a mask of small whole numbers, %g to %g (%s%s)" % (lo, hi, dtype_name(mask.dtype),
                                                                        list(mask.shape)))
        made = _numbers_made(node)
        if made is not None:
            what += ", made numbers by %s at %s" % (made.op, _loc(made.file, made.line))
            origins.append({"kind": "created", "op": made.op, "file": made.file, "line": made.line, "feeds": ["mask"],
                            "dtype": "%s%s" % (dtype_name(mask.dtype), list(mask.shape)),
                            "source": linecache.getline(made.file, made.line).strip() or None})
    target = "%s scores" % dtype_name(scores.dtype) if scores is not None else "the scores"
    _record(tracer, "AD624", "error", file, line, func, {"a": scores, "b": mask},
            "adds a mask of 1 and 0 to float scores",
            "%s at %s %s: it shifts the scores by a few units where it should remove them (a masked score keeps "
            "at least e^-%g of its weight), so nothing is masked; mask with scores.masked_fill(~mask, "
            "torch.finfo(scores.dtype).min), or "
            "pass the boolean mask to F.scaled_dot_product_attention(attn_mask=mask), where True means attend; an "
            "additive mask holds 0 and a large negative number"
            % (tracer.display(func) if not isinstance(func, str) else func, _loc(file, line), how % (what, target),
               spread),
            origins=origins)


def numbers_mask_at_call(tracer, name, file, line, extra):
    """AD624 at an attention call given an additive mask of only 1 and 0: it masks nothing."""
    for role, t in extra.items():
        if "mask" in role and zero_one(t):
            numbers_mask(tracer, name, file, line, t, None, "gets %s as its additive " + role + ", added to %s")


_CAST_NAMES = frozenset(("float", "double", "half", "bfloat16", "to", "type", "type_as"))
_RESHAPES = frozenset(("view", "reshape", "unsqueeze", "squeeze", "expand", "expand_as", "__getitem__", "repeat",
                       "transpose", "permute", "contiguous", "flatten", "unflatten", "clone", "detach"))


def _cast_made(node, depth=8):
    """The explicit cast that made a boolean or integer tensor floating (``.float()``, ``.to(dtype)``,
    ``.type_as(x)``), through reshapes only; None where an op computed it or a cast changed a float's
    width. (A node keeps its floating inputs only: a cast of a boolean has none, or only the tensor
    whose dtype it copies.)"""
    n = node
    while n is not None and depth > 0:
        if n.kind == "cast" or n.short in _CAST_NAMES:  # x.type_as(scores) of a boolean keeps scores' dtype
            return n if all(i.dtype == n.dtype for i in n.inputs) else None
        if n.kind != "op" or n.short not in _RESHAPES or not n.inputs:
            return None
        n, depth = n.inputs[0], depth - 1
    return None


def _numbers_mask_fixable(n):
    return n is not None and n.file is not None


def _numbers_made(node, depth=6):
    """The op that made a 0/1 mask floating (a cast of a boolean: ``.float()``, ``.to(dtype)``,
    ``.type_as(x)``), through reshapes; else the op that made it."""
    n, first = node, node
    while n is not None and depth > 0:
        if n.kind == "cast" and not n.inputs and n.file:
            return n
        if not n.inputs:
            break
        n, depth = n.inputs[0], depth - 1
    return first if _numbers_mask_fixable(first) else None


def _cast_overflow(tracer, func, src, out):
    pattern = tracer.masks.of(src)
    if not pattern:
        return
    limit = _LIMIT[out.dtype]
    values = [v for v in pattern[1:] if isinstance(v, float) and v == v and abs(v) != float("inf") and abs(v) > limit]
    if not values:
        return
    file, line = tracer.caller()
    node = tracer.nodes.get(src)
    origins = []
    if node is not None and node.file:
        origins.append({"kind": "created", "op": node.op, "file": node.file, "line": node.line, "feeds": ["mask"],
                        "dtype": "%s%s" % (dtype_name(src.dtype), list(src.shape)),
                        "source": linecache.getline(node.file, node.line).strip() or None})
    _record(tracer, "AD623", "warning", file, line, func, {"a": src}, "a mask value overflows the dtype",
            "%s at %s casts a mask holding %g to %s, which cannot hold it: it becomes -inf there, and a row the mask "
            "covers entirely gives NaN after the softmax; build the mask with torch.finfo(%s).min (the target "
            "dtype's limit)" % (tracer.display(func), _loc(file, line), values[0], dtype_name(out.dtype),
                                str(out.dtype)), origins=origins)


_POSITION_OPS = frozenset(("arange", "cumsum"))


def _half_angles(tracer, func, angles):
    """cos/sin of half-precision angles made from positions (an arange, integer position ids) or
    a frequency buffer."""
    node = tracer.nodes.get(angles)
    if node is None:
        return
    found = _table_sources(node)
    if not found["positions"]:
        return
    file, line = tracer.caller()
    product = found["product"]
    origins = []
    for src in found["buffers"] + found["positions"]:
        if src.file:
            origins.append({"kind": "created" if src.kind != "buffer" else "buffer", "op": src.op or src.name,
                            "name": src.name, "file": src.file, "line": src.line, "feeds": ["angles"],
                            "dtype": src.dtype, "source": linecache.getline(src.file, src.line).strip() or None})
    fix_line = None
    if product is not None and product.file:
        fix_line = {"file": product.file, "line": product.line, "op": product.op, "feeds": ["angles"],
                    "dtype": product.dtype}
    sources = ", ".join(sorted({"the buffer %s" % s.name if s.kind == "buffer" and s.name else "%s at %s" % (
        s.op, _loc(s.file, s.line)) for s in found["buffers"] + found["positions"] if s.file or s.name}))
    _record(tracer, "AD622", "warning", file, line, func, {"a": angles},
            "a rotary or position table computed in %s" % angles.dtype,
            "%s at %s computes a rotary or position table in %s from positions%s: %s holds integers exactly only "
            "up to %d and a frequency to %d bits, so past a few hundred positions the angles are off by radians "
            "and the table is wrong; compute positions times frequencies and their cos/sin in float32 (keep the "
            "frequency buffer float32: inv_freq.float() @ positions.float(), as transformers does), then cast the "
            "table to the model's dtype" % (
                tracer.display(func), _loc(file, line), dtype_name(angles.dtype),
                " (%s)" % sources if sources else "", dtype_name(angles.dtype),
                256 if angles.dtype == torch.bfloat16 else 2048, 8 if angles.dtype == torch.bfloat16 else 11),
            origins=origins, fix_line=fix_line)


def _walk(node, depth, follow):
    """Each node behind ``node`` (itself first) within ``depth`` hops, once; the inputs of a node are
    walked where ``follow(node)`` holds."""
    stack, seen = [(node, 0)], set()
    while stack:
        n, d = stack.pop()
        if n is None or id(n) in seen or d > depth:
            continue
        seen.add(id(n))
        yield n
        if follow(n):
            stack.extend((i, d + 1) for i in n.inputs)


def _freq_table(n) -> bool:
    return n.kind == "buffer" or (n.kind == "attribute" and bool(n.name) and "freq" in n.name)


def _table_sources(node, depth=10):
    """The positions (an arange, integer ids cast to a float) and frequency buffers behind a
    half-precision angle, and the product that combined them."""
    found = {"positions": [], "buffers": [], "product": None}
    half = ("float16", "bfloat16")
    # computed wider, then cast down: the table is right, and nothing behind it is walked
    for n in _walk(node, depth, lambda n: n.dtype in half):
        if n.dtype not in half:
            continue
        if _freq_table(n):
            found["buffers"].append(n)
        elif n.short in _POSITION_OPS or (n.kind in ("cast", "op") and not n.inputs and n.file):
            found["positions"].append(n)
        elif n.short in _CASTS and n.inputs:
            # a wide frequency table or position ids cast down to half before the product: the cast is
            # where the precision goes (the buffer itself stayed float32)
            kind = _wide_source(n.inputs[0])
            if kind:
                found[kind].append(n)
        if len(n.inputs) >= 2 and found["product"] is None and n.short in ("mul", "__mul__", "matmul", "einsum",
                                                                             "outer", "ger", "__rmul__", "mm", "bmm"):
            found["product"] = n
    if found["buffers"] and not found["positions"] and found["product"] is not None:
        found["positions"] = found["buffers"]  # frequencies in half times any positions: the same loss
    return found


def _wide_source(node, depth=6):
    """"buffers" where a float32 node comes from a frequency buffer (through views, expands, casts),
    "positions" where from positions (an arange, a cumsum, integer ids); else None."""
    for n in _walk(node, depth, lambda n: n.short not in _BOUNDARY_OPS):
        if _freq_table(n):
            return "buffers"
        if n.short in _POSITION_OPS or n.dtype in ("int64", "int32") or (n.name and "position" in n.name):
            return "positions"
    return None


# a projection or a norm: a float32 activation, not a table, is behind it
_BOUNDARY_OPS = frozenset(("linear", "conv1d", "conv2d", "embedding", "layer_norm", "rms_norm", "group_norm"))


def _record(tracer, rid, severity, file, line, func, operands, kernel_message, message, origins=(), patch=None,
            fix_line=None):
    key = (rid, file, line)
    seen = tracer.precision_seen.get(key)
    if seen is not None:
        seen["count"] = seen.get("count", 1) + 1
        return
    inputs = {r: {"dtype": dtype_name(t.dtype), "shape": list(t.shape)} for r, t in operands.items()
              if isinstance(t, torch.Tensor)}
    problem = {"id": rid, "severity": severity, "check": "precision", "kernel_message": kernel_message,
               "message": message}
    if fix_line:
        problem["fix_line"] = fix_line
    record = {"name": func if isinstance(func, str) else tracer.display(func), "family": "op", "layout": None, "file": file, "line": line,
              "module_path": tracer.current_module(), "inputs": inputs,
              "effective_dtypes": {r: v["dtype"] for r, v in inputs.items()}, "autocast": None, "head_dim": None,
              "head_dim_v": None, "problems": [problem], "via": None, "seq": tracer.seq, "_nodes": {},
              "_origins": list(origins), "_patch": patch}
    tracer.precision_seen[key] = record
    tracer.sinks.append(record)


_FILL_NAME = (re.compile(r"masked_fill_?\(\s*[^,()]+(?:\([^()]*\))?\s*,\s*(?:value\s*=\s*)?([A-Za-z_]\w*)\s*\)"),
              re.compile(r"\bfill_\(\s*([A-Za-z_]\w*)\s*\)"),
              re.compile(r"\bfull(?:_like)?\(\s*[^,]+,\s*(?:fill_value\s*=\s*)?([A-Za-z_]\w*)\s*[,)]"))


def _value_chosen(file, line, source, reach=80):
    """Where the fill value passed as a variable (``x.masked_fill(mask, mask_value)``) got its value:
    the nearest assignment to that name above the call, in the same function. None where the value
    is written at the call, or the assignment is not found there."""
    name = next((m.group(1) for m in (r.search(source) for r in _FILL_NAME) if m), None)
    if not name or not file or name in ("True", "False", "None"):
        return None
    indent = len(source) - len(source.lstrip())
    assign = re.compile(r"^\s*%s\s*(?::[^=]+)?=(?!=)" % re.escape(name))
    for n in range(line - 1, max(0, line - reach), -1):
        text = linecache.getline(file, n)
        stripped = text.lstrip()
        if stripped.startswith(("def ", "async def ")) and len(text) - len(stripped) < indent:
            return None  # the function's start: a parameter or a global, not an assignment here
        if assign.match(text):
            return n
    return None


def _finfo_patch(file, line, receiver, tracer):
    if not receiver or not file:
        return None
    from ..calls.patch import line_patch

    source = linecache.getline(file, line)
    m = _FINFO32.search(source)
    if not m:
        return None
    return line_patch(file, line, m.group(0), "torch.finfo(%s.dtype).min" % receiver)


def _loc(file, line):
    from ..calls.patch import display_path

    return "%s:%s" % (display_path(file) if file else "?", line)
