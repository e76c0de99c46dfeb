"""The words for a promotion chain, shared by the raised-forward finding and the report; imports no
torch (the report is read where torch does not import)."""

from __future__ import annotations

from ..calls.patch import display_path


def loc(file, line):
    """FILE:LINE as the findings show a place (the path shortened as patches show it)."""
    return "%s:%s" % (display_path(file) if file else "?", line)


def promotion_text(chain):
    """"promoted to float32 by OP at FILE:LINE (float32 operand X at ..., made by ...)"."""
    head = chain[0]
    what = head.get("reason", "") if head.get("kind") == "autocast" else ""
    with_operand = next((e for e in chain if e.get("operand")), None)
    if with_operand is not None:
        origin = with_operand.get("operand_origin") or {}
        extra = ""
        if origin.get("kind") in ("parameter", "buffer", "attribute") and origin.get("name") != with_operand["operand"]:
            extra = ", %s %s" % (origin["kind"], origin["name"])
        made = origin if origin.get("line") else (origin.get("via") or {})
        tail = ""
        if origin.get("kind") not in ("parameter", "buffer", "input") and made.get("line") and (
                made.get("line") != with_operand["line"]):
            tail = ", made by %s at %s" % (made.get("op"), loc(made.get("file"), made.get("line")))
        what = (what + "; " if what else "") + "%s operand %s%s at %s%s" % (
            with_operand.get("operand_dtype") or with_operand.get("dtype") or "float32", with_operand["operand"],
            extra, loc(with_operand["file"], with_operand["line"]), tail)
    return "promoted to %s by %s at %s (%s)" % (head.get("dtype") or "float32", head["op"],
                                                loc(head["file"], head["line"]), what)
