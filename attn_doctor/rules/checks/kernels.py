"""recipes/kernels.toml's checks: flash-attn's undefined symbol and its wheel built for another
torch, the installed attention libraries that do not import (with the class of each cause), and
compiled extensions built for another torch / CUDA / Python / C++ ABI or that do not load.
"""

from __future__ import annotations

import re
from typing import Optional

from ...facts import MODULE_DISTRIBUTIONS, Facts, distribution_of
from ...failures import import_cause, undefined_symbol_evidence, wheel_build, wheel_tag
from ..conditions import SkipRule
from .common import _error_line, _mm, _torch_ok
from .pytorch import triton_pin


def flash_attn_undefined_symbol(facts: Facts, data: dict) -> Optional[dict]:
    if facts.module_installed("flash_attn") is False:
        return None
    result = facts.imports.get("flash_attn")
    if result is None or result.status == "skipped":
        raise SkipRule("the flash_attn import was not probed" + (" (--quick)" if facts.quick else ""))
    if not result.error or result.error.kind != "undefined_symbol":
        return None
    err = result.error
    torch = facts.torch
    fa_version = facts.version_of("flash-attn")
    evidence = {
        "symbol": err.symbol,
        "library": err.library,
        **undefined_symbol_evidence(err.symbol or "", torch.cxx11_abi),
        "flash_attn": fa_version,
        "torch": torch.version,
        "torch_cxx11_abi": torch.cxx11_abi,
    }
    pkg = facts.packages.get("flash-attn")
    built = wheel_build(pkg.url if pkg else None)
    if built:
        evidence["built_for"] = f"torch {built['torch']}, CUDA {built['cuda']}, cxx11abi={'TRUE' if built['cxx11_abi'] else 'FALSE'}"
    evidence["wheel"] = (
        wheel_tag(fa_version, torch.version, torch.cuda, torch.cxx11_abi, facts.platform.python_version)
        or "a flash-attn build for this torch"
    )
    return evidence


def flash_attn_built_for_other_torch(facts: Facts, data: dict) -> Optional[dict]:
    """The flash-attn wheel's own name says it was built for another torch or ABI (from its URL)."""
    pkg = facts.packages.get("flash-attn")
    built = wheel_build(pkg.url if pkg else None)
    torch_version = facts.version_of("torch")
    if not built or not torch_version:
        return None
    evidence = {"built_for_torch": built["torch"], "torch": torch_version, "abi_note": ""}
    mismatch = _mm(built["torch"]) != _mm(torch_version)
    if facts.torch.cxx11_abi is not None and built["cxx11_abi"] != facts.torch.cxx11_abi:
        mismatch = True
        evidence["abi_note"] = (
            f" with cxx11abi{'TRUE' if built['cxx11_abi'] else 'FALSE'}"
            f" (this torch: cxx11abi{'TRUE' if facts.torch.cxx11_abi else 'FALSE'})"
        )
    if not mismatch:
        return None
    evidence["wheel"] = (
        wheel_tag(pkg.version, torch_version, facts.torch.cuda, facts.torch.cxx11_abi, facts.platform.python_version)
        or "a flash-attn build for this torch"
    )
    return evidence


# Import probes with rules of their own (flash_attn: AD301-AD305, xformers: AD307, flash_attn_4:
# AD309); every other installed library that does not import is AD318's.
OWN_IMPORT_RULES = ("flash_attn", "xformers", "flash_attn_4")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_FAILED_IMPORT = ("error", "crashed", "timeout")


def library_import_failures(facts: Facts, data: dict) -> Optional[dict]:
    """Installed attention libraries (triton, fla, liger-kernel, FlashAttention 3, ...) that do not
    import, each with its error and the class of its cause. triton first: the Triton kernel
    libraries fail with it."""
    _torch_ok(facts)
    probed = {m: r for m, r in facts.imports.items() if m not in OWN_IMPORT_RULES}
    if probed and all(r.status == "skipped" for r in probed.values()):
        raise SkipRule("the imports were not probed" + (" (--quick)" if facts.quick else ""))
    failing = sorted((m for m, r in probed.items() if r.status in _FAILED_IMPORT), key=lambda m: (m != "triton", m))
    if not failing:
        return None
    python = facts.platform.python_version or ""
    triton = facts.imports.get("triton")
    parts, causes, names = [], [], []
    for module in failing:
        result = probed[module]
        dist = next((d for d in MODULE_DISTRIBUTIONS.get(module, (module,)) if facts.version_of(d)), module)
        version = facts.version_of(dist) or result.version or ""
        err = result.error
        if module != "triton" and triton is not None and triton.status in _FAILED_IMPORT and (
            "triton" in (err.message if err else "")
        ):
            cause, words = "dependency_broken", "its dependency triton does not import"
        else:
            cause, words = import_cause(module, result.status, err, python, result.signal)
        said = _error_line(err)
        parts.append(f"{dist} {version}".strip() + " does not import" + (f" ({said})" if said else "") + f": {words}")
        causes.append(cause)
        names.append(dist)
    root = failing[0]
    dist = names[0]
    pin = triton_pin(facts, data) if root == "triton" else None
    version = facts.version_of(dist)
    requirement = f"{dist}{pin}" if pin else (f"{dist}=={version}" if version else dist)
    missing = _MISSING_MODULE.search(probed[root].error.message) if causes[0] == "missing_dependency" else None
    if missing:  # the dependency itself, not the package that needs it
        requirement = distribution_of(missing.group(1))
    evidence = {
        "summary": "; ".join(parts),
        "packages": " ".join(names),
        "cause": causes[0],
        "causes": causes,
        "module": root,
        "requirement": requirement,
        "install": "Install" if missing else "Reinstall",
        "consequence": "torch.compile, FlexAttention and every Triton kernel library (fla, liger-kernel) fail with it"
        if root == "triton" else "code that imports it fails",
    }
    if not facts.torch.cuda:  # a CPU torch runs no Triton or CUDA kernel here anyway
        evidence["severity"] = "warning"
        evidence["consequence"] += "; with this CPU-only torch nothing here runs its kernels, but a GPU node with this environment would fail"
    return evidence


