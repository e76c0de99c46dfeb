"""recipes/install.toml's check: what an install or uninstall killed half-way leaves in
site-packages.
"""

from __future__ import annotations

from typing import Optional

from ...facts import MODULE_DISTRIBUTIONS, Facts


# A half-installed one of these is an error (they decide whether attention runs at all); any other
# package's leftovers are a warning.
_CRITICAL_INSTALLS = {"torch"} | {d for dists in MODULE_DISTRIBUTIONS.values() for d in dists}


def half_installed(facts: Facts, data: dict) -> Optional[dict]:
    """pip's stash folders, module folders without metadata, dist-infos without RECORD or whose
    RECORD names missing files: an install or uninstall killed half-way (the env probe's leftovers)."""
    leftovers = list(facts.leftovers)
    if not leftovers:
        return None
    critical = [left for left in leftovers if left.package in _CRITICAL_INSTALLS]
    named = [left for left in critical or leftovers if left.package]
    package = named[0].package if named else None
    # The version to put back: the one pip was taking away (its stash holds it complete), else the
    # one whose metadata is there.
    ofs = [left for left in leftovers if left.package == package]
    version = next((left.version for left in ofs if left.kind == "stash" and left.version), None) or next(
        (left.version for left in ofs if left.version), None) or (facts.version_of(package) if package else None)
    return {
        "package": package,
        "version": version,
        "leftovers": "; ".join(f"{left.path} ({left.kind})" for left in leftovers[:6]) + (f"; and {len(leftovers) - 6} more" if len(leftovers) > 6 else ""),
        "leftover_paths": [left.path for left in leftovers],
        "severity": "error" if critical else "warning",
    }


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (half_installed,)
