"""Why an attention call does not get the fastest kernel, and the change in the user's code that
gives it one: the findings AD610-AD613 and AD277 (warnings: the call runs, slower) and the kernel
named on the fp32 (AD604) and head-dim (AD603) warnings SDPA already had.

For each SDPA call the *equivalent call* is the one the fix makes (the same attention, computed
the same way): ``is_causal=True`` instead of a causal mask, contiguous q/k/v, k/v with their heads
expanded, a mask of a shape every kernel takes, half-precision inputs. Its kernel is chosen the
same way as the call's own (kernels.sdpa_choice: torch on a GPU, else emulated); a finding is made
where it is a faster one (a causal mask always: with is_causal the kernel skips the masked half
of the work instead of reading a mask). cost.py times both on a GPU.
"""

from __future__ import annotations

import ast
import copy
import difflib
import linecache
import os

from . import masks, sdpa_select
from ..calls.patch import _arg, _enclosing_statement, _find_call, display_path, parsed_source
from ..places import library_package

# Slowest last: a kernel later in this list is a fallback from one earlier.
SPEED = ("flash", "cudnn", "mem_efficient", "math")


def _loc(record):
    return "%s:%s" % (display_path(record["file"]) if record.get("file") else "?", record.get("line"))


def _rank(kernel, order):
    if kernel is None:
        return 99
    fused = [k for k in order if k != "math"]
    return fused.index(kernel) if kernel in fused else len(fused)


def _maker(tracer, t):
    """The node of the op that made ``t`` (a mask, q): where the model chose it."""
    if t is None:
        return None
    table = tracer.nodes if (t.is_floating_point() or t.is_complex()) else getattr(tracer, "made_at", {})
    try:
        return table.get(t)
    except TypeError:
        return None


def _made_by_model(node):
    return node is not None and bool(node.file) and library_package(node.file) is None


def _name_maker(problem, node, role):
    """The line that made the tensor a fallback is about (the mask, the strided q): the line to change."""
    if node is not None and node.file and node.line:
        problem["fix_line"] = {"file": node.file, "line": node.line, "op": node.op, "feeds": [role],
                               "dtype": node.dtype}


def _problem(pid, check, message, kernel_message, choice, equivalent, fix=None):
    return {"id": pid, "severity": "warning", "check": check, "kernel_message": kernel_message, "message": message,
            "runs": choice.get("kernel"), "instead": equivalent.get("kernel"), "fix": fix,
            "equivalent_change": check}


def _equivalent(call, change):
    eq = copy.deepcopy(call)
    change(eq)
    return eq


