"""Named checks: rule conditions that need real logic. Pure functions of Facts (and recipe data).

Each returns None when the problem is absent, a dict of evidence when present, and raises
SkipRule when the facts it needs were not gathered. Recipes refer to them by name.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ...facts import MODULE_DISTRIBUTIONS, Facts, bf16_native, distribution_of
from ...failures import (CUTE_DSL_LIBS, cuda_major, fa4_extra, import_cause, undefined_symbol_evidence, wheel_build,
                        wheel_tag)
from ..conditions import SkipRule, marker_environment

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


def triton_pin(facts: Facts, data: dict) -> Optional[SpecifierSet]:
    """The triton release(s) the installed torch pins, or None where it pins none.

    From torch's own Requires-Dist where the probe read it (markers evaluated for this machine: a
    CPU or macOS wheel pins nothing), else from the recipe table (reports recorded before the probe
    kept the requirement)."""
    torch = facts.packages.get("torch")
    if torch is None:
        return None
    if facts.requires.get("torch"):
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


@check
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
def fa4_dsl_libs_mismatch(facts: Facts, data: dict) -> Optional[dict]:
    """flash-attn-4 is installed, torch is a CUDA 12 or 13 build, and the CuTe DSL's native
    libraries for that CUDA major are not (a plain `pip install flash-attn-4` beside a CUDA 13 torch)."""
    if not facts.version_of("flash-attn-4"):
        return None
    if not facts.torch.cuda:
        if facts.torch.status == "skipped":
            raise SkipRule("torch was not probed (--quick)")
        return None
    major = cuda_major(facts.torch.cuda)
    needed = CUTE_DSL_LIBS.get(major)
    if needed is None or facts.version_of(needed):
        return None
    present = [name for name in CUTE_DSL_LIBS.values() if facts.version_of(name)]
    return {
        "torch_cuda": facts.torch.cuda,
        "dsl_libs": needed,
        "dsl_libs_present": ", ".join(present) or "none",
        "fa4_extra": fa4_extra(facts.torch.cuda) or "?",
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


FLA_DISTRIBUTIONS = MODULE_DISTRIBUTIONS["fla"]


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


# Import probes with rules of their own (flash_attn: AD301-AD305, xformers: AD307, flash_attn_4:
# AD309); every other installed library that does not import is AD318's.
OWN_IMPORT_RULES = ("flash_attn", "xformers", "flash_attn_4")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_FAILED_IMPORT = ("error", "crashed", "timeout")


@check
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


def _smoke_ran(facts: Facts) -> None:
    if facts.smoke.status == "skipped":
        if facts.quick:
            raise SkipRule("the smoke tests need the full check (--quick)")
        if facts.smoke.error:  # the reason the report recorded (e.g. the option that turned them off)
            raise SkipRule(f"no smoke tests ran: {facts.smoke.error}")
        if facts.gpu_capabilities() == []:
            raise SkipRule("no smoke tests ran: no NVIDIA GPU found")
        raise SkipRule("no smoke tests ran (no reason recorded)")


@check
def smoke_failures(facts: Facts, data: dict) -> Optional[dict]:
    """An attention backend that accepted the inputs computed wrong numbers, raised, or took its
    smoke process down with it (crash, hang)."""
    from ...probes.gpu_child import LIBRARIES

    _smoke_ran(facts)
    problems, packages = [], []
    for r in facts.smoke.results:
        if r.status not in ("wrong", "error"):
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
    from ...probes.gpu_child import LIBRARIES

    for dist in MODULE_DISTRIBUTIONS.get(LIBRARIES.get(backend, ""), ()):
        build = facts.builds.get(dist)
        if build and any(e.status == "error" for e in build.extensions):
            made_for = f", built for torch {build.built_for.torch}" if build.built_for.torch else ""
            return f" (its compiled extension does not load next to this torch{made_for}: AD312)"
    return ""


@check
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


# ---------------------------------------------------------------- training configs (--config)

# LLaMA-Factory's `flash_attn` values by version (KNOWLEDGE.md 1.4; hparams/model_args.py).
# An intent (what the user means) -> the spelling each version accepts.
LLAMAFACTORY_FLASH_ATTN_INTENTS = ("auto", "disabled", "sdpa", "fa2", "fa3")


def llamafactory_flash_attn_values(version: Optional[str]) -> Optional[tuple]:
    """The values `flash_attn` accepts in this LLaMA-Factory version; None when unknown."""
    if not version:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    if v < Version("0.7.0"):
        return (True, False)
    if v < Version("0.8.3"):
        return ("off", "sdpa", "fa2", "auto")
    if v < Version("0.9.4"):
        return ("auto", "disabled", "sdpa", "fa2")
    return ("auto", "disabled", "sdpa", "fa2", "fa3")


def llamafactory_flash_attn_intent(value) -> Optional[str]:
    """What a `flash_attn` value means, whatever version it was written for."""
    if value is True:
        return "fa2"
    if value is False or value is None:
        return "disabled"
    text = str(value).strip().lower()
    return {
        "off": "disabled",
        "disabled": "disabled",
        "disable": "disabled",
        "none": "disabled",
        "eager": "disabled",
        "false": "disabled",
        "sdpa": "sdpa",
        "fa2": "fa2",
        "flashattn2": "fa2",
        "flash_attention_2": "fa2",
        "true": "fa2",
        "fa3": "fa3",
        "flash_attention_3": "fa3",
        "auto": "auto",
    }.get(text)


def llamafactory_flash_attn_value(version: Optional[str], intent: str):
    """The spelling of `intent` this LLaMA-Factory version accepts (the newest spelling when the
    version is unknown)."""
    valid = llamafactory_flash_attn_values(version) or ("auto", "disabled", "sdpa", "fa2", "fa3")
    if valid == (True, False):
        return intent in ("fa2", "fa3")  # <= 0.6: true = FlashAttention-2, false = transformers' default
    if intent == "fa3" and "fa3" not in valid:
        intent = "fa2"
    if intent == "disabled" and "disabled" not in valid:
        return "off"
    return intent


def _configs_of(facts: Facts, kind: str) -> list:
    if not facts.configs:
        raise SkipRule("no config file given (--config FILE)")
    found = [c for c in facts.configs if c.kind == kind and c.status == "ok"]
    if not found:
        raise SkipRule(f"no {kind} config among the --config files")
    return found


def _old_gpu(facts: Facts) -> Optional[dict]:
    """The weakest GPU when it has no native bf16 (compute capability < 8.0)."""
    caps = facts.gpu_capabilities()
    if caps is None:
        raise SkipRule("the GPUs were not probed")
    old = sorted((c for c in caps if not bf16_native(c)), key=lambda c: tuple(int(x) for x in c.split(".")))
    if not old:
        return None
    devices = facts.torch.devices or facts.gpu.devices
    name = ", ".join(sorted({d.name for d in devices if d.capability == old[0]}))
    return {"gpu": name, "capability": old[0], "sm": "sm" + old[0].replace(".", "")}


def _config_evidence(matching: list, setting: str, gpu: Optional[dict] = None) -> dict:
    evidence = dict(gpu or {})
    evidence.update(
        config=matching[0].path,
        config_files=[c.path for c in matching],
        setting=setting,
        more_configs=f" (and {len(matching) - 1} more)" if len(matching) > 1 else "",
    )
    return evidence


def _truthy(value) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"))


@check
def config_llamafactory_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """A LLaMA-Factory config asks for bf16 (or pure_bf16) on a GPU without native bf16."""
    configs = _configs_of(facts, "llamafactory")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if _truthy(c.settings.get("bf16")) or _truthy(c.settings.get("pure_bf16"))]
    if not gpu or not matching:
        return None
    key = "bf16" if _truthy(matching[0].settings.get("bf16")) else "pure_bf16"
    return _config_evidence(matching, f"{key}: true", gpu)


@check
def config_llamafactory_fa2_old_gpu(facts: Facts, data: dict) -> Optional[dict]:
    """A LLaMA-Factory config asks for FlashAttention-2 (or 3) on a GPU older than Ampere."""
    configs = _configs_of(facts, "llamafactory")
    gpu = _old_gpu(facts)
    matching = [
        c for c in configs if "flash_attn" in c.settings and llamafactory_flash_attn_intent(c.settings["flash_attn"]) in ("fa2", "fa3")
    ]
    if not gpu or not matching:
        return None
    version = facts.version_of("llamafactory")
    evidence = _config_evidence(matching, f"flash_attn: {_yaml_value(matching[0].settings['flash_attn'])}", gpu)
    evidence["suggested"] = _yaml_value(llamafactory_flash_attn_value(version, "sdpa"))
    return evidence


@check
def config_llamafactory_flash_attn_invalid(facts: Facts, data: dict) -> Optional[dict]:
    """A LLaMA-Factory config's `flash_attn` is not a value the installed LLaMA-Factory accepts."""
    configs = _configs_of(facts, "llamafactory")
    version = facts.version_of("llamafactory")
    if version is None:
        raise SkipRule("LLaMA-Factory is not installed in the target environment: the accepted flash_attn values depend on its version")
    valid = llamafactory_flash_attn_values(version)
    if valid is None:
        raise SkipRule(f"LLaMA-Factory version {version!r} is not a PEP 440 version")
    matching = [c for c in configs if "flash_attn" in c.settings and not _valid_value(c.settings["flash_attn"], valid)]
    if not matching:
        return None
    value = matching[0].settings["flash_attn"]
    intent = llamafactory_flash_attn_intent(value) or "auto"
    evidence = _config_evidence(matching, f"flash_attn: {_yaml_value(value)}")
    evidence.update(
        llamafactory=version,
        value=_yaml_value(value),
        valid=", ".join(_yaml_value(v) for v in valid),
        suggested=_yaml_value(llamafactory_flash_attn_value(version, intent)),
    )
    return evidence


