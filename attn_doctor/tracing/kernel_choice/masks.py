"""What an attention mask is, and where it comes from: the causal mask (``is_causal=True`` computes
the same), a sliding window, another band, a bias, and whether its values were made from the batch
(padding) or from parameters (a learned bias). Followed through the ops that build it, so that a
``meta`` trace (no values) can tell that ``torch.ones(T, T, dtype=torch.bool).tril()``, a
``register_buffer("bias", torch.tril(torch.ones(n, n)))`` sliced in forward, or
``(j <= i) & (j > i - w)`` over aranges is what it is.

Each tensor an interesting op makes gets a *pattern* over its last two dimensions (row i, column
j):

- ``("const", c)``;
- ``("vec", k, c)``: a 1-D ``k * index + c`` (an arange) not yet placed on rows or columns (a 1-D
  tensor broadcasts along the columns, j);
- ``("lin", a, b, c)``: the value ``a * i + b * j + c`` (aranges placed with ``[:, None]``,
  ``unsqueeze``, ``view(1, -1)``, and sums and differences of them);
- ``("absdiff", k)``: ``k * |j - i|``;
- ``("band", lo, hi, inside, outside)``: the value ``inside`` where ``lo <= j - i <= hi`` (None:
  unbounded), ``outside`` elsewhere. ``tril(d)`` is the band (None, d), ``triu(d)`` is (d, None).

Ops that do not keep a pattern give none: a mask combined with a padding mask says nothing.

The *provenance* of the values is kept apart (``MaskTracker.from_batch``): a tensor is marked as
made from the batch when any op that made it read a tensor made from the model's inputs (shape-only
ops such as ``ones_like`` excepted). A mask made from the batch is never declared the causal one,
even where one example's values are: the next batch may be padded. The tracker also watches the
model being built (``recording``), so a mask kept as a buffer made in ``__init__`` keeps its pattern
on meta.

On CPU (real values) ``classify`` also reads the values, which covers masks built in ways the
patterns do not follow. Standard library plus torch (imported lazily).
"""

from __future__ import annotations

from .mask_patterns import (  # noqa: F401 - NEG_LIMIT: part of this module's surface
    NEG_LIMIT, _scalar, _is_tensor, _arange, _cast, _is_zero, _min, _max, _map, _place, _linear, _combine, _abs, _compare, _is_bool_band, _intersect, _masked_fill, _select, _view, _starts_at_zero, _index_vec, _allows, allowed_band, kind_of_band)

VALUE_LIMIT = 1 << 24  # masks read by value on CPU: at most this many elements

_VIEWS = frozenset(("view", "reshape", "expand", "expand_as", "contiguous", "clone", "detach", "repeat",
                    "broadcast_to", "cuda", "cpu", "requires_grad_", "squeeze", "flatten"))
_CASTS = frozenset(("to", "type", "type_as", "bool", "float", "half", "bfloat16", "double", "int", "long"))
_NOT = frozenset(("logical_not", "bitwise_not", "__invert__"))
_COMPARE = {"le": "<=", "__le__": "<=", "lt": "<", "__lt__": "<", "ge": ">=", "__ge__": ">=", "gt": ">",
            "__gt__": ">", "eq": "==", "__eq__": "==", "ne": "!=", "__ne__": "!="}
_AND = frozenset(("__and__", "logical_and", "bitwise_and", "__iand__", "logical_and_"))
_FACTORIES = {"ones": 1, "ones_like": 1, "new_ones": 1, "zeros": 0, "zeros_like": 0, "new_zeros": 0}
_ADD = frozenset(("add", "__add__", "__radd__", "add_", "__iadd__"))
_SUB = frozenset(("sub", "__sub__", "sub_", "__isub__"))
_RSUB = frozenset(("rsub", "__rsub__"))
_MUL = frozenset(("mul", "__mul__", "__rmul__", "mul_", "__imul__"))
WATCHED = (_VIEWS | _CASTS | _NOT | frozenset(_COMPARE) | frozenset(_FACTORIES) | _AND | _ADD | _SUB | _RSUB | _MUL
           | frozenset(("tril", "triu", "tril_", "triu_", "full", "full_like", "new_full", "arange", "masked_fill",
                        "masked_fill_", "where", "__getitem__", "unsqueeze", "abs", "neg", "__neg__")))

# Ops whose output depends on their tensor arguments' shape, dtype or device only, not on values:
# they do not carry "made from the batch" over.
_SHAPE_ONLY = frozenset(("ones_like", "zeros_like", "empty_like", "full_like", "rand_like", "randn_like",
                         "new_ones", "new_zeros", "new_empty", "new_full", "new_tensor", "size", "dim", "numel",
                         "arange", "ones", "zeros", "full", "empty"))
