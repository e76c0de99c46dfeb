"""The pattern algebra of masks.py: what an op makes of its inputs' patterns over the last two
dimensions (row i, column j), as plain values: constants, aranges placed on rows or columns, linear
forms ``a * i + b * j + c``, ``|j - i|``, bands of allowed positions, and the comparisons, sums,
products, fills and views that combine them. Pure functions of patterns and Python scalars (torch
only to read a scalar tensor or an arange's arguments); masks.py's tracker applies them op by op."""

from __future__ import annotations

NEG_LIMIT = -1.0e4  # an additive mask value at or below this blocks a position (finfo.min, -1e9, -inf)


def _scalar(x):
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)):
        return float(x)
    return None


def _is_tensor(x):
    import torch

    return isinstance(x, torch.Tensor)


def _arange(args, kwargs):
    numbers = [float(a) for a in args if _scalar(a) is not None and not isinstance(a, bool)]
    start = float(kwargs["start"]) if _scalar(kwargs.get("start")) is not None else None
    step = float(kwargs["step"]) if _scalar(kwargs.get("step")) is not None else None
    if len(numbers) == 1:
        return ("vec", step or 1.0, start or 0.0)
    if len(numbers) == 2:
        return ("vec", step or 1.0, numbers[0])
    if len(numbers) == 3:
        return ("vec", numbers[2], numbers[0])
    return None


def _cast(value, dtype):
    import torch

    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return float(int(value))


def _is_zero(value):
    return value is False or (not isinstance(value, bool) and value == 0.0)


def _min(a, b):
    return b if a is None else (a if b is None else min(a, b))


def _max(a, b):
    return b if a is None else (a if b is None else max(a, b))


def _map(pattern, fn):
    if pattern[0] == "const":
        return ("const", fn(pattern[1]))
    if pattern[0] == "band":
        return ("band", pattern[1], pattern[2], fn(pattern[3]), fn(pattern[4]))
    return None


def _as_lin(p):
    """A pattern as a linear form (a, b, c) over (i, j), or None. A 1-D vec broadcasts along j."""
    if p[0] == "lin":
        return p[1], p[2], p[3]
    if p[0] == "vec":
        return 0.0, p[1], p[2]
    if p[0] == "const" and not isinstance(p[1], bool):
        return 0.0, 0.0, float(p[1])
    return None


def _place(p, axis):
    if p[0] != "vec" or axis is None:
        return None if p[0] == "vec" else p
    k, c = p[1], p[2]
    return ("lin", k, 0.0, c) if axis == "i" else ("lin", 0.0, k, c)


def _linear(p, scale, shift):
    if p[0] == "const" and not isinstance(p[1], bool):
        return ("const", p[1] * scale + shift)
    if p[0] == "vec":
        return ("vec", p[1] * scale, p[2] * scale + shift)
    if p[0] == "lin":
        return ("lin", p[1] * scale, p[2] * scale, p[3] * scale + shift)
    if p[0] == "absdiff" and scale > 0:
        return ("absdiff", p[1] * scale) if shift == 0 else None
    if p[0] == "band" and not isinstance(p[3], bool):
        return ("band", p[1], p[2], p[3] * scale + shift, p[4] * scale + shift)
    return None


def _combine(left, right, sign):
    """left + sign * right, for linear forms (and a constant added to a band's values)."""
    if right[0] == "const" and not isinstance(right[1], bool):
        return _linear(left, 1.0, sign * float(right[1]))
    if left[0] == "const" and not isinstance(left[1], bool):
        return _linear(right, sign, float(left[1]))
    if left[0] == right[0] == "vec":
        return ("vec", left[1] + sign * right[1], left[2] + sign * right[2])
    a, b = _as_lin(left), _as_lin(right)
    if a is None or b is None:
        return None
    return ("lin", a[0] + sign * b[0], a[1] + sign * b[1], a[2] + sign * b[2])


def _abs(p):
    lin = _as_lin(p) if p[0] in ("lin",) else None
    if lin and lin[2] == 0 and lin[0] == -lin[1] and lin[1] != 0:
        return ("absdiff", abs(lin[1]))
    return None


def _compare(left, right, op):
    """A comparison of linear forms: over (i, j) it is a band of j - i (True inside)."""
    if left is None or right is None:
        return None
    if op in ("==", "!="):
        if right[0] == "const" and left[0] in ("const", "band"):
            value = right[1]
            fn = (lambda v: v == value) if op == "==" else (lambda v: v != value)
            return _map(left, fn)
        if left[0] == "const" and right[0] == "band":
            value = left[1]
            fn = (lambda v: v == value) if op == "==" else (lambda v: v != value)
            return _map(right, fn)
        return None
    if left[0] == "absdiff" and right[0] == "const" and not isinstance(right[1], bool):
        w = float(right[1]) / left[1]
        bound = {"<=": (_floor(w), True), "<": (_below(w), True), ">": (_floor(w), False), ">=": (_below(w), False)}[op]
        edge, inside = bound
        if edge is None or edge < 0:
            return ("const", not inside)
        return ("band", -edge, edge, inside, not inside)
    a, b = _as_lin(left), _as_lin(right)
    if a is None or b is None:
        return None
    # left - right = A*i + B*j + C  op  0; a band of j - i needs A = -B != 0
    A, B, C = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    if B == 0 or A != -B:
        return None
    # B * (j - i) + C op 0  ->  (j - i) op' -C / B (the comparison flips for a negative B)
    t = -C / B
    if B < 0:
        op = {"<=": ">=", "<": ">", ">=": "<=", ">": "<"}[op]
    if op == "<=":
        return ("band", None, _floor(t), True, False)
    if op == "<":
        return ("band", None, _ceil(t) - 1, True, False)
    if op == ">=":
        return ("band", _ceil(t), None, True, False)
    return ("band", _floor(t) + 1, None, True, False)


