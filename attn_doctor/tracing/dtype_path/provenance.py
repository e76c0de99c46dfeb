"""Provenance: from a wide (float32, float64) input of an attention call back through the op graph
the tracer kept (nodes.py) to the implicit promotions it went through, and from each wide operand
to what made it wide (a parameter, a buffer, an input, an explicit cast, a tensor made there).
Reads the nodes only; the tracer's report (report.py) calls ``explain_sink`` for each bad call."""

from __future__ import annotations

import linecache
import re

from .decided import decided_at
from ..calls.nodes import WIDE_NAMES, dtype_name, same_width

_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*)\s*(?::[^=]*)?=(?!=)")


# Casts whose target dtype is another tensor's (its dtype follows that tensor's history).
_DTYPE_FOLLOWING = frozenset(("type_as", "to"))


def promotions_behind(start, budget=20000):
    """The implicit promotions a float32 tensor went through, oldest first."""
    found, mixed, stack, seen = [], [], [start], set()
    while stack and budget > 0:
        n = stack.pop()
        budget -= 1
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.kind == "cast" and n.short in _DTYPE_FOLLOWING:
            # x.type_as(y) / x.to(y) takes y's dtype: where y was promoted, so is the result
            stack.extend(i for i in n.inputs[1:] if i.dtype == n.dtype)
            continue
        if n.kind != "op":
            continue
        if n.promo:
            found.append(n)
        elif len(n.inputs) >= 2:
            # An op whose float32 inputs include a parameter, buffer or explicit cast: on its
            # own it would promote a half tensor too (VAR's ``.mul(scale_mul)`` after an
            # autocast-fp32 normalize). Reported only next to a real promotion.
            mixed.append(n)
        for i in n.inputs:
            if i.dtype in WIDE_NAMES:
                stack.append(i)
    if found:
        for n in mixed:
            kinds = [origin_of(i)["kind"] for i in n.inputs if i.dtype in WIDE_NAMES]
            if any(k in ("parameter", "buffer", "explicit_cast") for k in kinds) and any(
                    k == "promotion" for k in kinds):
                found.append(n)
    found.sort(key=lambda n: n.seq)
    return found

_PATH_STEPS = 8
_WIDE_BY_NAME = re.compile(r"torch\.(float32|float64|float|double)\b|\.(float|double)\(\)")


def wide_named(file, line):
    """The line names a wide dtype itself (``.float()``, ``torch.float32``): a cast there to a width
    the tensor already has is the line that keeps it wide."""
    return bool(file) and bool(_WIDE_BY_NAME.search(linecache.getline(file, line)))


def origin_of(n, limit=200):
    """Follow a float32 (or float64) operand back to what made it that wide."""
    first = n
    path, seen_lines = [], set()
    while limit > 0:
        limit -= 1
        if n.kept is not None and n.dtype in WIDE_NAMES and n.kind in ("op", "cast"):
            # an explicit cast to this width that found it so: the line that keeps it wide
            op, file, line = n.kept
            out = {"kind": "explicit_cast", "op": op, "file": file, "line": line, "source": _source(file, line),
                   "kept": True}
            break
        if n.kind in ("param", "buffer", "input"):
            out = {"kind": {"param": "parameter"}.get(n.kind, n.kind), "name": n.name}
            if n.kind == "buffer" and n.file:  # made when the model was built: where
                out.update(_where(n), op=n.op, when="when the model was built")
            break
        if n.kind == "attribute" or (n.kind == "tensor" and n.file):
            # made before the trace (the model's construction): where, where the tracker saw it
            out = {"kind": "attribute" if n.kind == "attribute" else "created", "name": n.name}
            if n.file:
                out.update(_where(n), op=n.op, when="when the model was built")
                _decided(out, n)
            break
        if n.kind == "cast":
            # a factory given a dtype (torch.zeros(..., dtype=d)) makes the tensor; a method casts one
            out = {"kind": "explicit_cast" if n.inputs else "created", "op": n.op}
            out.update(_where(n))
            _called_by(out, n)
            _decided(out, n)
            break
        if n.kind == "sink":
            out = {"kind": "attention_output", "op": n.op}
            break
        if n.kind == "tensor":
            out = {"kind": "tensor", "detail": "a %s tensor the trace did not see being made (before the "
                                               "forward, or by code torch does not report)" % n.dtype}
            break
        if n.promo:
            out = {"kind": "promotion", "op": n.op}
            out.update(_where(n))
            break
        # an empty operand (torch.cat's placeholder) widens nothing it joins: not an origin
        fp32_inputs = [i for i in n.inputs if same_width(i.dtype, n.dtype)]
        fp32_inputs = [i for i in fp32_inputs if not i.empty] or fp32_inputs
        if not fp32_inputs:
            out = {"kind": "created", "op": n.op}
            out.update(_where(n))
            _called_by(out, n)
            _decided(out, n)
            break
        if n.file and len(path) < _PATH_STEPS and (n.file, n.line) not in seen_lines:
            seen_lines.add((n.file, n.line))
            path.append(n)
        # Prefer a named parameter or buffer, then a direct cast (.float(), .to()) over one that
        # copies another tensor's dtype (type_as): it is what the user can change.
        n = min(fp32_inputs, key=_origin_rank)
    else:
        out = {"kind": "unknown"}
    if len(path) > 1:
        # the lines the wide value went through on its way from its origin (the one that keeps it
        # float32 is often where the fix goes: a table returned uncast), nearest the use first
        out["path"] = [dict(_where(step), op=step.op) for step in path]
    if first.kind == "op" and not first.promo:
        out["via"] = dict(_where(first), op=first.op)
    return out

