"""Turn a finished trace into plain JSON-able sink records and findings."""

from __future__ import annotations

import linecache
import re

from .kernel_choice import cost as cost_mod
from .kernel_choice import fallbacks, kernels
from .calls import patch, sinks
from .places import SAMPLES_FILE, library_package
from .dtype_path.words import loc as _loc, promotion_text


# The inputs whose dtypes a finding follows: q, k, v, the attention weights of attention written
# out (weights @ v), and the two operands of a matmul that mixes dtypes (a, b).
ROLES = ("q", "k", "v", "weights", "a", "b")

_CALL_NAMES = {
    "sdpa": ("scaled_dot_product_attention",),
    "mha": ("multi_head_attention_forward",),
}


def _call_names(record):
    names = _CALL_NAMES.get(record["family"])
    if names:
        return names
    short = record["name"].rsplit(".", 1)[-1].rsplit(":", 1)[-1]
    return (short,)


def _roles_for(record):
    """The q/k/v argument positions of a library kernel the patch can cast at the call (SDPA's too);
    None for transformers' attention functions, whose call is not in the user's code."""
    if record["family"] in ("sdpa", "mha"):
        return sinks.QKV_LONG
    if record["family"] in ("flash_attn2", "flash_attn3", "flash_attn4", "xformers", "sage"):
        return record.get("_roles")
    return None


def public_sink(record):
    out = {k: v for k, v in record.items() if not k.startswith("_") and k != "seq"}
    if record.get("_extra_nodes"):
        others = {r: dict(v) for r, v in record.get("other_inputs", {}).items()}
        from .dtype_path.provenance import origin_of  # its nodes.py imports torch: this module does not

        for role, node in record["_extra_nodes"].items():
            if role not in others:
                continue
            # where the mask got its dtype (made float32 there, cast there), not the reshape before the call
            origin = origin_of(node) if node.dtype in ("float32", "float64") else {}
            if origin.get("kind") in ("created", "explicit_cast") and origin.get("line"):
                others[role]["made_at"] = {k: origin[k] for k in ("op", "file", "line", "source", "called_by")
                                           if k in origin}
            elif node.file:
                others[role]["made_at"] = {"op": node.op, "file": node.file, "line": node.line,
                                           "source": linecache.getline(node.file, node.line).strip() or None}
        out["other_inputs"] = others
    out["source"] = linecache.getline(record["file"], record["line"]).strip() if record.get("file") else None
    out["ok"] = not any(p.get("severity") in ("error", "warning") for p in record["problems"])
    if "kernel" not in out and record.get("family") in kernels.NAMES:
        out["kernel"] = {"name": record["family"], "label": kernels.NAMES[record["family"]], "source": "call"}
    return out


def build(tracer, expected_dtype=None, cwd=None, fp32_model=False):
    """(sinks, findings) from a tracer's records; repeated sites (one per layer) are merged.
    fp32_model: the model computes in float32 without autocast (its SDPA calls' float32 inputs are
    one note for the run, not a warning per call)."""
    sink_list, findings, by_key = [], [], {}
    for record in tracer.sinks:
        if record.get("inner"):
            continue  # transformers' dispatch: the kernel call inside it is the record that counts
        public = public_sink(record)
        if record["family"] != "op":  # a matmul that mixes dtypes (AD608) is not an attention call
            sink_list.append(public)
        if not record["problems"]:
            continue
        dtype_problems = [p for p in record["problems"] if p["check"] in ("dtype", "same_dtype")]
        other = [p for p in record["problems"] if p not in dtype_problems]
        raw = tuple(sorted(record["effective_dtypes"].items()))
        for group in ([dtype_problems] if dtype_problems else []) + [[p] for p in other]:
            first = group[0]
            key = (first["id"], record["name"], record["file"], record["line"], raw)
            if key in by_key:
                f = by_key[key]
                f["count"] += 1
                if record["module_path"] and record["module_path"] not in f["module_paths"] and len(
                        f["module_paths"]) < 8:
                    f["module_paths"].append(record["module_path"])
                continue
            f = _finding(record, public, group, expected_dtype, cwd)
            by_key[key] = f
            findings.append(f)
    findings = _one_per_cause(findings)
    if fp32_model:
        findings = _fp32_model_note(findings)
    for f in findings:
        _library_choice(f)
    return sink_list, findings


