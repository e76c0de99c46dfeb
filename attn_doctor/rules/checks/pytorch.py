"""recipes/torch.toml's checks: triton against the release this torch wheel pins (the pin is read
here, and fix plans the reinstall from it), and SDPA's flash kernel refused on a GPU where it
should run. Named pytorch, not torch, so that it never reads as the torch package.
"""

from __future__ import annotations

from typing import Optional

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ...facts import Facts
from ..conditions import SkipRule, marker_environment
from .common import _mm, _torch_ok


def triton_pin(facts: Facts, data: dict) -> Optional[SpecifierSet]:
    """The triton release(s) the installed torch pins, or None where it pins none.

    From torch's own Requires-Dist where the probe read it (markers evaluated for this machine: a
    CPU or macOS wheel pins nothing), else from the recipe table (reports recorded before the probe
    kept the requirement)."""
    torch = facts.packages.get("torch")
    if torch is None:
        return None
    if facts.requires.get("torch"):
        from packaging.markers import UndefinedEnvironmentName  # 10 ms of regexes: only where torch's requirements are read
        from packaging.requirements import InvalidRequirement, Requirement

        env = marker_environment(facts)
        for line in facts.requires["torch"]:
            try:
                req = Requirement(line)
                if req.marker is None or req.marker.evaluate(env):
                    return req.specifier
            except (InvalidRequirement, UndefinedEnvironmentName):
                continue
        return None
    expected = data.get("torch_triton", {}).get(_mm(torch.version))
    if not expected:
        return None
    # "3.6.0" pins exactly; "2.3" pins the 2.3.x series
    return SpecifierSet("==" + (expected if expected.count(".") >= 2 else expected + ".*"))


def pin_text(spec: SpecifierSet) -> str:
    """'==3.6.0' -> '3.6.0', '==2.3.*' -> '2.3.*', '~=3.9.0' -> '~=3.9.0': how a message names a pin."""
    text = str(spec)
    return text[2:] if text.startswith("==") and "," not in text else text


def triton_torch_pin(facts: Facts, data: dict) -> Optional[dict]:
    """triton differs from the release this torch wheel pins (Linux wheels)."""
    torch_version = facts.version_of("torch")
    triton_version = facts.version_of("triton")
    if not torch_version or not triton_version:
        return None
    pin = triton_pin(facts, data)
    if pin is None:
        return None
    try:
        if pin.contains(Version(triton_version), prereleases=True):
            return None
    except InvalidVersion:
        return None
    return {
        "torch": torch_version,
        "triton": triton_version,
        "expected_triton": pin_text(pin),
        "expected_triton_spec": str(pin),
    }


def sdpa_flash_refused(facts: Facts, data: dict) -> Optional[dict]:
    """torch's own selection refuses SDPA's flash kernel: a warning on a GPU where it should run, a
    note before Ampere, where no torch release has one."""
    _torch_ok(facts)
    torch = facts.torch
    if not torch.devices or "flash_usable" not in torch.sdpa:
        raise SkipRule("the SDPA backends were not probed on a GPU")
    if torch.sdpa["flash_usable"]:
        return None
    reasons = torch.sdpa_reasons.get("flash_usable") or []
    evidence = {
        "gpu": torch.devices[0].name,
        "capability": torch.devices[0].capability,
        "sm": "sm" + torch.devices[0].capability.replace(".", ""),
        "dtype": torch.sdpa_probe_dtype or "?",
        "compiled": torch.sdpa.get("flash_compiled"),
        "reason": (reasons[0] if reasons else "no reason given").strip().splitlines()[0][:300],
    }
    if _before_ampere(torch.devices[0].capability):
        # no torch has a flash kernel for it: what the GPU is, said as a note; SDPA's other kernels run
        evidence["severity"] = "info"
    return evidence


def _before_ampere(capability: str) -> bool:
    try:
        return int(capability.split(".")[0]) < 8
    except ValueError:
        return False


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (triton_torch_pin, sdpa_flash_refused)
