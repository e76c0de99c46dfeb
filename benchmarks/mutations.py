"""Generic single-line mutations of a model's source, at the sites near attention: the dtype and
precision faults a person writes by hand, in any codebase, found by the source's syntax tree (no
regex anchor of one written form).

A site is "near attention" when it is in a function or method that computes attention or feeds
it: one that calls scaled_dot_product_attention, softmax, matmul / ``@`` / bmm / baddbmm / einsum,
a flash-attn / xformers / flex / sage kernel, masked_fill, an attention interface; or one that
builds what attention reads (rotary, sinusoidal, timestep and position tables, masks, biases,
scales), or any method of a class whose name says it does (Attention, Rotary, Position, Embed,
Mask, Norm: the norms applied to q/k and to the hidden states that make them).

Kinds (each a change of one physical line; every other line is byte-identical and the file still
compiles):

  insert_cast            a tensor assigned (or returned) near attention gets ``.float()`` (it promotes:
                         activations, scores, masks) or ``.to(<half>)`` (tables, positions,
                         frequencies, scores: computed in the model's half dtype) appended
  drop_upcast            an upcast removed: ``.float()``, ``.double()``, ``.to(torch.float32)``,
                         ``.type(torch.float32)``, a ``dtype=torch.float32`` argument
  change_dtype_arg       a dtype argument changed: float32 -> an activation's dtype (or the half
                         dtype), an activation's / a dtype variable's dtype -> torch.float32,
                         ``.type_as(x)`` -> ``.float()``
  widen_fill             a fill or mask constant widened past what half holds: -1e4 / -10000 / -65504
                         -> -1e9, ``torch.finfo(x.dtype).min`` -> ``torch.finfo(torch.float32).min``
  bool_mask_to_numbers   a boolean mask used to mask turned into numbers added to the scores:
                         ``s.masked_fill(m, v)`` -> ``(s + m.to(s.dtype))``, ``torch.where(m, s, v)``
                         -> ``(s + m.to(s.dtype))``, ``attn_mask=m`` -> ``attn_mask=m.to(q.dtype)``, a
                         mask built ``dtype=torch.bool`` / ``.bool()`` made ``.float()``
  drop_contiguous        a ``.contiguous()`` removed (a kernel-choice change, seen on a GPU only unless
                         a later ``.view`` raises)

``<half>`` in a new line is the model's half dtype, filled in per run (``Mutation.render(dtype)``):
``torch.bfloat16`` or ``torch.float16`` (the module's own name for torch).

    python benchmarks/mutations.py --list path/to/modeling_x.py            # every mutation, in order
    python benchmarks/mutations.py --list FILE --kind widen_fill --json    # one kind, as JSON lines

Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import asdict, dataclass

KINDS = ("insert_cast", "drop_upcast", "change_dtype_arg", "widen_fill", "bool_mask_to_numbers", "drop_contiguous")
HALF = "<half>"
HALF_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "bfloat16": "bfloat16", "float16": "float16"}

# calls that compute attention (the last name of the callee)
ATTN_CALLS = frozenset((
    "scaled_dot_product_attention", "softmax", "log_softmax", "matmul", "bmm", "baddbmm", "einsum",
    "flash_attn_func", "flash_attn_varlen_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func", "flash_attn_with_kvcache",
    "memory_efficient_attention", "memory_efficient_attention_forward", "flex_attention", "sageattn",
    "masked_fill", "masked_fill_", "attention_interface", "eager_attention_forward", "sdpa_attention_forward",
    "flash_attention_forward", "_flash_attention_forward", "scaled_dot_product", "dot_product_attention",
))
# calls that build tables, masks and scales
TABLE_CALLS = frozenset((
    "arange", "cos", "sin", "exp", "pow", "outer", "tril", "triu", "finfo", "where", "rsqrt", "sqrt",
    "linspace", "logspace", "polar", "view_as_complex", "view_as_real", "full", "ones", "zeros", "cat", "stack",
    "log", "einsum", "ger", "masked_fill", "rms_norm", "layer_norm", "norm", "cumsum", "meshgrid",
))
# names of functions, classes and variables that say "this builds what attention reads"
NEAR_NAME = re.compile(r"rotary|rope|freq|sinus|timestep|time_?proj|time_?embed|position|pos_?emb|pos_?embed|"
                       r"_pos|pos_|alibi|relative|rel_?pos|theta|angle|inv_freq|mask|causal|attn|attention|"
                       r"norm|scal|bias|sincos|fourier|embed", re.I)
NEAR_CLASS = re.compile(r"Attention|Attn|Rotary|Rope|RoPE|Position|Positional|Embed|Mask|Norm|Sinus|Timestep|"
                        r"Relative|Alibi", re.I)

# variables whose value is a table (a cast to half loses its precision)
TABLE_NAME = re.compile(r"freq|theta|angle|cos|sin|emb|pos|rotary|rope|sinus|timestep|^t$|^ts$|inv|alibi|slope|"
                        r"table|period|exponent|phase|arange|^seq$|idx|index|sincos|fourier|args?$|grid|omega|"
                        r"rel|bucket|distance", re.I)
SCORES_NAME = re.compile(r"score|attn_?w|attn$|^attn_|weights|logits|sim$|dots|probs|^p_?attn|^w$|^a$|^s$|qk$|^qk",
                         re.I)
MASK_NAME = re.compile(r"mask|bias", re.I)
ACT_NAME = re.compile(r"^(x|h|hs|hidden|hidden_states?|q|k|v|qq|kk|vv|query|key|value|queries|keys|values|"
                      r"query_states|key_states|value_states|query_layer|key_layer|value_layer|xq|xk|xv|qkv|out|"
                      r"output|outputs|attn_output|context|context_layer|ctx|y|inputs?|input_tensor|tensor|"
                      r"embeddings|inputs_embeds|sample|latents?|img|q_embed|k_embed|q_rot|k_rot|q_pass|k_pass)$",
                      re.I)
NOT_TENSOR_NAME = re.compile(r"ids$|_ids_|^ids|indices|index$|idx$|token|loss|labels?$|shape|size|^dim$|_dim$|^dims?$|dtype|device|^n_|^num_|_len$|^len|^bsz$|batch_size|"
                             r"^b$|^nh$|^hd$|^seqlen|^seq_len|^tgt_len|^src_len|^kv_len|^q_len|_heads$|count|config|"
                             r"^is_|^use_|^has_|fused|flag|enable|^module$|^mod$|^self$|^layer$|^block$|name|layer_idx|^scale$|^scaling$|^eps$|^p$|^dropout|^training$",
                             re.I)
NOT_TENSOR_CALL = frozenset((
    "len", "int", "float", "bool", "str", "getattr", "isinstance", "hasattr", "range", "tuple", "list", "dict",
    "set", "super", "type", "min", "max", "abs", "round", "sum", "zip", "enumerate", "sorted", "next", "iter",
    "math", "item", "tolist", "size", "dim", "numel", "get", "pop", "format", "join", "split", "getLogger",
    "get_interface", "partial", "deepcopy", "copy", "any", "all", "callable", "id", "print", "logger", "warn",
    "warning", "ceil", "floor", "sqrt_", "log2", "is_tensor", "is_floating_point", "get_seq_length",
    "get_mask_sizes", "nullcontext", "autocast", "no_grad", "parameters", "buffers", "children", "modules",
))
TORCH_FUNCS = frozenset(("torch", "F", "nn", "functional", "fn", "th"))
# tensor methods: a value that calls one of these is a tensor
TENSOR_METHODS = frozenset((
    "view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand", "expand_as", "contiguous", "float",
    "half", "bfloat16", "to", "type_as", "matmul", "softmax", "cos", "sin", "exp", "flatten", "unflatten", "chunk",
    "masked_fill", "clone", "detach", "repeat", "repeat_interleave", "mul", "add", "sum", "mean", "pow", "sqrt",
    "rsqrt", "tril", "triu", "neg", "sigmoid", "tanh", "narrow", "split", "unbind", "new_zeros", "new_ones", "new_full",
    "new_tensor", "type", "double", "bool", "long", "int", "abs", "clamp", "clamp_min", "norm", "bmm", "cumsum", "cat",
))

CAST_METHODS_UP = ("float", "double")
F32_NAMES = ("float32", "float", "float64", "double")


@dataclass(frozen=True)
class Mutation:
    kind: str
    line: int           # 1-based line number of the changed line
    original: str       # the original line (no line ending)
    new: str            # the new line (no line ending); HALF stands for the model's half dtype
    description: str
    function: str = ""  # the enclosing function's qualified name
    col: int = 0        # the column (in characters) where the change starts

    def render(self, dtype="bf16", torch_name="torch"):
        """The new line with the half dtype filled in (``dtype``: bf16 / fp16)."""
        return self.new.replace(HALF, "%s.%s" % (torch_name, HALF_DTYPES[dtype]))

    @property
    def key(self):
        return "%s:%d:%d:%s" % (self.kind, self.line, self.col, self.new.strip()[:80])


def apply(source, mutation, dtype="bf16", torch_name=None):
    """``source`` with the mutation's line replaced (its line ending kept); every other line as it was."""
    lines = source.splitlines(keepends=True)
    old = lines[mutation.line - 1]
    body = old.rstrip("\r\n")
    if body != mutation.original:
        raise ValueError("line %d is not the line the mutation was made for" % mutation.line)
    ending = old[len(body):]
    lines[mutation.line - 1] = mutation.render(dtype, torch_name or torch_alias(source) or "torch") + ending
    return "".join(lines)