# Warnings about what the model computes slowly or less precisely (a fallback kernel, a mask read
# for nothing, a table in half): where every line they name is an installed library's, no line of
# the user's changes it. The library's choice is said as a note, with where to take it.
_AT_MOST_NOTES = frozenset(("AD603", "AD610", "AD611", "AD612", "AD613", "AD618", "AD619", "AD620", "AD622", "AD625",
                            "AD626"))


def _library_choice(f):
    if f.get("severity") != "warning" or f["id"] not in _AT_MOST_NOTES:
        return
    sink = f.get("sink") or {}
    named = [sink] + list(f.get("chain") or ()) + [o for o in f.get("origins") or () if o.get("file")]
    files = [e.get("file") for e in named if e.get("file")]
    libraries = {library_package(x) for x in files}
    if not files or None in libraries or sink.get("called_from"):
        return
    owner = sorted(libraries)[0]
    f["severity"] = "info"
    f["message"] += ("; every line this names is %s's own code, not a line you change: a note, not a warning "
                     "(report it to %s, or choose another attention implementation)" % (owner, owner))


# What an fp32 model gets at SDPA (a slower kernel: AD604's warning) is the model's precision, not
# a problem of one call: one note for the run, which says how to trace the precision it trains in.
def _fp32_model_note(findings):
    fp32 = [f for f in findings if f["id"] == "AD604" and f["severity"] == "warning"]
    if not fp32:
        return findings
    calls = sum(f.get("count", 1) for f in fp32)
    sites = ", ".join(_loc(f["sink"]["file"], f["sink"]["line"]) for f in fp32[:3]) + (", ..." if len(fp32) > 3 else "")
    runs = next((f["kernel"]["runs"] for f in fp32 if f.get("kernel") and f["kernel"].get("runs")), None)
    if runs:
        from .kernel_choice.sdpa_select import LABELS

        runs = "SDPA's %s kernel" % LABELS.get(runs, runs)
    # on a GPU the first call was timed against its half-precision twin: the note keeps that figure
    cost = next((f["cost"] for f in fp32 if (f.get("cost") or {}).get("measured")), None)
    note = dict(fp32[0], severity="info", chain=[], origins=[], patch=None, count=calls, checks=["fp32_model"],
                run_note=True, kernel_message="", cost=cost,
                message=("the model computes in float32 (its parameters are float32 and no autocast was traced): its "
                         "%d attention call%s (%s) get float32 q/k/v, which %s; that is the precision of this trace, "
                         "not a fault of one call. To trace the precision you train in: --autocast bf16 (mixed "
                         "precision, fp32 weights) or --dtype bf16 (a bf16 model); fp16 likewise"
                         % (calls, "" if calls == 1 else "s", sites,
                            "run on %s, not a flash kernel" % runs if runs else "no flash kernel takes")))
    if cost:
        note["message"] += "; " + cost_mod.describe(cost)
    out, placed = [], False
    for f in findings:
        if f in fp32:
            if not placed:
                out.append(note)
                placed = True
            continue
        out.append(f)
    return out


def _one_per_cause(findings):
    """Matmuls that mix dtypes because of one promotion (q's and k's projections of one float32
    input) are one finding: the first, with the others' places in ``also``."""
    out, by_cause = [], {}
    for f in findings:
        head = (f.get("chain") or [None])[0] or (f.get("origins") or [None])[0]
        cause = (head.get("file"), head.get("line"), head.get("op")) if f["id"] == "AD608" and head else None
        if cause is None or cause not in by_cause:
            if cause is not None:
                by_cause[cause] = f
            out.append(f)
            continue
        first = by_cause[cause]
        first["count"] += f["count"]
        first.setdefault("also", []).append({k: f["sink"].get(k) for k in ("name", "file", "line", "source")})
    for f in by_cause.values():
        if f.get("also"):
            f["message"] += "; the same float32 value also reaches %s" % ", ".join(
                "%s at %s" % (a["name"], _loc(a["file"], a["line"])) for a in f["also"][:4])
    return out


