"""What the tracer keeps for each floating tensor an op makes (a ``Node``: op, file:line, module
path, input nodes, dtype), and the dtype vocabulary of its judgements: half and wide dtypes, their
names, how wide each is, and the ops that are explicit casts."""

from __future__ import annotations

import torch

HALF_DTYPES = (torch.float16, torch.bfloat16)
DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float64: "float64",
}
# Width of a floating dtype: an op whose output is wider than one of its floating inputs widened it.
# Complex tensors count at the width of their parts: a rotary embedding written with complex numbers
# (view_as_complex, polar, view_as_real) carries a float32 q through complex64 and back.
RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3, torch.complex64: 2,
        torch.complex128: 3}
if hasattr(torch, "complex32"):
    RANK[torch.complex32] = 1
WIDE_NAMES = ("float32", "float64", "complex64", "complex128")
WIDTH = {"float16": 1, "bfloat16": 1, "complex32": 1, "float32": 2, "complex64": 2, "float64": 3, "complex128": 3}


def same_width(a, b):
    """Two dtype names of one width (float32 and complex64: a complex view of the same numbers)."""
    return a == b or (a in WIDTH and WIDTH.get(a) == WIDTH.get(b))


def traced(t):
    """The tensors whose dtypes the tracer follows: floating and complex ones."""
    return t.is_floating_point() or t.is_complex()
NAME_TO_DTYPE = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16,
                 "float16": torch.float16, "half": torch.float16, "bf16": torch.bfloat16,
                 "bfloat16": torch.bfloat16}

# Explicit casts: their fp32 output is what the user asked for, never a promotion.
CAST_OPS = frozenset(("float", "double", "half", "bfloat16", "to", "type", "type_as"))

# The floating dtypes autocast lowers (all but float64), by name.
LOWER_ELIGIBLE = ("float32", "float16", "bfloat16")


def dtype_name(dtype):
    return DTYPE_NAMES.get(dtype) or str(dtype).replace("torch.", "")


class Node(object):
    """Where one tensor came from. kind: op, cast, param, buffer, input, tensor (made outside
    the trace), sink (an attention kernel's output)."""

    __slots__ = ("seq", "kind", "op", "file", "line", "module", "inputs", "dtype", "promo", "name", "short", "shapes",
                 "stack", "batch", "kept", "empty")

    def __init__(self, seq, kind, dtype, op=None, file=None, line=None, module=None, inputs=(), promo=None,
                 name=None, short=None, shapes=None):
        self.short = short  # the op's short name (policy.short_name)
        self.shapes = shapes  # input shapes, kept for matmuls only (an inline attention's q @ k^T)
        self.seq, self.kind, self.dtype, self.op, self.file, self.line = seq, kind, dtype, op, file, line
        self.module, self.inputs, self.promo, self.name = module, inputs, promo, name
        # for casts and tensors made here: the calls that led to the line ((file, line), outermost
        # last), so that a float32 made in a helper names the model's line that called it
        self.stack = None
        # made from the model's inputs (an activation), not from parameters or sizes alone
        self.batch = False
        # (op, file, line) of an explicit cast to this width that returned the tensor as it was: the
        # code asked for the width there (``x.to(torch.float32)`` on a float32 x)
        self.kept = None
        self.empty = False  # no elements (a cache's empty placeholder joined by torch.cat)


def all_tensors(args, kwargs):
    """Every tensor among an op's arguments, and in its argument lists (torch.cat's)."""
    for seq in (args, kwargs.values() if kwargs else ()):
        for a in seq:
            if isinstance(a, torch.Tensor):
                yield a
            elif isinstance(a, (list, tuple)):
                for b in a:
                    if isinstance(b, torch.Tensor):
                        yield b
