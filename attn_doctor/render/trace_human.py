"""Human rendering of a dtype-trace report (``attn-doctor trace``) and of the sample forward
passes (``check``'s dtype-path section). The only printing code of the tracer."""

from __future__ import annotations

import os

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from rich.tree import Tree

from .console import diff_renderable, make_console, whole_lines

MARKS = {"error": ("✗", "bold red"), "warning": ("!", "bold yellow"), "info": ("i", "cyan"), "ok": ("✓", "bold green"),
         "failed": ("✗", "bold magenta"), "skipped": ("-", "dim")}


def _path(file):
    if not file:
        return "?"
    try:
        rel = os.path.relpath(file)
        return rel if not rel.startswith("..") else file
    except ValueError:
        return file


def _loc(file, line):
    return "%s:%s" % (_path(file), line)


def _mark(kind):
    sym, style = MARKS[kind]
    return Text(sym + " ", style=style)


def finding_renderable(f, verbose=False, plain=False):
    title = Text.assemble(_mark(f["severity"]), (f["id"] + " ", "bold"), f["message"])
    if f.get("count", 1) > 1:
        title.append("  (%d calls" % f["count"], style="dim")
        if f.get("module_paths"):
            title.append(": " + ", ".join(f["module_paths"][:3]) + (", ..." if len(f["module_paths"]) > 3 else ""),
                         style="dim")
        title.append(")", style="dim")
    if f.get("run_note"):  # about the whole run (its precision), not one call: the line says it all
        return title
    tree = Tree(title, guide_style="dim")
    for entry in f.get("chain") or ():
        label = Text.assemble(
            ("%s " % ("autocast" if entry.get("kind") == "autocast" else (
                "operand" if entry.get("kind") == "fp32_operand" else "promotes")), "cyan"),
            (entry["op"], "bold"), "  ", (_loc(entry["file"], entry["line"]), "underline"),
            ("  -> " + "/".join(entry.get("feeds", ())), "dim"))
        node = tree.add(label)
        if entry.get("source"):
            node.add(Text(entry["source"], style="green"))
        if entry.get("operand"):
            origin = entry.get("operand_origin") or {}
            text = Text.assemble(("%s operand: " % (entry.get("operand_dtype") or entry.get("dtype") or "float32"), "dim"),
                                 (entry["operand"], "bold"))
            if origin.get("kind") in ("parameter", "buffer", "input", "attribute") and not origin.get("line"):
                text.append("  (%s %s)" % (origin["kind"], origin.get("name")), style="dim")
            elif origin.get("when") and origin.get("line"):
                text.append("  (%smade by %s at %s %s)" % ("%s %s, " % (origin["kind"], origin["name"]) if origin.get("name")
                                                            else "", origin.get("op"),
                                                            _loc(origin.get("file"), origin.get("line")), origin["when"]),
                            style="dim")
            elif origin.get("kind") in ("explicit_cast", "created", "promotion") and origin.get("line"):
                text.append("  (%s %s at %s)" % (origin["kind"].replace("_", " "), origin.get("op"),
                                                  _loc(origin.get("file"), origin.get("line"))), style="dim")
            via = origin.get("via")
            if origin.get("path"):
                # the lines its value went through, nearest the use first (same file: line numbers)
                steps = ["%d" % p["line"] if p.get("file") == entry.get("file") else _loc(p.get("file"), p.get("line"))
                         for p in origin["path"]]
                text.append("  through line%s %s" % ("s" if len(steps) > 1 else "", ", ".join(steps)), style="dim")
            elif via and via.get("line") and via.get("line") != entry.get("line"):
                text.append("  via %s" % _loc(via.get("file"), via.get("line")), style="dim")
            node.add(text)
        elif entry.get("reason") and verbose:
            node.add(Text(entry["reason"], style="dim"))
    for origin in f.get("origins") or ():
        if not origin.get("line"):
            continue
        node = tree.add(Text.assemble(
            ("%s " % origin["kind"].replace("_", " "), "cyan"), (origin.get("op") or "", "bold"), "  ",
            (_loc(origin["file"], origin["line"]), "underline"),
            ("  -> %s %s" % ("/".join(origin.get("feeds", ())), origin.get("dtype")), "dim")))
        if origin.get("source"):
            node.add(Text(origin["source"], style="green"))
        decided = origin.get("decided")
        if decided:
            sub = node.add(Text.assemble(("dtype chosen at ", "dim"), (_loc(decided["file"], decided["line"]), "underline"),
                                         (" (the line to change)", "dim")))
            if decided.get("source"):
                sub.add(Text(decided["source"], style="green"))
        for call in origin.get("called_by") or ():
            sub = node.add(Text.assemble(("called from ", "dim"), (_loc(call["file"], call["line"]), "underline")))
            if call.get("source"):
                sub.add(Text(call["source"], style="green"))
    sink = f["sink"]
    dtypes = ", ".join("%s %s%s" % (sink[r].get("name") or ("operand" if r in "abcd" else r), sink[r]["dtype"],
                                    list(sink[r]["shape"]) if sink[r].get("shape") is not None else "")
                       for r in ("q", "k", "v", "weights", "a", "b", "c", "d") if isinstance(sink.get(r), dict))
    layout = "[%s] " % sink["layout"] if sink.get("layout") else ""
    sink_node = tree.add(Text.assemble(("op " if sink.get("family") == "op" else "sink ", "cyan"), (sink["name"], "bold"),
                                       "  ", (_loc(sink["file"], sink["line"]), "underline"),
                                       ("  %s%s" % (layout, dtypes), "dim")))
    if sink.get("source"):
        sink_node.add(Text(sink["source"], style="green"))
    frame = sink.get("called_from")
    if frame:
        mine = sink_node.add(Text.assemble(("inside %s, reached from your code at " % frame.get("library"), "dim"),
                                           (_loc(frame["file"], frame["line"]), "underline")))
        if frame.get("source"):
            mine.add(Text(frame["source"], style="green"))
    if f.get("kernel_message"):
        sink_node.add(Text.assemble(("kernel says: ", "dim"), (f["kernel_message"], "red")))
    cost = f.get("cost") or {}
    if cost and not cost.get("measured") and cost.get("why"):
        sink_node.add(Text("cost " + cost["why"], style="dim"))
    if f.get("fix") and not f.get("patch"):
        sink_node.add(Text.assemble(("fix: ", "dim"), (f["fix"], "bold")))
    parts = [tree]
    if f.get("patch"):
        parts.append(diff_renderable(f["patch"], whole=plain))
    return Group(*parts)


