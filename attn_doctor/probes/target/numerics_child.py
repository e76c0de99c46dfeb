"""The numerics sweep: every attention kernel the job may get, forward and backward, against float64,
over a designed set of the shapes that break kernels.

Standard library plus torch (and the attention libraries it tests), Python 3.8+ syntax: gpu_child.py
loads this file by path inside the *target* interpreter and runs `run_numerics_group` in a fork of
its own, beside the smoke tests.

A kernel that runs can still compute wrong numbers, only at some shapes and often only in backward:
a key tile half past the sequence's end scored 0 instead of -inf, whose exp overflows only where a
row's logsumexp is far below zero; a single query row; a fully masked row; grouped-query heads. Random
normal inputs keep every logsumexp near log(Sk), far from such overflows, so some cases here are
adversarial on purpose (every scaled logit near -120, as a "massive activation" channel makes them).

The criterion (numerics_criterion.py, beside this file) is FlashAttention's own test criterion: a
kernel's largest error against float64 may be a small multiple of what a plain PyTorch implementation
in the same dtype gets, plus a floor of a few roundings; any non-finite value where float64 is finite
is wrong, whatever its size.
"""

from __future__ import annotations

import math
import os
import sys
import time


def _sibling(stem):
    """<stem>.py beside this file, loaded by path as this file is (without its package)."""
    name = "attn_doctor_" + stem
    module = sys.modules.get(name)
    if module is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), stem + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


_C = _sibling("numerics_criterion")
ERROR_MULTIPLE, FLOOR_ROUNDINGS, EPS, QUANTIZED_BOUND = _C.ERROR_MULTIPLE, _C.FLOOR_ROUNDINGS, _C.EPS, _C.QUANTIZED_BOUND
measure, measure_quantized, _copy_leaf, _rounded = _C.measure, _C.measure_quantized, _C.copy_leaf, _C.rounded

# The designed cases, each library's and how its cases split across processes (numerics_cases.py).
_CASES = _sibling("numerics_cases")
DIRECTIONS, DIRECTION_WORDS, CASES, LIBRARY_CASES = _CASES.DIRECTIONS, _CASES.DIRECTION_WORDS, _CASES.CASES, _CASES.LIBRARY_CASES
CASE_BY_NAME, LIBRARY_PARTS, TIME_MARGIN_S, TENSOR_MASKS = _CASES.CASE_BY_NAME, _CASES.LIBRARY_PARTS, _CASES.TIME_MARGIN_S, _CASES.TENSOR_MASKS
_AHEAD = _sibling("ahead_compile")


def case_facts(case):
    """What a finding says of a case, as plain data."""
    return {"cls": case["cls"], "shape": [case["b"], case["h"], case.get("hkv", case["h"]), case["sq"], case["sk"], case["d"]],
            "mask": case["mask"], "logits": case["logits"]}


# ---------------------------------------------------------------- inputs and references