def torch_alias(source_or_tree):
    tree = ast.parse(source_or_tree) if isinstance(source_or_tree, str) else source_or_tree
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch":
                    return a.asname or "torch"
    for node in ast.walk(tree):  # an import inside a function or a try block
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch":
                    return a.asname or "torch"
    return None


# ---------------------------------------------------------------- helpers on the syntax tree

def _callee(call):
    """The last name of a call's function (``torch.nn.functional.softmax`` -> softmax)."""
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return None


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _own_nodes(func):
    """The nodes of ``func``'s body, not those of functions or classes defined inside it."""
    stack = list(func.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            stack.append(child)


def _functions(tree):
    """(qualified name, class name or None, function node) of every function, methods included."""
    out = []

    def walk(node, prefix, cls):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".", child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, cls, child))
                walk(child, prefix + child.name + ".", cls)
            else:
                walk(child, prefix, cls)

    walk(tree, "", None)
    return out


def _is_torch_dtype(node, names=F32_NAMES):
    """``torch.float32`` (or ``th.float``...) with its attribute in ``names``."""
    return isinstance(node, ast.Attribute) and node.attr in names and isinstance(node.value, ast.Name) and \
        node.value.id in ("torch", "th", "pt")


def _is_dtype_of(node):
    """``x.dtype`` / ``self.dtype`` / a variable named like a dtype (``input_dtype``)."""
    if isinstance(node, ast.Attribute) and node.attr == "dtype":
        return True
    return isinstance(node, ast.Name) and (node.id == "dtype" or node.id.endswith("_dtype"))