def sdpa_fallbacks(tracer, record, call, tensors, choice, choose, target):
    """Findings for one SDPA call (a list of problem dicts for record["problems"]). `choose(call,
    tensors)` picks an equivalent call's kernel the way the call's own was picked (kernels.py, which
    calls this: passed in, not imported back); `target` is the GPU judged for."""
    from . import cost

    q, k, v, mask = tensors
    made = (q, k, v, mask, call["dropout"], call["is_causal"], call["enable_gqa"])
    order = choice.get("order") or sdpa_select.priority_order(target)
    runs = sdpa_select.LABELS.get(choice.get("kernel"), "no kernel")
    out = []

    def pick(eq_call, eq_tensors):
        return choose(eq_call, eq_tensors)

    # A mask: the causal one (is_causal=True replaces it), or one that forces a mask-reading kernel
    # for a reason of its own (a window, a bias, padding), named with what skips the work instead.
    maker = _maker(tracer, mask)
    if mask is not None and not call["is_causal"]:
        verdict = masks.classify(getattr(tracer, "masks", None), mask, q.shape[-2], k.shape[-2], tracer)
        record["mask"] = {key: verdict[key] for key in ("kind", "lo", "hi", "how", "from_batch", "parameters",
                                                         "buffers", "window") if verdict.get(key) not in (None, [])}
        if verdict["kind"] == "causal" and not verdict["from_batch"]:
            eq_call = _equivalent(call, lambda c: c.update(mask=None, is_causal=True))
            eq_args = (q, k, v, None, call["dropout"], True, call["enable_gqa"])
            eq = pick(eq_call, eq_args)
            kind = "additive %s" % str(mask.dtype).replace("torch.", "") if mask.is_floating_point() else "boolean"
            message = ("%s at %s gets an explicit causal mask (%s, %s) where is_causal=True computes the same: SDPA runs "
                       "its %s kernel reading a [%s] mask; with is_causal=True and no mask it runs %s, which skips the "
                       "masked half" % (record["name"], _loc(record), kind, verdict["how"], runs,
                                        ", ".join(str(x) for x in mask.shape), sdpa_select.LABELS.get(eq["kernel"])))
            out.append(_problem("AD610", "causal_mask", message, choice["refused"].get("flash", ""), choice, eq,
                                fix="causal"))
            _name_maker(out[-1], maker, "attn_mask")
            cost.attach(out[-1], tracer, made, eq_args, eq)
        elif verdict["kind"] == "full" and not verdict["from_batch"] and (
                library_package(record.get("file")) is None or _made_by_model(maker)) \
                and not any(p.get("severity") == "error" for p in record["problems"]):
            # the model's own mask (a library's mask is the library's choice: not the user's line)
            # a mask that masks nothing: the same attention as no mask, which the flash kernel takes
            eq_call = _equivalent(call, lambda c: c.update(mask=None))
            eq_args = (q, k, v, None, call["dropout"], False, call["enable_gqa"])
            eq = pick(eq_call, eq_args)
            kind = "additive %s" % str(mask.dtype).replace("torch.", "") if mask.is_floating_point() else "boolean"
            message = ("%s at %s gets a mask that masks nothing (%s, %s, [%s]): SDPA runs its %s kernel reading it; "
                       "with no mask (the attn_mask argument dropped: the same attention) it runs %s" % (
                           record["name"], _loc(record), kind, verdict["how"], ", ".join(str(x) for x in mask.shape),
                           runs, sdpa_select.LABELS.get(eq["kernel"])))
            out.append(_problem("AD619", "mask_masks_nothing", message, choice["refused"].get("flash", ""), choice, eq,
                                fix="no_mask"))
            _name_maker(out[-1], maker, "attn_mask")
            cost.attach(out[-1], tracer, made, eq_args, eq)
            measured = out[-1]["cost"].get("measured")
            if not measured and _rank(eq["kernel"], order) >= _rank(choice["kernel"], order):
                # the same kernel either way and nothing timed: a note (timed on a GPU, the mask's
                # reading costs what the measurement says, and the severity is the measurement's)
                out[-1].update(severity="info")
        else:
            found = _mask_of_its_own(record, verdict, mask, runs, choice)
            if found is not None:
                out.append(found)
    # A last dimension that is not contiguous: every fused kernel refuses it.
    strided = [r for r, t in (("q", q), ("k", k), ("v", v)) if t.shape[-1] != 1 and t.stride(-1) != 1]
    if strided:
        def contiguous(c):
            for r in strided:
                shape = c[r]["shape"]
                c[r]["stride"] = [int(_prod(shape[i + 1:])) for i in range(len(shape))]
        eq_call = _equivalent(call, contiguous)
        eq_args = tuple(t.contiguous() if r in strided else t for r, t in (("q", q), ("k", k), ("v", v))) + made[3:]
        eq = pick(eq_call, eq_args)
        if _rank(eq["kernel"], order) < _rank(choice["kernel"], order):
            strides = ", ".join("%s.stride(-1) = %d" % (r, call[r]["stride"][-1]) for r in strided)
            message = ("%s at %s gets %s with a last dimension that is not contiguous (%s): every fused kernel refuses it "
                       "and SDPA runs its %s kernel; %s lets it run %s" % (
                           record["name"], _loc(record), "/".join(strided), strides, runs,
                           ", ".join("%s.contiguous()" % r for r in strided), sdpa_select.LABELS.get(eq["kernel"])))
            out.append(_problem("AD611", "last_dim_stride", message, choice["refused"].get("flash", ""), choice, eq,
                                fix={"contiguous": strided}))
            _name_maker(out[-1], _maker(tracer, dict((("q", q), ("k", k), ("v", v)))[strided[0]]), strided[0])
            cost.attach(out[-1], tracer, made, eq_args, eq)
    # q/k/v not 4-D ([batch, heads, seq, head_dim]): the fused kernels take no other rank.
    ranks = {t.dim() for t in (q, k, v)}
    if ranks != {4} and len(ranks) == 1 and min(ranks) >= 3:
        found = _layout_fallback(record, call, made, choice, pick, order, runs)
        if found is not None:
            out.append(found[0])
            cost.attach(out[-1], tracer, made, found[1], found[2])
    # k/v with fewer heads than q, not expanded, where the kernel needs them expanded.
    hq, hk = call["q"]["shape"][-3] if len(call["q"]["shape"]) == 4 else None, call["k"]["shape"][-3]
    # (without enable_gqa only one k/v head broadcasts; more raise in the math kernel: AD607)
    if (hq and hk != hq and hk and hq % hk == 0 and call["k"]["shape"][-3] == call["v"]["shape"][-3]
            and (call["enable_gqa"] or hk == 1)):
        def expand(c):
            for r in ("k", "v"):
                shape = c[r]["shape"]
                shape[-3] = hq
                c[r]["stride"] = [int(_prod(shape[i + 1:])) for i in range(len(shape))]
            c["enable_gqa"] = False
        eq_call = _equivalent(call, expand)
        rep = hq // hk
        eq_args = (q, k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3), mask, call["dropout"],
                   call["is_causal"], False)
        eq = pick(eq_call, eq_args)
        if _rank(eq["kernel"], order) < _rank(choice["kernel"], order):
            message = ("%s at %s gets k/v with %d heads for q's %d (%s): SDPA runs its %s kernel; k/v expanded to %d heads "
                       "(k.repeat_interleave(%d, dim=-3), the same for v, as transformers' repeat_kv does) run %s" % (
                           record["name"], _loc(record), hk, hq,
                           "enable_gqa=True" if call["enable_gqa"] else "broadcast, enable_gqa not set", runs, hq, rep,
                           sdpa_select.LABELS.get(eq["kernel"])))
            reason = choice["refused"].get("mem_efficient") or choice["refused"].get("flash", "")
            out.append(_problem("AD613", "gqa_heads", message, reason, choice, eq))
            cost.attach(out[-1], tracer, made, eq_args, eq)
    # A mask of a shape, stride or grad that leaves SDPA only its math kernel.
    if mask is not None and choice.get("kernel") == "math" and not out:
        L, S = call["q"]["shape"][-2], call["k"]["shape"][-2]

        def mask_fixed(c):
            c["mask"].update(requires_grad=False, shape=[call["q"]["shape"][0], 1, L, S], stride=[L * S, L * S, S, 1])
        eq_call = _equivalent(call, mask_fixed)
        eq_mask = mask.detach().expand(mask.shape[:-2] + (L, S)) if mask.dim() >= 2 else mask
        eq_mask = eq_mask.reshape(-1, 1, L, S)[: call["q"]["shape"][0]].contiguous() if eq_mask.dim() != 4 else eq_mask
        eq_args = (q, k, v, eq_mask.contiguous()) + made[4:]
        eq = pick(eq_call, eq_args)
        if eq["kernel"] not in (None, "math"):
            why = [r for r in choice["refused"].values() if "mask" in r.lower() or "Attn_mask" in r]
            message = ("%s at %s gets a mask SDPA's fused kernels refuse (shape [%s]%s%s): it runs its math kernel; a "
                       "[batch or 1, heads or 1, %d, %d] mask with a contiguous last dimension%s runs %s" % (
                           record["name"], _loc(record), ", ".join(str(x) for x in mask.shape),
                           ", requires grad" if mask.requires_grad else "",
                           ", last-dim stride %d" % mask.stride(-1) if mask.stride(-1) != 1 else "", L, S,
                           " and no grad" if mask.requires_grad else "", sdpa_select.LABELS.get(eq["kernel"])))
            out.append(_problem("AD612", "mask_shape", message, why[0] if why else "", choice, eq))
            cost.attach(out[-1], tracer, made, eq_args, eq)
    _name_the_kernel(tracer, record, call, made, choice, choose, target)
    return out


