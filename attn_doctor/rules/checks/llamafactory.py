"""recipes/config.toml's LLaMA-Factory checks: a `flash_attn` value the installed LLaMA-Factory
rejects, and what it does when FlashAttention-2 is asked for and flash-attn is missing or broken
(it logs one line and trains without it). The every-framework plan checks are in config.py."""

from __future__ import annotations

from typing import Optional

from packaging.version import InvalidVersion, Version

from ...facts import Facts
from ..conditions import SkipRule
from .config import _config_evidence, _configs_of, _elsewhere, _import_failure, _old_gpu, _valid_value, _yaml_value
from .llamafactory_values import (llamafactory_flash_attn_intent, llamafactory_flash_attn_value,
                                  llamafactory_flash_attn_values)


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
                    suggested=_yaml_value(llamafactory_flash_attn_value(version, "sdpa")),
                    install="Install flash-attn built for this torch" if facts.torch.cuda or facts.torch.hip
                    else "Install flash-attn in the environment the job runs in (with a CUDA build of torch)")
    if not installed:
        evidence.update(
            state="flash-attn is not installed in the target environment",
            consequence=f"LLaMA-Factory logs '{_llamafactory_fa2_log(version)}' and trains without it: it leaves "
            "attn_implementation unset, so transformers picks its default (SDPA; eager for models without SDPA, and for Gemma 2)"
            + _elsewhere(facts),
        )
        if _elsewhere(facts):
            evidence["severity"] = "info"
            evidence["elsewhere"] = True
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


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (
    config_llamafactory_flash_attn_invalid,
    config_llamafactory_fa2_unavailable,
)