def _floor(x):
    import math

    return int(math.floor(x))


def _ceil(x):
    import math

    return int(math.ceil(x))


def _below(w):
    """The largest whole number below w (|j - i| < w means |j - i| <= this)."""
    import math

    return int(math.ceil(w)) - 1


def _is_bool_band(p):
    return p is not None and p[0] == "band" and isinstance(p[3], bool) and p[3] != p[4]


def _allowing(p):
    """A pattern as (lo, hi, True-inside) when it is 1/True inside a band and 0/False outside."""
    if p is None or p[0] != "band":
        return None
    inside, outside = p[3], p[4]
    if _is_zero(outside) and (inside is True or (not isinstance(inside, bool) and inside == 1.0)):
        return p[1], p[2]
    return None


def _intersect(left, right):
    if left is None or right is None:
        return None
    if left[0] == "const" and right[0] == "band":
        left, right = right, left
    if left[0] == "band" and right[0] == "const":
        v = right[1]
        if v is True or (not isinstance(v, bool) and v == 1.0):
            return left
        return None
    a, b = _allowing(left), _allowing(right)
    if a is None or b is None:
        return None
    return ("band", _max(a[0], b[0]), _min(a[1], b[1]), left[3], left[4])


def _masked_fill(first, cond, value):
    if value is None or not _is_bool_band(cond):
        return None
    if first[0] == "const":
        return _select(cond, value, first[1])
    if first[0] == "band" and _is_zero(first[3]) and first[4] == value:
        # already `value` outside a band; filled where cond holds: the band narrows when cond holds
        # outside another band (the allowed region is the intersection)
        _, lo, hi, inside, _ = cond
        if inside is False:  # cond is True outside (lo, hi): the allowed part is that band
            return ("band", _max(first[1], lo), _min(first[2], hi), first[3], value)
    return None


def _select(cond, if_true, if_false):
    _, lo, hi, inside, _ = cond
    return ("band", lo, hi, if_true, if_false) if inside else ("band", lo, hi, if_false, if_true)


def _view(pattern, short, args, kwargs):
    if pattern[0] != "vec":
        return pattern
    if short in ("view", "reshape"):
        rest = args[1:]
        shape = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else list(rest)
        if shape == [1, -1]:
            return _place(pattern, "j")
        if shape == [-1, 1]:
            return _place(pattern, "i")
        return None
    if short in ("expand", "expand_as", "broadcast_to", "repeat"):
        return None
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


def _index_vec(pattern, args):
    """``arange(n)[None, :]`` is a row (varies along j), ``arange(n)[:, None]`` a column (along i)."""
    if len(args) < 2 or not isinstance(args[1], tuple) or len(args[1]) != 2:
        return pattern if len(args) > 1 and isinstance(args[1], slice) and _starts_at_zero(args[1]) else None
    a, b = args[1]
    if a is None and isinstance(b, slice) and _starts_at_zero(b):
        return _place(pattern, "j")
    if isinstance(a, slice) and b is None and _starts_at_zero(a):
        return _place(pattern, "i")
    return None


# ---------------------------------------------------------------- what a mask is


def _allows(value, is_bool):
    if is_bool:
        return bool(value)
    v = float(value)
    if v == 0.0:
        return True
    return False if v <= NEG_LIMIT else None  # another finite value is a bias, not a mask


def allowed_band(pattern, is_bool):
    """The (lo, hi) of j - i a band pattern lets through, or None where it is no band of allowed
    positions (a bias, a band blocked inside)."""
    if not pattern or pattern[0] != "band":
        return None
    _, lo, hi, inside, outside = pattern
    a_in, a_out = _allows(inside, is_bool), _allows(outside, is_bool)
    if a_in is None or a_out is None or a_in == a_out:
        return None
    if a_in:
        return (lo, hi)
    # allowed outside a one-sided band: the other side
    if lo is None and hi is not None:
        return (hi + 1, None)
    if hi is None and lo is not None:
        return (None, lo - 1)
    return None


def kind_of_band(lo, hi):
    """causal, window (causal sliding window), local (a window on both sides), band."""
    if lo is None and hi is None:
        return "full"
    if hi == 0 and lo is None:
        return "causal"
    if hi == 0 and lo is not None and lo < 0:
        return "window"
    if lo is not None and hi is not None and lo == -hi and hi > 0:
        return "local"
    return "band"