def _as_4d(t):
    """A 3-D [batch, seq, dim] tensor as one head, a 5-D or wider one with its leading dims folded
    into the batch: the same attention, in the layout every fused kernel takes."""
    if t.dim() == 3:
        return t.unsqueeze(1)
    return t.reshape((-1,) + tuple(t.shape[-3:]))


def _layout_fallback(record, call, made, choice, pick, order, runs):
    """AD618: q/k/v of rank 3 or 5+ run the math kernel; reshaped to 4-D they run a fused one.
    (problem, equivalent arguments, equivalent choice), or None where 4-D gains nothing."""
    q, k, v, mask = made[:4]
    rank = q.dim()
    eq_q, eq_k, eq_v = _as_4d(q), _as_4d(k), _as_4d(v)
    eq_mask = mask
    if mask is not None:
        try:
            full = mask.expand(tuple(q.shape[:-1]) + (k.shape[-2],))
            eq_mask = _as_4d(full) if rank != 3 else full.unsqueeze(1)
        except RuntimeError:
            return None  # a mask that does not broadcast: the call raises, AD607 says so
    def to_4d(c):
        for role, t in (("q", eq_q), ("k", eq_k), ("v", eq_v)):
            c[role].update(shape=[int(x) for x in t.shape], stride=[int(x) for x in t.contiguous().stride()])
        if c.get("mask") is not None and eq_mask is not None:
            c["mask"].update(shape=[int(x) for x in eq_mask.shape], stride=[int(x) for x in eq_mask.stride()])
    eq_call = _equivalent(call, to_4d)
    eq_args = (eq_q.contiguous(), eq_k.contiguous(), eq_v.contiguous(), eq_mask) + made[4:]
    eq = pick(eq_call, eq_args)
    if _rank(eq["kernel"], order) >= _rank(choice["kernel"], order):
        return None
    shape = ", ".join(str(x) for x in q.shape)
    how = ("q.unsqueeze(1) (one head; the same for k, v)" if rank == 3 else
           "q.flatten(0, %d) (the leading dims folded into the batch; the same for k, v, and the output reshaped "
           "back)" % (rank - 4))
    message = ("%s at %s gets %d-D q/k/v ([%s]): SDPA's fused kernels take 4-D [batch, heads, seq, head_dim] only, so "
               "it runs its %s kernel; as 4-D, %s, it runs %s" % (
                   record["name"], _loc(record), rank, shape, runs, how, sdpa_select.LABELS.get(eq["kernel"])))
    reason = choice["refused"].get("flash") or choice["refused"].get("mem_efficient", "")
    return _problem("AD618", "layout_rank", message, reason, choice, eq), eq_args, eq


