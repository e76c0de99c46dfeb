"""recipes/libraries.toml's checks: flash-linear-attention (fla), named under whichever of its two
distributions is installed, and the torch its releases require.
"""

from __future__ import annotations

from typing import Optional

from packaging.version import InvalidVersion, Version

from ...facts import MODULE_DISTRIBUTIONS, Facts


FLA_DISTRIBUTIONS = MODULE_DISTRIBUTIONS["fla"]


def _fla(facts: Facts) -> Optional[tuple[str, str]]:
    for name in FLA_DISTRIBUTIONS:
        version = facts.version_of(name)
        if version:
            return name, version
    return None


def fla_name(facts: Facts, data: dict) -> Optional[dict]:
    """Names the installed fla distribution (it ships under two names)."""
    found = _fla(facts)
    return {"fla": f"{found[0]} {found[1]}"} if found else None


def fla_torch_requirement(facts: Facts, data: dict) -> Optional[dict]:
    """fla >= 0.1.0 requires torch >= 2.5; fla >= 0.5.0 requires torch >= 2.7."""
    found = _fla(facts)
    torch_version = facts.version_of("torch")
    if not found or not torch_version:
        return None
    try:
        fla_v, torch_v = Version(found[1]), Version(torch_version)
    except InvalidVersion:
        return None
    needed = ">=2.7" if fla_v >= Version("0.5.0") else ">=2.5" if fla_v >= Version("0.1.0") else None
    if needed is None or torch_v.release >= Version(needed[2:]).release:
        return None
    return {"fla": f"{found[0]} {found[1]}", "needed_torch": needed, "torch": torch_version}


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (fla_name, fla_torch_requirement)