def _finding(record, public, problems, expected_dtype, cwd):
    from .dtype_path.provenance import explain_sink, wide_origins  # its nodes.py imports torch: this module does not

    first = problems[0]
    chain, origins, rid, severity = [], [], first["id"], first["severity"]
    eff = record["effective_dtypes"]
    if first["check"] in ("dtype", "same_dtype"):
        chains = explain_sink(record)
        merged = {}
        for role in ROLES:
            for entry in chains.get(role, ()):
                key = (entry["file"], entry["line"], entry["op"])
                if key in merged:
                    if role not in merged[key]["feeds"]:
                        merged[key]["feeds"].append(role)
                else:
                    merged[key] = dict(entry, feeds=[role])
        chain = list(merged.values())
        if chain and record["family"] != "op":
            rid = "AD601"
        else:
            origins = wide_origins(record)
    elif first["check"] == "precision":
        seen_places = set()
        for o in record.get("_origins") or ():
            if (o.get("file"), o.get("line")) not in seen_places:
                seen_places.add((o.get("file"), o.get("line")))
                origins.append(dict(o))
    elif first["check"] == "forward_raised":
        chain = list(record.get("_chain") or ())  # the operands' origins are in the message (raised.py)
    elif first["check"] == "softmax_width" and record.get("_scores") is not None:
        from .dtype_path.provenance import chain_entry, promotions_behind

        half = eff.get("q")
        chain = [dict(chain_entry(p, half), feeds=["scores"]) for p in promotions_behind(record["_scores"])]
    sink = {
        "name": record["name"],
        "family": record["family"],
        "file": record["file"],
        "line": record["line"],
        "source": public.get("source"),
        "module_path": record["module_path"],
        "layout": record["layout"],
        "head_dim": record["head_dim"],
        "autocast": record["autocast"],
        "standin": bool(record.get("standin")),
    }
    for role, info in record["inputs"].items():
        sink[role] = info
    if public.get("other_inputs"):
        sink["other_inputs"] = public["other_inputs"]
    if first.get("fix_line") and first["fix_line"].get("file"):
        # the line a precision finding's fix changes (a table made in half, k^T v in float16)
        where = first["fix_line"]
        origins = list(origins) + [{"kind": "created", "op": where.get("op") or "the product", "file": where["file"],
                                    "line": where["line"], "feeds": where.get("feeds") or ["the call"],
                                    "dtype": where.get("dtype") or "",
                                    "source": linecache.getline(where["file"], where["line"]).strip() or None}]
    message = first["message"] if first.get("message") and rid == first["id"] else _message(
        rid, record, first, chain, public)
    if rid == "AD620" and chain:
        message += "; the scores are %s" % promotion_text(chain)
    if origins and first["check"] != "precision":  # a precision finding's message names its sources
        message += "; " + "; ".join(_origin_text(o) for o in origins)
    made = first.get("mask_made")
    if made:
        message += "; " + _mask_made_text(made)
        if made.get("line"):
            origins = list(origins) + [{
                "kind": "created", "op": "the %s" % made["role"], "file": made["file"], "line": made["line"],
                "source": linecache.getline(made["file"], made["line"]).strip() or None,
                "called_by": [dict(c, source=linecache.getline(c["file"], c["line"]).strip() or None)
                              for c in made.get("called_by") or ()],
                "feeds": [made["role"]], "dtype": "%s%s" % (made["dtype"], made["shape"])}]
    called_from = _called_from(record)
    if called_from:
        sink["called_from"] = called_from
        mask_maker = (first.get("fix_line") or {}) if first["check"] not in ("dtype", "same_dtype") else {}
        message += "; " + _called_from_text(called_from, mask=first["check"] not in ("dtype", "same_dtype"),
                                            chain=chain, maker=mask_maker)
    cost = first.get("cost")
    if cost and cost.get("measured"):
        message += "; " + cost_mod.describe(cost)
    patch_text = record.get("_patch")
    operand_fix = None
    if rid == "AD601" and chain and not ({"q", "k", "v"} & {r for e in chain for r in e.get("feeds", ())}):
        # the attention weights were promoted, not q or k: the operand to cast is what joined the
        # scores (a float32 mask or bias), at the line where it joined them
        operand_fix = _weights_operand_fix(record, chain, eff, cwd)
        if operand_fix is not None:
            patch_text = operand_fix.get("patch")
    if patch_text:
        pass
    elif first.get("fix"):
        patch_text = fallbacks.patch_for(record, first, cwd)
    elif first["check"] in ("dtype", "same_dtype"):
        roles = _roles_for(record)
        target = sinks.target_dtype(eff, expected_dtype)
        if roles is not None and target is not None and record.get("file"):
            patch_text = patch.sink_patch(record["file"], record["line"], _call_names(record), roles, eff, target,
                                          cwd=cwd, rule_id=rid)
    return {
        "id": rid,
        "severity": severity,
        "message": message,
        "kernel_message": first["kernel_message"],
        "checks": [p["check"] for p in problems],
        "sink": sink,
        "chain": chain,
        "origins": origins,
        # a call in an installed package gets no patch: an edit there is lost at its next install
        "patch": None if called_from else patch_text,
        "count": record.get("count", 1),
        "module_paths": [record["module_path"]] if record["module_path"] else [],
        "continued_with": record.get("continued_with"),
        "kernel": {"runs": first.get("runs"), "instead": first.get("instead")} if first.get("runs") else None,
        "cost": cost,
        **({"fix": first["remedy"]} if first.get("remedy") else {}),
        **({"fix": operand_fix["fix"]} if operand_fix else {}),
        **(_raised_extras(record) if rid == "AD621" else {}),
    }