def make_inputs(torch, case, dtype, device, seed=1234):
    """q, k, v, grad_out in `dtype` on `device` (made on the CPU in float32 from a fixed seed, then
    rounded), the mask (None, a bool or a float tensor; float in `dtype`), is_causal, enable_gqa."""
    gen = torch.Generator().manual_seed(seed + sum(ord(c) for c in case["name"]))
    b, h, sq, sk, d = case["b"], case["h"], case["sq"], case["sk"], case["d"]
    hkv = case.get("hkv", h)
    dv = case.get("dv", d)
    q = torch.randn(b, h, sq, d, generator=gen)
    k = torch.randn(b, hkv, sk, d, generator=gen)
    v = torch.randn(b, hkv, sk, dv, generator=gen)
    grad_out = torch.randn(b, h, sq, dv, generator=gen)
    if case["logits"] == "neglse":
        # Every scaled logit near -120: q's first channel 1, k's -120 * sqrt(d), the rest small.
        q, k = q * 0.1, k * 0.1
        q[..., 0] = 1.0
        k[..., 0] = -120.0 * math.sqrt(d)
    elif case["logits"] == "large":
        q, k = q * 2.5, k * 2.5  # scaled logits of std ~6 * sqrt(d) / sqrt(d) ... ~ 6-30 in magnitude
    mask = None
    kind = case["mask"]
    tril = torch.ones(sq, sk, dtype=torch.bool).tril()
    if kind == "bool-causal":
        mask = tril[None, None].expand(b, 1, sq, sk).contiguous()
    elif kind == "float-causal":
        mask = torch.zeros(sq, sk).masked_fill(~tril, float("-inf"))[None, None].expand(b, 1, sq, sk).contiguous()
    elif kind == "all-true":
        mask = torch.ones(b, 1, sq, sk, dtype=torch.bool)
    elif kind == "bool-padding":
        mask = torch.ones(b, 1, sq, sk, dtype=torch.bool)
        mask[0, :, :, sk - sk // 3:] = False  # batch 0's last third of keys is padding
    elif kind == "float-bias":
        distance = (torch.arange(sq)[:, None] - torch.arange(sk)[None, :]).abs().float()
        slopes = torch.tensor([2.0 ** -(i + 1) for i in range(h)])
        mask = (-slopes[:, None, None] * distance)[None].expand(b, h, sq, sk).contiguous()
    elif kind == "fully-masked":
        # Left padding in a causal model: batch 1's first 16 positions are padding, and a causal
        # query among them sees no real key.
        mask = tril[None, None].expand(b, 1, sq, sk).clone()
        mask[1, :, :, :16] = False
    is_causal = kind == "causal"
    enable_gqa = hkv != h
    out = [t.to(dtype).to(device) for t in (q, k, v, grad_out)]
    if case.get("layout") == "fused-qkv":
        # one (b, s, 3, h, d) buffer; each of q, k, v a (b, h, s, d) view of its slot
        fused = torch.stack([t.transpose(1, 2) for t in out[:3]], dim=2).contiguous()
        out[:3] = [fused[:, :, i].transpose(1, 2) for i in range(3)]
    if mask is not None:
        mask = (mask if mask.dtype == torch.bool else mask.to(dtype)).to(device)
    return out[0], out[1], out[2], out[3], mask, is_causal, enable_gqa


def plain_attention(torch, q, k, v, mask, is_causal, enable_gqa, scale=None, parts=None):
    """Attention written out in the inputs' dtype (FlashAttention's `attention_ref` without upcast):
    the scores, the softmax and both products in that dtype. A row that sees no key gives zeros
    (what SDPA promises since torch 2.5), without a NaN reaching the backward."""
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        groups = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)
    scale = (1.0 / math.sqrt(q.shape[-1])) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    sq, sk = scores.shape[-2], scores.shape[-1]
    allowed = None
    if is_causal:
        allowed = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril()
    elif mask is not None and mask.dtype == torch.bool:
        allowed = mask
    elif mask is not None:
        scores = scores + mask.to(scores.dtype)
        allowed = ~torch.isneginf(mask)
    empty = None
    if allowed is not None:
        allowed = allowed.expand(scores.shape)
        empty = ~allowed.any(-1, keepdim=True)  # rows that see no key
        scores = scores.masked_fill(~(allowed | empty), float("-inf"))
        if mask is not None and mask.dtype != torch.bool:
            scores = scores.masked_fill(empty, 0.0)
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, v)
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    if parts is not None:  # what the criterion's rounding spreads are computed from
        parts.update(p=(probs.masked_fill(empty, 0.0) if empty is not None else probs).detach(), k=k.detach(),
                     v=v.detach(), scale=scale)
    return out


def run_reference(torch, inputs, dtype, scale=None):
    """[out, dq, dk, dv] of the plain attention in the inputs' dtype; in float64 (`dtype` None)
    followed by the directions' rounding spreads (numerics_criterion.rounding_spreads)."""
    q, k, v, grad_out, mask, is_causal, enable_gqa = inputs[:7]
    work = [t.detach().to(dtype or torch.float64).requires_grad_(True) for t in (q, k, v)]
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.to(dtype or torch.float64)
    parts = {} if dtype is None else None
    out = plain_attention(torch, work[0], work[1], work[2], mask, is_causal, enable_gqa, scale, parts)
    out.mul(grad_out.to(out.dtype)).sum().backward()
    result = [out.detach()] + [t.grad for t in work]
    if parts is not None:
        result.append(_C.rounding_spreads(torch, parts["p"], parts["k"], parts["v"], work[0].detach(), grad_out,
                                          out.detach(), parts["scale"], k.shape[-3] if k.dim() >= 3 else 1))
    return result


