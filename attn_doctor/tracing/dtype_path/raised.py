"""The forward pass raised: where in the model's code (the innermost frame that is neither torch's
nor the doctor's), in which op, with which operands (shape and dtype of each), and the operand that
does not fit walked back to the line that made it: for a dtype mismatch the line that made it (or
chose) its dtype, for a shape mismatch the line that built its shape (a mask made from the cache
length instead of the query length). A crash is what users meet first; named at its line it is a
finding like any other (AD621).

The tracer calls ``note_op_raise`` when an op it runs raises (its operands are at hand there); for
an exception raised by Python itself (an ``assert``, a ``KeyError`` in the model's code) the
tensors named on the raising line are read from that frame's locals. ``raise_record`` turns
either into a record the report builds a finding from."""

from __future__ import annotations

import ast
import inspect
import linecache
import re

import torch

from ..calls.nodes import HALF_DTYPES, dtype_name
from .words import loc as _loc, promotion_text

# "The size of tensor a (16) must match the size of tensor b (9) at non-singleton dimension 3"
_BROADCAST = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                        r"dimension (\d+)")
_SHAPE_WORDS = ("size of tensor", "shape", "must match the size", "cannot be multiplied", "is invalid for input of size",
                "broadcast", "dimension", "Sizes of tensors must match", "expected size")
_DTYPE_WORDS = ("dtype", "scalar type", "same type", "Expected object of scalar type", "to be equal to src",
                "m1 and m2", "found Float", "found Half", "found BFloat16", "but found", "without overflow")
_MAX_OPERANDS = 4


# an op that takes integers (an index, an int64 accumulator) was given a floating tensor
_INDEX_WORDS = ("used as indices must be long", "can't be cast to the desired output type Long",
                "can't be cast to the desired output type Int", "expected scalar type Long",
                "index_select(): Expected dtype int", "Expected dtype int64 for index", "must be a LongTensor")


def _kind(message):
    """"index", "dtype", "shape" or None: what the message says does not fit."""
    if any(w in message for w in _INDEX_WORDS) or _NOT_IMPLEMENTED.search(message):
        return "index"  # integers or booleans wanted (an index, a bitwise op), a floating tensor given
    if any(w in message for w in _DTYPE_WORDS):
        return "dtype"
    if any(w in message for w in _SHAPE_WORDS):
        return "shape"
    return None


def _parameter_names(func):
    """The names of an op's parameters (input, other, index, src, mask, ...), from torch's own
    table of its functions' signatures; () where it has none."""
    try:
        fake = torch.overrides.get_testing_overrides().get(func)
        return tuple(inspect.signature(fake).parameters) if fake is not None else ()
    except (TypeError, ValueError, AttributeError):
        return ()


def _tensor_operands(func, args, kwargs):
    """[(label, tensor)] of an op's tensor arguments, each labelled with its parameter's name."""
    names = _parameter_names(func) if func is not None else ()
    out = []
    for i, a in enumerate(args):
        label = names[i] if i < len(names) else "arg%d" % i
        if label == "self":
            label = "input"
        if isinstance(a, torch.Tensor):
            out.append((label, a))
        elif isinstance(a, (list, tuple)):
            out.extend(("%s[%d]" % (label, j), b) for j, b in enumerate(a[:8]) if isinstance(b, torch.Tensor))
    for k, v in (kwargs or {}).items():
        if isinstance(v, torch.Tensor):
            out.append((k, v))
    return out[:_MAX_OPERANDS]


def note_op_raise(tracer, func, args, kwargs, exc):
    """An op the tracer ran raised ``exc``: keep where and with what (the first time only: the op
    that raised first is the innermost, later frames re-raise it)."""
    if tracer.raised is not None or tracer.in_sink:
        return
    file, line = tracer.caller()
    tracer.raised = {
        "exc": exc, "op": tracer.display(func), "file": file, "line": line, "callers": tracer.callers(),
        "module_path": tracer.current_module(),
        "operands": [(label, _describe(tracer, t, line)) for label, t in _tensor_operands(func, args, kwargs)],
    }


_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9.]*)\s*(?::[^=]*)?=(?!=)")