_NAME = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


def _weights_operand_fix(record, chain, eff, cwd):
    """{"fix": words, "patch": diff or None} for scores promoted by a wider operand (a float32 mask
    added): cast that operand where it joins them, to the dtype of v (named from the call's line)."""
    entry = next((e for e in chain if e.get("operand")), None)
    if entry is None:
        return None
    name = entry["operand"]
    origin = entry.get("operand_origin") or {}
    half = eff.get("v") or eff.get("q")
    made = " (made at %s)" % _loc(origin["file"], origin["line"]) if origin.get("line") else ""
    fix = ("the %s operand %s%s widens the scores at %s: cast it to the scores' dtype where it joins them (%s.to(...)) "
           "or make it in %s where it is made" % (entry.get("operand_dtype") or "float32", name, made,
                                                 _loc(entry["file"], entry["line"]), name, half))
    patch_text = None
    if _NAME.match(name) and entry.get("file"):
        dtype_expr = _value_name(record) or ("torch.%s" % half if half else None)
        line = linecache.getline(entry["file"], entry["line"])
        if dtype_expr and re.search(r"\b%s\b" % re.escape(name), line):
            patch_text = patch.line_patch(entry["file"], entry["line"], name, "%s.to(%s)" % (
                name, dtype_expr if dtype_expr.startswith("torch.") else dtype_expr + ".dtype"), cwd=cwd)
    return {"fix": fix, "patch": patch_text}


def _value_name(record):
    """The variable v is in at a written-out attention's line (`probs @ v`, `torch.matmul(p, v)`)."""
    import ast

    source = linecache.getline(record.get("file") or "", record.get("line") or 0).strip()
    try:
        tree = ast.parse(source.split("=", 1)[-1].strip() if "=" in source.split("(")[0] else
                         source.replace("return ", "", 1))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and isinstance(node.right, ast.Name):
            return node.right.id
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "matmul", "bmm") and len(node.args) >= 2 and isinstance(node.args[1], ast.Name):
            return node.args[1].id
    return None


def _raised_extras(record):
    """A crash's finding: the lines its operands were made at (the places a fix changes) as
    origins, and the fix in words."""
    from .dtype_path.raised import raised_fix

    out = {"origins": [dict(o) for o in record.get("_origins") or () if o.get("line")]}
    fix = raised_fix(record)
    if fix:
        out["fix"] = fix
    if record.get("called_by"):
        out["sink_called_by"] = record["called_by"]
    return out


# Keyword arguments of the user's call that choose a mask or causality in the library's words.
_MASK_OPTION = re.compile(r"\b(\w*(?:mask|causal|window|bias)\w*)\s*=\s*([^,()]+(?:\([^()]*\))?)")


