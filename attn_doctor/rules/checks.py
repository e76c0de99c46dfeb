"""Named checks: rule conditions that need real logic. Pure functions of Facts (and recipe data).

Each returns None when the problem is absent, a dict of evidence when present, and raises
SkipRule when the facts it needs were not gathered. Recipes refer to them by name.
"""

from __future__ import annotations

from typing import Callable, Optional

from packaging.version import InvalidVersion, Version

from ..facts import Facts
from ..failures import explain_undefined_symbol, wheel_build, wheel_tag
from .conditions import SkipRule

CHECKS: dict[str, Callable[[Facts, dict], Optional[dict]]] = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def _torch_ok(facts: Facts) -> None:
    if facts.torch.status == "skipped":
        raise SkipRule("torch was not probed (--quick)" if facts.quick else "the torch probe did not run")
    if facts.torch.status != "ok":
        raise SkipRule("torch did not import")


def _mm(version: str) -> str:
    """'2.11.0+cu130' -> '2.11'"""
    try:
        v = Version(version)
    except InvalidVersion:
        return ".".join(version.split("+")[0].split(".")[:2])
    return f"{v.major}.{v.minor}"


@check
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
        "demangled": err.demangled or err.symbol,
        "library": err.library,
        "side": explain_undefined_symbol(err.symbol or "", torch.cxx11_abi),
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


@check
def torch_arch_missing(facts: Facts, data: dict) -> Optional[dict]:
    """A GPU whose compute capability no kernel in torch's binary can run on."""
    _torch_ok(facts)
    torch = facts.torch
    if not torch.devices:
        raise SkipRule("torch sees no GPU")
    if not torch.arch_list:
        raise SkipRule("torch did not report its compiled architectures")
    missing = []
    for device in torch.devices:
        if not _arch_runs(device.capability, torch.arch_list):
            missing.append(device)
    if not missing:
        return None
    d = missing[0]
    return {
        "gpu": d.name,
        "capability": d.capability,
        "sm": "sm" + d.capability.replace(".", ""),
        "arch_list": " ".join(torch.arch_list),
        "torch": torch.version,
    }


def _arch_runs(capability: str, arch_list: list[str]) -> bool:
    major, minor = (int(x) for x in capability.split("."))
    for arch in arch_list:
        kind, _, num = arch.partition("_")
        digits = "".join(ch for ch in num if ch.isdigit())
        if len(digits) < 2:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and a_major == major and a_minor <= minor and not num.endswith(("a", "f")):
            return True  # cubins run on later minor revisions of the same major
        if kind == "sm" and (a_major, a_minor) == (major, minor):
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True  # PTX is JIT-compiled forward
    return False


@check
def triton_torch_pin(facts: Facts, data: dict) -> Optional[dict]:
    """triton differs from the release this torch wheel pins (Linux x86_64 wheels)."""
    torch_version = facts.version_of("torch")
    triton_version = facts.version_of("triton")
    if not torch_version or not triton_version:
        return None
    pins = data.get("torch_triton", {})
    expected = pins.get(_mm(torch_version))
    if not expected:
        return None
    expected_list = expected if isinstance(expected, list) else [expected]
    try:
        tv = Version(triton_version)
        ok = any(
            tv.release[: len(Version(e).release)] == Version(e).release if e.count(".") < 2 else tv == Version(e)
            for e in expected_list
        )
    except InvalidVersion:
        return None
    if ok:
        return None
    pin = expected_list[0] if expected_list[0].count(".") >= 2 else expected_list[0] + ".*"
    return {
        "torch": torch_version,
        "triton": triton_version,
        "expected_triton": " or ".join(expected_list),
        "expected_triton_pin": pin,
    }


@check
def driver_too_old(facts: Facts, data: dict) -> Optional[dict]:
    """torch is built for a newer CUDA major than the driver supports."""
    torch_cuda = facts.torch.cuda
    driver_cuda = facts.gpu.cuda_driver_version
    if facts.torch.status == "skipped" and not torch_cuda:
        raise SkipRule("torch was not probed (--quick)")
    if not torch_cuda:
        return None
    if not driver_cuda:
        if facts.gpu.source in ("none", "skipped"):
            return None
        raise SkipRule("the driver's CUDA version is unknown")
    try:
        t_major, d_major = int(torch_cuda.split(".")[0]), int(driver_cuda.split(".")[0])
    except ValueError:
        return None
    if t_major <= d_major:
        return None
    return {
        "torch_cuda": torch_cuda,
        "driver_cuda": driver_cuda,
        "driver_cuda_digits": driver_cuda.replace(".", ""),
        "driver": facts.gpu.driver_version,
        "torch": facts.torch.version,
    }


@check
def cuda_unusable(facts: Facts, data: dict) -> Optional[dict]:
    """The driver sees a GPU, torch is a CUDA build, and still CUDA does not initialise."""
    _torch_ok(facts)
    if not facts.gpu.devices or not facts.torch.cuda:
        return None
    if facts.torch.cuda_available:
        return None
    return {
        "gpu": ", ".join(sorted({d.name for d in facts.gpu.devices})),
        "torch": facts.torch.version,
        "cuda_error": (facts.torch.cuda_error or "torch.cuda.is_available() is False").splitlines()[0][:300],
    }


@check
def sdpa_flash_refused(facts: Facts, data: dict) -> Optional[dict]:
    """On a GPU where the SDPA flash kernel should run, torch's own selection refuses it."""
    _torch_ok(facts)
    torch = facts.torch
    if not torch.devices or "flash_usable" not in torch.sdpa:
        raise SkipRule("the SDPA backends were not probed on a GPU")
    if torch.sdpa["flash_usable"]:
        return None
    reasons = torch.sdpa_reasons.get("flash_usable") or []
    return {
        "gpu": torch.devices[0].name,
        "capability": torch.devices[0].capability,
        "sm": "sm" + torch.devices[0].capability.replace(".", ""),
        "dtype": torch.sdpa_probe_dtype or "?",
        "compiled": torch.sdpa.get("flash_compiled"),
        "reason": (reasons[0] if reasons else "no reason given").strip().splitlines()[0][:300],
    }


@check
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


FLA_DISTRIBUTIONS = ("flash-linear-attention", "fla-core")


def _fla(facts: Facts) -> Optional[tuple[str, str]]:
    for name in FLA_DISTRIBUTIONS:
        version = facts.version_of(name)
        if version:
            return name, version
    return None


@check
def fla_name(facts: Facts, data: dict) -> Optional[dict]:
    """Names the installed fla distribution (it ships under two names)."""
    found = _fla(facts)
    return {"fla": f"{found[0]} {found[1]}"} if found else None


@check
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