# ---------------------------------------------------------------- the kernels under test


def sdpa_call(torch, make_ctx):
    """SDPA with one backend forced (make_ctx from gpu_child._sdpa_backends), or its default
    dispatch (make_ctx None)."""
    import contextlib

    def call(q, k, v, mask, is_causal, enable_gqa):
        extra = {"enable_gqa": True} if enable_gqa else {}
        with (make_ctx() if make_ctx else contextlib.nullcontext()):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, **extra)

    return call


class NotApplicable(Exception):
    """The kernel's API cannot express this case (a mask tensor for flash-attn): not run."""


def library_call(torch, name):
    """call(q, k, v, mask, is_causal, enable_gqa) on [B, H, S, D] tensors for one attention library;
    raises if it does not import. A case its API cannot express raises NotApplicable."""

    def bshd(t):
        return t.transpose(1, 2)

    def first(res):  # FA3 and FA4 return (out, lse)
        return res[0] if isinstance(res, tuple) else res

    if name in ("flash_attn", "flash_attn_3", "flash_attn_4"):
        if name == "flash_attn":
            from flash_attn import flash_attn_func as fn
        elif name == "flash_attn_3":
            from flash_attn_interface import flash_attn_func as fn
        else:
            from flash_attn.cute import flash_attn_func as fn

        def call(q, k, v, mask, is_causal, enable_gqa):
            if mask is not None:
                raise NotApplicable("takes no mask tensor")
            if is_causal and q.shape[2] != k.shape[2]:
                raise NotApplicable("aligns a causal mask bottom-right where SDPA aligns it top-left")
            return bshd(first(fn(bshd(q), bshd(k), bshd(v), causal=is_causal)))

        if name == "flash_attn_4":
            # A kernel compiled per head dim, causality, grouping and dtype (a sequence length reuses
            # it): the cases of LIBRARY_PARTS, in the dtype training would use. Paid once per package
            # set (stack groups, cached under the stack key; the compiled kernels kept in the
            # doctor's kernels folder, gpu_child.kernel_caches, for --no-cache runs).
            call.only_cases = tuple(c for part in LIBRARY_PARTS[name] for c in part)
            call.one_dtype = True
        return call
    if name == "xformers":
        import xformers.ops as xops

        def call(q, k, v, mask, is_causal, enable_gqa):
            if enable_gqa:
                raise NotApplicable("takes grouped heads only in its 5-D layout")
            bias = None
            if is_causal:
                if q.shape[2] != k.shape[2]:
                    raise NotApplicable("causal with Sq != Sk")
                bias = xops.LowerTriangularMask()
            elif mask is not None:
                # a tensor bias, in storage whose rows are aligned to 8 elements, as xformers asks
                b, h, sq, sk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
                full = mask.expand(b, h, sq, sk)
                if full.dtype == torch.bool:
                    full = torch.zeros(full.shape, dtype=q.dtype, device=q.device).masked_fill(~full, float("-inf"))
                padded = torch.empty(b, h, sq, (sk + 7) // 8 * 8, dtype=q.dtype, device=q.device)
                bias = padded[..., :sk]
                bias.copy_(full.to(q.dtype))
            return bshd(xops.memory_efficient_attention(bshd(q), bshd(k), bshd(v), attn_bias=bias))

        return call
    if name == "sageattention":
        from sageattention import sageattn

        def call(q, k, v, mask, is_causal, enable_gqa):
            if mask is not None or enable_gqa:
                raise NotApplicable("takes no mask tensor and no grouped heads")
            if q.shape[-1] not in (64, 96, 128):
                raise NotApplicable("head dims 64, 96 and 128 only")
            if is_causal and q.shape[2] != k.shape[2]:
                raise NotApplicable("causal with Sq != Sk")
            return sageattn(q, k, v, tensor_layout="HND", is_causal=is_causal)

        call.forward_only = True  # an inference kernel: INT8 q and k, no backward
        # Its Triton kernels compile per head dim, causality and dtype (seconds each): head dim 64,
        # causal and not, in the dtype training would use.
        call.only_cases = ("tile64-nomask-neglse", "tile64-causal-neglse", "one-query-neglse", "odd-causal", "odd-cross", "large-logits")
        call.one_dtype = True
        return call
    raise ValueError("unknown attention library %r" % name)


def compiled_cases(shape):
    """The cases a compiled kernel runs without compiling again: its smoke test's own shape
    ([b, h, s, d], causal through score_mod), with each kind of logits. Another shape would cost
    another compile."""
    b, h, s, d = shape
    tile = "a multiple of 64 but not of 128" if s % 128 == 64 else ("a multiple of 128" if s % 128 == 0 else "odd" if s % 2 else "even")
    words = {"normal": "", "neglse": ", rows whose logsumexp is far below zero", "large": ", large logits (a near one-hot softmax)"}
    return tuple({"name": "compiled-%s" % logits, "cls": "causal, sequence length %d (%s)%s" % (s, tile, words[logits]),
                  "b": b, "h": h, "sq": s, "sk": s, "d": d, "mask": "causal", "logits": logits}
                 for logits in ("normal", "neglse", "large"))


def compiled_call(compiled_causal):
    """call(...) for a compiled causal attention fn(q, k, v): causal cases only."""

    def call(q, k, v, mask, is_causal, enable_gqa):
        if mask is not None or not is_causal or enable_gqa:
            raise NotApplicable("compiled for causal attention without a mask tensor only")
        return compiled_causal(q, k, v)

    return call


# ---------------------------------------------------------------- measuring


def check_kernel(torch, call, inputs, refs, dtype_name, sync):
    """Forward and backward of `call` on the case's inputs, judged against float64 (refs[0]) with the
    plain same-dtype implementation's error (refs[1]) as the yardstick."""
    import warnings

    q, k, v, grad_out, mask, is_causal, enable_gqa = inputs
    # a forward-only kernel may write into its inputs (SageAttention scales q in place): each call
    # gets copies, in the inputs' own layout (a strided view stays one)
    work = [_copy_leaf(torch, t, not getattr(call, "forward_only", False)) for t in (q, k, v)]
    result = {}
    started = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = call(work[0], work[1], work[2], mask, is_causal, enable_gqa)
            if not getattr(call, "forward_only", False):
                out.mul(grad_out).sum().backward()
            sync()
    except NotApplicable as exc:
        return {"status": "n/a", "why": str(exc)[:200]}
    except BaseException as exc:  # noqa: BLE001 - a kernel's refusal or failure is the result
        message = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        result["status"] = "refused" if "No available kernel" in message else "error"
        result["error"] = message
        # torch's reasons, without the "... kernel not used because:" headers between them
        import re

        said = (re.sub(r"\s*\(Triggered internally at [^)]*\)\.?$", "", str(w.message).strip().splitlines()[0])[:200] for w in caught)
        reasons = [line for line in dict.fromkeys(said) if line and "not used because" not in line]
        if reasons:
            result["reasons"] = reasons[:4]
        try:
            sync()
        except BaseException as sticky:  # noqa: BLE001 - a sticky CUDA error poisons what follows
            result["sticky_error"] = str(sticky)[:300]
        return result
    got = [out.detach()] + [t.grad for t in work]
    directions = {}
    spreads = refs[0][4] if len(refs[0]) > 4 else {}
    for name, g, r, p in zip(DIRECTIONS, got, refs[0], refs[1]):
        if g is None:
            if not getattr(call, "forward_only", False):
                directions[name] = {"ok": False, "nonfinite": 0, "err": float("nan"), "missing": True}
            continue
        directions[name] = (measure_quantized(torch, g, r) if getattr(call, "forward_only", False)
                            else measure(torch, g, r, p, dtype_name, spreads.get(name)))
    wrong = [name for name, m in directions.items() if not m["ok"]]
    result["status"] = "ok" if not wrong else "wrong"
    result["ms"] = round((time.perf_counter() - started) * 1000, 3)
    # the worst ratio against what was allowed, kept for every result: the margin a healthy kernel has
    result["worst"] = max((m["err"] / m["allowed"] if m.get("allowed") else 0.0) for m in directions.values() if not m.get("missing"))
    if wrong:
        result["directions"] = {name: _rounded(m) for name, m in directions.items() if not m["ok"]}
    return result


def _prime(torch, call, inputs, sync):
    """The call once, forward and backward, with its output's gradient laid out (b, s, h, d) as a
    model's transpose leaves it (the same values): the layout a case with `prime` is not measured in."""
    if getattr(call, "forward_only", False):
        return
    q, k, v, grad_out, mask, is_causal, enable_gqa = inputs
    try:
        work = [_copy_leaf(torch, t, True) for t in (q, k, v)]
        out = call(work[0], work[1], work[2], mask, is_causal, enable_gqa)
        out.backward(grad_out.transpose(1, 2).contiguous().transpose(1, 2))
        sync()
    except BaseException:  # noqa: BLE001 - a refusal here is the measured call's to report
        pass


def sweep(torch, backends, dtypes, device, cases=CASES, sync=None, choose=None, progress=None, seed=1234, deadline=None):
    """Every (backend, dtype, case): [{"backend", "dtype", "case", "status", ...}].

    backends: [(name, call)] (a call may be an exception: the library did not import, each result
    then "unavailable"). choose(q, k, v, mask, is_causal, enable_gqa): the backend SDPA's default
    dispatch picks for the case, kept as "default" on SDPA's results. deadline (time.monotonic()):
    no case starts after it; each one left is "timeout"."""
    sync = sync or (lambda: None)
    results = []
    for dtype in dtypes:
        dtype_name = str(dtype).replace("torch.", "")
        for case in cases:
            if deadline is not None and time.monotonic() >= deadline:
                results += [{"backend": name, "dtype": dtype_name, "case": case["name"], "status": "timeout",
                             "why": "not run: the sweep's time ran out before this case"} for name, call in backends
                            if case["name"] in getattr(call, "only_cases", (case["name"],))
                            and not (getattr(call, "one_dtype", False) and dtype is not dtypes[-1])]
                continue
            runs = [call for _name, call in backends if not isinstance(call, BaseException)
                    and case["name"] in getattr(call, "only_cases", (case["name"],))
                    and not (getattr(call, "one_dtype", False) and dtype is not dtypes[-1])]
            inputs = refs = None
            if runs or choose is not None:  # the references (float64 attention, backward) only for a case that runs
                inputs = make_inputs(torch, case, dtype, device, seed)
                refs = (run_reference(torch, inputs, None), run_reference(torch, inputs, dtype))
            default = None
            if choose is not None:
                q, k, v, _g, mask, is_causal, enable_gqa = inputs
                default = choose(q, k, v, mask, is_causal, enable_gqa)
            for name, call in backends:
                row = {"backend": name, "dtype": dtype_name, "case": case["name"]}
                if getattr(call, "one_dtype", False) and dtype is not dtypes[-1]:
                    continue
                if case["name"] not in getattr(call, "only_cases", (case["name"],)):
                    row.update(status="n/a", why="not run: each shape compiles a kernel of its own")
                elif isinstance(call, BaseException):
                    row.update(status="unavailable", error=("%s: %s" % (type(call).__name__, call))[:300])
                else:
                    if case.get("prime"):
                        _prime(torch, call, inputs, sync)
                    row.update(check_kernel(torch, call, inputs, refs, dtype_name, sync))
                if default is not None and name.startswith("sdpa-"):
                    row["default"] = default
                results.append(row)
            if progress and inputs is not None:
                progress(case["name"], dtype_name)
    return results


def default_choice(torch):
    """choose(...) -> the name of the SDPA backend its default dispatch picks ("sdpa-cudnn", ...)."""
    names = {"flash_attention": "sdpa-flash", "efficient_attention": "sdpa-mem-efficient",
             "cudnn_attention": "sdpa-cudnn", "math": "sdpa-math"}

    def choose(q, k, v, mask, is_causal, enable_gqa):
        try:
            from torch.nn.attention import SDPBackend

            extra = {"enable_gqa": True} if enable_gqa else {}
            index = torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal, scale=None, **extra)
            return names.get(SDPBackend(index).name.lower(), SDPBackend(index).name.lower())
        except BaseException as exc:  # noqa: BLE001 - a private API: report rather than guess
            return "unknown (%s)" % type(exc).__name__

    return choose