def _called_from(record):
    """The user's frame that called into the library holding this attention call, with the options
    of its call that choose the mask, or None when the call is the user's own."""
    frame = record.get("called_from")
    if not frame or not frame.get("file"):
        return None
    source = linecache.getline(frame["file"], frame["line"]).strip() or None
    options = ["%s=%s" % (m.group(1), m.group(2).strip()) for m in _MASK_OPTION.finditer(source or "")]
    return {"file": frame["file"], "line": frame["line"], "function": frame.get("function"), "source": source,
            "library": frame.get("library"), "library_file": frame.get("library_file"),
            "library_line": frame.get("library_line"), "options": options[:4]}


def _called_from_text(frame, mask, chain=(), maker=None):
    """Where the fix goes for an attention call inside a library: the library's option that chose
    the mask, what the user's code gives it, or, where the promotion itself is in the library's
    code, the library (`check`'s sample models are the doctor's: no code of the user's is involved)."""
    sample = frame.get("file") == SAMPLES_FILE
    where = "the call is inside %s, %s" % (frame["library"], "in attn-doctor's sample model built with it" if sample
                                           else "reached from your code at %s" % _loc(frame["file"], frame["line"]))
    if mask and maker and maker.get("file") and library_package(maker["file"]) is None and not sample:
        # the tensor the call refuses or reads needlessly is made by the user's own code
        return where + ": the %s is made in your code at %s: change it there" % (
            "/".join(maker.get("feeds") or ["mask"]), _loc(maker["file"], maker["line"]))
    if mask:
        chosen = (" (%s)" % ", ".join(frame["options"])) if frame["options"] else ""
        return where + chosen + ": the library builds this mask, so the change is the library's option there " \
                                "(its causal flag, or its attention implementation), not is_causal in its code"
    # the library's own: each promoting op and the line that made its wide operand are in its code
    # (an operand that is a parameter, buffer or input may be what the user's code gave it)
    inside = [e for e in chain if library_package(e.get("file")) == frame["library"]
              and library_package((e.get("operand_origin") or {}).get("file")) == frame["library"]]
    if sample or (chain and len(inside) == len(chain)):
        return where + ": the promotion happens in the library's own code, so the fix is the library's: " \
                       "upgrade it, or report it upstream with these lines"
    return where + ": the fix goes into what your code gives it (its dtype) or into the library (upgrade or report)"


def _origin_text(origin):
    """Where a wide input got its width: "q/k float32 since Tensor.float at model.py:9 (not cast back)"."""
    roles = "/".join(origin["feeds"]) if not set(origin["feeds"]) & {"a", "b"} else "the operand"
    kind = origin.get("kind")
    if kind in ("parameter", "buffer", "input") or (kind == "attribute" and not origin.get("line")):
        return "%s %s from %s %s" % (roles, origin["dtype"], kind, origin.get("name"))
    if origin.get("when"):  # made before the trace, when the model was built
        named = "%s %s, " % (kind, origin["name"]) if origin.get("name") else ""
        return "%s %s from %smade by %s at %s %s" % (roles, origin["dtype"], named, origin.get("op"),
                                                    _loc(origin.get("file"), origin.get("line")), origin["when"])
    what = "since %s at %s" % (origin.get("op"), _loc(origin.get("file"), origin.get("line")))
    if origin.get("called_by"):
        what += " (called from %s)" % ", ".join(_loc(c["file"], c["line"]) for c in origin["called_by"][:2])
    if kind == "explicit_cast":
        text = "%s %s %s (an explicit cast, not cast back before the call)" % (roles, origin["dtype"], what)
    else:
        text = "%s %s %s (made %s there)" % (roles, origin["dtype"], what, origin["dtype"])
    return text + decided_text(origin)


def _mask_made_text(made):
    """"the attn_mask [3, 1, 32] does not broadcast to [3, 4, 32, 32]; it is made at model.py:7 (called from ...)"."""
    text = "the %s %s%s does not broadcast to the call's [batch, heads, q_len, kv_len] = %s" % (
        made["role"], made["dtype"], made["shape"], made.get("expected"))
    if made.get("line"):
        text += "; it is made at %s" % _loc(made["file"], made["line"])
        if made.get("called_by"):
            text += " (called from %s)" % ", ".join(_loc(c["file"], c["line"]) for c in made["called_by"][:2])
        if len(made["shape"]) == len(made.get("expected") or ()) - 1:
            text += ": one axis short (a [batch, kv_len] padding mask needs [:, None, None, :])"
    return text


