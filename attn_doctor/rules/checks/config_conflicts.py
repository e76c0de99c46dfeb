"""recipes/config.toml's checks of combinations: settings a config turns on together that its
framework refuses together (AD504: bf16 and fp16 both true, each reader recording the framework's
own message in ConfigFile.conflicts, from its code: transformers' TrainingArguments, DeepSpeed's
config), and a plan that crashes at its first optimizer step (AD506: fp16 weights under a GradScaler,
the known crash `explain` names AD654). fix judges every edit it plans with these too.
"""

from __future__ import annotations

from typing import Optional

from ...facts import ConfigFile, Facts, bf16_native
from ..conditions import SkipRule
from .config import _plan_evidence, _plans, _weakest, _yaml_value, framework_label


def _setting(config: ConfigFile, keys: str) -> str:
    """`bf16: true` and `fp16: true`, as the file writes them."""
    shown = []
    for key in keys.split(", "):
        value = config.settings.get(key, True)
        shown.append(f"`{key}: {_yaml_value(value)}`")
    return " and ".join(shown)


def _keep(config: ConfigFile, gpu: Optional[dict]) -> tuple[str, str]:
    """(the intent that keeps one, the words for it): fp16 where the GPU has no native bf16, else bf16."""
    if gpu is not None and not bf16_native(gpu["capability"]) and "precision=fp16" in config.edits:
        return "precision=fp16", f"fp16 ({gpu['gpu']} has no native bf16)"
    if "precision=bf16" in config.edits:
        where = f"native on {gpu['gpu']}" if gpu is not None else "on a GPU without native bf16 (before Ampere) keep fp16 instead"
        return "precision=bf16", f"bf16 ({where})"
    return "precision=fp16", "fp16"


def config_precision_conflict(facts: Facts, data: dict) -> Optional[dict]:
    """A config turns on settings its framework refuses together: the run stops before training
    (transformers: "At most one of fp16 and bf16 can be True, but not both"), or, where no
    framework's rule is known, which one it takes is up to the code that reads the file."""
    configs = [c for c in _plans(facts) if c.conflicts]
    if not configs:
        return None
    try:
        gpu = _weakest(facts)
    except SkipRule:
        gpu = None
    matching, keeps = [], []
    for config in configs:
        keys = next(iter(config.conflicts))
        intent, keep = _keep(config, gpu)
        matching.append((config, _setting(config, keys), intent))
        keeps.append(keep)
    evidence = _plan_evidence(matching, gpu, "")
    first = matching[0][0]
    refusal = first.conflicts[next(iter(first.conflicts))]
    evidence["consequence"] = (f"it refuses them together when it starts: \"{refusal}\"" if refusal else
                               "no framework rule is known for this file, so which one the run takes is up to the code that reads it")
    evidence["keep"] = keeps[0]
    if not refusal:
        evidence["severity"] = "warning"
    return evidence


def config_fp16_weights_scaled(facts: Facts, data: dict) -> Optional[dict]:
    """A plan that loads the trained weights in fp16 (an explicit dtype key) and scales fp16
    gradients with a GradScaler: torch.amp.GradScaler.unscale_ raises "Attempting to unscale FP16
    gradients" at the first optimizer step. Adapters kept in fp32 over a frozen fp16 base are fine."""
    matching = []
    for config in _plans(facts):
        params, scaling = config.plan.get("param_dtype"), config.plan.get("loss_scaling")
        compute = config.plan.get("compute_dtype")
        if params is None or params.value != "float16" or scaling is None or scaling.value is not True:
            continue
        if params.source != "file" or not params.key:
            continue  # a default: the framework's own loading, which its reader states where it is fp16
        # the plan's weights are what the framework trains, also where one key sets them and the compute
        # (axolotl's fp16: true loads the model in float16: resolve_dtype); a reader whose framework
        # upcasts what it trains says float32 there
        adapter, kept = config.plan.get("adapter"), config.plan.get("adapter_dtype")
        if adapter is not None and (kept is None or kept.value == "float32"):
            continue  # only fp32 adapters train: their gradients are fp32
        raw = params.raw if params.raw is not None else params.value
        scaled = scaling.key or (compute.key if compute is not None else None)
        if scaled == params.key:
            shown = ", the one key that loads the weights in float16 and scales fp16 gradients,"
        else:
            shown = f" and `{scaled}: {_yaml_value(config.settings.get(scaled, True))}`" if scaled else " under fp16 mixed precision"
        matching.append((config, f"`{params.key}: {_yaml_value(raw)}`{shown}", "weights=fp32"))
    if not matching:
        return None
    try:
        gpu = _weakest(facts)
    except SkipRule:
        gpu = None
    return _plan_evidence(matching, gpu, "")


CHECKS = (config_precision_conflict, config_fp16_weights_scaled)