def _describe(tracer, t, at_line=None):
    # a weight or buffer no op read before this one has its node made here (its name, where it was made)
    node = (tracer.node_of(t) if id(t) in tracer.names else tracer.nodes.get(t)) if (
        t.is_floating_point() or t.is_complex()) else tracer.made_at.get(t)
    name = (tracer.names.get(id(t)) or (None, None))[1]
    if name is None and node is not None and node.file and node.line != at_line:
        # the variable the line that made it assigns (`mask = torch.full(...)`)
        m = _ASSIGN.match(linecache.getline(node.file, node.line) or "")
        name = m.group(1) if m else None
    return {"dtype": dtype_name(t.dtype), "shape": [int(x) for x in t.shape], "node": node, "name": name,
            "mask": tracer.masks.of(t) is not None or t.dtype == torch.bool}


def _python_raise(tracer, exc):
    """For an exception Python raised in the model's code: the innermost model frame of its
    traceback, and the tensors that line names (read from the frame's locals)."""
    tb, frame = exc.__traceback__, None
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not tracer._internal.get(fn, tracer._is_internal(fn)):
            frame = (tb.tb_frame, tb.tb_lineno)
        tb = tb.tb_next
    if frame is None:
        return None
    f, line = frame
    file = f.f_code.co_filename
    operands = []
    for name in _names_on_line(file, line):
        value = _lookup(f, name)
        if isinstance(value, torch.Tensor) and len(operands) < _MAX_OPERANDS:
            info = _describe(tracer, value, line)
            info["name"] = name
            operands.append((name, info))
    statement = linecache.getline(file, line).strip()
    return {"exc": exc, "op": "`%s`" % (statement if len(statement) <= 80 else statement[:77] + "..."),
            "file": file, "line": line, "callers": [], "module_path": tracer.current_module(), "operands": operands,
            "python": True, "statement": statement}


def _names_on_line(file, line):
    """The names and attribute chains (``q``, ``self.cache_k``) the statement at ``line`` reads."""
    source = linecache.getline(file, line).strip()
    if not source:
        return []
    try:
        tree = ast.parse(source.rstrip(":") if source.endswith(":") else source)
    except SyntaxError:
        try:
            tree = ast.parse(source.rstrip(":") + ": pass")
        except SyntaxError:
            return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, n = [node.attr], node.value
            while isinstance(n, ast.Attribute):
                chain.append(n.attr)
                n = n.value
            if isinstance(n, ast.Name):
                names.append(".".join([n.id] + chain[::-1]))
        elif isinstance(node, ast.Name):
            names.append(node.id)
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def _lookup(frame, dotted):
    parts = dotted.split(".")
    if parts[0] not in frame.f_locals:
        return None
    value = frame.f_locals[parts[0]]
    for p in parts[1:]:
        try:
            value = getattr(value, p, None)
        except Exception:  # noqa: BLE001 - a property that raises
            return None
    return value


