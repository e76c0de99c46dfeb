"""recipes/numerics.toml's known bugs of the attention libraries (AD714 FlashAttention 4, AD715
Transformer Engine's FA4 path, AD716 cuDNN paths the sweep cannot reach, AD717 flex_attention): each
a row of the recipes' data table `numerics_bugs` judged over the installed releases, the GPU and the
job's head dims; where the numerics sweep measured the bug's cases, its measurement decides."""

from __future__ import annotations

from typing import Optional

from packaging.version import Version

from ...facts import Facts
from ..conditions import SkipRule
from .numerics import (DIST_ALTERNATIVES, _capabilities, _short_link, _specifier_holds, _version, config_head_dims,
                       cudnn_version, head_dim_meets, torch_version, trigger_words)


def dist_version(facts: Facts, name: str) -> Optional[str]:
    if name == "torch":
        return str(torch_version(facts)) if torch_version(facts) else None
    return next((v for v in (facts.version_of(d) for d in DIST_ALTERNATIVES.get(name, (name,))) if v), None)


def _measured_row(facts: Facts, bug: dict) -> Optional[tuple[str, str]]:
    """("wrong" | "clean" | "failed", words) where the sweep ran the bug's cases on its kernel."""
    mine = [r for r in facts.smoke.numerics if r.backend == bug.get("kernel") and r.case in bug.get("cases", [])]
    if any(r.status == "wrong" for r in mine):
        return "wrong", ""
    failed = [r for r in mine if r.status == "error"]
    if failed:
        return "failed", f"the numerics sweep's run of its case {failed[0].case} failed here: {failed[0].error}"
    if mine and all(r.status == "ok" for r in mine) and len({r.case for r in mine}) == len(set(bug["cases"])):
        return "clean", ""
    return None


class _Unjudged(Exception):
    """A fact a known bug needs is unknown: the reason."""


def _bug_holds(facts: Facts, bug: dict) -> Optional[dict]:
    """The words of one known bug that this stack meets, or None; raises _Unjudged where a fact it
    needs was not gathered."""
    if bug.get("released") is False:
        return None  # no release carries it: knowledge, not a finding
    if bug.get("trace"):
        return None  # its trigger is a call's shapes and strides: judged at traced calls (known_calls.py)
    versions = {}
    for dist, spec in (bug.get("packages") or {}).items():
        version = dist_version(facts, dist)
        if version is None or _specifier_holds(spec, _version(version)) is False:
            return None
        versions[dist] = version
    wanted = bug.get("packages_any") or []
    if wanted and not any(dist_version(facts, d) for d in wanted):
        return None
    if bug.get("torch"):
        held = _specifier_holds(bug["torch"], torch_version(facts))
        if held is None:
            raise _Unjudged("the torch version is unknown")
        if not held:
            return None
    try:
        caps = _capabilities(facts)
    except SkipRule as exc:
        raise _Unjudged(str(exc)) from None
    caps = [c for c in caps if _specifier_holds(bug.get("capability"), Version(f"{c[0]}.{c[1]}"))]
    if not caps:
        return None
    cudnn = None
    if bug.get("cudnn"):
        cudnn, _where = cudnn_version(facts)
        if cudnn is None:
            raise _Unjudged("the cuDNN version is unknown")
        if not _specifier_holds(bug["cudnn"], cudnn):
            return None
    measured = _measured_row(facts, bug) if bug.get("cases") else None
    if measured and measured[0] in ("wrong", "clean"):
        return None  # measured here: wrong numbers are the sweep's finding (AD706, citing the bug), right ones clear it
    trigger = bug.get("trigger") or {}
    shapes = ""
    dims = config_head_dims(facts)
    if dims and any(k in trigger for k in ("head_dims", "head_dim_not_multiple_of")):
        meeting = [d for d in dims if head_dim_meets(trigger, d)]
        if not meeting:
            return None  # the configs' models do not use the head dims it needs
        shapes = f"the config's model has head dim {', '.join(str(d) for d in meeting)}"
    if not shapes and bug.get("verified") is False and not bug.get("needs") and trigger:
        # an unconfirmed range and a shape this check cannot see: said only where the job's shapes
        # are known to meet it (a config's model here, a traced call in known_calls.py)
        return None
    cap = caps[0]
    return {"versions": versions, "cap": cap, "cudnn": cudnn, "shapes": shapes,
            "measured": measured[1] if measured else "", "verified": bug.get("verified") is not False}