def decided_text(origin):
    """", its dtype chosen at model.py:9 by a condition (`dtype = ... if ... else ...`)"."""
    decided = origin.get("decided")
    if not decided:
        return ""
    return "; its dtype is chosen at %s%s: `%s`" % (_loc(decided["file"], decided["line"]),
                                                   " by a condition" if decided.get("test") else "",
                                                   decided.get("source") or decided.get("variable"))


def _message(rid, record, problem, chain, public=None):
    where = _loc(record["file"], record["line"])
    eff = record["effective_dtypes"]
    shown = {r: eff[r] for r in ROLES if r in eff and (r != "weights" or eff[r] != eff.get("v"))}
    dtypes = ", ".join("%s %s" % kv for kv in shown.items())
    wide = sorted({d for d in eff.values() if d in sinks.WIDE}) or ["float32"]
    if rid == "AD606":
        others = (public or {}).get("other_inputs") or {}
        parts = []
        for role, info in sorted(others.items()):
            text = "%s %s" % (role, info.get("effective_dtype") or info["dtype"])
            made = info.get("made_at")
            if made and made.get("line"):
                text += " (made by %s at %s)" % (made["op"], _loc(made["file"], made["line"]))
            parts.append(text)
        return "%s at %s gets %s with %s: the kernel refuses it" % (
            record["name"], where, ", ".join(parts) or "a mask", dtypes)
    if rid == "AD621":
        from .dtype_path.raised import raised_message

        return raised_message(record)
    if rid == "AD607":
        # every operand with its shape: the one that does not fit may be the mask or bias
        shapes = {r: i.get("shape") for r, i in (record.get("inputs") or {}).items()}
        shapes.update({r: i.get("shape") for r, i in ((public or {}).get("other_inputs") or {}).items()})
        every = dict(shown)
        every.update({r: i.get("effective_dtype") or i["dtype"] for r, i in sorted(((public or {}).get("other_inputs") or {}).items())})
        said = ", ".join("%s %s%s" % (r, d, " [%s]" % ", ".join(str(x) for x in shapes[r]) if shapes.get(r) else "")
                         for r, d in every.items())
        return "%s at %s raised (%s): %s" % (record["name"], where, said, problem["kernel_message"])
    if rid == "AD601":
        return "%s reaches %s at %s with %s: %s" % (
            "/".join(r for r in ROLES if any(r in e["feeds"] for e in chain)), record["name"], where, dtypes,
            promotion_text(chain))
    if rid == "AD602":
        return "%s at %s gets mixed dtypes (%s)" % (record["name"], where, dtypes)
    if rid == "AD608":
        text = "%s at %s gets operands of two dtypes (%s, %s): on a GPU it raises here, before the attention call" % (
            record["name"], where, eff.get("a"), eff.get("b"))
        return text + ("; %s" % promotion_text(chain) if chain else "")
    if rid == "AD604":
        if problem["severity"] == "warning":
            return "%s at %s gets %s inputs (%s): no flash kernel, SDPA falls back to a slower one" % (
                record["name"], where, "/".join(wide), dtypes)
        return "%s at %s gets %s inputs (%s); the kernel takes fp16/bf16%s only" % (
            record["name"], where, "/".join(wide), dtypes, " (or fp8)" if record.get("family") == "flash_attn4" else "")
    if rid == "AD603" and record.get("family") == "flash_attn4":
        # FlashAttention 4's head dims depend on the architecture: not one limit (its message says which)
        return "%s at %s: head dims (%s, %s) are not ones FlashAttention 4 takes on this GPU" % (
            record["name"], where, record["head_dim"], record["head_dim_v"])
    if rid == "AD603":
        return "%s at %s: head dim %s is over the kernel's limit of %d" % (
            record["name"], where, record["head_dim"], sinks.FA2_MAX_HEAD_DIM)
    if rid == "AD605":
        return "%s at %s: %s" % (record["name"], where, problem["kernel_message"])
    return problem["kernel_message"]


def summarize(sink_list, findings):
    return {
        "sinks": len(sink_list),
        "bad_sinks": sum(1 for s in sink_list if not s["ok"]),
        "errors": sum(1 for f in findings if f["severity"] == "error"),
        "warnings": sum(1 for f in findings if f["severity"] == "warning"),
        "notes": sum(1 for f in findings if f["severity"] == "info"),
    }