_NOT_JUDGED = ("could not run", "reached no attention call", "stopped")


def _route_line(route):
    verdict = route.get("verdict") or "?"
    kind = {"clean": "ok", "runs, with warnings": "warning", "fails": "error"}.get(verdict, "failed")
    if route.get("role") == "advice" and kind == "error":
        kind = "warning"
    text = Text.assemble("  ", _mark(kind), (route.get("label") or route.get("name") or "", "bold"), ": ")
    attention = route.get("attention") or []
    if attention:
        text.append(", ".join(attention) + " — ")
    at = route.get("at")
    if verdict == "fails" and at:
        text.append("fails at %s (%s)" % (_loc(at.get("file"), at.get("line")), at.get("id")))
    elif verdict in ("could not run", "reached no attention call", "stopped") and route.get("error"):
        text.append("%s: %s" % (verdict, route["error"]))
    else:
        text.append(verdict)
    summ = route.get("summary") or {}
    if summ.get("sinks"):
        text.append("  (%d attention call%s)" % (summ["sinks"], "" if summ["sinks"] == 1 else "s"), style="dim")
    if route.get("role") == "advice":
        text.append("  advice: not the path this machine takes", style="dim")
    if route.get("note"):
        text.append("  (%s)" % route["note"], style="dim")
    return text


def _render_advice(console, routes, verbose, plain):
    for route in routes:
        if route.get("role") == "advice" and route.get("findings"):
            console.print(Text("advice, %s (not the path this machine takes):" % route.get("label"), style="bold"))
            for f in route["findings"]:
                # an error on a path this machine does not take is advice: marked as a warning
                shown = dict(f, severity="warning") if f.get("severity") == "error" else f
                console.print(finding_renderable(shown, verbose, plain))