def _llamafactory_fa2_log(version: Optional[str]) -> str:
    """The line LLaMA-Factory logs when `flash_attn` asks for FlashAttention-2 and transformers'
    is_flash_attn_2_available() says no (model/model_utils/attention.py; llmtuner's patcher.py
    before 0.7, which spelled it FlashAttention2 in 0.5-0.6)."""
    try:
        v = Version(version) if version else None
    except InvalidVersion:
        v = None
    if v is not None and Version("0.5.0") <= v < Version("0.7.0"):
        return "FlashAttention2 is not installed."
    return "FlashAttention-2 is not installed."


def _import_failure(facts: Facts, module: str) -> Optional[str]:
    """The first line of why an installed module does not import; None when it imports, is not
    installed or was not probed."""
    result = facts.imports.get(module)
    if result is None or result.status not in ("error", "crashed", "timeout"):
        return None
    if result.status == "crashed":
        return f"the import crashed the process (signal {result.signal})" if result.signal else "the import crashed the process"
    if result.status == "timeout":
        return "the import hung"
    return _error_line(result.error) or "it raised"


def _error_line(err) -> str:
    """`Type: the message's last line` of an import error (where Python puts the cause), bounded."""
    if err is None:
        return ""
    text = (err.message.strip().splitlines() or [""])[-1]
    return f"{err.type}: {text}"[:300] if text else err.type