def raise_record(tracer, exc, expected_dtype=None):
    """The record of the forward pass's exception (an op's, or Python's in the model's code), with
    the operand that does not fit and the line that made it, or None where it was raised outside
    the model's code or by an attention call (AD607 has it)."""
    if getattr(tracer, "raised_at_sink", None) is exc:
        return None
    raised = tracer.raised if tracer.raised is not None and tracer.raised["exc"] is exc else None
    if raised is None:
        raised = _python_raise(tracer, exc)
    if raised is None or not raised.get("file") or (raised["file"], raised["line"]) in tracer.overflow_lines:
        return None  # a fill that overflows was named there already (AD623): one finding per cause
    if isinstance(exc, ImportError) or (isinstance(exc, TypeError) and "'NoneType' object is not callable" in str(exc)):
        return None  # a library not installed here (or a function its optional import left None): could not run
    from ..standins.registry import missing_library_read

    if missing_library_read(exc):
        return None  # a module its optional import left None (`xops.memory_efficient_attention`): likewise
    if _device_limit(str(exc)):
        return None  # the trace device has no kernel for it (half on CPU): the device's limit, not the model's
    text = str(exc).strip().splitlines()
    message = text[0][:400] if text else type(exc).__name__
    kind = _kind(message)
    if kind is None and raised.get("python"):
        # a bare `assert q.dtype == k.dtype`: what the statement compares says what does not fit
        statement = raised.get("statement") or ""
        kind = "dtype" if "dtype" in statement else ("shape" if re.search(r"\b(shape|size)\b", statement) else None)
    operands = raised["operands"]
    culprit = _culprit(kind, message, operands, expected_dtype or _model_dtype(tracer))
    roles = {}
    for i, (label, info) in enumerate(operands[:_MAX_OPERANDS]):
        roles["abcd"[i]] = (label, info)
    origins, chain = [], []
    if kind == "dtype" and culprit is not None and culprit[1]["node"] is not None:
        from .provenance import chain_entry, promotions_behind

        node = culprit[1]["node"]
        if node.dtype in ("float32", "float64"):
            peers = [i["dtype"] for lb, i in operands if i is not culprit[1] and i["dtype"] in ("float16", "bfloat16")]
            label = culprit[1].get("name") or culprit[0]
            chain = [dict(chain_entry(p, peers[0] if peers else None), feeds=[label])
                     for p in promotions_behind(node)]
    for role, (label, info) in roles.items():
        if chain and info is culprit[1]:
            continue  # its promotions say where it became wide
        if (culprit is not None and info is not culprit[1]) or (culprit is None and kind is None):
            continue
        origin = _origin(info, kind)
        if origin is not None:
            origin.update(feeds=[info.get("name") or label], role=role, dtype="%s%s" % (info["dtype"], info["shape"]))
            origins.append(origin)
    record = {
        "name": raised["op"], "family": "op", "layout": None, "file": raised["file"], "line": raised["line"],
        "module_path": raised.get("module_path"),
        "inputs": {role: {"dtype": info["dtype"], "shape": info["shape"], "name": info.get("name") or label}
                   for role, (label, info) in roles.items()},
        "effective_dtypes": {role: info["dtype"] for role, (label, info) in roles.items()},
        "autocast": None, "head_dim": None, "head_dim_v": None,
        "problems": [{"id": "AD621", "severity": "error", "check": "forward_raised", "kernel_message": message,
                      "mismatch": kind}],
        "via": None, "seq": tracer.seq, "_nodes": {}, "_origins": origins, "_chain": chain,
        "_culprit": (next((r for r, (lb, i) in roles.items() if culprit is not None and i is culprit[1]), None),
                     culprit[0] if culprit else None),
        "_labels": {role: (info.get("name") or label) for role, (label, info) in roles.items()},
        "raised_by": type(exc).__name__,
    }
    if raised.get("callers"):
        record["called_by"] = [{"file": f, "line": ln} for f, ln in raised["callers"][:2]]
    return record


_NOT_IMPLEMENTED = re.compile(r"not implemented for '([A-Za-z]+)'")


def _device_limit(text):
    """The trace device has no kernel for the op in this dtype (a half op on the CPU, an op meta does
    not carry): not the model's fault. An op with no kernel for float32 or an integer dtype has none
    on any device (bitwise_and of a float mask): the model's."""
    if "Could not run" in text:
        return True
    m = _NOT_IMPLEMENTED.search(text)
    return bool(m) and m.group(1) in ("Half", "BFloat16", "ComplexHalf", "Float8_e4m3fn", "Float8_e5m2")


def _model_dtype(tracer):
    """The floating dtype most of the model's parameters have (what its activations are in)."""
    counts = getattr(tracer, "param_dtypes", None) or {}
    return max(counts, key=counts.get) if counts else None


def _culprit(kind, message, operands, expected_dtype):
    """(label, info) of the operand that does not fit, or None where the operands cannot tell."""
    if len(operands) < 1:
        return None
    if kind == "dtype":
        floating = ("float32", "float64", "float16", "bfloat16")
        operands = [(lb, i) for lb, i in operands if i["dtype"] in floating] or operands
        dtypes = [info["dtype"] for _, info in operands]
        if expected_dtype:
            off = [(lb, i) for lb, i in operands if i["dtype"] != expected_dtype and i["dtype"] in
                   ("float32", "float64", "float16", "bfloat16")]
            if len(off) == 1:
                return off[0]
        counts = {d: dtypes.count(d) for d in dtypes}
        rare = [(lb, i) for lb, i in operands if counts[i["dtype"]] == 1]
        if len(rare) == 1 and len(operands) > 2:
            return rare[0]
        if len(operands) >= 2 and "without overflow" not in message:
            # a half activation and a wider table or cache: the wider one was made in another dtype
            wide = [(lb, i) for lb, i in operands if i["dtype"] in ("float32", "float64")]
            half = [(lb, i) for lb, i in operands if i["dtype"] in ("float16", "bfloat16")]
            if len(wide) == 1 and half:
                return wide[0]
        return operands[0] if len(operands) == 1 else None
    if kind == "index":
        # the floating one of the operands that should hold integers (past the tensor indexed, first)
        floating = [(lb, i) for lb, i in operands if i["dtype"] in ("float32", "float64", "float16", "bfloat16")]
        if len(floating) > 1 and floating[0][1] is operands[0][1]:
            floating = floating[1:]
        return floating[0] if floating else None
    if kind == "shape" and len(operands) >= 2:
        m = _BROADCAST.search(message)
        pair = operands[:2]
        masks = [(lb, i) for lb, i in pair if i["mask"]]
        if len(masks) == 1:
            return masks[0]
        # the operand made from sizes (a factory, an arange) rather than from the model's inputs
        made = [(lb, i) for lb, i in pair if _made_from_sizes(i["node"])]
        if len(made) == 1:
            return made[0]
        if m:
            return None
    return None