def _mask_words(verdict):
    """What the mask is, in words, and the alternative that skips the masked work (never
    is_causal=True, which would compute another attention)."""
    kind, how = verdict["kind"], verdict.get("how")
    if kind == "window":
        w = verdict["window"]
        return ("a sliding-window causal mask (each query sees its %d latest keys, %s)" % (w, how),
                "flex_attention with a block mask (create_block_mask(lambda b, h, q, kv: (kv <= q) & (q - kv < %d), "
                "...)) or flash-attn's flash_attn_func(..., causal=True, window_size=(%d, 0)) skip the blocks outside "
                "the window" % (w, w - 1))
    if kind == "local":
        w = verdict["hi"]
        return ("a local-window mask (|i - j| <= %d, %s)" % (w, how),
                "flex_attention with a block mask (mask_mod: (q - kv).abs() <= %d) or flash-attn's "
                "window_size=(%d, %d) skip the blocks outside the window" % (w, w, w))
    if kind == "band":
        lo, hi = verdict.get("lo"), verdict.get("hi")
        span = "%s <= j - i <= %s" % ("-inf" if lo is None else lo, "inf" if hi is None else hi)
        return ("a band mask (%s, %s)" % (span, how),
                "flex_attention with a block mask of the same band skips the blocks outside it")
    if kind == "bias" and verdict.get("parameters"):
        return ("an additive bias computed from parameter %s (a learned bias)" % ", ".join(verdict["parameters"][:3]),
                "flex_attention's score_mod adds the bias inside its fused kernel (score + bias[h, q_idx, kv_idx]), "
                "with no [.., L, S] tensor in memory")
    if kind == "bias":
        origin = (" computed from buffer %s" % ", ".join(verdict["buffers"][:3])) if verdict.get("buffers") else ""
        return ("an additive position bias%s (ALiBi or relative positions)" % origin,
                "flash-attn's alibi_slopes= (for ALiBi) or flex_attention's score_mod compute it inside the kernel")
    return None


