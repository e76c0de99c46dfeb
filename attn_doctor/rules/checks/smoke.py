"""recipes/smoke.toml's checks, read from the GPU smoke tests' results: backends that computed wrong
numbers, raised or took their process down, and SDPA's default dispatch falling back to the math
kernel on an Ampere+ GPU, and torch.compile failing to compile attention.
"""

from __future__ import annotations

from typing import Optional

from ...facts import MODULE_DISTRIBUTIONS, Facts, bf16_native
from ..conditions import SkipRule
from .common import kernels_not_run
from .pytorch import triton_torch_pin


def _smoke_ran(facts: Facts) -> None:
    if facts.smoke.status == "skipped":
        if facts.quick:
            raise SkipRule("the smoke tests need the full check (--quick)")
        raise SkipRule(kernels_not_run(facts, "smoke tests"))


def smoke_failures(facts: Facts, data: dict) -> Optional[dict]:
    """An attention backend that accepted the inputs computed wrong numbers, raised, or took its
    smoke process down with it (crash, hang)."""
    from ...probes.target.gpu_child import COMPILED, LIBRARIES

    _smoke_ran(facts)
    problems, packages = [], []
    for r in facts.smoke.results:
        if r.status not in ("wrong", "error") or r.backend in COMPILED:  # compiled_attention_fails' finding
            continue
        # which distribution each failure is about: what a finding on the same cause names too
        module = LIBRARIES.get(r.backend)
        packages += list(MODULE_DISTRIBUTIONS.get(module, (module,))) if module else ["torch"]
        if r.status == "wrong":
            problems.append(
                f"{r.backend} in {r.dtype}: relative error {r.rel_err:.2g} (gradients {r.rel_err_grad:.2g}) "
                f"against float64, tolerance {r.tolerance:g}"
            )
        else:
            problems.append(f"{r.backend} in {r.dtype} raised: {r.error}" + _unloaded_build(facts, r.backend))
    if facts.smoke.status == "failed" and facts.smoke.error:
        problems.append(facts.smoke.error)
        packages.append("torch")
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return {"summary": problems[0] + more, "count": len(problems), "packages": ", ".join(dict.fromkeys(packages))}


def _unloaded_build(facts: Facts, backend: str) -> str:
    """The cause behind a library backend's failure when its compiled extension does not load next
    to this torch (AD312 says which build it is): the smoke failure is then its symptom."""
    from ...probes.target.gpu_child import LIBRARIES

    for dist in MODULE_DISTRIBUTIONS.get(LIBRARIES.get(backend, ""), ()):
        build = facts.builds.get(dist)
        if build and any(e.status == "error" for e in build.extensions):
            made_for = f", built for torch {build.built_for.torch}" if build.built_for.torch else ""
            return f" (its compiled extension does not load next to this torch{made_for}: AD312)"
    return ""


def sdpa_default_math(facts: Facts, data: dict) -> Optional[dict]:
    """On an Ampere+ GPU, SDPA's default dispatch falls back to the math kernel for a half dtype."""
    _smoke_ran(facts)
    caps = facts.gpu_capabilities() or []
    if not caps or not all(bf16_native(c) for c in caps):
        return None
    slow = [c for c in facts.smoke.choices if c.backend == "math"]
    if not slow:
        return None
    choice = next((c for c in slow if c.source), slow[0])  # the user's model first
    reasons = "; ".join(f"{k}: {v[0]}" for k, v in choice.refused.items() if v) or "no reason given"
    where = f" (your model, {choice.source})" if choice.source else ""
    return {"dtype": choice.dtype, "head_dim": choice.head_dim, "where": where, "reasons": reasons[:600]}


# The checks recipes name (the registry in __init__.py collects them).
def compiled_attention_fails(facts: Facts, data: dict) -> Optional[dict]:
    """torch.compile (Inductor writing triton kernels) could not compile flex_attention on this GPU,
    or the compiled kernel computed wrong numbers."""
    from ...probes.target.gpu_child import COMPILED

    _smoke_ran(facts)
    compiled = [r for r in facts.smoke.results if r.backend in COMPILED]
    if not compiled:
        missing = sorted(m for m in set(COMPILED.values()) if not facts.version_of(m))
        raise SkipRule(f"torch.compile was not smoke-tested: it needs {', '.join(missing)} installed" if missing
                       else "torch.compile was not smoke-tested (a report from an older attn-doctor)")
    failed = next((r for r in compiled if r.status in ("wrong", "error")), None)
    if failed is None:
        return None
    if failed.status == "wrong":
        what = (f"computed wrong numbers in {failed.dtype}: relative error {failed.rel_err:.2g} "
                f"(gradients {failed.rel_err_grad:.2g}) against float64, tolerance {failed.tolerance:g}")
    else:
        what = f"failed in {failed.dtype}: {failed.error}"
    pin = triton_torch_pin(facts, data)  # AD201's finding: the likelier cause, named beside the symptom
    cause = (f" (triton {pin['triton']} is not the release torch {pin['torch']} pins, {pin['expected_triton']}: AD201)"
             if pin else "")
    return {"summary": what + cause, "dtype": failed.dtype, "packages": "triton"}


CHECKS = (smoke_failures, sdpa_default_math, compiled_attention_fails)
