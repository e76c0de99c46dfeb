"""At an SDPA call traced on a CUDA device in training: the call through the kernel SDPA picks for it,
forward and backward, against float64 (probes/target/numerics_child.py's references and criterion).

Twice: on the call's own inputs, and on the same call (its shapes, mask, causal flag, heads, dtype)
with the logits that break kernels: every row's logsumexp far below zero, as a "massive activation"
head makes them. A model's random initial weights never give such rows, a trained one may at step
65,000; the second run finds the kernel bug before the job does. A wrong result is an AD617 problem at
the call's line, with the kernel, the direction and a kernel of SDPA that computed it right.

Standard library plus torch.
"""

from __future__ import annotations

# The float64 reference costs 8 bytes per score: a call larger than this is cut to its first batch
# element and as few head groups as bring it under.
MAX_SCORES = 1 << 26
_RANK = {"info": 0, "warning": 1, "error": 2}


def numerics_child():
    from ..probe_files import probe_file

    return probe_file("numerics_child")


def _cut(q, k, v, mask):
    """The call cut to fit MAX_SCORES: the first batch element, the first head groups."""
    b, hq, sq = q.shape[0], q.shape[-3], q.shape[-2]
    sk = k.shape[-2]
    hkv = k.shape[-3]
    group = max(1, hq // max(1, hkv))
    if b * hq * sq * sk <= MAX_SCORES:
        return q, k, v, mask, None
    keep_kv = max(1, min(hkv, MAX_SCORES // max(1, group * sq * sk)))
    q, k, v = q[:1, : keep_kv * group], k[:1, :keep_kv], v[:1, :keep_kv]
    if mask is not None and mask.dim() == 4:
        mask = mask[:1, : (keep_kv * group if mask.shape[1] > 1 else 1)]
    if q.shape[-3] * sq * sk > MAX_SCORES:
        return None
    return q, k, v, mask, "compared on batch element 0 and %d of %d query heads (the float64 reference of the whole call is too large)" % (
        q.shape[-3], hq)


def _adversarial(torch, q, k):
    """q and k of the same shapes and dtype whose scaled logits are all near -120: every row's
    logsumexp far below -ln(FLT_MAX) = -88.7."""
    import math

    gen = torch.Generator(device="cpu").manual_seed(4321)
    d = q.shape[-1]
    q2 = (torch.randn(q.shape, generator=gen) * 0.1)
    k2 = (torch.randn(k.shape, generator=gen) * 0.1)
    q2[..., 0] = 1.0
    k2[..., 0] = -120.0 * math.sqrt(d)
    return q2.to(q.dtype).to(q.device), k2.to(k.dtype).to(k.device)


def check_call(tracer, record, q, k, v, mask, is_causal, enable_gqa, scale):
    """{"runs": [...], "note"} of the call's kernel against float64, and an AD617 problem where it
    computed a wrong result (None where it did not). Never raises: a failure here is a note."""
    import torch

    nc = numerics_child()
    tracer.in_sink += 1  # the comparison's own ops are no model ops
    try:
        with torch.enable_grad(), torch.autocast("cuda", enabled=False):
            return _check(torch, nc, tracer, record, q, k, v, mask, is_causal, enable_gqa, scale)
    except Exception as exc:  # noqa: BLE001 - a surprise here must not cost the trace
        return {"note": "not compared with float64: %s: %s" % (type(exc).__name__, str(exc)[:200])}, None
    finally:
        tracer.in_sink -= 1


def _check(torch, nc, tracer, record, q, k, v, mask, is_causal, enable_gqa, scale):
    half = (torch.float16, torch.bfloat16)
    effective = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(str(record.get("autocast") or ""))
    if effective is not None:  # autocast casts q, k, v (and a float mask) before the kernel: so does the comparison
        q, k, v = (t.to(effective) for t in (q, k, v))
        if mask is not None and mask.is_floating_point():
            mask = mask.to(effective)
    if q.dtype not in half or k.dtype != q.dtype or v.dtype != q.dtype:
        return {"note": "not compared with float64: q, k, v are not one half dtype"}, None
    if mask is not None and mask.dtype not in (torch.bool, q.dtype):
        mask = mask.to(q.dtype)
    cut = _cut(q.detach(), k.detach(), v.detach(), mask.detach() if mask is not None else None)
    if cut is None:
        return {"note": "not compared with float64: the call is too large even for one batch element"}, None
    q, k, v, mask, cut_note = cut
    extra = {"enable_gqa": True} if enable_gqa else {}

    def sdpa(q_, k_, v_, mask_, causal_, gqa_):
        return torch.nn.functional.scaled_dot_product_attention(q_, k_, v_, attn_mask=mask_, is_causal=causal_, scale=scale, **extra)

    name = str(q.dtype).replace("torch.", "")
    gen = torch.Generator(device="cpu").manual_seed(1234)
    grad_out = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=gen).to(q.dtype).to(q.device)
    runs, problem = [], None
    for label, (q_, k_) in (("the call's own inputs", (q, k)), ("logits whose logsumexp is far below zero", _adversarial(torch, q, k))):
        inputs = (q_, k_, v, grad_out, mask, is_causal, enable_gqa)
        refs = (nc.run_reference(torch, inputs, None, scale), nc.run_reference(torch, inputs, q.dtype, scale))
        result = nc.check_kernel(torch, sdpa, inputs, refs, name, torch.cuda.synchronize)
        result["inputs"] = label
        runs.append(result)
        if result.get("status") == "wrong" and (problem is None or problem["severity"] != "error"):
            # the most severe of the two runs: wrong only at padding rows on the call's own inputs can
            # be wrong everywhere with the logits that break kernels (NaN dQ at 64 mod 128)
            found = _problem(torch, nc, record, result, label, sdpa, inputs, refs, name)
            if _marginal(result) and found.get("instead") in (None, "math"):
                # just past the tolerance, and so is every other fused kernel of SDPA (math is the
                # plain implementation the tolerance is measured on): the yardstick's limit on this
                # call, not a fault of one kernel
                result["inconclusive"] = ("%s; SDPA's other fused kernels are as far: within %gx the tolerance, "
                                          "not a fault of one kernel" % (found["kernel_message"], MARGINAL))
                continue
            padding = _padding_rows(torch, nc, sdpa, inputs, scale, name)
            if padding is not None:
                _as_padding(found, padding, _labels_ignore(tracer, padding["rows"]))
            if problem is None or _RANK[found["severity"]] > _RANK[problem["severity"]]:
                problem = found
    out = {"runs": runs}
    if cut_note:
        out["note"] = cut_note
    return out, problem


# A wrong result this close to the tolerance is a kernel's fault only where another fused kernel
# computes the same call within it.
MARGINAL = 4.0


def _marginal(result):
    directions = (result.get("directions") or {}).values()
    return bool(directions) and all(not d.get("nonfinite") and d.get("allowed") and d["err"] / d["allowed"] < MARGINAL
                                    for d in directions)


def _empty_rows(torch, mask, is_causal, sq, sk):
    """[batch, heads, q_len] booleans: the query rows that see no key (left padding under a causal
    mask), or None where every row sees one."""
    if mask is None:
        return None
    allowed = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
    if is_causal:
        allowed = allowed & torch.ones(sq, sk, dtype=torch.bool, device=mask.device).tril()
    empty = ~allowed.any(-1)
    return empty if bool(empty.any()) else None


def _padding_rows(torch, nc, sdpa, inputs, scale, name):
    """Where the kernel is wrong only at rows that see no key: {"rows": [batch, q_len] booleans,
    "count"}; None where it is wrong elsewhere too (given one key each, it still fails)."""
    q, k, v, grad_out, mask, is_causal, enable_gqa = inputs[:7]
    empty = _empty_rows(torch, mask, is_causal, q.shape[-2], k.shape[-2])
    if empty is None:
        return None
    # the same call with each such row allowed its own position (or the last key): every row sees one
    sq, sk = q.shape[-2], k.shape[-2]
    shape = q.shape[:-1] + (sk,)
    rows = empty.expand(q.shape[:-1])
    pos = torch.arange(sq, device=q.device).clamp(max=sk - 1)
    open_ = rows[..., None] & torch.nn.functional.one_hot(pos, sk).bool().expand(shape)
    causal = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril() if is_causal else None
    if mask.dtype == torch.bool:
        fixed_mask = mask.expand(shape).clone()
        if causal is not None:
            fixed_mask &= causal
        fixed_mask |= open_
    else:
        fixed_mask = mask.expand(shape).clone()
        if causal is not None:
            fixed_mask = fixed_mask.masked_fill(~causal, torch.finfo(fixed_mask.dtype).min)
        fixed_mask = fixed_mask.masked_fill(open_, 0.0)
    fixed = (q, k, v, grad_out, fixed_mask, False, enable_gqa)
    refs = (nc.run_reference(torch, fixed, None, scale), nc.run_reference(torch, fixed, q.dtype, scale))
    again = nc.check_kernel(torch, sdpa, fixed, refs, name, torch.cuda.synchronize)
    if again.get("status") != "ok":
        return None
    per_token = rows.any(1) if rows.dim() == 3 else rows  # [batch, q_len]
    return {"rows": per_token, "count": int(per_token.sum())}


def _labels_ignore(tracer, rows):
    """True where the model's labels are -100 at every row that sees no key (and at the next
    position, which a causal LM's shifted loss reads from it): the loss ignores them."""
    labels = (getattr(tracer, "inputs_by_name", None) or {}).get("labels")
    if labels is None or labels.dim() != 2 or labels.shape[-1] != rows.shape[-1]:
        return None
    labels = labels[: rows.shape[0]].to(rows.device)
    nxt = labels.roll(-1, dims=-1)
    nxt[..., -1] = -100
    return bool(((labels == -100) & (nxt == -100))[rows].all())


def _as_padding(problem, padding, ignored):
    """A kernel wrong only at rows that see no key, graded as check grades them: those rows hold
    padding, so a warning (later layers carry their values) and a note where the labels ignore them."""
    severity = "info" if ignored else "warning"
    problem["severity"] = severity
    problem["padding_rows"] = padding["count"]
    problem["message"] = problem["message"].replace(
        "computes wrong gradients on this GPU", "computes wrong values at the %d query row%s that see no key "
        "(padding: left padding under a causal mask) on this GPU" % (padding["count"], "" if padding["count"] == 1 else "s"))
    problem["message"] = problem["message"].replace(
        "computes a wrong output on this GPU", "computes wrong values at the %d query row%s that see no key "
        "(padding: left padding under a causal mask) on this GPU" % (padding["count"], "" if padding["count"] == 1 else "s"))
    problem["message"] += ("; every other row is right (given one key each, the same call is within tolerance). SDPA "
                           "promises zeros for a row that sees no key: %s" % (
                               "the labels are -100 at those positions, so the loss ignores them (a note)" if ignored
                               else "those rows hold padding, which the loss ignores where its labels are -100 there, "
                                    "but the values flow on through later layers (a warning, as check grades it)"))


def _clean_kernel(torch, nc, inputs, refs, name):
    """The first of SDPA's other kernels that computes these inputs right: what to run instead."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None
    for member, words in (("EFFICIENT_ATTENTION", "memory-efficient"), ("FLASH_ATTENTION", "flash"), ("MATH", "math")):
        def call(q_, k_, v_, mask_, causal_, gqa_, _m=member):
            extra = {"enable_gqa": True} if gqa_ else {}
            with sdpa_kernel(getattr(SDPBackend, _m)):
                return torch.nn.functional.scaled_dot_product_attention(q_, k_, v_, attn_mask=mask_, is_causal=causal_, **extra)

        result = nc.check_kernel(torch, call, inputs, refs, name, torch.cuda.synchronize)
        if result.get("status") == "ok":
            return words
    return None


def _problem(torch, nc, record, result, label, sdpa, inputs, refs, name):
    kernel = (record.get("kernel") or {}).get("label") or "SDPA"
    where = "%s:%s" % (record.get("file"), record.get("line")) if record.get("file") else "the call"
    said = []
    for direction, d in (result.get("directions") or {}).items():
        word = {"out": "forward", "dq": "dQ", "dk": "dK", "dv": "dV"}.get(direction, direction)
        if d.get("nonfinite"):
            said.append("%s %s of %s values NaN or inf" % (word, format(d["nonfinite"], ","), format(d.get("size") or 0, ",")))
        elif d.get("allowed"):
            said.append("%s error %.3g, %.0fx the tolerance" % (word, d["err"], d["err"] / d["allowed"]))
    instead = _clean_kernel(torch, nc, inputs, refs, name)
    message = ("F.scaled_dot_product_attention at %s computes wrong gradients on this GPU through %s (the kernel SDPA "
               "picks for this call), with %s: %s" % (where, kernel, label, "; ".join(said)))
    if "dq" not in (result.get("directions") or {}) and "dk" not in (result.get("directions") or {}) and "dv" not in (result.get("directions") or {}):
        message = message.replace("wrong gradients", "a wrong output")
    if instead:
        message += "; SDPA's %s kernel computes the same call right" % instead
    name = (record.get("kernel") or {}).get("name")
    switch = {"cudnn": "enable_cudnn_sdp", "flash": "enable_flash_sdp", "mem_efficient": "enable_mem_efficient_sdp",
              "math": "enable_math_sdp"}.get(name)
    remedy = None
    if switch:
        remedy = "torch.backends.cuda.%s(False) at the top of the training script" % switch
        if name == "cudnn":
            remedy += " (or TORCH_CUDNN_SDPA_DEPRIORITIZED=1 in its environment, torch 2.10 and newer)"
        if instead:
            remedy += ": SDPA then runs %s here" % ("its %s kernel" % instead)
    return {"id": "AD617", "severity": "error", "check": "numerics", "message": message, "instead": instead,
            "kernel_message": "%s against float64: %s" % (kernel, "; ".join(said)), "numerics": result,
            "remedy": remedy}