def near_attention(func, cls):
    """Why ``func`` is near attention (a short reason), or None."""
    own = list(_own_nodes(func))
    calls = [n for n in own if isinstance(n, ast.Call)]
    names = {_callee(c) for c in calls}
    hit = sorted(n for n in names if n in ATTN_CALLS)
    if hit:
        return "calls " + ", ".join(hit[:3])
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) for n in own):
        return "a matrix product (@)"
    if cls and NEAR_CLASS.search(cls):
        return "a method of %s" % cls
    tables = sorted(n for n in names if n in TABLE_CALLS)
    if tables and (NEAR_NAME.search(func.name) or any(
            isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and NEAR_NAME.search(n.id) for n in own)):
        return "builds a table or mask (%s)" % ", ".join(tables[:3])
    return None


def _mentions_tensor(node):
    """True where an expression is, by its words, a tensor: a torch call, a tensor method, a module
    call on self, or arithmetic on tensor-like names."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            name = _callee(n)
            if name in NOT_TENSOR_CALL:
                continue
            root = _root(n.func)
            if root in TORCH_FUNCS or name in TENSOR_METHODS:
                return True
            if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Call) and \
                    _callee(n.func.value) == "super":
                continue  # super().method(...): the module's own machinery
            if root == "self" and isinstance(n.func, ast.Attribute) and not name.startswith("_get"):
                return True
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            return True
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not n.id.isupper()]
    return bool(names) and any(ACT_NAME.match(x) or SCORES_NAME.search(x) or TABLE_NAME.search(x) or
                               MASK_NAME.search(x) for x in names if x not in ("self", "torch", "math"))


def _calls_torch(node):
    """True where the expression calls torch (``torch.*``, ``F.*``) or a tensor method."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            name = _callee(n)
            if _root(n.func) in TORCH_FUNCS or (name in TENSOR_METHODS and isinstance(n.func, ast.Attribute)):
                return True
    return False


