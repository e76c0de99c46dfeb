"""Provenance: from a wide (float32, float64) input of an attention call back through the op graph
the tracer kept (nodes.py) to the implicit promotions it went through, and from each wide operand
to what made it wide (a parameter, a buffer, an input, an explicit cast, a tensor made there).
Reads the nodes only; the tracer's report (report.py) calls ``explain_sink`` for each bad call."""

from __future__ import annotations

import linecache
import re

from .nodes import WIDE_NAMES

_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*)\s*(?::[^=]*)?=(?!=)")


def promotions_behind(start, budget=20000):
    """The implicit promotions a float32 tensor went through, oldest first."""
    found, mixed, stack, seen = [], [], [start], set()
    while stack and budget > 0:
        n = stack.pop()
        budget -= 1
        if id(n) in seen:
            continue
        seen.add(id(n))
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

def origin_of(n, limit=200):
    """Follow a float32 (or float64) operand back to what made it that wide."""
    first = n
    while limit > 0:
        limit -= 1
        if n.kind in ("param", "buffer", "input"):
            out = {"kind": {"param": "parameter"}.get(n.kind, n.kind), "name": n.name}
            break
        if n.kind == "cast":
            out = {"kind": "explicit_cast", "op": n.op}
            out.update(_where(n))
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
        fp32_inputs = [i for i in n.inputs if i.dtype == n.dtype]
        if not fp32_inputs:
            out = {"kind": "created", "op": n.op}
            out.update(_where(n))
            break
        # Prefer a named parameter or buffer, then a direct cast (.float(), .to()) over one that
        # copies another tensor's dtype (type_as): it is what the user can change.
        n = min(fp32_inputs, key=_origin_rank)
    else:
        out = {"kind": "unknown"}
    if first.kind == "op" and not first.promo:
        out["via"] = dict(_where(first), op=first.op)
    return out

def explain_sink(record):
    """Chains of promotions behind each fp32 input of a bad sink."""
    chains = {}
    for role, node in record["_nodes"].items():
        if node.dtype not in WIDE_NAMES:
            continue
        promos = promotions_behind(node)
        if promos:
            chains[role] = [chain_entry(p) for p in promos]
    return chains

def chain_entry(n):
    entry = {"op": n.op, "kind": n.promo, "dtype": n.dtype}
    entry.update(_where(n))
    entry["module_path"] = n.module
    fp32_inputs = [i for i in n.inputs if i.dtype == n.dtype]
    if n.promo == "autocast":
        entry["operand"] = None
        entry["operand_origin"] = None
        entry["reason"] = "CUDA autocast runs %s in float32 (its half input comes out float32)" % n.op
    elif fp32_inputs:
        origins = [(i, origin_of(i)) for i in fp32_inputs]
        ranked = [p for p in origins if p[1]["kind"] in ("parameter", "buffer", "explicit_cast", "created",
                                                          "input")] or origins
        operand, origin = ranked[0]
        entry["operand"] = _operand_label(operand, origin, n.line)
        entry["operand_origin"] = origin
        if n.promo:
            entry["reason"] = ("a narrower tensor meets a %s operand; type promotion makes the result %s"
                               % (n.dtype, n.dtype))
        else:
            entry["kind"] = "fp32_operand"
            entry["reason"] = ("combines the promoted tensor with a %s operand: this op alone would "
                               "promote a half-precision input too" % n.dtype)
    else:
        entry["operand"] = None
        entry["operand_origin"] = None
        entry["reason"] = "the op returns %s from a narrower input" % n.dtype
    return entry


def _origin_rank(n):
    if n.kind in ("param", "buffer"):
        return 0
    if n.kind == "cast":
        return 2 if n.op == "Tensor.type_as" else 1
    if n.kind == "input":
        return 3
    return 4


def _source(file, line):
    if not file or not line:
        return None
    text = linecache.getline(file, line)
    return text.strip() or None


def _where(n):
    return {"file": n.file, "line": n.line, "source": _source(n.file, n.line)}


def _operand_label(node, origin, promoting_line=None):
    if node.kind in ("param", "buffer", "input") and node.name:
        return node.name
    m = _ASSIGN.match(linecache.getline(node.file, node.line) or "") if node.file and node.line else None
    if m and node.line != (promoting_line or -1):
        return m.group(1)
    if origin.get("name"):
        return origin["name"]
    m = _ASSIGN.match(linecache.getline(origin["file"], origin["line"]) or "") if origin.get("line") else None
    if m:
        return m.group(1)
    if origin.get("kind") == "explicit_cast":
        return "the result of %s (float32 since %s at line %s)" % (node.op, origin.get("op"), origin.get("line"))
    return "the result of %s" % node.op
