"""Precision faults found by measurement: the float64 shadow's events (numerics/shadow.py) made
findings, each at the op where precision was lost, with the operand that carried the error and the
line that chose its dtype.

- AD626: an op whose result is far further from float64 than its inputs were and than the model's
  dtype rounds (a cosine of angles held in half precision, a table whose positions or frequencies
  were rounded, a sum that underflows): the line of the op, the operand with its magnitude and the
  spacing of its dtype there, and where that operand was made half (a cast, a tensor made with a
  half dtype, a buffer cast with the model): the line to change.
- AD627: an op that makes inf or NaN from finite inputs where float64 stays finite (fp16 scores,
  sums or exponentials past 65504): error, with how far float64 goes past the dtype's largest value.

Whatever the spelling, the measurement is the same; nothing here recognises a written form.
"""

from __future__ import annotations

import linecache

from ..calls import policy
from ..calls.nodes import HALF_DTYPES, dtype_name
from .inline import QK_OPS
from ..numerics.shadow import UNIT, spacing
from .precision import _loc, _record
from .provenance import _called_by, _decided, _where

_HALF_NAMES = ("float16", "bfloat16")
# A layer boundary: past it a half value is the model's weights' dtype, not a line's choice.
_BOUNDARY = frozenset(("linear", "conv1d", "conv2d", "conv3d", "embedding", "layer_norm", "group_norm", "rms_norm",
                       "batch_norm", "instance_norm", "sink"))


def _percent(x):
    if x >= 0.095:
        return "%.0f%%" % (100 * x)
    if x >= 0.0095:
        return "%.1f%%" % (100 * x)
    return "%.2g%%" % (100 * x)


def _number(x):
    if x is None:
        return "?"
    if 1000 <= abs(x) < 1e7:
        return "%d" % round(x)
    if abs(x) >= 1e7 or (x and abs(x) < 1e-3):
        return "%.3g" % x
    return "%.4g" % x


def half_sources(node, by_seq, limit=300):
    """Where a half-precision value behind ``node`` became half, as (node, is_reader): casts to half,
    tensors made with a half dtype, parameters, buffers and inputs in half (each followed by the op
    that read it, a reader: where a cast to float32 would go); the walk follows half values only, the
    inputs that carry more error first, and stops at projections and norms (there the half dtype is
    the weights')."""
    found, stack, seen = [], [(node, None)], set()
    while stack and limit > 0:
        limit -= 1
        n, reader = stack.pop()
        if n is None or id(n) in seen or n.dtype not in _HALF_NAMES:
            continue
        seen.add(id(n))
        if n.kind in ("param", "buffer", "attribute", "input", "tensor"):
            found.append((n, False))
            if reader is not None and reader.file:
                found.append((reader, True))
            continue
        if n.kind == "cast":
            found.append((n, False))
            continue
        if n.kind != "op" or n.short in _BOUNDARY:
            continue
        halves = [i for i in n.inputs if i.dtype in _HALF_NAMES]
        if not halves:
            found.append((n, False))  # made half here from wider or integer inputs
            continue
        stack.extend((i, n) for i in sorted(halves, key=lambda i: by_seq.get(i.seq, 0.0)))
    return found


def error_origin(node, by_seq, limit=64):
    """The node where the error an operand carries was made: from ``node``, follow the input carrying
    the most error while it carries at least half of it; the first node whose inputs carry far less
    than it does made it (rounded a value, or is a buffer whose values a cast rounded)."""
    n = node
    while n is not None and limit > 0:
        limit -= 1
        own = by_seq.get(n.seq, 0.0)
        carried = [(by_seq.get(i.seq, 0.0), i) for i in n.inputs if i.dtype != "bool"]
        if not carried:
            return n if own > 0 else None
        err, worst = max(carried, key=lambda c: c[0])
        if err < 0.5 * own or err <= 0.0:
            return n
        n = worst
    return None


def _activations_rounding(origin):
    """The error an op amplified was made by a projection, a norm, an attention kernel or a product
    of two activations: the rounding of the activations in the dtype the model computes in (a softmax
    of large scores from half q and k), which training in that dtype has by design and no line of the
    model chose. A table, a position, a frequency or a constant made or cast in half is a line's
    choice; this is not."""
    if origin is None:
        return False
    if origin.short in QK_OPS:  # q @ k^T, probs @ v: both operands activations (not positions x frequencies)
        return len(origin.inputs) >= 2 and all(i.batch and i.kind not in ("param", "buffer", "attribute")
                                               for i in origin.inputs[-2:])
    return origin.short in _BOUNDARY or origin.kind == "sink"