def _not_tensor_value(node):
    if isinstance(node, (ast.Constant, ast.Compare, ast.BoolOp, ast.Lambda, ast.Dict, ast.List, ast.Tuple, ast.Set,
                         ast.JoinedStr, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.Starred,
                         ast.IfExp, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
        return True
    if isinstance(node, ast.Attribute) and node.attr in ("shape", "dtype", "device", "ndim", "T", "mT", "config",
                                                         "weight", "bias", "is_causal", "training"):
        return node.attr not in ("T", "mT", "weight", "bias")
    if isinstance(node, ast.Call):
        name = _callee(node)
        if name in NOT_TENSOR_CALL or name in ("size", "dim", "item", "tolist", "numel", "to_tuple") or (
                name and name.startswith(("use_", "is_", "has_", "should_", "get_config", "_use_", "_is_"))):
            return True
        if name and name[:1].isupper():
            return True  # a class constructed (a module, a config, a Parameter or Buffer)
        if isinstance(node.func, ast.Attribute) and _root(node.func) in ("math", "np", "numpy", "os", "re", "logger"):
            return True
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr in (
            "shape", "config"):
        return True
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return True  # kwargs["x"], a dict's entry
    return False


# ---------------------------------------------------------------- byte-exact editing of one line

class _Lines(object):
    def __init__(self, source):
        self.text = source.splitlines()
        self.raw = [t.encode("utf-8") for t in self.text]

    def seg(self, node):
        """The source text of a node on one line, or None where it spans lines."""
        if getattr(node, "lineno", None) is None or node.lineno != node.end_lineno:
            return None
        return self.raw[node.lineno - 1][node.col_offset:node.end_col_offset].decode("utf-8")

    def replace(self, line, start, end, text):
        """The line ``line`` with bytes [start, end) replaced by ``text``."""
        raw = self.raw[line - 1]
        return (raw[:start] + text.encode("utf-8") + raw[end:]).decode("utf-8")

    def col(self, line, byte_col):
        return len(self.raw[line - 1][:byte_col].decode("utf-8", "replace"))


_ATOMIC = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)


def _paren(node, text):
    return text if isinstance(node, _ATOMIC) else "(%s)" % text


def _target_name(target):
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript):
        return _target_name(target.value)
    return None


def _act_param(func):
    """The activation among the function's parameters (``x``, ``hidden_states``, ``query``), or None."""
    args = list(func.args.posonlyargs) + list(func.args.args) + list(func.args.kwonlyargs)
    for a in args:
        if a.arg in ("self", "cls"):
            continue
        if ACT_NAME.match(a.arg) and not a.arg.lower().startswith(("t", "input_ids")):
            return a.arg
    return None


# ---------------------------------------------------------------- the kinds