def _mask_of_its_own(record, verdict, mask, runs, choice):
    """AD616 (a note): a mask that is not the causal one forces SDPA onto a mask-reading kernel.
    Made from the batch (padding) and equal to the causal mask on this example: said as such, never
    as is_causal's equivalent. A window, band or bias: named, with what skips the work instead."""
    if verdict["from_batch"]:
        if verdict["kind"] != "causal":
            return None  # a padding mask the model needs: nothing to say
        words = ("a mask made from the batch (from %s) that equals the causal mask on this example" % (
            verdict["from_batch"]),
            "where a batch has no padding, is_causal=True (no mask) does the same; with padding keep the mask, or "
            "pack the sequences without padding (flash_attn_varlen_func with cu_seqlens, a block-diagonal "
            "flex_attention mask)")
    else:
        words = _mask_words(verdict)
    if words is None:
        return None
    what, instead = words
    reads = ("reading a [%s] bias from memory" if verdict["kind"] == "bias" else
             "reading a [%s] mask, computing the masked positions too") % ", ".join(str(x) for x in mask.shape)
    message = "%s at %s gets %s: SDPA runs its %s kernel %s; %s" % (record["name"], _loc(record), what, runs, reads,
                                                                    instead)
    problem = {"id": "AD616", "severity": "info", "check": "mask_of_its_own", "message": message,
               "kernel_message": choice["refused"].get("flash", ""), "runs": choice.get("kernel"), "instead": None,
               "fix": None, "equivalent_change": "mask_of_its_own",
               "cost": {"measured": False, "why": "not measured: the alternative is another kernel (flex_attention, "
                                                  "flash-attn), not an SDPA call"}}
    return problem


def _name_the_kernel(tracer, record, call, made, choice, choose, target):
    """AD604 (fp32 inputs) and AD603 (head dim over 256) at SDPA are fallbacks too: say which
    kernel runs, and for fp32 which one the half-precision call gets."""
    from . import cost

    runs = sdpa_select.LABELS.get(choice.get("kernel"), "no kernel")
    for p in record["problems"]:
        if p.get("severity") != "warning" or p["id"] not in ("AD603", "AD604") or p.get("runs"):
            continue
        p["runs"] = choice.get("kernel")
        if p["id"] == "AD603":
            p["message"] = ("%s at %s: head dim %s is over the flash and cuDNN kernels' limit of 256: SDPA runs its %s "
                            "kernel" % (record["name"], _loc(record), record.get("head_dim"), runs))
            p["cost"] = {"measured": False, "why": "not measured: no call of the same head dim runs a faster kernel "
                                                   "(the fix changes the model: more heads of a smaller size)"}
            continue
        half = "bfloat16" if target["capability"] >= (8, 0) else "float16"
        eq_call = _equivalent(call, lambda c: [c[r].update(dtype=half, itemsize=2) for r in ("q", "k", "v")])
        import torch

        q, k, v, mask = made[:4]
        cast = getattr(torch, half)
        eq_mask = mask.to(cast) if mask is not None and mask.is_floating_point() else mask
        eq_args = (q.to(cast), k.to(cast), v.to(cast), eq_mask) + made[4:]
        eq = choose(eq_call, eq_args)
        p["instead"] = eq.get("kernel")
        dtypes = ", ".join("%s %s" % (r, record["effective_dtypes"][r]) for r in ("q", "k", "v"))
        p["message"] = ("%s at %s gets float32 inputs (%s): SDPA runs its %s kernel; in %s (the model in %s, or under "
                        "autocast) it runs %s" % (record["name"], _loc(record), dtypes, runs, half, half,
                                                  sdpa_select.LABELS.get(eq.get("kernel"))))
        cost.attach(p, tracer, made, eq_args, eq)


