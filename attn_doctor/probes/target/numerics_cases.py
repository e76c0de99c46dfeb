"""The numerics sweep's designed cases (numerics_child.py's data): the shapes that break attention
kernels, the cases each library runs beyond them (its known bugs' shapes), and how a library that
compiles per shape splits them across processes. Standard library only, Python 3.8+ syntax: loaded
by path beside numerics_child.py inside the target interpreter."""

DIRECTIONS = ("out", "dq", "dk", "dv")
DIRECTION_WORDS = {"out": "forward", "dq": "dQ", "dk": "dK", "dv": "dV"}

# The designed cases. Each names the class of shapes it stands for (`cls`), what a finding says.
# b: batch, h: query heads, hkv: key/value heads (grouped-query attention where fewer), sq/sk: query
# and key lengths, d: head dim. mask: none | causal (is_causal=True) | bool-causal (a tril tensor) |
# float-causal (0 / -inf) | all-true | bool-padding (the last keys of batch 0 masked) | float-bias (an
# ALiBi-like slope) | fully-masked (the first query rows see no key). logits: normal | neglse (every
# scaled logit near -120: each row's logsumexp far below -88.7 = -ln(FLT_MAX)) | large (logits of
# magnitude ~30: a near one-hot softmax).
CASES = (
    {"name": "tile64-bool-mask-neglse", "cls": "sequence length a multiple of 64 but not of 128, a boolean mask, rows whose logsumexp is far below zero",
     "b": 1, "h": 1, "sq": 704, "sk": 704, "d": 64, "mask": "bool-causal", "logits": "neglse"},
    {"name": "tile64-all-true-neglse", "cls": "sequence length a multiple of 64 but not of 128, an all-True mask, rows whose logsumexp is far below zero",
     "b": 1, "h": 2, "sq": 192, "sk": 192, "d": 128, "mask": "all-true", "logits": "neglse"},
    {"name": "tile64-float-mask-neglse", "cls": "sequence length a multiple of 64 but not of 128, an additive float mask, rows whose logsumexp is far below zero",
     "b": 1, "h": 1, "sq": 1088, "sk": 1088, "d": 32, "mask": "float-causal", "logits": "neglse"},
    {"name": "tile64-nomask-neglse", "cls": "sequence length a multiple of 64 but not of 128, non-causal without a mask, rows whose logsumexp is far below zero",
     "b": 1, "h": 2, "sq": 320, "sk": 320, "d": 64, "mask": "none", "logits": "neglse"},
    {"name": "tile128-bool-mask-neglse", "cls": "sequence length a multiple of 128, a boolean mask, rows whose logsumexp is far below zero",
     "b": 1, "h": 1, "sq": 768, "sk": 768, "d": 64, "mask": "bool-causal", "logits": "neglse"},
    {"name": "tile64-causal-neglse", "cls": "sequence length a multiple of 64 but not of 128, is_causal=True, rows whose logsumexp is far below zero",
     "b": 1, "h": 1, "sq": 704, "sk": 704, "d": 64, "mask": "causal", "logits": "neglse"},
    {"name": "one-query-neglse", "cls": "one query row against 128 keys, no mask, logsumexp far below zero",
     "b": 1, "h": 2, "sq": 1, "sk": 128, "d": 64, "mask": "none", "logits": "neglse"},
    {"name": "one-query-padding", "cls": "one query row against an odd number of keys, a boolean padding mask",
     "b": 2, "h": 2, "sq": 1, "sk": 257, "d": 64, "mask": "bool-padding", "logits": "normal"},
    {"name": "odd-causal", "cls": "an odd sequence length, is_causal=True",
     "b": 1, "h": 2, "sq": 333, "sk": 333, "d": 64, "mask": "causal", "logits": "normal"},
    {"name": "odd-cross", "cls": "odd query and key lengths that differ (Sq != Sk), no mask",
     "b": 1, "h": 2, "sq": 77, "sk": 301, "d": 64, "mask": "none", "logits": "normal"},
    {"name": "bool-padding", "cls": "a boolean padding mask",
     "b": 2, "h": 2, "sq": 256, "sk": 256, "d": 64, "mask": "bool-padding", "logits": "normal"},
    {"name": "float-bias", "cls": "an additive float bias (ALiBi-like)",
     "b": 1, "h": 2, "sq": 384, "sk": 384, "d": 64, "mask": "float-bias", "logits": "normal"},
    {"name": "gqa-1", "cls": "grouped-query attention with 1 key/value head (8 query heads)",
     "b": 1, "h": 8, "hkv": 1, "sq": 256, "sk": 256, "d": 128, "mask": "causal", "logits": "normal"},
    {"name": "gqa-2", "cls": "grouped-query attention with 2 key/value heads (8 query heads)",
     "b": 1, "h": 8, "hkv": 2, "sq": 256, "sk": 256, "d": 128, "mask": "causal", "logits": "normal"},
    {"name": "gqa-4-mask", "cls": "grouped-query attention with 4 key/value heads (8 query heads), a boolean causal mask",
     "b": 1, "h": 8, "hkv": 4, "sq": 320, "sk": 320, "d": 128, "mask": "bool-causal", "logits": "normal"},
    {"name": "head-dim-96", "cls": "head dim 96", "b": 1, "h": 2, "sq": 256, "sk": 256, "d": 96, "mask": "causal", "logits": "normal"},
    {"name": "head-dim-192", "cls": "head dim 192", "b": 1, "h": 2, "sq": 256, "sk": 256, "d": 192, "mask": "causal", "logits": "normal"},
    {"name": "head-dim-256", "cls": "head dim 256", "b": 1, "h": 2, "sq": 256, "sk": 256, "d": 256, "mask": "causal", "logits": "normal"},
    {"name": "large-logits", "cls": "large logits (a near one-hot softmax)",
     "b": 1, "h": 2, "sq": 256, "sk": 256, "d": 64, "mask": "causal", "logits": "large"},
    {"name": "fully-masked-rows", "cls": "fully masked query rows (left padding under a causal mask), where SDPA promises zeros",
     "b": 2, "h": 2, "sq": 128, "sk": 128, "d": 64, "mask": "fully-masked", "logits": "normal"},
    # `prime`: before it is measured, the call runs forward and backward once with its output's
    # gradient in the (batch, seq, heads, dim) memory a model's transpose gives it; the measured call's
    # is contiguous. A kernel that caches a backward plan per shape and not per gradient layout then
    # reads the gradient with the first call's strides. The shape is no other case's.
    {"name": "grad-layout-reuse", "cls": "a shape whose backward ran before in the same process with the output's "
     "gradient in another memory layout (a backward plan cached per shape reused)",
     "b": 1, "h": 2, "sq": 160, "sk": 160, "d": 48, "mask": "none", "logits": "normal", "prime": "grad-bshd"},
)