def _insert_cast(L, func, qual, torch_name):
    out = []
    for node in _own_nodes(func):
        pairs = []  # (name, value node)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, (ast.Name, ast.Attribute, ast.Subscript)):
                pairs.append((_target_name(t), node.value))
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                pairs.extend((_target_name(a), b) for a, b in zip(t.elts, node.value.elts))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs.append((_target_name(node.target), node.value))
        elif isinstance(node, ast.Return) and node.value is not None:
            vals = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for v in vals:
                base = v
                while isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute):
                    base = base.func.value
                pairs.append((_root(base) if not isinstance(base, ast.BinOp) else None, v))
        for name, value in pairs:
            if not name or NOT_TENSOR_NAME.search(name) or _not_tensor_value(value):
                continue
            if func.name == "__init__" and not _calls_torch(value):
                continue  # a constructor's option stored (a flag, a size, a scale), not a tensor
            if isinstance(value, ast.Call) and _callee(value) in ("chunk", "split", "unbind", "tensor_split",
                                                                  "split_with_sizes", "unflatten_tuple"):
                continue  # a tuple of tensors
            text = L.seg(value)
            if text is None or not _mentions_tensor(value):
                continue
            ends_up = isinstance(value, ast.Call) and _is_upcast(value) is not None
            ends_cast = isinstance(value, ast.Call) and _callee(value) in ("to", "type_as", "half", "bfloat16")
            is_table = bool(TABLE_NAME.search(name)) and not ACT_NAME.match(name)
            is_scores = bool(SCORES_NAME.search(name))
            is_mask = bool(MASK_NAME.search(name))
            casts = []
            if (not is_table or is_scores) and not ends_up:
                casts.append(("float", ".float()", "promotes %s to float32" % name))
            if (is_table or is_scores) and not is_mask and not ends_cast:
                if torch_name:
                    casts.append(("half", ".to(%s)" % HALF, "computes %s in the half dtype" % name))
            for _, suffix, what in casts:
                new = L.replace(value.lineno, value.col_offset, value.end_col_offset, _paren(value, text) + suffix)
                out.append(Mutation("insert_cast", value.lineno, L.text[value.lineno - 1], new,
                                    "%s: %s appended to %s" % (what, suffix, name), qual,
                                    L.col(value.lineno, value.end_col_offset)))
    return out


def _is_upcast(call):
    """(kind of upcast, text to keep) for ``x.float()`` / ``x.double()`` / ``x.to(torch.float32)`` /
    ``x.type(torch.float32)``, else None."""
    f = call.func
    if not isinstance(f, ast.Attribute):
        return None
    if f.attr in CAST_METHODS_UP and not call.args and not call.keywords:
        return "." + f.attr + "()"
    if f.attr in ("to", "type") and len(call.args) == 1 and not call.keywords and _is_torch_dtype(call.args[0]):
        return ".%s(%s)" % (f.attr, call.args[0].attr)
    if f.attr == "to" and not call.args and len(call.keywords) == 1 and call.keywords[0].arg == "dtype" and \
            _is_torch_dtype(call.keywords[0].value):
        return ".to(dtype=%s)" % call.keywords[0].value.attr
    return None


def _drop_keyword(L, call, kw):
    """The line with keyword ``kw`` of ``call`` removed (its comma too), or None where it spans lines."""
    if kw.lineno != kw.end_lineno:
        return None
    raw = L.raw[kw.lineno - 1]
    start, end = kw.col_offset, kw.end_col_offset
    items = sorted([a for a in call.args] + [k for k in call.keywords], key=lambda n: (n.lineno, n.col_offset))
    i = items.index(kw)
    if i > 0:
        prev = items[i - 1]
        if prev.end_lineno != kw.lineno:
            return None
        cut_from = prev.end_col_offset  # ", dtype=..." after the previous argument
        if b"," not in raw[cut_from:start]:
            return None
        return L.replace(kw.lineno, cut_from, end, "")
    if len(items) > 1:
        nxt = items[1]
        if nxt.lineno != kw.lineno:
            return None
        return L.replace(kw.lineno, start, nxt.col_offset, "")
    return L.replace(kw.lineno, start, end, "")


def _drop_upcast(L, func, qual):
    out = []
    for node in _own_nodes(func):
        if not isinstance(node, ast.Call):
            continue
        what = _is_upcast(node)
        if what is not None:
            value = node.func.value
            if value.end_lineno == node.end_lineno:
                new = L.replace(node.end_lineno, value.end_col_offset, node.end_col_offset, "")
                out.append(Mutation("drop_upcast", node.end_lineno, L.text[node.end_lineno - 1], new,
                                    "drops the upcast %s" % what, qual, L.col(node.end_lineno, value.end_col_offset)))
            continue
        for kw in node.keywords:
            if kw.arg == "dtype" and _is_torch_dtype(kw.value):
                new = _drop_keyword(L, node, kw)
                if new is not None:
                    out.append(Mutation("drop_upcast", kw.lineno, L.text[kw.lineno - 1], new,
                                        "drops dtype=%s from %s(...)" % (kw.value.attr, _callee(node)), qual,
                                        L.col(kw.lineno, kw.col_offset)))
    return out


