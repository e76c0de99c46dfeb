"""LLaMA-Factory's `flash_attn` values by release: an intent (what the user means: auto, disabled,
sdpa, fa2, fa3) and the spelling each release accepts. Read by config.py's and llamafactory.py's
checks and by fix's config edits."""

from __future__ import annotations

from typing import Optional

from packaging.version import InvalidVersion, Version


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