# In-place writes: what is written into the first argument makes it of the writer's provenance.
_WRITES = frozenset(("__setitem__", "copy_", "index_copy_", "index_put_", "masked_scatter_", "scatter_",
                     "masked_fill_", "add_", "mul_", "__iand__", "__ior__", "logical_and_", "logical_or_"))


class MaskTracker(object):
    """Patterns and provenance of the tensors a trace (and the model's construction) made, weakly
    keyed: no tensor is kept alive."""

    def __init__(self):
        from torch.utils.weak import WeakIdKeyDictionary

        self.patterns = WeakIdKeyDictionary()
        self.batch = WeakIdKeyDictionary()  # tensors made from the model's inputs -> the input's name
        # float32/float64 tensors the model's construction made -> (file, line, func) of the model's
        # line that made them: a cache or table kept as a plain attribute (module.to() leaves it)
        # is then named where it was made, though the trace never saw it being made
        self.sites = WeakIdKeyDictionary()

    def of(self, t):
        import torch

        if isinstance(t, torch.Tensor):
            return self.patterns.get(t)
        s = _scalar(t)
        return ("const", s) if s is not None else None

    # ------------------------------------------------------------ provenance: made from the batch

    def mark_batch(self, tensor, name="the inputs"):
        import torch

        if isinstance(tensor, torch.Tensor) and tensor not in self.batch:
            self.batch[tensor] = name

    def from_batch(self, tensor):
        """The name of the input a tensor was made from, or None."""
        return self.batch.get(tensor) if tensor is not None else None

    def propagate(self, short, args, kwargs, out):
        """After an op: its outputs are made from the batch when a tensor argument was."""
        import torch

        if short in _SHAPE_ONLY:
            return
        batch = self.batch
        hit = None
        for a in args:
            if isinstance(a, torch.Tensor):
                hit = batch.get(a)
            elif isinstance(a, (list, tuple)):
                hit = next((batch[b] for b in a if isinstance(b, torch.Tensor) and b in batch), None)
            if hit is not None:
                break
        if hit is None and kwargs:
            hit = next((batch[v] for v in kwargs.values() if isinstance(v, torch.Tensor) and v in batch), None)
        if hit is None:
            return
        if isinstance(out, torch.Tensor):
            batch.setdefault(out, hit)
        elif isinstance(out, (list, tuple)):
            for o in out:
                if isinstance(o, torch.Tensor):
                    batch.setdefault(o, hit)
        if short in _WRITES and args and isinstance(args[0], torch.Tensor):
            batch.setdefault(args[0], hit)

    # ------------------------------------------------------------ patterns

    def observe(self, short, args, kwargs, out):
        """After any op: its output's pattern, and an in-place write to a tensor with a pattern
        (``mask[1, 12:] = 0``, ``fill_``) forgets that pattern unless the op keeps one."""
        if short in WATCHED:
            self.note(short, args, kwargs, out)
        elif args and (short == "__setitem__" or (short.endswith("_") and not short.startswith("_"))
                       or (short.startswith("__i") and short.endswith("__"))):
            if _is_tensor(args[0]):
                self.patterns.pop(args[0], None)

    def note_site(self, func, short, args, out):
        """Where the model's construction made a wide floating tensor (kept through moves)."""
        import torch

        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if short in _SITE_KEEPING and first is not None and first in self.sites:
            # kept through moves and casts (a float32 buffer cast with the model keeps its maker)
            self.sites[out] = self.sites[first]
            return
        if out.dtype not in (torch.float32, torch.float64):
            return
        if out in self.sites:
            return
        file, line = _model_line()
        if file is not None:
            self.sites[out] = (file, line, func)

    def site_of(self, t):
        return self.sites.get(t)

    def note(self, short, args, kwargs, out):
        """Record the pattern of ``out`` made by op ``short`` from ``args``/``kwargs``."""
        import torch

        if not isinstance(out, torch.Tensor):
            return
        try:
            pattern = self._pattern(short, args, kwargs or {}, out)
        except (TypeError, ValueError, IndexError, AttributeError, OverflowError, ZeroDivisionError):
            pattern = None
        if pattern is not None:
            self.patterns[out] = pattern
        elif out in self.patterns:  # an in-place op that broke the pattern
            del self.patterns[out]

    def _pattern(self, short, args, kwargs, out):
        import torch

        first = self.of(args[0]) if args else None
        if short in _FACTORIES:
            return ("const", bool(_FACTORIES[short]) if out.dtype == torch.bool else float(_FACTORIES[short]))
        if short in ("full", "full_like", "new_full"):
            value = _scalar(args[-1] if len(args) > 1 else kwargs.get("fill_value"))
            return None if value is None else ("const", _cast(value, out.dtype))
        if short == "arange":
            return _arange(args, kwargs)
        if short in ("tril", "triu", "tril_", "triu_"):
            d = int(args[1] if len(args) > 1 else kwargs.get("diagonal", 0))
            zero = False if out.dtype == torch.bool else 0.0
            lower = short.startswith("tril")
            if first is None:
                return None
            if first[0] == "const":
                return ("band", None, d, first[1], zero) if lower else ("band", d, None, first[1], zero)
            if first[0] == "band" and _is_zero(first[4]):
                _, lo, hi, inside, outside = first
                return ("band", lo, _min(hi, d), inside, outside) if lower else ("band", _max(lo, d), hi, inside, outside)
            return None
        if first is None:
            return None
        if short in _VIEWS:
            return _view(first, short, args, kwargs)
        if short == "unsqueeze":
            dim = int(args[1] if len(args) > 1 else kwargs.get("dim"))
            return _place(first, "j" if dim == 0 else "i" if dim in (1, -1) else None) if first[0] == "vec" else first
        if short == "__getitem__":
            if first[0] == "vec":
                return _index_vec(first, args)
            return first if _starts_at_zero(args[1] if len(args) > 1 else None) else None
        if short in _CASTS:
            return _map(first, lambda v: _cast(v, out.dtype))
        if short in _NOT:
            return _map(first, lambda v: not v)
        other = self.of(args[1]) if len(args) > 1 else self.of(kwargs.get("other"))
        if short in _COMPARE:
            return _compare(first, other, _COMPARE[short])
        if short in _AND:
            return _intersect(first, other)
        if short in ("masked_fill", "masked_fill_"):
            cond = self.of(args[1] if len(args) > 1 else kwargs.get("mask"))
            value = _scalar(args[2] if len(args) > 2 else kwargs.get("value"))
            return _masked_fill(first, cond, value)
        if short == "where":
            a, b = (self.of(x) for x in args[1:3]) if len(args) >= 3 else (None, None)
            if not (_is_bool_band(first) and a and b and a[0] == "const" and b[0] == "const"):
                return None
            return _select(first, a[1], b[1])
        if short == "abs":
            return _abs(first)
        if short in ("neg", "__neg__"):
            return _linear(first, -1.0, 0.0)
        if other is None:
            return None
        if short in _ADD:
            return _combine(first, other, 1.0)
        if short in _SUB:
            return _combine(first, other, -1.0)
        if short in _RSUB:
            return _combine(other, first, -1.0)
        if short in _MUL:
            if other[0] == "const" and not isinstance(other[1], bool):
                return _linear(first, float(other[1]), 0.0)
            if first[0] == "const" and not isinstance(first[1], bool):
                return _linear(other, float(first[1]), 0.0)
            return _intersect(first, other)  # 0/1 masks multiplied: both must allow
        return None

    # ------------------------------------------------------------ watching the model being built

    def recording(self):
        """A context manager: the patterns of what the model's construction makes (buffers), and of
        its move and cast to the trace device and dtype, are kept."""
        from torch.overrides import TorchFunctionMode

        from ..calls.policy import short_name

        tracker = self

        class _Record(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                try:
                    short = short_name(func)
                except Exception:  # noqa: BLE001 - an odd callable: nothing to learn from it
                    return out
                tracker.observe(short, args, kwargs, out)
                tracker.note_site(func, short, args, out)
                return out

        return _Record()


_SITE_KEEPING = frozenset(("to", "cuda", "cpu", "clone", "contiguous", "detach", "view", "reshape", "expand",
                           "__getitem__", "requires_grad_", "share_memory_", "pin_memory"))


def _model_line():
    """The innermost frame of the model's code (not torch's, not the doctor's): (file, line)."""
    import os
    import sys

    import torch

    from ..places import DOCTOR_DIR

    skip = (os.path.dirname(torch.__file__) + os.sep, DOCTOR_DIR)
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(skip) and not name.startswith("<") and not name.endswith(("contextlib.py",
                                                                                         "functools.py")):
            return name, f.f_lineno
        f = f.f_back
    return None, None


def _band_of_values(mask, q_len, k_len):
    """On real values: ("causal" | "window" | "local" | "band", lo, hi), ("bias",), ("varies",)
    (one batch element or head differs from another: padding) or None."""
    import torch

    with torch.no_grad():
        m = mask.reshape(-1, q_len, k_len)
        if m.is_floating_point():
            f = m.float()
            if not bool(((f == 0) | (f <= NEG_LIMIT)).all()):
                return ("bias",)
        if m.shape[0] > 1 and not bool((m == m[:1]).all()):
            return ("varies",)
        m = m[0]
        if m.dtype == torch.bool:
            allowed = m
        elif m.is_floating_point():
            f = m.float()
            allowed = f == 0
            if not bool((allowed | (f <= NEG_LIMIT)).all()):
                return ("bias",)
        else:
            return None
        if not bool(allowed.any()):
            return None
        i = torch.arange(q_len, device=m.device)[:, None]
        j = torch.arange(k_len, device=m.device)[None, :]
        d = (j - i).expand(q_len, k_len)
        lo, hi = int(d[allowed].min()), int(d[allowed].max())
        if not bool((allowed == ((d >= lo) & (d <= hi))).all()):
            return None
        lo_b = None if lo <= -(q_len - 1) else lo
        hi_b = None if hi >= k_len - 1 else hi
        return (kind_of_band(lo_b, hi_b), lo_b, hi_b)


def _mask_ancestry(tracer, mask, limit=2000):
    """For a floating mask: the parameters and buffers its values were computed from (the tracer's
    nodes), as ({"parameter": [names], "buffer": [names]})."""
    out = {"parameter": [], "buffer": []}
    nodes = getattr(tracer, "nodes", None)
    if nodes is None or not mask.is_floating_point():
        return out
    start = nodes.get(mask)
    named = getattr(tracer, "names", {}).get(id(mask))
    if start is None and named and named[0] in ("param", "buffer"):
        out["parameter" if named[0] == "param" else "buffer"].append(named[1])
    stack, seen = ([start] if start is not None else []), set()
    while stack and limit > 0:
        n = stack.pop()
        limit -= 1
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.kind == "param" and n.name and n.name not in out["parameter"]:
            out["parameter"].append(n.name)
        elif n.kind == "buffer" and n.name and n.name not in out["buffer"]:
            out["buffer"].append(n.name)
        stack.extend(n.inputs or ())
    return out


def classify(tracker, mask, q_len, k_len, tracer=None):
    """What a mask at an attention call is: a dict with ``kind`` ("causal", "window", "local",
    "band", "bias" or None: not known), ``lo``/``hi`` (the band of j - i it lets through),
    ``window`` (for a sliding window), ``how`` ("built by tril/triu", "its values"),
    ``from_batch`` (the input its values were made from: padding; None), ``parameters`` and
    ``buffers`` (what a floating mask was computed from)."""
    import torch

    out = {"kind": None, "lo": None, "hi": None, "how": None, "from_batch": None, "parameters": [], "buffers": []}
    if mask is None or mask.dim() < 2:
        return out
    out["from_batch"] = tracker.from_batch(mask) if tracker is not None else None
    ancestry = _mask_ancestry(tracer, mask) if tracer is not None else {"parameter": [], "buffer": []}
    out["parameters"], out["buffers"] = ancestry["parameter"], ancestry["buffer"]
    if tuple(mask.shape[-2:]) != (q_len, k_len):
        return out
    is_bool = mask.dtype == torch.bool
    pattern = tracker.of(mask) if tracker is not None else None
    band = allowed_band(pattern, is_bool)
    if pattern and pattern[0] == "const" and _allows(pattern[1], is_bool) is True and not out["parameters"]:
        # torch.ones(.., dtype=bool), zeros for an additive mask: every position allowed
        out.update(kind="full", how="made %s everywhere" % ("True" if is_bool else "0"))
    elif mask.is_floating_point() and out["parameters"]:
        # computed from a parameter: a learned bias, whatever this initialisation's values are
        out.update(kind="bias", how="computed from parameter %s" % ", ".join(out["parameters"][:3]))
    elif band is not None:
        lo, hi = band
        out.update(kind=kind_of_band(lo, hi), lo=lo, hi=hi, how="built by tril/triu")
    elif mask.device.type != "meta" and mask.numel() <= VALUE_LIMIT:
        found = _band_of_values(mask, q_len, k_len)
        if found and found[0] in ("varies", "bias"):
            out.update(kind=found[0], how="its values")
        elif found:
            out.update(kind=found[0], lo=found[1], hi=found[2], how="its values")
    elif mask.is_floating_point() and out["buffers"]:
        out.update(kind="bias", how="computed from buffer %s" % ", ".join(out["buffers"][:3]))
    if out["kind"] in ("window", "local") and out["lo"] is not None and out["hi"] is not None:
        out["window"] = out["hi"] - out["lo"] + 1 if out["kind"] == "local" else 1 - out["lo"]
    return out


def is_causal_mask(tracker, mask, q_len, k_len):
    """(True, how) where ``mask`` gives exactly what is_causal=True gives for these lengths, for
    every batch: its values are not made from the batch."""
    if mask is None or mask.dim() < 2:
        return False, None
    verdict = classify(tracker, mask, q_len, k_len)
    if verdict["kind"] == "causal" and not verdict["from_batch"]:
        return True, verdict["how"]
    return False, None