_FACTORY_OPS = ("torch.full", "torch.ones", "torch.zeros", "torch.empty", "torch.arange", "torch.tensor",
                "torch.tril", "torch.triu", "Tensor.new_ones", "Tensor.new_zeros", "Tensor.new_full")


def _made_from_sizes(node, depth=12):
    """True where a tensor's history reaches a factory (full, ones, arange, ...) and no input or
    parameter: a tensor built from sizes, as masks and position tables are."""
    seen, stack, factory = set(), [(node, 0)], False
    while stack:
        n, d = stack.pop()
        if n is None or id(n) in seen or d > depth:
            continue
        seen.add(id(n))
        if n.kind in ("input", "param"):
            return False
        if n.op in _FACTORY_OPS or (n.kind in ("op", "cast") and not n.inputs and n.file):
            factory = True
        stack.extend((i, d + 1) for i in n.inputs)
    return factory


def _origin(info, kind):
    """Where an operand was made: for its dtype, what made it that wide or narrow (provenance's
    origin); for its shape, the lines that built it, from its maker to the op."""
    node = info.get("node")
    if node is None:
        name = info.get("name")
        return {"kind": "input" if name else "tensor", "name": name} if name else None
    from .provenance import origin_of

    if kind in ("dtype", "index") and node.dtype in ("float32", "float64", "float16", "bfloat16"):
        out = origin_of(node)
        if out.get("kind") in ("promotion",):
            out["kind"] = "promotion"
        return out
    return shape_origin(node)


def shape_origin(node, limit=64):
    """The line that made a tensor, followed back through the ops that kept or changed its shape to
    the op that first made it (a factory, a slice, a view of another size), with the lines it
    passed through (nearest the use first)."""
    path, first = [], node
    n = node
    while limit > 0 and n is not None:
        limit -= 1
        if n.kind in ("param", "buffer", "input", "attribute") and not n.file:
            return {"kind": {"param": "parameter"}.get(n.kind, n.kind), "name": n.name}
        if n.file and (not path or (path[-1].file, path[-1].line) != (n.file, n.line)):
            path.append(n)
        if not n.inputs:
            break
        n = n.inputs[0]
    made = path[-1] if path else first
    if made is None or not made.file:
        return None
    out = {"kind": "created" if not made.inputs else "made", "op": made.op, "file": made.file, "line": made.line,
           "source": linecache.getline(made.file, made.line).strip() or None}
    if made.stack:
        out["called_by"] = [{"file": f, "line": ln, "source": linecache.getline(f, ln).strip() or None}
                            for f, ln in made.stack]
    if len(path) > 1:
        out["path"] = [{"file": p.file, "line": p.line, "op": p.op,
                        "source": linecache.getline(p.file, p.line).strip() or None} for p in path[:-1][:8]]
    return out


def is_half(dtype):
    return dtype in HALF_DTYPES


def where_text(record):
    """"at model.py:12 in Tensor.add (a float32[1, 4, 16, 16], b bool[1, 1, 9, 9])"."""
    ops = ", ".join("%s %s%s" % (role, i["dtype"], i["shape"]) for role, i in sorted(record["inputs"].items()))
    return "at %s in %s%s" % (_loc(record["file"], record["line"]), record["name"], " (%s)" % ops if ops else "")


