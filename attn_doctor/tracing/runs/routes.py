"""Which attention path the model takes. Where an attention library (flash-attn 2/3/4, xformers,
SageAttention, the kernels hub) does not import, a stand-in takes its
place (standins/registry.py), so the model takes the path it takes where the library is installed. When the
stand-in was called, that is not the path the model takes here: api.trace runs the trace again
without it in a fresh process, and combine_routes makes one report of both (``routes``). On
``--device cuda`` the installed route is the verdict and the stand-in's is advice; on meta and CPU,
which stand for a GPU machine that may or may not have the library, both count. Plain data in and
out."""

from __future__ import annotations

from ..errors import EXIT_CLEAN, EXIT_FINDINGS

ROUTE_INSTALLED = "installed"
ROUTE_STANDIN = "standin"


def _standin_parts(report=None):
    """The stand-ins a route ran through: [(library, release whose checks it enforces)]."""
    from ..standins.registry import LIBRARIES

    releases = {library.family: (library.release, library.version) for library in LIBRARIES}
    parts = []
    for s in (report or {}).get("sinks") or ():
        if not s.get("standin"):
            continue
        if ":" in (s.get("name") or ""):  # a kernels-hub kernel: "repo:function"
            part = ("the kernels hub's %s" % s["name"].split(":")[0], "(kernels %s)" % releases["hub"][1])
        else:
            # transformers' flash path reaches flash-attn 2's functions
            part = releases.get(s.get("family"), releases["flash_attn2"])
        if part not in parts:
            parts.append(part)
    return parts or [releases["flash_attn2"]]


def _standin_label(report=None):
    """Which stand-ins the route ran through, each with the release whose checks it enforces."""
    return "with " + " and ".join("%s %s" % part for part in _standin_parts(report))


def standin_libraries(report=None):
    """The libraries a stand-in route ran through, by name, for sentences about where they import."""
    return " and ".join(name for name, _ in _standin_parts(report))


# torch's own kernels and transformers'; the attention libraries' names are in their records.
_KERNEL_LABELS = {"sdpa": "SDPA", "mha": "MHA (SDPA inside)", "fla": "fla", "eager": "eager (matmul, softmax)",
                  "transformers_flash": "flash_attention_2 (transformers)"}


def _kernels(sink_list):
    from ..standins.registry import LIBRARIES

    labels = dict(_KERNEL_LABELS, **{library.family: library.kernel for library in LIBRARIES})
    seen = []
    for s in sink_list or ():
        label = labels.get(s.get("family"), s.get("name"))
        if label not in seen:
            seen.append(label)
    return seen


def route_entry(report, name, role):
    """One route's summary: which attention it reached and what became of it."""
    status = report.get("status")
    findings = report.get("findings") or []
    errors = [f for f in findings if f.get("severity") == "error"]
    err = report.get("error") or {}
    at = None
    if errors:
        sink = errors[0].get("sink") or {}
        at = {"file": sink.get("file"), "line": sink.get("line"), "id": errors[0].get("id"),
              "message": errors[0].get("message")}
        verdict = "fails"
    elif status in ("failed", "usage_error"):
        verdict = "could not run"
    elif status == "no_attention":
        verdict = "reached no attention call"
    elif status == "partial":
        verdict = "stopped"
    elif findings:
        verdict = "runs, with warnings"
    else:
        verdict = "clean"
    entry = {"name": name, "label": "as installed" if name == ROUTE_INSTALLED else _standin_label(report),
             "role": role, "status": status, "exit_code": report.get("exit_code"),
             "attention": _kernels(report.get("sinks")), "verdict": verdict, "at": at, "error": err.get("message"),
             "summary": report.get("summary"), "findings": findings}
    if name != ROUTE_INSTALLED:
        entry["libraries"] = standin_libraries(report)
    return entry


def combine_routes(standin, installed, device):
    """One report from two traces of the same model: with the stand-ins and as installed.
    On cuda the installed route is the verdict and the stand-in's is advice; on meta/cpu both count
    (which one the training machine takes depends on whether it has the library)."""
    verdict = [ROUTE_INSTALLED] if device == "cuda" else [ROUTE_STANDIN, ROUTE_INSTALLED]
    by_name = {ROUTE_INSTALLED: installed, ROUTE_STANDIN: standin}
    routes = [route_entry(installed, ROUTE_INSTALLED, "verdict"),
              route_entry(standin, ROUTE_STANDIN, "verdict" if ROUTE_STANDIN in verdict else "advice")]
    primary = installed if device == "cuda" else standin
    if device != "cuda" and installed.get("status") in ("failed", "no_attention"):
        routes[0]["note"] = ("not counted in the exit code: off the GPU the trace stands for a machine with "
                             "%s, and that path ran" % standin_libraries(standin))
    out = dict(primary)
    out["notes"] = list(standin.get("notes") or [])
    for note in installed.get("notes") or ():
        if note not in out["notes"]:
            out["notes"].append("as installed: " + note)
    findings, sink_list = [], []
    summary = {"sinks": 0, "bad_sinks": 0, "errors": 0, "warnings": 0, "ops": 0}
    for name in verdict:
        rep = by_name[name]
        findings += [dict(f, route=name) for f in rep.get("findings") or ()]
        sink_list += [dict(s, route=name) for s in rep.get("sinks") or ()]
        for key in summary:
            summary[key] += int((rep.get("summary") or {}).get(key) or 0)
    out.update(findings=findings, sinks=sink_list, summary=summary, routes=routes)
    if summary["errors"]:
        out["exit_code"] = EXIT_FINDINGS
    elif primary.get("exit_code") not in (None, EXIT_CLEAN, EXIT_FINDINGS):
        out["exit_code"] = primary["exit_code"]
    else:
        out["exit_code"] = EXIT_CLEAN
    out["duration_s"] = round(float(standin.get("duration_s") or 0) + float(installed.get("duration_s") or 0), 3)
    return out