# Cases a library runs beyond CASES: the shapes of its own known bugs (recipes/numerics.toml's
# numerics_bugs rows name them in `cases`, so that a measurement here confirms or clears the bug).
# `dv`: v's head dim where it differs from q's and k's (MLA); `layout`: "fused-qkv" makes q, k and v
# strided views of one (batch, seq, 3, heads, dim) projection, as a fused QKV Linear gives them.
LIBRARY_CASES = {
    "flash_attn_4": (
        {"name": "fa4-head-dim-160", "cls": "head dim 160 (above 128, not a multiple of 64)",
         "b": 1, "h": 2, "sq": 256, "sk": 256, "d": 160, "mask": "causal", "logits": "normal"},
        {"name": "fa4-head-dim-72", "cls": "head dim 72 (not a multiple of 32)",
         "b": 2, "h": 2, "sq": 256, "sk": 256, "d": 72, "mask": "causal", "logits": "normal"},
        {"name": "fa4-head-dim-256-fused-qkv", "cls": "head dim 256, q, k and v strided views of one fused QKV projection",
         "b": 2, "h": 2, "sq": 256, "sk": 256, "d": 256, "mask": "causal", "logits": "normal", "layout": "fused-qkv"},
        {"name": "fa4-mla-128-96", "cls": "head dims 128 for q and k, 96 for v (an MLA shape)",
         "b": 1, "h": 2, "sq": 256, "sk": 256, "d": 128, "dv": 96, "mask": "causal", "logits": "normal"},
    ),
}
CASE_BY_NAME = {c["name"]: c for c in CASES + tuple(c for extra in LIBRARY_CASES.values() for c in extra)}

# A library that compiles per head dim and causality runs its cases in parts, a part the cases
# sharing one compile (forward and backward: FA4 pays 2.5-5 s for each): each part's kernels are
# compiled ahead in processes of their own, side by side, and its cases run in the library's one
# group as they land (jit_library.py). A strided layout is a part of its own: its kernel may differ.
#
# FlashAttention 4 runs the shapes of its known bugs (recipes/numerics.toml's numerics_bugs: one head
# dim of the 136-176 range stands for it), its causal path and grouped-query heads; the sweep's other
# shapes are n/a for it. Each part costs 6-8 CPU seconds of compiling, shared with the first check's
# other processes (the compiled flex test, SDPA's sweep): on a 16-core H200 node fourteen units (the
# sweep's other shapes too) took the first check to 1.55x the flex test alone, these eight to 1.26x
# (1.06x where FA4 has the bytecode pip writes).
LIBRARY_PARTS = {
    "flash_attn_4": (
        ("odd-causal", "tile64-causal-neglse", "large-logits"),  # head dim 64, causal
        ("gqa-2",), ("fa4-mla-128-96",), ("fa4-head-dim-256-fused-qkv",), ("fa4-head-dim-72",), ("fa4-head-dim-160",),
    ),
}

# A group starts no case this many seconds before its job's time limit (isolation.IMPORT_TIMEOUT_S):
# the rest are "timeout" rows and the sweep is not cached, so the next check (kernels compiled) runs them.
TIME_MARGIN_S = 12.0

# Masks given to the kernel as a tensor (the other kinds are is_causal or nothing).
TENSOR_MASKS = ("bool-causal", "float-causal", "all-true", "bool-padding", "float-bias", "fully-masked")