# ---------------------------------------------------------------- the GPU child's entry point


def numerics_groups(dtypes, libraries=()):
    """How the sweep is split across parallel processes: SDPA's forced backends, one process per
    dtype and one more for cuDNN's (whose plans are built per shape: the slowest part); each
    library in a process of its own."""
    groups = []
    for d in dtypes:
        groups += ["num:sdpa:%s" % d, "num:sdpa-cudnn:%s" % d]
    groups += ["num:lib:%s" % name for name in libraries]
    return groups


def run_numerics_group(group, sdpa_backends, index=0, bf16_native=None, seed=1234, budget_s=None):
    """One group of the sweep on GPU `index`, in this process: {"status", "numerics": [...], "phases"}.
    sdpa_backends: gpu_child._sdpa_backends (name -> context factory). budget_s: its job's time limit.
    A library that compiles per shape (LIBRARY_PARTS) runs its cases in its own group instead
    (jit_library.py)."""
    started = time.perf_counter()
    deadline = time.monotonic() + budget_s - TIME_MARGIN_S if budget_s else None
    phases = {}
    import torch

    return _run_numerics_group(torch, group, sdpa_backends, index, bf16_native, seed, started, deadline, phases)


def _run_numerics_group(torch, group, sdpa_backends, index, bf16_native, seed, started, deadline, phases):

    out = {"status": "ok", "numerics": [], "phases": phases, "device_index": index}
    # Beside the compiled test (Inductor's compile: the cold check's critical path, CPU-bound), the
    # sweep takes the CPU that is left: one thread, a lower priority.
    _AHEAD.lower_priority()
    torch.set_num_threads(1)
    if not torch.cuda.is_available():
        out.update(status="error", error={"type": "RuntimeError", "message": "CUDA is not available to torch"})
        return out
    index = min(max(int(index), 0), torch.cuda.device_count() - 1)
    torch.cuda.set_device(index)
    device = "cuda:%d" % index
    _, kind, rest = group.split(":", 2)
    what, _, only = rest.rpartition(":") if kind.startswith("sdpa") or ":" in rest else (rest, "", "")
    capability = tuple(torch.cuda.get_device_capability(index))
    native = bf16_native(capability) if bf16_native else capability >= (8, 0)
    dtypes = [torch.float16] + ([torch.bfloat16] if native else [])
    if kind.startswith("sdpa"):
        dtypes = [d for d in dtypes if str(d).replace("torch.", "") == (only or what)]
        if kind == "sdpa-cudnn":
            backends = [(n, sdpa_call(torch, c)) for n, c in sdpa_backends.items() if n == "sdpa-cudnn"]
        else:
            backends = [(n, sdpa_call(torch, c)) for n, c in sdpa_backends.items() if n != "sdpa-cudnn"]
        choose = default_choice(torch)
    else:
        mark = time.perf_counter()
        try:
            backends = [(what, library_call(torch, what))]
        except BaseException as exc:  # noqa: BLE001 - the import probe reports it; here just not tested
            backends = [(what, exc)]
        phases["library_import_s"] = round(time.perf_counter() - mark, 3)
        choose = None
    torch.cuda.synchronize()
    phases["cuda_init_s"] = round(time.perf_counter() - started, 3)
    mark = time.perf_counter()
    cases = CASES if kind.startswith("sdpa") else CASES + LIBRARY_CASES.get(what, ())
    marks = [time.perf_counter()]

    def case_done(name, dtype_name):  # where a library's time goes: each case's compile and run
        marks.append(time.perf_counter())
        if len(phases) < 16:  # torch_run keeps 20 phases a group
            phases.setdefault("case:" + name, round(marks[-1] - marks[-2], 3))

    out["numerics"] = sweep(torch, backends, dtypes, device, cases=cases, sync=torch.cuda.synchronize, choose=choose, seed=seed,
                            deadline=deadline, progress=None if kind.startswith("sdpa") else case_done)
    out["cases"] = {c["name"]: case_facts(c) for c in cases}
    phases["sweep_s"] = round(time.perf_counter() - mark, 3)
    phases["total_s"] = round(time.perf_counter() - started, 3)
    phases.update(_cpu_seconds())
    return out


def _cpu_seconds():
    """{"cpu_s": this process's CPU seconds and its children's}: beside its wall seconds, whether a
    compile waited for the CPU or ran threads of its own; {} where it cannot be told."""
    try:
        import resource

        return {"cpu_s": round(sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))), 3)}
    except (ImportError, OSError, AttributeError):
        return {}