def _source_entry(n, feeds, reader=False):
    if reader:
        what = "%s reading it" % n.op
    elif n.kind == "cast":
        what = ("cast to %s by %s" if n.inputs else "made in %s by %s") % (n.dtype, n.op)
    elif n.kind == "buffer" and n.dtype not in _HALF_NAMES:
        what = "the buffer %s (its values rounded by a cast to half precision, then cast back)" % n.name
    elif n.kind == "op" and n.inputs:  # made half from wider inputs
        wide = sorted({i.dtype for i in n.inputs if i.dtype not in _HALF_NAMES})
        what = "computed in %s by %s from %s inputs%s" % (
            n.dtype, n.op, "/".join(wide) or "wider", " (CUDA autocast runs it in half precision)"
            if policy.policy_for(n.short) == "lower" else "")
    else:
        what = {"param": "the parameter %s", "buffer": "the buffer %s (cast with the model)",
                "attribute": "the attribute %s", "input": "the input %s"}.get(n.kind, "%s") % (n.name or n.op)
    entry = {"kind": "created" if n.kind in ("cast", "op") else n.kind, "op": n.op or n.name, "name": n.name,
             "file": n.file, "line": n.line, "feeds": [feeds], "dtype": n.dtype, "what": what}
    if n.file:
        entry.update(_where(n))
        _called_by(entry, n)
        _decided(entry, n)
    return entry


def _sources(node, by_seq):
    """The places that made ``node``'s value half, earliest first, one per line."""
    out, lines = [], set()
    for n, reader in sorted(half_sources(node, by_seq), key=lambda p: p[0].seq):
        place = (n.file, n.line) if n.file else (n.kind, n.name)
        if place not in lines:
            lines.add(place)
            out.append(_source_entry(n, "operand", reader))
    return out


def _worst_operand(event):
    """The operand that carried the error into the op (the largest error), else the largest."""
    ops = list(event.operands)
    if not ops:
        return None
    return max(ops, key=lambda o: (o["err"], o["max"] or 0.0))


def records(tracer, shadow):
    """Turn the shadow's events into the tracer's precision records (precision._record): one per
    cause, so the ops that lose precision from the same half-precision sources (a table's cos and its
    sin) are one finding."""
    groups = {}
    for ev, nan in _harmful_overflows(shadow):
        _overflow(tracer, shadow, ev, nan)
    for ev in shadow.events:
        if ev.kind != "loss":
            continue
        operand = _worst_operand(ev)
        sources = []
        by_seq = shadow.build_by_seq if ev.building else shadow.by_seq
        if operand is not None and operand["node"] is not None:
            if _activations_rounding(error_origin(operand["node"], by_seq)):
                continue
            if dtype_name(operand["dtype"]) in _HALF_NAMES:
                sources = _sources(operand["node"], by_seq)
            else:  # a wide operand carrying error: where it was made (a buffer a cast rounded)
                made = error_origin(operand["node"], by_seq)
                if made is not None and (made.file or made.name):
                    sources = [_source_entry(made, "operand")]
        key = tuple((o.get("file"), o.get("line"), o.get("name")) for o in sources) or (ev.file, ev.line)
        groups.setdefault(key, []).append((ev, operand, sources))
    for group in groups.values():
        _loss(tracer, shadow, group)


def _operand_text(operand, label):
    dtype = operand["dtype"]
    node = operand["node"]
    made = ""
    if node is not None and node.file and node.op:
        made = " from %s at %s" % (node.op, _loc(node.file, node.line))
    gap = spacing(operand["max"], dtype) if dtype in HALF_DTYPES else None
    where = ", reaches %s" % _number(operand["max"]) if operand["max"] else ""
    if gap is not None and operand["max"]:
        where = ", reaches %s, where %s's neighbouring values are %s apart" % (
            _number(operand["max"]), dtype_name(dtype), _number(gap))
    return "its %s, %s%s%s%s" % (label, dtype_name(dtype), list(operand["shape"]), made, where)


def _sources_text(sources):
    parts = []
    for s in sources[:3]:
        at = " at %s" % _loc(s["file"], s["line"]) if s.get("file") else ""
        parts.append("%s%s" % (s["what"], at))
    return " and ".join(parts)


def _loss(tracer, shadow, group):
    ev, operand, sources = group[0]
    unit = max(UNIT.get(ev.dtype, shadow.unit), shadow.unit)
    message = ("%s at %s%s loses precision: its %s result is %s off float64 (its inputs were %s off; %s rounds to "
               "%s)" % (ev.op, _loc(ev.file, ev.line), _when(ev), dtype_name(ev.dtype), _percent(ev.err),
                        _percent(ev.err_in), dtype_name(shadow.model_dtype), _percent(unit)))
    if len(group) > 1:
        message += ", and so do %s" % ", ".join("%s at %s (%s off)" % (e.op, _loc(e.file, e.line), _percent(e.err))
                                               for e, _, _ in group[1:4])
    if operand is not None:
        message += ": %s" % _operand_text(operand, "input")
    if sources and dtype_name(operand["dtype"]) in _HALF_NAMES:
        message += "; that input is %s since %s (the line to change: compute it in float32 and cast the result " \
                   "to the model's dtype)" % (dtype_name(operand["dtype"]), _sources_text(sources))
    elif sources:
        message += "; its error comes from %s (the line to change: keep those values in float32)" % _sources_text(
            sources)
    _record(tracer, "AD626", "warning", ev.file, ev.line, ev.op, {},
            "%s result %s off float64" % (dtype_name(ev.dtype), _percent(ev.err)), message, origins=sources)
    record = tracer.precision_seen.get(("AD626", ev.file, ev.line))
    if record is not None:
        record["count"] = sum(e.count for e, _, _ in group)
        record["module_path"] = ev.module