def render_trace(report, console=None, verbose=False):
    console = console or make_console()
    plain = whole_lines(console)
    status = report.get("status")
    head = Text.assemble(("dtype trace ", "bold"), (str(report.get("target")), "bold cyan"),
                         ("  device=%s" % report.get("device"), "dim"))
    if report.get("dtype"):
        head.append("  dtype=%s" % report["dtype"], style="dim")
    if report.get("autocast"):
        head.append("  autocast=%s (%s)" % (report["autocast"], report.get("autocast_mode")), style="dim")
    if report.get("train"):
        head.append("  train", style="dim")
    hf = report.get("hf") or {}
    if hf.get("attn_implementation"):
        head.append("  attn_implementation=%s (%s; transformers %s)" % (
            hf["attn_implementation"], hf.get("attn_implementation_source"), hf.get("transformers")), style="dim")
    console.print(head)
    where = report.get("interpreter") or {}
    if where.get("python"):
        console.print(Text("  traced in %s — %s" % (where["python"], where.get("why")), style="dim"))
    if hf.get("inputs"):
        console.print(Text("  inputs made from the config: " + hf["inputs"], style="dim"))
    for note in report.get("notes") or ():
        console.print(Text("  note: " + note, style="dim"))
    err = report.get("error")
    routes = report.get("routes") or []
    several = len(routes) > 1
    if several:
        libraries = next((r.get("libraries") for r in routes if r.get("libraries")), None) or "an attention library"
        console.print(Text("attention paths (%s does not import here; the model takes another path where it "
                           "does):" % libraries, style="bold"))
        for route in routes:
            console.print(_route_line(route))
    if status in ("usage_error", "failed"):
        console.print(_failed_line(status, err))
        if verbose and err and err.get("traceback"):
            console.print(Text(err["traceback"], style="dim"))
        elif err and err.get("traceback"):
            console.print(Text("  (traceback with -v)", style="dim"))
        _render_advice(console, routes, verbose, plain)
        return
    findings = report.get("findings") or []
    labels = {r.get("name"): r.get("label") for r in routes}
    current = None
    for f in findings:
        if several and f.get("route") != current:
            current = f.get("route")
            console.print(Text(labels.get(current, current or "") + ":", style="bold"))
        console.print(finding_renderable(f, verbose, plain))
    _render_advice(console, routes, verbose, plain)
    render_kernels(report, console)
    if verbose:
        for s in report.get("sinks") or ():
            console.print(Text.assemble(_mark("ok" if s["ok"] else "warning"), s["name"], "  ",
                                        _loc(s["file"], s["line"]), ("  %s" % s.get("module_path"), "dim"),
                                        ("  %s head_dim=%s" % (s["effective_dtypes"], s.get("head_dim")), "dim")))
    if err and status != "no_attention":
        console.print(Text.assemble(_mark("warning"), err.get("message", "")))
        if verbose and err.get("traceback"):
            console.print(Text(err["traceback"], style="dim"))
    render_summary(report, console)


def kernel_sites(sinks):
    """(file, line, name, kernel label, where judged, count) per call site: one per layer merged."""
    sites = {}
    for s in sinks or ():
        kernel = s.get("kernel") or {}
        if not kernel.get("label"):
            continue
        key = (s.get("file"), s.get("line"), s.get("name"), kernel["label"])
        if key in sites:
            sites[key][-1] += 1
        else:
            how = "asked torch on this GPU" if kernel.get("source") == "torch" else (
                "emulated for %s" % kernel["for"] if kernel.get("for") else "")
            sites[key] = [s.get("file"), s.get("line"), s.get("name"), kernel["label"], how, 1]
    return [tuple(v) for v in sites.values()]


def render_kernels(report, console):
    """The kernel each attention call site runs on the target GPU."""
    sites = kernel_sites(report.get("sinks"))
    if not sites:
        return
    console.print(Text("kernel at each attention call:", style="bold"))
    for file, line, name, label, how, count in sites:
        extra = ", ".join(x for x in (how, "%d calls" % count if count > 1 else "") if x)
        console.print(Text.assemble("  ", (_loc(file, line), "underline"), "  %s -> " % name, (label, "bold"),
                                    ("  (%s)" % extra if extra else "", "dim")))