def explain_sink(record):
    """Chains of promotions behind each fp32 input of a bad sink."""
    chains = {}
    eff = record.get("effective_dtypes") or {}
    model_dtype = next((eff[r] for r in ("v", "q", "k") if eff.get(r) in _HALF), None)
    for role, node in record["_nodes"].items():
        if node.dtype not in WIDE_NAMES:
            continue
        promos = promotions_behind(node)
        if promos:
            chains[role] = [chain_entry(p, model_dtype) for p in promos]
    return chains


_HALF = ("float16", "bfloat16")

# What an input can be wide since, where no implicit promotion made it so.
_ORIGIN_KINDS = ("explicit_cast", "created", "parameter", "buffer", "attribute", "input")


def wide_origins(record):
    """Where each wide q/k/v input of a bad call got its width when no implicit promotion did (an
    explicit ``.float()`` never cast back, a float32 tensor made there, a float32 parameter): one
    entry per place, with the roles it feeds."""
    merged = {}
    for role, node in record["_nodes"].items():
        if role not in ("q", "k", "v", "weights", "a", "b") or node.dtype not in WIDE_NAMES or promotions_behind(node):
            continue
        origin = origin_of(node)
        if origin.get("kind") not in _ORIGIN_KINDS:
            continue
        key = (origin.get("kind"), origin.get("name"), origin.get("file"), origin.get("line"), origin.get("op"))
        if key in merged:
            merged[key]["feeds"].append(role)
        else:
            merged[key] = dict(origin, dtype=node.dtype, feeds=[role])
    return list(merged.values())


def chain_entry(n, model_dtype=None):
    """One promotion of a chain: the op, where, and the operand that widened it. ``model_dtype``:
    the half dtype the model computes in (the one the call's other inputs kept), to tell which of
    two half operands (bf16 meeting fp16 gives fp32) is the stray one."""
    entry = {"op": n.op, "kind": n.promo, "dtype": n.dtype}
    entry.update(_where(n))
    entry["module_path"] = n.module
    fp32_inputs = [i for i in n.inputs if same_width(i.dtype, n.dtype)]
    if n.promo == "autocast":
        entry["operand"] = None
        entry["operand_origin"] = None
        entry["reason"] = "CUDA autocast runs %s in float32 (its half input comes out float32)" % n.op
    elif fp32_inputs:
        origins = [(i, origin_of(i)) for i in fp32_inputs]
        ranked = [p for p in origins if p[1]["kind"] in ("parameter", "buffer", "attribute", "explicit_cast",
                                                          "created", "input")] or origins
        operand, origin = ranked[0]
        entry["operand"] = _operand_label(operand, origin, n.line)
        entry["operand_origin"] = _without_named_lines(origin, (n.file, n.line))
        if n.promo:
            entry["reason"] = ("a narrower tensor meets a %s operand; type promotion makes the result %s"
                               % (n.dtype, n.dtype))
        else:
            entry["kind"] = "fp32_operand"
            entry["reason"] = ("combines the promoted tensor with a %s operand: this op alone would "
                               "promote a half-precision input too" % n.dtype)
    else:
        halves = sorted({i.dtype for i in n.inputs if i.dtype in _HALF})
        stray = [i for i in n.inputs if i.dtype in _HALF and i.dtype != model_dtype] if len(halves) == 2 else []
        if stray:
            operand = stray[0]
            origin = origin_of(operand)
            entry["operand"] = _operand_label(operand, origin, n.line)
            entry["operand_origin"] = origin
            entry["operand_dtype"] = operand.dtype
            entry["reason"] = ("%s meets a %s operand: type promotion of bfloat16 and float16 gives %s"
                               % (model_dtype, operand.dtype, n.dtype))
        else:
            entry["operand"] = None
            entry["operand_origin"] = None
            entry["reason"] = "the op returns %s from a narrower input" % n.dtype
    return entry


