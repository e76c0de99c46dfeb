"""recipes/config.toml's checks: training configs given with --config (LLaMA-Factory YAML, a model's
config.json, accelerate, DeepSpeed) whose settings the GPU or the installed versions cannot
honour. Also LLaMA-Factory's `flash_attn` spellings by version, which fix's config edits use.
"""

from __future__ import annotations

from typing import Optional

from packaging.version import InvalidVersion, Version

from ...facts import Facts, bf16_native
from ..conditions import SkipRule
from .common import _error_line


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


def config_llamafactory_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """A LLaMA-Factory config asks for bf16 (or pure_bf16) on a GPU without native bf16."""
    configs = _configs_of(facts, "llamafactory")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if _truthy(c.settings.get("bf16")) or _truthy(c.settings.get("pure_bf16"))]
    if not gpu or not matching:
        return None
    key = "bf16" if _truthy(matching[0].settings.get("bf16")) else "pure_bf16"
    return _config_evidence(matching, f"{key}: true", gpu)


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


def config_transformers_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """A model's config.json says bfloat16 (what torch_dtype="auto" loads) on a GPU without native bf16."""
    configs = _configs_of(facts, "transformers")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if "bfloat16" in (str(c.settings.get("dtype")), str(c.settings.get("torch_dtype")))]
    if not gpu or not matching:
        return None
    key = "dtype" if str(matching[0].settings.get("dtype")) == "bfloat16" else "torch_dtype"
    return _config_evidence(matching, f'"{key}": "bfloat16"', gpu)


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


def config_accelerate_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """An accelerate config sets mixed_precision: bf16 on a GPU without native bf16."""
    configs = _configs_of(facts, "accelerate")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if str(c.settings.get("mixed_precision")).lower() == "bf16"]
    if not gpu or not matching:
        return None
    return _config_evidence(matching, "mixed_precision: bf16", gpu)


def config_deepspeed_bf16(facts: Facts, data: dict) -> Optional[dict]:
    """A DeepSpeed config enables its bf16 block on a GPU without native bf16 ("auto" defers to the trainer)."""
    configs = _configs_of(facts, "deepspeed")
    gpu = _old_gpu(facts)
    matching = [c for c in configs if _truthy(c.settings.get("bf16.enabled"))]
    if not gpu or not matching:
        return None
    return _config_evidence(matching, '"bf16": {"enabled": true}', gpu)


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (
    config_llamafactory_bf16,
    config_llamafactory_fa2_old_gpu,
    config_llamafactory_flash_attn_invalid,
    config_llamafactory_fa2_unavailable,
    config_transformers_bf16,
    config_transformers_fa2_unusable,
    config_accelerate_bf16,
    config_deepspeed_bf16,
)
