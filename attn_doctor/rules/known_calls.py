"""Known kernel bugs judged at traced attention calls (recipes/numerics.toml's `numerics_bugs`).

The tracer records at each SDPA call the kernel SDPA picks on the GPU judged for (asked of torch on
a CUDA device, emulated elsewhere), whether it is causal without a mask tensor, its lengths, heads
and dtype, and whether it takes gradients; the report records torch, its CUDA and the cuDNN beside it.
Here each bug's conditions are held against those facts, and a call that meets one gets the bug's
finding at its line (AD710 key lengths 64 mod 128, AD711 a single query row, AD713 grouped-query
heads on a B200). Where the call was measured on the GPU (trace --device cuda --train) the
measurement decides: a wrong result is AD617's finding, a right one clears the known bug. Pure.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from packaging.version import Version

from .checks.numerics import _short_link, _specifier_holds, _version, cudnn_first_for, parse_cudnn


def _capability(report: dict) -> Optional[tuple[int, int]]:
    cap = report.get("capability")
    if isinstance(cap, (list, tuple)) and len(cap) == 2 and all(isinstance(x, int) for x in cap):
        return int(cap[0]), int(cap[1])
    return None


def _meets(bug_id: str, call: dict) -> Optional[str]:
    """Why this call's shapes meet the bug, or None."""
    sk, sq = call.get("sk") or 0, call.get("sq") or 0
    if bug_id == "AD710":
        if call.get("is_causal") and not call.get("mask"):
            return None  # cuDNN's causal kernel without a mask tensor is another kernel, not affected
        at = (f"this trace's key length {sk} is one of them" if sk % 128 == 64 else
              f"this trace's key length is {sk}, but a batch padded to 64 mod 128 meets it")
        return f"non-causal ({'a mask tensor' if call.get('mask') else 'no mask'}); {at}"
    if bug_id == "AD711":
        if sq != 1 or sk % 64:
            return None
        return f"one query row against {sk} keys"
    if bug_id == "AD713":
        hkv, hq = call.get("hkv") or 0, call.get("hq") or 0
        if not (1 < hkv < 8 and hq > hkv):
            return None
        return f"grouped-query attention with {hkv} key/value heads for {hq} query heads"
    return None


# The bugs a traced call can meet, and whether each needs the backward (a training call).
AT_CALLS = {"AD710": True, "AD711": True, "AD713": False}


def known_bug_findings(report: dict, data: dict, env: Mapping[str, str]) -> list[dict]:
    """The known-bug findings for a trace report's SDPA calls: one per bug and call site."""
    bugs = data.get("numerics_bugs") or {}
    stack = report.get("stack") or {}
    cap = _capability(report)
    tv = _version(stack.get("torch"))
    if not bugs or cap is None or tv is None:
        return []
    cudnn = parse_cudnn(stack.get("cudnn"))
    if cudnn is None:  # a CPU build of torch here: the cuDNN its CUDA wheels ship
        pinned = (data.get("torch_cudnn") or {}).get(f"{tv.major}.{tv.minor}")
        if pinned:
            cudnn = parse_cudnn(pinned)
            stack = dict(stack, cudnn_from=f"as torch {tv.major}.{tv.minor}'s CUDA wheels ship it")
    why = cudnn_first_for(tv, cudnn, str(stack.get("cuda") or ""), dict(env), cap)
    out, seen = [], set()
    for sink in report.get("sinks") or ():
        call, kernel = sink.get("call") or {}, sink.get("kernel") or {}
        if sink.get("family") != "sdpa" or kernel.get("name") != "cudnn" or not call:
            continue
        sink = dict(sink, mask_kind=(sink.get("mask") or {}).get("kind"))
        measured = sink.get("numerics") or {}
        for bug_id, needs_grad in AT_CALLS.items():
            bug = bugs.get(bug_id)
            if bug is None or (needs_grad and not (report.get("train") and call.get("grad"))):
                continue
            if not (_specifier_holds(bug.get("torch"), tv) and _specifier_holds(bug.get("capability"), Version(f"{cap[0]}.{cap[1]}"))):
                continue
            if _specifier_holds(bug.get("cudnn"), cudnn) is False:
                continue
            if kernel.get("source") != "torch" and why is None:
                continue
            if measured.get("runs"):
                continue  # measured at this call on the GPU: AD617 or clean
            meets = _meets(bug_id, call)
            key = (bug_id, sink.get("file"), sink.get("line"))
            if meets is None or key in seen:
                continue
            seen.add(key)
            out.append(_finding(bug_id, bug, sink, meets, tv, cudnn, stack, cap, kernel, why))
    return out


def _finding(bug_id: str, bug: dict, sink: dict, meets: str, tv: Version, cudnn: Optional[Version], stack: dict,
             cap: tuple[int, int], kernel: dict, why: Optional[str]) -> dict:
    where = f"{sink.get('file')}:{sink.get('line')}" if sink.get("file") else "an attention call"
    cudnn_words = f"cuDNN {cudnn}" if cudnn else "a cuDNN of unknown version"
    if stack.get("cudnn_from") and cudnn:
        cudnn_words += f" ({stack['cudnn_from']})"
    judged = "this GPU" if kernel.get("source") == "torch" else f"sm{cap[0]}{cap[1]}, torch {tv.major}.{tv.minor}, {cudnn_words}"
    what = {"AD710": "cuDNN's backward returns NaN dQ at key lengths 64 mod 128 where a row's logsumexp is below -88.7",
            "AD711": "cuDNN's backward returns NaN in all of dK and dV for a single query row where its logsumexp is below -88.7",
            "AD713": "cuDNN returns wrong attention for grouped-query models with 2 or 4 key/value heads on a B200"}[bug_id]
    message = (f"F.scaled_dot_product_attention at {where} runs SDPA's cuDNN kernel ({why or 'asked of torch'}; judged for "
               f"{judged}): {meets}. {what} [{_short_link(bug.get('source', ''))}]; observed on {bug.get('observed')}, "
               f"{bug.get('fixed') or 'no release is known to fix it'}")
    fix = "torch.backends.cuda.enable_cudnn_sdp(False) at the top of the training script"
    env = "TORCH_CUDNN_SDPA_DEPRIORITIZED=1" if tv >= Version("2.10") else ("TORCH_CUDNN_SDPA_PREFERRED=0" if tv >= Version("2.9") else None)
    if env:
        fix += f", or {env} in its environment"
    if bug_id == "AD710" and sink.get("mask_kind") == "causal":
        fix += ", or is_causal=True without the mask (it only says causal)"
    return {"id": bug_id, "severity": "warning", "message": message, "kernel_message": what, "checks": ["known_bug"], "fix": fix,
            "sink": {k: sink.get(k) for k in ("name", "family", "file", "line", "source", "module_path")},
            "chain": [], "origins": [], "patch": None, "count": sink.get("count", 1), "module_paths": [],
            "kernel": {"runs": "cudnn", "instead": None}, "cost": None, "known_bug": bug.get("source")}


def add_known_bugs(report: dict, data: dict, env: Mapping[str, str]) -> dict:
    """The report with the known-bug findings of its calls added, its summary counted again."""
    found = known_bug_findings(report, data, env)
    if not found:
        return report
    report.setdefault("findings", []).extend(found)
    summary: dict[str, Any] = report.setdefault("summary", {})
    summary["warnings"] = int(summary.get("warnings") or 0) + len(found)
    for sink in report.get("sinks") or ():
        if any(f["sink"].get("file") == sink.get("file") and f["sink"].get("line") == sink.get("line") for f in found):
            sink["ok"] = False
    return report
