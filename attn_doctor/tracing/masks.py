"""Is an attention mask the causal one? Followed through the ops that build it, so that a ``meta``
trace (no values) can tell that ``torch.ones(T, T, dtype=torch.bool).tril()`` or
``torch.full((T, T), -inf).triu(1)`` is exactly what ``is_causal=True`` computes.

Each tensor an interesting op makes gets a *pattern* over its last two dimensions (row i, column
j): ``("const", c)``, ``("arange", axis)`` (0..n-1 along rows "i" or columns "j"), or
``("tri", side, d, inside, outside)``: the value ``inside`` where j - i <= d (side "lower") or
j - i >= d (side "upper"), ``outside`` elsewhere. Ops that do not keep a pattern simply give none:
a mask combined with a padding mask is no longer the causal one, and says nothing.

On CPU (real values) ``is_causal_mask`` also compares the values themselves, which covers masks
built in ways the patterns do not follow. Standard library plus torch (imported lazily).
"""

from __future__ import annotations

NEG_LIMIT = -1.0e4  # an additive mask value at or below this blocks a position (finfo.min, -1e9, -inf)

_VIEWS = frozenset(("view", "reshape", "unsqueeze", "expand", "expand_as", "contiguous", "clone", "detach",
                    "repeat", "broadcast_to", "cuda", "cpu", "requires_grad_"))
_CASTS = frozenset(("to", "type", "type_as", "bool", "float", "half", "bfloat16", "double", "int", "long"))
_NOT = frozenset(("logical_not", "bitwise_not", "__invert__"))
_COMPARE = {"le": "<=", "__le__": "<=", "lt": "<", "__lt__": "<", "ge": ">=", "__ge__": ">=", "gt": ">",
            "__gt__": ">"}
_FLIP = {"<=": ">=", "<": ">", ">=": "<=", ">": "<"}
_FACTORIES = {"ones": 1, "ones_like": 1, "new_ones": 1, "zeros": 0, "zeros_like": 0, "new_zeros": 0}
WATCHED = (_VIEWS | _CASTS | _NOT | frozenset(_COMPARE) | frozenset(_FACTORIES) | frozenset((
    "tril", "triu", "tril_", "triu_", "full", "full_like", "new_full", "arange", "masked_fill", "masked_fill_",
    "where", "eq", "__eq__", "ne", "__ne__", "mul", "__mul__", "__rmul__", "add", "__add__", "__radd__", "sub",
    "__sub__", "rsub", "__rsub__", "__getitem__", "__and__", "logical_and")))


def _scalar(x):
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)):
        return float(x)
    return None


class MaskTracker(object):
    """Patterns of the tensors a trace made (weakly keyed: no tensor is kept alive)."""

    def __init__(self):
        from torch.utils.weak import WeakIdKeyDictionary

        self.patterns = WeakIdKeyDictionary()

    def of(self, t):
        import torch

        if isinstance(t, torch.Tensor):
            return self.patterns.get(t)
        s = _scalar(t)
        return ("const", s) if s is not None else None

    def note(self, short, args, kwargs, out):
        """Record the pattern of ``out`` made by op ``short`` from ``args``/``kwargs``."""
        import torch

        if not isinstance(out, torch.Tensor):
            return
        try:
            pattern = self._pattern(short, args, kwargs or {}, out)
        except (TypeError, ValueError, IndexError, AttributeError):
            pattern = None
        if pattern is not None:
            self.patterns[out] = pattern

    def _pattern(self, short, args, kwargs, out):
        import torch

        first = self.of(args[0]) if args else None
        if short in _FACTORIES:
            return ("const", bool(_FACTORIES[short]) if out.dtype == torch.bool else float(_FACTORIES[short]))
        if short in ("full", "full_like", "new_full"):
            value = _scalar(args[-1] if len(args) > 1 else kwargs.get("fill_value"))
            return None if value is None else ("const", _cast(value, out.dtype))
        if short == "arange":
            numbers = [a for a in args if _scalar(a) is not None]
            return ("arange", None) if len(numbers) == 1 or (len(numbers) == 2 and numbers[0] == 0) else None
        if short in ("tril", "triu", "tril_", "triu_"):
            d = int(args[1] if len(args) > 1 else kwargs.get("diagonal", 0))
            if first is None or first[0] != "const":
                return None
            zero = False if out.dtype == torch.bool else 0.0
            return ("tri", "lower" if short.startswith("tril") else "upper", d, first[1], zero)
        if first is None:
            return None
        if short in _VIEWS:
            return _view(first, short, args, kwargs)
        if short == "__getitem__":
            if first[0] == "arange":
                return _index_arange(first, args)
            return first if _starts_at_zero(args[1] if len(args) > 1 else None) else None
        if short in _CASTS:
            return _map(first, lambda v: _cast(v, out.dtype))
        if short in _NOT:
            return _map(first, lambda v: not v)
        if short in ("eq", "__eq__", "ne", "__ne__"):
            other = _scalar(args[1]) if len(args) > 1 else None
            if other is None:
                return None
            return _map(first, (lambda v: v == other) if "eq" in short else (lambda v: v != other))
        if short in _COMPARE:
            return _compare(first, self.of(args[1]) if len(args) > 1 else None, _COMPARE[short])
        if short in ("masked_fill", "masked_fill_"):
            cond = self.of(args[1] if len(args) > 1 else kwargs.get("mask"))
            value = _scalar(args[2] if len(args) > 2 else kwargs.get("value"))
            if first[0] != "const" or value is None or not _is_bool_tri(cond):
                return None
            return _select(cond, value, first[1])
        if short == "where":
            a, b = (self.of(x) for x in args[1:3]) if len(args) >= 3 else (None, None)
            if not (_is_bool_tri(first) and a and b and a[0] == "const" and b[0] == "const"):
                return None
            return _select(first, a[1], b[1])
        scalar = _scalar(args[1]) if len(args) > 1 else None
        if scalar is None or isinstance(scalar, bool):
            return None
        if short in ("mul", "__mul__", "__rmul__"):
            return _map(first, lambda v: float(v) * scalar)
        if short in ("add", "__add__", "__radd__"):
            return _map(first, lambda v: float(v) + scalar)
        if short in ("sub", "__sub__"):
            return _map(first, lambda v: float(v) - scalar)
        if short in ("rsub", "__rsub__"):
            return _map(first, lambda v: scalar - float(v))
        return None