def _origin_words(origin):
    """"made by torch.full at model.py:22 (through lines 23, 25)" / "the parameter scale"."""
    kind = origin.get("kind")
    if kind in ("parameter", "buffer", "input", "attribute") and not origin.get("line"):
        return "the %s %s" % (kind, origin.get("name"))
    if kind == "promotion":
        text = "promoted by %s at %s" % (origin.get("op"), _loc(origin.get("file"), origin.get("line")))
    elif kind == "explicit_cast":
        text = "cast by %s at %s" % (origin.get("op"), _loc(origin.get("file"), origin.get("line")))
    else:
        text = "made by %s at %s" % (origin.get("op"), _loc(origin.get("file"), origin.get("line")))
    if origin.get("when"):
        text += " " + origin["when"]
    if origin.get("called_by"):
        text += " (called from %s)" % ", ".join(_loc(c["file"], c["line"]) for c in origin["called_by"][:2])
    path = origin.get("path") or ()
    if path:
        same = all(p.get("file") == origin.get("file") for p in path)
        text += " (through line%s %s)" % ("s" if len(path) > 1 else "", ", ".join(
            str(p["line"]) if same else _loc(p.get("file"), p.get("line")) for p in path[:6]))
    decided = origin.get("decided")
    if decided:
        text += "; its dtype is chosen at %s: `%s`" % (_loc(decided["file"], decided["line"]),
                                                     decided.get("source") or decided.get("variable"))
    return text


def raised_message(record):
    """The finding's message: where, which op with which operands, the exception, and the operand
    that does not fit with the line that made it."""
    problem = record["problems"][0]
    ops = ", ".join("%s %s%s" % (i.get("name") or role, i["dtype"], i["shape"])
                    for role, i in sorted(record["inputs"].items()))
    said = problem["kernel_message"]
    text = "the forward pass raised at %s in %s%s: %s" % (
        _loc(record["file"], record["line"]), record["name"], " (%s)" % ops if ops else "",
        said if said == record.get("raised_by") else "%s: %s" % (record.get("raised_by") or "Error", said))
    culprit_role, culprit_label = record.get("_culprit") or (None, None)
    labels = record.get("_labels") or {}
    for origin in record.get("_origins") or ():
        role = origin["feeds"][0]
        head = "%s %s" % (labels.get(role) or role, origin.get("dtype"))
        lead = "the operand that does not fit: " if role == culprit_role else ""
        text += "; %s%s is %s" % (lead, head, _origin_words(origin))
    chain = record.get("_chain") or ()
    if chain:
        label = (record.get("_culprit") or (None, None))[1]
        culprit = (record.get("_labels") or {}).get((record.get("_culprit") or (None,))[0]) or label
        text += "; %s %s" % (culprit, promotion_text(chain))
    return text


def raised_fix(record):
    """What to change, in words, for the operand that does not fit."""
    problem = record["problems"][0]
    role = (record.get("_culprit") or (None,))[0]
    origins = [o for o in record.get("_origins") or () if role is None or o["role"] == role]
    chain = record.get("_chain") or ()
    if chain and problem.get("mismatch") == "dtype":
        head = chain[0]
        label = (record.get("_labels") or {}).get(role) or role
        return ("keep %s in the model's half dtype: cast the result of %s at %s back (.to(x.dtype)), or make its "
                "wider operand in the model's dtype" % (label, head["op"], _loc(head["file"], head["line"])))
    if not origins or not origins[0].get("line"):
        return None
    origin = origins[0]
    where = _loc(origin["file"], origin["line"])
    decided = origin.get("decided")
    other = [r for r in record["inputs"] if r != role]
    label = (record.get("_labels") or {}).get(role) or role
    if problem.get("mismatch") == "dtype" and role:
        floating = [r for r in other if record["inputs"][r]["dtype"] in ("float16", "bfloat16", "float32", "float64")]
        if not floating:
            return None
        peer = floating[0]
        return ("make %s %s where it is made (%s%s), or cast it with .to(%s.dtype) before this op" % (
            label, record["inputs"][peer]["dtype"], where,
            "; the dtype is chosen at %s" % _loc(decided["file"], decided["line"]) if decided else "",
            record["inputs"][peer].get("name") or peer))
    if problem.get("mismatch") == "index" and role:
        return "keep %s an integer or boolean tensor where it is made (%s): an index, a position, a count or a " \
               "mask is not cast to a floating dtype" % (label, where)
    if problem.get("mismatch") == "shape" and role:
        target = record["inputs"][other[0]]["shape"] if other else None
        return "build %s with a shape that broadcasts to %s where it is made (%s)" % (label, target, where)
    return None