@check
def config_llamafactory_fa2_unavailable(facts: Facts, data: dict) -> Optional[dict]:
    """A LLaMA-Factory config asks for FlashAttention-2 while flash-attn is not installed or does
    not import. Every LLaMA-Factory release then logs a warning and trains without it (attention
    left to transformers' default), or, where the package is installed but broken, asks for it
    anyway (is_flash_attn_2_available() reads package metadata, it does not import) and loading
    the model raises. A GPU too old for it is AD502's."""
    configs = _configs_of(facts, "llamafactory")
    matching = [
        c for c in configs if "flash_attn" in c.settings and llamafactory_flash_attn_intent(c.settings["flash_attn"]) == "fa2"
    ]
    if not matching or _old_gpu(facts):
        return None
    installed = facts.module_installed("flash_attn")
    if installed is None:
        raise SkipRule("the installed packages were not read")
    version = facts.version_of("llamafactory")
    gpu = bool(facts.gpu_capabilities())
    evidence = _config_evidence(matching, f"flash_attn: {_yaml_value(matching[0].settings['flash_attn'])}")
    # The torch to build for: this one where it is a CUDA build (a CPU node's is not the one that trains).
    evidence.update(llamafactory=version, cuda_torch=facts.torch.version if facts.torch.cuda else None,
                    suggested=_yaml_value(llamafactory_flash_attn_value(version, "sdpa")))
    if not installed:
        evidence.update(
            state="flash-attn is not installed in the target environment",
            consequence=f"LLaMA-Factory logs '{_llamafactory_fa2_log(version)}' and trains without it: it leaves "
            "attn_implementation unset, so transformers picks its default (SDPA; eager for models without SDPA, and for Gemma 2)",
        )
        return evidence
    broken = _import_failure(facts, "flash_attn")
    if broken is None:
        return None
    evidence["state"] = f"flash-attn {facts.version_of('flash-attn')} is installed but does not import ({broken})"
    if gpu:
        evidence["consequence"] = ("LLaMA-Factory checks only that the package is installed, asks transformers for "
                                   "flash_attention_2, and loading the model raises that import error")
        evidence["severity"] = "error"
    else:
        evidence["consequence"] = ("here, without a GPU, LLaMA-Factory logs "
                                   f"'{_llamafactory_fa2_log(version)}' and trains without it; on a GPU node it asks "
                                   "transformers for flash_attention_2 and loading the model raises that import error")
    return evidence