def _harmful_overflows(shadow):
    """[(the event to report, the NaN event it led to or None)]: an overflow or a NaN harms where the
    forward's results hold inf or NaN that float64 does not (the loss, the logits); one whose elements
    a later op drops (a padded block sliced off, a -inf a softmax makes 0) harms nothing. Reported at
    the overflow nearest before the first NaN (a softmax of inf scores), else at the NaN itself (0/0),
    else at the last overflow (an inf that reaches the results)."""
    if not shadow.output_bad:
        return []
    overflows, nan = [], None
    for ev in shadow.events:
        if ev.kind == "overflow":
            overflows.append(ev)
        elif ev.kind == "nan":
            nan = ev
            break
    if nan is not None:
        return [(overflows[-1], nan)] if overflows else [(nan, None)]
    return [(overflows[-1], None)] if overflows else []


def _overflow(tracer, shadow, ev, nan=None):
    finfo_max = _finfo_max(ev.dtype)
    if ev.kind == "nan":
        message = ("%s at %s%s makes NaN in %d of %d elements where float64 stays finite" % (
            ev.op, _loc(ev.file, ev.line), _when(ev), ev.nonfinite, ev.numel))
        big = sorted(ev.operands, key=lambda o: -(o["max"] or 0.0))[:2]
        if big:
            message += "; %s" % "; ".join(_operand_text(o, "operand") for o in big)
        _record(tracer, "AD627", "error", ev.file, ev.line, ev.op, {}, "%s makes NaN" % dtype_name(ev.dtype),
                message + "; compute it in float32", origins=[_source_entry(o["node"], "operand") for o in big
                                                              if o["node"] is not None and o["node"].file])
        _set_count(tracer, ev)
        return
    message = ("%s at %s%s overflows %s: %d of %d elements are inf where float64 stays finite (it reaches "
               "%s; %s holds %s)" % (ev.op, _loc(ev.file, ev.line), _when(ev), dtype_name(ev.dtype), ev.nonfinite, ev.numel,
                                 _number(ev.twin_max), dtype_name(ev.dtype), _number(finfo_max)))
    big = sorted(ev.operands, key=lambda o: -(o["max"] or 0.0))[:2]
    if big:
        message += "; %s" % "; ".join(_operand_text(o, "operand") for o in big)
    if nan is not None:
        message += "; the inf makes NaN at %s (%s)" % (_loc(nan.file, nan.line), nan.op)
    else:
        message += "; the inf reaches the forward's results"
    message += ("; compute this op in float32 (or bf16, which has float32's range), or scale its inputs first "
                "(q by 1/sqrt(head dim) before q @ k^T)")
    sources = [_source_entry(o["node"], "operand") for o in big if o["node"] is not None and o["node"].file]
    _record(tracer, "AD627", "error", ev.file, ev.line, ev.op, {},
            "%s overflows to inf" % dtype_name(ev.dtype), message, origins=sources)
    _set_count(tracer, ev)


def _when(ev):
    return " (when the model was built)" if ev.building else ""


def _set_count(tracer, ev):
    record = tracer.precision_seen.get(("AD627", ev.file, ev.line))
    if record is not None:
        record["count"] = ev.count
        record["module_path"] = ev.module


def _finfo_max(dtype):
    import torch

    try:
        return float(torch.finfo(dtype).max)
    except TypeError:
        return None


def headroom_note(shadow, weights):
    """How close float16 values came to overflow, said once: with random weights trained activations
    are larger, so the distance is what a trained model has to spare, at most."""
    if shadow.peak is None or shadow.model_dtype not in HALF_DTYPES:
        return None
    ratio, where = shadow.peak
    if ratio <= 0:
        return None
    import math

    power = int(math.floor(math.log2(where["max"]))) if where["max"] >= 1 else 0
    return ("float16 values reach %s (about 2^%d of float16's 65504) at %s %s with %s: trained activations are "
            "larger, so that is the most headroom the model has" % (
                _number(where["max"]), power, where["op"], _loc(where["file"], where["line"]), weights))


def source_line(file, line):
    return linecache.getline(file, line).strip() if file else None