def _change_dtype_arg(L, func, qual, torch_name):
    out = []
    act = _act_param(func)
    for node in _own_nodes(func):
        if not isinstance(node, ast.Call):
            continue
        slots = [kw.value for kw in node.keywords if kw.arg == "dtype"]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "type") and node.args:
            slots.append(node.args[0])
        for val in slots:
            if val.lineno != val.end_lineno:
                continue
            if _is_torch_dtype(val):
                if act and act not in ("t",):
                    to, why = act + ".dtype", "%s.dtype" % act
                elif torch_name:
                    to, why = HALF, "the half dtype"
                else:
                    continue
                new = L.replace(val.lineno, val.col_offset, val.end_col_offset, to)
                out.append(Mutation("change_dtype_arg", val.lineno, L.text[val.lineno - 1], new,
                                    "%s(...): %s -> %s" % (_callee(node), val.attr, why), qual,
                                    L.col(val.lineno, val.col_offset)))
            elif _is_dtype_of(val) and torch_name:
                new = L.replace(val.lineno, val.col_offset, val.end_col_offset, "%s.float32" % torch_name)
                out.append(Mutation("change_dtype_arg", val.lineno, L.text[val.lineno - 1], new,
                                    "%s(...): %s -> torch.float32" % (_callee(node), L.seg(val)), qual,
                                    L.col(val.lineno, val.col_offset)))
        if isinstance(node.func, ast.Attribute) and node.func.attr == "type_as" and len(node.args) == 1 and \
                node.func.value.end_lineno == node.end_lineno:
            new = L.replace(node.end_lineno, node.func.value.end_col_offset, node.end_col_offset, ".float()")
            out.append(Mutation("change_dtype_arg", node.end_lineno, L.text[node.end_lineno - 1], new,
                                ".type_as(%s) -> .float()" % L.seg(node.args[0]), qual,
                                L.col(node.end_lineno, node.func.value.end_col_offset)))
    return out


FILL_CONSTANTS = (1e4, 1e5, 3e4, 65504.0, 65500.0, 32752.0, 32767.0, 5e4, 6e4)


def _widen_fill(L, func, qual, torch_name):
    out = []
    for node in _own_nodes(func):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool) \
                and float(node.operand.value) in FILL_CONSTANTS and node.lineno == node.end_lineno:
            new = L.replace(node.lineno, node.col_offset, node.end_col_offset, "-1e9")
            out.append(Mutation("widen_fill", node.lineno, L.text[node.lineno - 1], new,
                                "fill %s -> -1e9 (past what float16 holds)" % L.seg(node), qual,
                                L.col(node.lineno, node.col_offset)))
        elif isinstance(node, ast.Call) and _callee(node) == "finfo" and len(node.args) == 1 and torch_name \
                and not _is_torch_dtype(node.args[0], ("float32", "float", "float64", "double")) \
                and node.args[0].lineno == node.args[0].end_lineno:
            arg = node.args[0]
            new = L.replace(arg.lineno, arg.col_offset, arg.end_col_offset, "%s.float32" % torch_name)
            out.append(Mutation("widen_fill", arg.lineno, L.text[arg.lineno - 1], new,
                                "torch.finfo(%s) -> torch.finfo(torch.float32)" % L.seg(arg), qual,
                                L.col(arg.lineno, arg.col_offset)))
    return out


def _as_numbers(mask_node, mask_text, like_text):
    return "%s.to(%s.dtype)" % (_paren(mask_node, mask_text), like_text)