def _cuda_major(version: Optional[str]) -> Optional[str]:
    return version.split(".")[0] if version else None


def _abi_words(cxx11_abi: bool) -> str:
    """A C++ ABI as a wheel's local tag and torch._C._GLIBCXX_USE_CXX11_ABI say it."""
    return "the C++11 ABI (cxx11abiTRUE)" if cxx11_abi else "the pre-C++11 ABI (cxx11abiFALSE)"


def extension_builds(facts: Facts, data: dict) -> Optional[dict]:
    """Distributions whose compiled extensions were built for another torch / CUDA / Python / C++
    ABI, or do not load next to this torch. flash-attn has rules of its own (AD301-AD306) and is
    left to them."""
    _torch_ok(facts)
    if not facts.builds_probed:
        raise SkipRule("the compiled extensions were not probed")
    torch = facts.torch
    python_mm = ".".join(facts.platform.python_version.split(".")[:2])
    problems, failing, names, other_torch, other_abi = [], False, [], set(), False
    for name, build in sorted(facts.builds.items()):
        if name in ("flash-attn",):
            continue
        bf = build.built_for
        broken = [e for e in build.extensions if e.status == "error"]
        differs = []
        if bf.torch and torch.version and _mm(bf.torch) != _mm(torch.version):
            differs.append(f"torch {bf.torch}")
        if bf.cuda and torch.cuda and _cuda_major(bf.cuda) != _cuda_major(torch.cuda):
            differs.append(f"CUDA {bf.cuda}")
        elif bf.cuda and not torch.cuda and not torch.hip:
            differs.append(f"CUDA {bf.cuda}")
        if bf.python and python_mm and ".".join(bf.python.split(".")[:2]) != python_mm and broken:
            differs.append(f"Python {bf.python}")
        # A library built with the other C++ ABI names std::string differently from this torch:
        # every torch function taking or returning one is a symbol the loader cannot resolve.
        if bf.cxx11_abi is not None and torch.cxx11_abi is not None and bf.cxx11_abi != torch.cxx11_abi:
            differs.append(_abi_words(bf.cxx11_abi))
            other_abi = True
        if not broken and not differs:
            continue
        failing = failing or bool(broken)
        names.append(name)
        if bf.torch:
            other_torch.add(bf.torch)
        text = f"{name} {build.version}"
        if broken:
            err = broken[0].error
            why = (err.message.strip().splitlines() or [err.type])[-1] if err else "it did not load"
            more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
            text += f": {broken[0].file}{more} does not load ({why[:300]})"
        if differs or bf.source:
            built = ", ".join(differs) if differs else ", ".join(x for x in (f"torch {bf.torch}" if bf.torch else "", f"CUDA {bf.cuda}" if bf.cuda else "") if x)
            text += f"; built for {built}" + (f" ({bf.source})" if bf.source else "")
        problems.append(text)
    if not problems:
        return None
    this = f"torch {torch.version}" + (f" (CUDA {torch.cuda})" if torch.cuda else " (CPU-only)" if not torch.hip else f" (ROCm {torch.hip})")
    if other_abi:
        this += ", " + _abi_words(torch.cxx11_abi).replace("the ", "", 1)
    evidence = {
        "summary": "; ".join(problems),
        "this_torch": this + (f", Python {facts.platform.python_version}" if facts.platform.python_version else ""),
        "packages": " ".join(names),
        "consequence": "its kernels are disabled or its import fails" if failing
        else f"it loads, but was built for another torch{' or C++ ABI' if other_abi else ''} and may crash at its first op",
    }
    if other_abi:
        evidence["torch_abi"] = _abi_words(torch.cxx11_abi)
    if len(other_torch) == 1:
        evidence["built_torch"] = other_torch.pop().split("+")[0]
    if not failing:
        evidence["severity"] = "warning"
    return evidence


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (
    flash_attn_undefined_symbol,
    flash_attn_built_for_other_torch,
    library_import_failures,
    extension_builds,
)