def _at_least(version: Optional[str], floor: str) -> bool:
    try:
        return version is not None and Version(version).release >= Version(floor).release
    except InvalidVersion:
        return False


def _valid_value(value, valid: tuple) -> bool:
    if isinstance(value, bool) or isinstance(valid[0], bool):
        return any(value is v for v in valid)
    return isinstance(value, str) and value in valid


def _yaml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@check
def config_transformers_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """A model's config.json says bfloat16 (what torch_dtype="auto" loads) on a GPU without native bf16."""
    configs = _configs_of(facts, "transformers")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if "bfloat16" in (str(c.settings.get("dtype")), str(c.settings.get("torch_dtype")))]
    if not gpu or not matching:
        return None
    key = "dtype" if str(matching[0].settings.get("dtype")) == "bfloat16" else "torch_dtype"
    return _config_evidence(matching, f'"{key}": "bfloat16"', gpu)


@check
def config_transformers_fa2_unusable(facts: Facts, data: dict) -> Optional[dict]:
    """A model's config.json asks for flash_attention_2 where it cannot run (GPU before Ampere, or no flash-attn)."""
    configs = _configs_of(facts, "transformers")
    matching = [c for c in configs if c.settings.get("attn_implementation") == "flash_attention_2"]
    if not matching:
        return None
    severity = None
    gpu = _old_gpu(facts)
    if gpu:
        reason = f"{gpu['gpu']} is {gpu['sm']}: FlashAttention-2 needs Ampere (sm80) or newer"
    elif facts.packages and facts.version_of("flash-attn") is None:
        reason = "flash-attn is not installed in the target environment"
        if facts.version_of("kernels") and _at_least(facts.version_of("transformers"), "4.56"):
            reason += (f": transformers {facts.version_of('transformers')} downloads kernels-community/flash-attn "
                       "from the Hugging Face Hub instead (the kernels package is installed)")
            severity = "warning"
    elif _import_failure(facts, "flash_attn"):
        reason = f"flash-attn {facts.version_of('flash-attn')} does not import ({_import_failure(facts, 'flash_attn')})"
    else:
        return None
    evidence = _config_evidence(matching, '"attn_implementation": "flash_attention_2"', gpu)
    evidence["reason"] = reason
    if severity:
        evidence["severity"] = severity
    return evidence


@check
def config_accelerate_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """An accelerate config sets mixed_precision: bf16 on a GPU without native bf16."""
    configs = _configs_of(facts, "accelerate")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if str(c.settings.get("mixed_precision")).lower() == "bf16"]
    if not gpu or not matching:
        return None
    return _config_evidence(matching, "mixed_precision: bf16", gpu)


@check
def config_deepspeed_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """A DeepSpeed config enables its bf16 block on a GPU without native bf16 ("auto" defers to the trainer)."""
    configs = _configs_of(facts, "deepspeed")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if _truthy(c.settings.get("bf16.enabled"))]
    if not gpu or not matching:
        return None
    return _config_evidence(matching, '"bf16": {"enabled": true}', gpu)


def _cuda_major(version: Optional[str]) -> Optional[str]:
    return version.split(".")[0] if version else None


def _abi_words(cxx11_abi: bool) -> str:
    """A C++ ABI as a wheel's local tag and torch._C._GLIBCXX_USE_CXX11_ABI say it."""
    return "the C++11 ABI (cxx11abiTRUE)" if cxx11_abi else "the pre-C++11 ABI (cxx11abiFALSE)"


@check
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


# A half-installed one of these is an error (they decide whether attention runs at all); any other
# package's leftovers are a warning.
_CRITICAL_INSTALLS = {"torch"} | {d for dists in MODULE_DISTRIBUTIONS.values() for d in dists}


@check
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