def _bool_mask_to_numbers(L, func, qual):
    out = []
    for node in _own_nodes(func):
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name in ("masked_fill", "masked_fill_") and isinstance(node.func, ast.Attribute) and \
                    len(node.args) == 2 and node.lineno == node.end_lineno:
                s_node, m_node = node.func.value, node.args[0]
                s, m = L.seg(s_node), L.seg(m_node)
                if s is None or m is None:
                    continue
                if name == "masked_fill":
                    text = "(%s + %s)" % (_paren(s_node, s), _as_numbers(m_node, m, _paren(s_node, s)))
                else:
                    text = "%s.add_(%s)" % (_paren(s_node, s), _as_numbers(m_node, m, _paren(s_node, s)))
                new = L.replace(node.lineno, node.col_offset, node.end_col_offset, text)
                out.append(Mutation("bool_mask_to_numbers", node.lineno, L.text[node.lineno - 1], new,
                                    "%s(%s, ...) -> the mask added to %s as numbers" % (name, m, s), qual,
                                    L.col(node.lineno, node.col_offset)))
            elif name == "where" and _root(node.func) in ("torch", "th") and len(node.args) == 3 and \
                    node.lineno == node.end_lineno:
                m_node, a, b = node.args
                m = L.seg(m_node)
                const_a = isinstance(a, (ast.Constant, ast.UnaryOp)) or _callee(a) == "float" if isinstance(
                    a, ast.Call) else isinstance(a, (ast.Constant, ast.UnaryOp))
                const_b = isinstance(b, (ast.Constant, ast.UnaryOp)) or (isinstance(b, ast.Attribute) and
                                                                         b.attr in ("min", "max", "inf"))
                if not const_a and const_b:
                    s = L.seg(a)
                    text = "(%s + %s)" % (_paren(a, s), _as_numbers(m_node, m, _paren(a, s)))
                    why = "torch.where(%s, %s, ...) -> the mask added to %s as numbers" % (m, s, s)
                elif const_a and not const_b and not isinstance(b, ast.Attribute):
                    s = L.seg(b)
                    text = "(%s + %s)" % (_paren(b, s), _as_numbers(m_node, m, _paren(b, s)))
                    why = "torch.where(%s, ..., %s) -> the mask added to %s as numbers" % (m, s, s)
                else:
                    text = "%s.float()" % _paren(m_node, m)
                    why = "torch.where(%s, ...) -> the boolean mask itself, as float numbers" % m
                new = L.replace(node.lineno, node.col_offset, node.end_col_offset, text)
                out.append(Mutation("bool_mask_to_numbers", node.lineno, L.text[node.lineno - 1], new, why, qual,
                                    L.col(node.lineno, node.col_offset)))
            elif name == "scaled_dot_product_attention" and node.args:
                q = L.seg(node.args[0])
                mask = next((kw.value for kw in node.keywords if kw.arg == "attn_mask"), None)
                if mask is None and len(node.args) >= 4:
                    mask = node.args[3]
                if q is None or mask is None or (isinstance(mask, ast.Constant) and mask.value is None):
                    continue
                m = L.seg(mask)
                if m is None:
                    continue
                new = L.replace(mask.lineno, mask.col_offset, mask.end_col_offset,
                                _as_numbers(mask, m, _paren(node.args[0], q)))
                out.append(Mutation("bool_mask_to_numbers", mask.lineno, L.text[mask.lineno - 1], new,
                                    "attn_mask %s given as numbers in q's dtype" % m, qual,
                                    L.col(mask.lineno, mask.col_offset)))
            elif name == "bool" and isinstance(node.func, ast.Attribute) and not node.args and \
                    node.func.value.end_lineno == node.end_lineno:
                new = L.replace(node.end_lineno, node.func.value.end_col_offset, node.end_col_offset, ".float()")
                out.append(Mutation("bool_mask_to_numbers", node.end_lineno, L.text[node.end_lineno - 1], new,
                                    "a mask made .bool() -> .float() (numbers)", qual,
                                    L.col(node.end_lineno, node.func.value.end_col_offset)))
            for kw in node.keywords:
                if kw.arg == "dtype" and _is_torch_dtype(kw.value, ("bool",)) and kw.value.lineno == kw.value.end_lineno:
                    new = L.replace(kw.value.lineno, kw.value.col_offset, kw.value.end_col_offset,
                                    "%s.float32" % kw.value.value.id)
                    out.append(Mutation("bool_mask_to_numbers", kw.value.lineno, L.text[kw.value.lineno - 1], new,
                                        "%s(..., dtype=torch.bool) -> dtype=torch.float32 (a mask of numbers)"
                                        % _callee(node), qual, L.col(kw.value.lineno, kw.value.col_offset)))
    return out