def _origin_rank(n):
    if n.kind in ("param", "buffer", "attribute"):
        return 0
    if n.kind == "cast":
        return 2 if n.op == "Tensor.type_as" else 1
    if n.kind == "input":
        return 3
    if n.kind == "tensor":
        return 5  # made before the trace saw it: the path through the ops it did see says more
    return 4


def _source(file, line):
    if not file or not line:
        return None
    text = linecache.getline(file, line)
    return text.strip() or None


def _called_by(out, n):
    """The calls that led to a cast or a tensor made in a helper function: the model's lines that
    called it, innermost first (what a fix may change instead of the helper)."""
    if n.stack:
        out["called_by"] = [{"file": f, "line": ln, "source": _source(f, ln)} for f, ln in n.stack]


def _decided(out, n):
    """The line that chose the dtype the tensor was made or cast with, where a variable held it."""
    found = decided_at(n.file, n.line, n.stack or ())
    if found is not None and (found["file"], found["line"]) != (n.file, n.line):
        out["decided"] = found


def _without_named_lines(origin, promoting):
    """The origin with its path cut to the lines the finding does not already name (the promoting
    line, the origin's own), and without a path where none is left."""
    path = origin.get("path")
    if not path:
        return origin
    named = {promoting, (origin.get("file"), origin.get("line"))}
    kept = [p for p in path if (p.get("file"), p.get("line")) not in named]
    out = dict(origin)
    if kept:
        out["path"] = kept
    else:
        out.pop("path")
    return out


def _where(n):
    return {"file": n.file, "line": n.line, "source": _source(n.file, n.line)}


def _operand_label(node, origin, promoting_line=None):
    if node.kind in ("param", "buffer", "input", "attribute") and node.name:
        return node.name
    m = _ASSIGN.match(linecache.getline(node.file, node.line) or "") if node.file and node.line else None
    if m and node.line != (promoting_line or -1):
        return m.group(1)
    if origin.get("name"):
        return origin["name"]
    m = _ASSIGN.match(linecache.getline(origin["file"], origin["line"]) or "") if origin.get("line") else None
    if m and origin["line"] != promoting_line:  # on the promoting line the name is the result's
        return m.group(1)
    if origin.get("kind") == "explicit_cast":
        return "the result of %s (%s since %s at line %s)" % (node.op, node.dtype, origin.get("op"), origin.get("line"))
    return "the result of %s" % node.op


def misshapen_mask(record, nodes, made_at):
    """Where the mask an attention call refused was made (``nodes``: the tracer's floating tensors' nodes,
    ``made_at``: its boolean ones' makers), when its shape does not broadcast to
    the call's [batch, heads, q_len, kv_len]: the line a user changes is its maker's."""
    import torch

    q, k = record["_nodes"].get("q"), record["_nodes"].get("k")
    shapes = record.get("inputs") or {}
    qs, ks = (shapes.get("q") or {}).get("shape"), (shapes.get("k") or {}).get("shape")
    if q is None or k is None or not qs or not ks or len(qs) != 4 or len(ks) != 4:
        return None
    expected = (qs[0], qs[1], qs[2], ks[2]) if record.get("layout", "").startswith("B,H") else None
    for role, t in (record.get("_extra") or {}).items():
        if "mask" not in role and "bias" not in role:
            continue
        try:
            if expected is not None:
                torch.broadcast_shapes(tuple(t.shape), expected)
            continue  # it broadcasts: not the mask's shape
        except RuntimeError:
            pass
        node = nodes.get(t) if t.is_floating_point() else made_at.get(t)
        site = (node.file, node.line, tuple(node.stack or ())) if node is not None and node.file else None
        out = {"role": role, "shape": [int(x) for x in t.shape], "dtype": dtype_name(t.dtype),
               "expected": list(expected) if expected else None}
        if site is not None:
            out.update(file=site[0], line=site[1], called_by=[{"file": f, "line": ln} for f, ln in site[2]])
        return out
    return None