def _cast(value, dtype):
    import torch

    if dtype == torch.bool:
        return bool(value)
    return float(value)


def _map(pattern, fn):
    if pattern[0] == "const":
        return ("const", fn(pattern[1]))
    if pattern[0] == "tri":
        return ("tri", pattern[1], pattern[2], fn(pattern[3]), fn(pattern[4]))
    return None


def _is_bool_tri(p):
    return p is not None and p[0] == "tri" and isinstance(p[3], bool) and p[3] != p[4]


def _select(cond, if_true, if_false):
    _, side, d, inside, _ = cond
    return ("tri", side, d, if_true, if_false) if inside else ("tri", side, d, if_false, if_true)


def _view(pattern, short, args, kwargs):
    if pattern[0] != "arange":
        return pattern
    if short == "unsqueeze":
        dim = int(args[1] if len(args) > 1 else kwargs.get("dim"))
        return ("arange", "j" if dim == 0 else "i" if dim in (1, -1) else None)
    if short in ("view", "reshape"):
        rest = args[1:]
        shape = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else list(rest)
        if list(shape) == [1, -1]:
            return ("arange", "j")
        if list(shape) == [-1, 1]:
            return ("arange", "i")
    return pattern


def _starts_at_zero(index):
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if isinstance(item, slice):
            if item.start not in (None, 0) or item.step not in (None, 1):
                return False
        elif item is not None and item is not Ellipsis:
            return False
    return True


def _index_arange(pattern, args):
    """``arange(n)[None, :]`` is a row (varies along j), ``arange(n)[:, None]`` a column (along i)."""
    if pattern[0] != "arange" or len(args) < 2 or not isinstance(args[1], tuple) or len(args[1]) != 2:
        return None
    a, b = args[1]
    if a is None and isinstance(b, slice):
        return ("arange", "j")
    if isinstance(a, slice) and b is None:
        return ("arange", "i")
    return None


def _compare(left, right, op):
    """``j <= i`` over a row and a column arange: the lower triangle (True inside)."""
    if not (left and right and left[0] == right[0] == "arange" and {left[1], right[1]} == {"i", "j"}):
        return None
    if left[1] == "i":
        op = _FLIP[op]  # i >= j  is  j <= i
    return {"<=": ("tri", "lower", 0, True, False), "<": ("tri", "lower", -1, True, False),
            ">=": ("tri", "upper", 0, True, False), ">": ("tri", "upper", 1, True, False)}[op]


def pattern_is_causal(pattern, is_bool):
    """Whether a tri pattern lets position (i, j) through exactly when j <= i (is_causal=True)."""
    if not pattern or pattern[0] != "tri":
        return False
    _, side, d, inside, outside = pattern
    allowed_inside = _allows(inside, is_bool)
    allowed_outside = _allows(outside, is_bool)
    if allowed_inside is None or allowed_outside is None or allowed_inside == allowed_outside:
        return False
    if side == "lower" and d == 0:
        return allowed_inside
    if side == "upper" and d == 1:
        return allowed_outside
    return False


def _allows(value, is_bool):
    if is_bool:
        return bool(value)
    v = float(value)
    if v == 0.0:
        return True
    return False if v <= NEG_LIMIT else None  # another finite bias is no mask


def is_causal_mask(tracker, mask, q_len, k_len):
    """(True, how) where ``mask`` gives exactly what is_causal=True gives for these lengths."""
    import torch

    if mask is None or mask.dim() < 2 or tuple(mask.shape[-2:]) not in ((q_len, k_len),):
        return False, None
    is_bool = mask.dtype == torch.bool
    if pattern_is_causal(tracker.of(mask) if tracker is not None else None, is_bool):
        return True, "built by tril/triu"
    if mask.device.type == "meta" or mask.numel() > (1 << 24):
        return False, None
    with torch.no_grad():
        ones = torch.ones(q_len, k_len, dtype=torch.bool, device=mask.device).tril()
        if is_bool:
            same = bool((mask == ones).all())
        elif mask.is_floating_point():
            m = mask.float()
            same = bool(((m == 0) == ones).all()) and bool((m[..., ~ones] <= NEG_LIMIT).all())
        else:
            same = False
    return same, ("its values" if same else None)