def _failed_line(status, err):
    return Text.assemble(_mark("failed"), ("trace could not run: " if status == "failed" else "usage: ", "bold"),
                         err.get("message", "") if err else "")


def render_quiet(report, console):
    """All of the report with -q: each finding's one line (its rule, where, its kind of call), then
    the verdict."""
    for f in report.get("findings") or ():
        if f.get("severity") not in ("error", "warning"):
            continue
        sink = f.get("sink") or {}
        console.print(Text.assemble(_mark(f["severity"]), (f["id"] + " ", "bold"),
                                    "%s at %s" % (sink.get("name") or "?", _loc(sink.get("file"), sink.get("line")))))
    render_summary(report, console)


def render_summary(report, console):
    """The verdict line(s) that end the report."""
    status, err = report.get("status"), report.get("error")
    summary = report.get("summary") or {}
    findings = report.get("findings") or []
    routes = report.get("routes") or []
    several = len(routes) > 1
    if status in ("usage_error", "failed"):
        console.print(_failed_line(status, err))
        return
    if status == "no_attention":
        console.print(Text.assemble(_mark("failed"), ("nothing judged: ", "bold"), (err or {}).get("message", "")))
        return
    # A path that could not run judged nothing: the last line says so and counts it, never a bare ✓.
    unjudged = [r for r in routes if r.get("verdict") in _NOT_JUDGED]
    judged = "" if not unjudged else " on %d of %d paths" % (len(routes) - len(unjudged), len(routes))
    not_judged = "; not judged: " + ", ".join("%s (%s)" % (r.get("label") or r.get("name"), r.get("verdict"))
                                               for r in unjudged) if unjudged else ""
    notes = sum(1 for f in findings if f.get("severity") == "info")
    # the other path's findings (advice) are printed above: the last line never reads as if there were none
    advice = [(r, [f for f in r.get("findings") or () if f.get("severity") in ("error", "warning")])
              for r in routes if r.get("role") == "advice"]
    advice_text = "".join("; advice above: %d problem%s on the %s path" % (len(fs), "" if len(fs) == 1 else "s",
                                                                           r.get("label") or r.get("name"))
                          for r, fs in advice if fs)
    if len(findings) == notes and not err:
        console.print(Text.assemble(_mark("warning" if unjudged or advice_text else "ok"),
                                    "no dtype problems at %d attention call%s%s%s "
                                    "(%d ops traced)%s%s%s" % (summary.get("sinks", 0), "" if summary.get("sinks") == 1 else "s",
                                                               " on the path this machine takes" if advice_text else "",
                                                               judged, summary.get("ops", 0), not_judged,
                                                               "; %d note%s above" % (notes, "" if notes == 1 else "s")
                                                               if notes else "", advice_text)))
    else:
        console.print(Text("%d error(s), %d warning(s)%s at %d of %d attention calls%s; %d ops traced in %.2fs%s" % (
            summary.get("errors", 0), summary.get("warnings", 0), ", %d note(s)" % notes if notes else "",
            summary.get("bad_sinks", 0), summary.get("sinks", 0),
            judged or (" (%d paths)" % len(routes) if several else ""), summary.get("ops", 0),
            report.get("duration_s") or 0, not_judged), style="bold"))


def render_samples(result, console=None, verbose=False):
    """The dtype-path section of ``check``: one line per sample forward pass."""
    console = console or make_console()
    plain = whole_lines(console)
    for s in result.get("samples") or ():
        status = s["status"]
        if status == "ran":
            summ = s.get("summary") or {}
            kind = "error" if summ.get("errors") else ("warning" if summ.get("warnings") else "ok")
            line = Text.assemble(_mark(kind), (s["name"], "bold"),
                                 ("  %d attention calls" % summ.get("sinks", 0), "dim"))
        else:
            line = Text.assemble(_mark("skipped" if status == "skipped" else "failed"), (s["name"], "bold"),
                                 ("  %s" % (s.get("reason") or status), "dim"))
        console.print(line)
        for f in s.get("findings") or ():
            console.print(Padding(finding_renderable(f, verbose, plain), (0, 0, 0, 2), expand=False))