def flex_not_compiled(record):
    message = ("flex_attention at %s is called without torch.compile: it runs its unfused implementation, which "
               "materialises the whole [%s] score matrix per head; torch.compile(flex_attention) runs the fused "
               "kernel" % (_loc(record), "q_len x kv_len"))
    return {"id": "AD277", "severity": "warning", "check": "flex_compile", "message": message,
            "kernel_message": "flex_attention called without torch.compile() - this will use an unfused "
                              "implementation that materializes the full scores matrix instead of generating a fused "
                              "kernel.", "runs": "flex_eager", "instead": "flex_compiled", "fix": None,
            "cost": {"measured": False, "why": "flex_attention's cost is not timed (compiling it takes seconds)"}}


def _prod(xs):
    out = 1
    for x in xs:
        out *= int(x)
    return out


# ---------------------------------------------------------------- patches


def patch_for(record, problem, cwd=None):
    """A unified diff making the problem's change where it is safe (a plain call at the line);
    None where it is not."""
    fix = problem.get("fix")
    file, line = record.get("file"), record.get("line")
    if not fix:
        return None
    text, tree = parsed_source(file)
    if tree is None:
        return None
    call = _find_call(tree, line, {"scaled_dot_product_attention"})
    if call is None:
        return None
    lines = text.splitlines(True)
    if fix == "causal":
        new_lines = _causal_edit(lines, call)
    elif fix == "no_mask":
        new_lines = _no_mask_edit(lines, call)
    else:
        new_lines = _contiguous_edit(lines, tree, call, fix.get("contiguous") or ())
    if new_lines is None:
        return None
    path = display_path(file, cwd)
    old, new = (path, path) if os.path.isabs(path) else ("a/" + path, "b/" + path)
    return "".join(difflib.unified_diff(lines, new_lines, fromfile=old, tofile=new, n=3)) or None


def _causal_edit(lines, call):
    """attn_mask=MASK (or the 4th positional argument) becomes is_causal=True, on one line."""
    node = _arg(call, 3, "attn_mask")
    if node is None or any(kw.arg == "is_causal" for kw in call.keywords) or len(call.args) > 4:
        return None
    if node.lineno != node.end_lineno:
        return None
    kw = next((kw for kw in call.keywords if kw.arg == "attn_mask"), None)
    row = node.lineno - 1
    text = lines[row]
    if kw is not None:
        start = text.find("attn_mask", 0, node.col_offset)
        if start < 0 or text[start:node.col_offset].replace(" ", "") != "attn_mask=":
            return None
    else:
        start = node.col_offset
    edited = text[:start] + "is_causal=True" + text[node.end_col_offset:]
    return lines[:row] + [edited] + lines[row + 1:]


def _no_mask_edit(lines, call):
    """attn_mask=MASK (or the 4th positional argument) becomes attn_mask=None, on one line."""
    node = _arg(call, 3, "attn_mask")
    if node is None or node.lineno != node.end_lineno:
        return None
    row = node.lineno - 1
    text = lines[row]
    edited = text[:node.col_offset] + "None" + text[node.end_col_offset:]
    return lines[:row] + [edited] + lines[row + 1:]


def _contiguous_edit(lines, tree, call, roles):
    positions = {"q": (0, "query"), "k": (1, "key"), "v": (2, "value")}
    names = []
    for role in roles:
        node = _arg(call, *positions[role])
        if not isinstance(node, ast.Name):
            return None
        if node.id not in names:
            names.append(node.id)
    stmt = _enclosing_statement(tree, call)
    if stmt is None or not names:
        return None
    first = lines[stmt.lineno - 1]
    indent = first[: len(first) - len(first.lstrip())]
    new_line = "%s%s = %s  # attn-doctor AD611: the fused kernels need a contiguous last dimension\n" % (
        indent, ", ".join(names), ", ".join("%s.contiguous()" % n for n in names))
    return lines[: stmt.lineno - 1] + [new_line] + lines[stmt.lineno - 1:]


def source_line(record):
    return linecache.getline(record["file"], record["line"]).strip() if record.get("file") else None
