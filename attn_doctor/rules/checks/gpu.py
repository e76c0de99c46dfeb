"""recipes/gpu.toml's checks: a GPU that no kernel in torch's binary runs on, a driver older than
the CUDA torch was built for, and CUDA that does not initialise although the driver sees a GPU.
"""

from __future__ import annotations

from typing import Optional

from ...facts import Facts
from ..conditions import SkipRule
from .common import _torch_ok


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
        "build_with_it": _build_with(d.capability, torch.cuda),
    }


def _build_with(capability: str, cuda: Optional[str]) -> str:
    """Which torch build carries an architecture this one lacks, as far as CUDA's own support goes:
    CUDA 13 dropped Maxwell, Pascal and Volta (sm5x-sm70); CUDA 12.8 is the first with Blackwell."""
    major = int(capability.split(".")[0])
    if major <= 7 and capability != "7.5":
        return ("a torch build for CUDA 12.6 (pip install torch --index-url https://download.pytorch.org/whl/cu126): "
                "CUDA 13 builds carry no sm_%s" % capability.replace(".", ""))
    if major >= 10:
        return "a torch build for CUDA 12.8 or newer (Blackwell needs it)"
    return "a torch build whose torch.cuda.get_arch_list() names sm_%s" % capability.replace(".", "")


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


def driver_too_old(facts: Facts, data: dict) -> Optional[dict]:
    """torch is built for a newer CUDA major than the driver supports."""
    _not_assumed(facts)
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


def cuda_unusable(facts: Facts, data: dict) -> Optional[dict]:
    """The driver sees a GPU, torch is a CUDA build, and still CUDA does not initialise."""
    _not_assumed(facts)
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


def _not_assumed(facts: Facts) -> None:
    """This machine's driver and CUDA are not the assumed GPU's (check --gpu)."""
    if facts.assumed_gpu is not None:
        raise SkipRule("the GPU is assumed (--gpu): this machine's driver and CUDA are not the job's")


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (torch_arch_missing, driver_too_old, cuda_unusable)