def _bug_words(bug: dict, held: dict) -> str:
    trigger = trigger_words(bug.get("trigger") or {})
    when = bug.get("needs") or trigger
    text = f"{bug['cls']}: {bug['what']}"
    if held["shapes"]:
        text += f" ({held['shapes']})"
    elif when:
        text += f" (only where the job has {when})"
    text += f"; seen: {bug.get('observed')}; {bug.get('fixed') or 'no release is known to fix it'}"
    if not held["verified"]:
        text += f" (a note: {bug.get('range_note') or 'its release range was not verified'})"
    if held["measured"]:
        text += f"; {held['measured']}"
    return text + f" [{_short_link(bug.get('source', ''))}]"


def known_library_bug(facts: Facts, data: dict, rule: str) -> Optional[dict]:
    """The known bugs (recipes' numerics_bugs rows whose `rule` is this one) that the installed
    releases, torch, cuDNN, the GPU and, where a config gives them, the model's head dims meet; a
    bug the numerics sweep measured here is the measurement's (one finding per cause). A warning
    where a row's range was verified, a note where only its report is."""
    bugs = [(key, bug) for key, bug in (data.get("numerics_bugs") or {}).items() if bug.get("rule") == rule]
    if not bugs:
        raise SkipRule(f"no knowledge of {rule} in the recipes")
    found, unjudged = [], []
    for key, bug in bugs:
        try:
            held = _bug_holds(facts, bug)
        except _Unjudged as exc:
            unjudged.append(str(exc))
            continue
        if held:
            found.append((key, bug, held))
    if not found:
        if unjudged:
            raise SkipRule(unjudged[0])
        return None
    found.sort(key=lambda f: not f[2]["verified"])
    cap = found[0][2]["cap"]
    versions = {d: v for _k, _b, held in found for d, v in held["versions"].items()}
    cudnn = next((h["cudnn"] for _k, _b, h in found if h["cudnn"]), None)
    fixes = [b.get("requirement") for _k, b, _h in found]
    cudnn_fixed = [b.get("cudnn_fixed") for _k, b, _h in found if b.get("cudnn_fixed")]
    evidence = {
        "summary": "; also ".join(_bug_words(b, h) for _k, b, h in found),
        "bugs": " ".join(k for k, _b, _h in found),
        "gpu": f"sm{cap[0]}{cap[1]}" + (f" ({facts.assumed_gpu.name}, assumed)" if facts.assumed_gpu else ""),
        "packages": " ".join(d for d in versions if d != "torch"),
        "severity": "warning" if any(h["verified"] for _k, _b, h in found) else "info",
        "torch": str(torch_version(facts) or ""),
    }
    for dist, version in versions.items():
        evidence[dist.replace("-", "_")] = version
    if cudnn is not None:
        evidence["cudnn"] = f"cuDNN {cudnn}"
    if dist_version(facts, "transformer-engine"):
        evidence["nvte_fused"] = "NVTE_FUSED_ATTN"  # TE's switch: a remedy only where TE runs the attention
    upgrade = _one_upgrade(fixes)
    if upgrade:
        evidence["requirement"] = upgrade  # one upgrade fixes every bug found; else no pip remedy
    if cudnn_fixed:
        evidence["cudnn_fixed"] = max(cudnn_fixed, key=lambda v: Version(v))
    return evidence


def _one_upgrade(requirements: list) -> Optional[str]:
    """The one requirement that meets every "name>=version" given (the highest), or None where a
    bug has no fixed release or they name different packages."""
    from packaging.requirements import InvalidRequirement, Requirement

    floors = []
    for text in requirements:
        try:
            req = Requirement(str(text or ""))
        except InvalidRequirement:
            return None
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != ">=":
            return None
        floors.append((req.name, Version(specs[0].version)))
    if not floors or len({name for name, _v in floors}) != 1:
        return None
    name, floor = max(floors, key=lambda f: f[1])
    return f"{name}>={floor}"


def fa4_known_bugs(facts: Facts, data: dict) -> Optional[dict]:
    return known_library_bug(facts, data, "AD714")


def te_fa4_known_bugs(facts: Facts, data: dict) -> Optional[dict]:
    return known_library_bug(facts, data, "AD715")


def cudnn_unmeasured_known_bugs(facts: Facts, data: dict) -> Optional[dict]:
    return known_library_bug(facts, data, "AD716")


def flex_known_bugs(facts: Facts, data: dict) -> Optional[dict]:
    found = known_library_bug(facts, data, "AD717")
    return found


CHECKS = (fa4_known_bugs, te_fa4_known_bugs, cudnn_unmeasured_known_bugs, flex_known_bugs)