def _drop_contiguous(L, func, qual):
    out = []
    for node in _own_nodes(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "contiguous" \
                and not node.args and not node.keywords and node.func.value.end_lineno == node.end_lineno:
            value = node.func.value
            new = L.replace(node.end_lineno, value.end_col_offset, node.end_col_offset, "")
            out.append(Mutation("drop_contiguous", node.end_lineno, L.text[node.end_lineno - 1], new,
                                "drops .contiguous() of %s" % (L.seg(value) or "a tensor")[:60], qual,
                                L.col(node.end_lineno, value.end_col_offset)))
    return out


# ---------------------------------------------------------------- entry points

def sites(source):
    """[(qualified name, first line, last line, why near attention)] of the functions near attention."""
    tree = ast.parse(source)
    out = []
    for qual, cls, func in _functions(tree):
        why = near_attention(func, cls)
        if why:
            out.append((qual, func.lineno, func.end_lineno, why))
    return out


def enumerate_mutations(source, kinds=KINDS):
    """Every mutation of ``source`` at a site near attention, in a deterministic order (line, kind,
    column, new text); each one compiles."""
    tree = ast.parse(source)
    torch_name = torch_alias(tree)
    L = _Lines(source)
    found = []
    for qual, cls, func in _functions(tree):
        if not near_attention(func, cls):
            continue
        if "insert_cast" in kinds:
            found += _insert_cast(L, func, qual, torch_name)
        if "drop_upcast" in kinds:
            found += _drop_upcast(L, func, qual)
        if "change_dtype_arg" in kinds:
            found += _change_dtype_arg(L, func, qual, torch_name)
        if "widen_fill" in kinds:
            found += _widen_fill(L, func, qual, torch_name)
        if "bool_mask_to_numbers" in kinds:
            found += _bool_mask_to_numbers(L, func, qual)
        if "drop_contiguous" in kinds:
            found += _drop_contiguous(L, func, qual)
    seen, out = set(), []
    order = {k: i for i, k in enumerate(KINDS)}
    spans = _statement_spans(tree)
    for m in sorted(found, key=lambda m: (m.line, order[m.kind], m.col, m.new)):
        if (m.line, m.new) in seen or m.new == m.original:
            continue
        seen.add((m.line, m.new))
        if not _parses(L.text, spans.get(m.line, (m.line, m.line)), m.line, m.render("bf16", torch_name or "torch")):
            continue
        out.append(m)
    return out


def _statement_spans(tree):
    """{line: (first, last)} of the innermost simple statement holding each line."""
    spans = {}
    compound = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
                ast.With, ast.AsyncWith, ast.Try) + ((ast.Match,) if hasattr(ast, "Match") else ())
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, compound):
            for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                old = spans.get(ln)
                if old is None or (old[1] - old[0]) > (node.end_lineno - node.lineno):
                    spans[ln] = (node.lineno, node.end_lineno)
    return spans


def _parses(text, span, line, new):
    """True where the statement holding ``line``, with ``new`` in its place, is still Python (the
    statement alone, under an ``if`` so its indentation holds: the rest of the file is unchanged)."""
    body = [new if ln == line else text[ln - 1] for ln in range(span[0], span[1] + 1)]
    indent = len(body[0]) - len(body[0].lstrip())
    src = "if 1:\n" + ("" if indent else " ") + ("\n" + ("" if indent else " ")).join(body) + "\n"
    try:
        ast.parse(src)
        return True
    except SyntaxError:
        return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", metavar="FILE", required=True, help="print the mutations of FILE")
    ap.add_argument("--kind", action="append", choices=KINDS, help="only these kinds (repeatable)")
    ap.add_argument("--sites", action="store_true", help="print the functions near attention instead")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    args = ap.parse_args(argv)
    with open(args.list, encoding="utf-8") as fh:
        source = fh.read()
    if args.sites:
        for qual, a, b, why in sites(source):
            print("%5d-%-5d %-50s %s" % (a, b, qual, why))
        return 0
    muts = enumerate_mutations(source, tuple(args.kind or KINDS))
    for i, m in enumerate(muts):
        if args.json:
            print(json.dumps(dict(asdict(m), index=i)))
        else:
            print("#%d %s %s:%d  (%s)  %s\n  - %s\n  + %s" % (i, m.kind, args.list, m.line, m.function, m.description,
                                                            m.original.strip(), m.new.strip()))
    counts = {}
    for m in muts:
        counts[m.kind] = counts.get(m.kind, 0) + 1
    print("%d mutations: %s" % (len(muts), ", ".join("%s %d" % (k, counts[k]) for k in KINDS if k in counts)),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
