"""The numerics sweep's criterion: how far a kernel's result may be from float64, and the helpers of a
measurement (numerics_child.py loads this file by path beside it; standard library plus torch,
Python 3.8+ syntax).

The criterion is FlashAttention's own test criterion: a kernel's largest error against float64 may be
a small multiple of what a plain PyTorch implementation in the same dtype gets against float64, plus a
floor of a few roundings of the result's natural size; any non-finite value where float64 is finite
is wrong, whatever its size.

The natural size is not always the result's own. A gradient can be near zero by cancellation: dQ =
scale * dS @ K with dS = P * (dP - D), and where attention is near uniform (a model's random initial
weights), or a row has one key, dP - D cancels to nearly nothing. A fused kernel rounds P, dP and D to
half precision before they cancel, so its error scales with the terms, not with their difference;
the plain implementation rounds in another order and may cancel exactly. Held to a few roundings of
a result that cancelled to zero, a healthy kernel is wrong by any factor. So each element's floor is
also taken on the spread of its own roundings: the root of the sum of squares of the terms it adds up.
Elsewhere (every element whose spread is below the result's largest value) nothing changes.
"""

from __future__ import annotations

# A kernel's error may be this multiple of the plain same-dtype implementation's, against float64.
# FlashAttention's tests use 2 for the output and 2-3 for gradients; the margin over that was measured
# on healthy kernels (every SDPA backend, flash-attn, compiled flex) over repeated runs.
ERROR_MULTIPLE = 4.0
# Where the plain error is ~0 (an exact case), the error may still be this many roundings of the
# result's natural size: the largest reference value, or the spread of the roundings that add up to
# it where they cancel (`rounding_spreads`).
FLOOR_ROUNDINGS = 4.0
EPS = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}


# A quantized kernel (SageAttention's INT8 q and k) is lossy by design: the plain same-dtype
# implementation is no yardstick for it. It is held to a relative error (L2) against float64 instead,
# and any non-finite value.
QUANTIZED_BOUND = 0.1  # SageAttention 1.0.6 on an H100: at most 3.9% over every case it takes, three seeds


def measure_quantized(torch, got, ref):
    ref = ref.double()
    finite_ref = torch.isfinite(ref)
    got = got.double()
    nonfinite = int(((~torch.isfinite(got)) & finite_ref).sum())
    both = finite_ref & torch.isfinite(got)
    norm = float(torch.linalg.vector_norm(ref.masked_fill(~finite_ref, 0)))
    err = float(torch.linalg.vector_norm((got - ref).masked_fill(~both, 0)))
    allowed = QUANTIZED_BOUND * max(norm, 1e-30)
    return {"err": err, "plain": None, "scale": norm, "nonfinite": nonfinite, "size": int(ref.numel()), "allowed": allowed,
            "roundings": None, "ok": nonfinite == 0 and err <= allowed, "relative": err / max(norm, 1e-30)}


def measure(torch, got, ref, plain, dtype_name, spread=None):
    """One direction's comparison: {"err", "plain", "scale", "allowed", "nonfinite", "ok"}; plain is
    the largest absolute error of the plain same-dtype implementation against float64, scale the
    largest float64 value. Each element may be off by ERROR_MULTIPLE plain errors plus
    FLOOR_ROUNDINGS roundings of the larger of scale and its own rounding spread (`spread`, a tensor
    of ref's shape: rounding_spreads); err and allowed are those of the element furthest past its
    allowance (with no spread: the largest error, as FlashAttention's tests take it)."""
    ref = ref.double()
    finite_ref = torch.isfinite(ref)
    got = got.double()
    bad = (~torch.isfinite(got)) & finite_ref
    nonfinite = int(bad.sum())
    both = finite_ref & torch.isfinite(got)
    diff = (got - ref).abs().masked_fill(~both, 0)
    plain = plain.double()
    usable = finite_ref & torch.isfinite(plain)
    base = float((plain - ref).abs().masked_fill(~usable, 0).max()) if usable.any() else float("nan")
    scale = float(ref.abs().masked_fill(~finite_ref, 0).max()) if finite_ref.any() else 0.0
    eps = EPS.get(dtype_name, 2.0 ** -8)
    multiple = ERROR_MULTIPLE * base if base == base else 0.0
    rounding = eps * max(scale, 1e-30)
    err = float(diff.max()) if diff.numel() else 0.0
    allowed = multiple + FLOOR_ROUNDINGS * rounding
    if spread is not None and tuple(spread.shape) == tuple(ref.shape) and diff.numel():
        per = multiple + FLOOR_ROUNDINGS * (spread.to(diff.device, torch.float64) * eps).clamp(min=rounding)
        worst = int((diff / per).argmax())
        err, allowed = float(diff.flatten()[worst]), float(per.flatten()[worst])
        rounding = (allowed - multiple) / FLOOR_ROUNDINGS
    return {"err": err, "plain": base if base == base else None, "scale": scale, "nonfinite": nonfinite, "size": int(ref.numel()),
            "allowed": allowed, "roundings": err / rounding, "ok": nonfinite == 0 and err <= allowed}


def rounding_spreads(torch, p, k, v, q, grad_out, out, scale, hkv):
    """{"out", "dq", "dk", "dv"}: tensors of each direction's shape, each element the root sum of
    squares of the float64 terms it adds up (each rounded once by a kernel in half precision). p: the
    softmax [.., h, sq, sk] (zero at rows that see no key); k, v: expanded to the query heads; hkv:
    the key/value heads (grouped-query attention sums a group's terms)."""
    with torch.no_grad():
        go = grad_out.to(torch.float64)
        d = (go * out).sum(-1, keepdim=True)
        # each score's gradient term before dP - D cancels, squared (in dP's memory)
        w2 = torch.matmul(go, v.transpose(-2, -1)).abs_().add_(d.abs()).mul_(p).pow_(2)
        p2 = p ** 2

        def grouped(t):  # [.., h, sk, d] summed over each key/value head's query heads
            h = t.shape[-3]
            return t if h == hkv else t.unflatten(-3, (hkv, h // hkv)).sum(-3)

        return {"out": torch.matmul(p2, v ** 2).sqrt_(),
                "dq": torch.matmul(w2, k ** 2).sqrt_().mul_(abs(scale)),
                "dk": grouped(torch.matmul(w2.transpose(-2, -1), q ** 2)).sqrt_().mul_(abs(scale)),
                "dv": grouped(torch.matmul(p2.transpose(-2, -1), go ** 2)).sqrt_()}


def copy_leaf(torch, t, grad):
    """A copy of t with its strides and offset (clone() makes a strided view contiguous), as a leaf
    that takes gradients."""
    if t.is_contiguous():
        return t.detach().clone().requires_grad_(grad)
    storage = torch.empty(t.untyped_storage().nbytes() // t.element_size(), dtype=t.dtype, device=t.device)
    view = storage.as_strided(t.shape, t.stride(), t.storage_offset())
    view.copy_(t.detach())
    return view.requires_grad_(grad)


def rounded(m):
    return {k: (float("%.4g" % v) if isinstance(v, float) and v == v and abs(v) != float("inf") else v) for k, v in m.items() if k != "ok"}
