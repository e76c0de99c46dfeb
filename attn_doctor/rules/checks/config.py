"""recipes/config.toml's checks: the training plans of the configs given with --config (each read by
its framework's reader, attn_doctor/probes/configs/) that the GPU or the installed packages cannot
honour. One check per hazard, for every framework; the remedy is written in each file's own keys
(ConfigFile.edits). LLaMA-Factory's own checks are in llamafactory.py, its `flash_attn` spellings
by version in llamafactory_values.py.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Optional

from packaging.version import InvalidVersion, Version

from ...facts import ConfigFile, Facts, bf16_native
from ..conditions import SkipRule
from .common import _error_line
from .llamafactory_values import llamafactory_flash_attn_value


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


def _at_least(version: Optional[str], floor: str) -> bool:
    try:
        return version is not None and Version(version).release >= Version(floor).release
    except InvalidVersion:
        return False


def _valid_value(value, valid: tuple) -> bool:
    if isinstance(value, bool) or isinstance(valid[0], bool):
        return any(value is v for v in valid)
    return isinstance(value, str) and value in valid


def framework_label(kind: str) -> str:
    # imported where a config is judged: a check without --config never loads the readers
    from ...probes.configs.readers import label

    return label(kind)


def _yaml_value(value) -> str:
    if isinstance(value, (list, tuple)):
        return json.dumps(value)  # a flow sequence as YAML (and JSON) writes it
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


# ---------------------------------------------------------------- the training plan, every framework

# Frameworks that hand `tf32` to transformers' TrainingArguments, which raises below Ampere.
_TRAINING_ARGUMENTS = ("llamafactory", "axolotl", "trl", "ms-swift")


def _plans(facts: Facts) -> list[ConfigFile]:
    if not facts.configs:
        raise SkipRule("no config file given (--config FILE)")
    found = [c for c in facts.configs if c.status == "ok" and c.kind != "unknown"]
    if not found:
        raise SkipRule("no --config file was read as a framework's config")
    return found


def _cap(capability: str) -> tuple[int, int]:
    major, _, minor = capability.partition(".")
    return int(major), int(minor or 0)


def _weakest(facts: Facts) -> Optional[dict]:
    """The weakest GPU the configs will run on: its name, capability and sm; None without a GPU."""
    caps = facts.gpu_capabilities()
    if caps is None:
        raise SkipRule("the GPUs were not probed")
    if not caps:
        return None
    weakest = min(caps, key=_cap)
    devices = facts.torch.devices or facts.gpu.devices
    name = ", ".join(sorted({d.name for d in devices if d.capability == weakest})) or "the GPU"
    return {"gpu": name, "capability": weakest, "sm": "sm" + weakest.replace(".", "")}


def _setting_text(config: ConfigFile, name: str) -> str:
    """How the file asks for a plan value: `bf16: auto` (its key), or `no bf16 key (axolotl's default: ...)`."""
    setting = config.plan[name]
    if setting.source == "file" and setting.key:
        raw = setting.raw if setting.raw is not None else setting.value
        return f"`{setting.key}: {_yaml_value(raw)}`"
    if setting.source == "env" and setting.key:
        return f"`{setting.key}={setting.raw if setting.raw is not None else setting.value}` in the environment"
    return f"no {_KEY_WORDS.get(name, name)} key"


_KEY_WORDS = {"compute_dtype": "precision", "param_dtype": "precision", "tf32": "tf32", "attention": "attention", "fp8": "fp8"}


def _edit_text(config: ConfigFile, intent: str) -> Optional[str]:
    """A remedy as the file's own syntax: `bf16: false, fp16: true` in YAML, `"fp16": {"enabled": true}`
    in JSON, `[training] mixed_precision_param = "float32"` in TOML."""
    edit = config.edits.get(intent)
    if not edit:
        return None
    parts = []
    if config.format == "python":
        # a Python config is read, never edited: the remedy as mmengine's command line takes it (an
        # old-style child and a read_base() config spell the same change differently in the file)
        shown = " ".join(f"{dotted}={value}" for dotted, value in edit.items())
        return (f"`--cfg-options {shown}` on the training command (tools/train.py), or that value in the file by "
                "hand: attn-doctor never edits or runs a Python config")
    for dotted, value in edit.items():
        if config.format == "toml":
            section, _, key = dotted.rpartition(".")
            shown = json.dumps(value) if isinstance(value, (str, list)) else _yaml_value(value)
            parts.append(f"[{section}] {key} = {shown}" if section else f"{key} = {shown}")
        elif config.format == "json":
            *parents, key = dotted.split(".")
            shown = json.dumps(value) if isinstance(value, (str, list)) else _yaml_value(value)
            text = f'"{key}": {shown}'
            for parent in reversed(parents):
                text = f'"{parent}": {{{text}}}'
            parts.append(text)
        else:
            parts.append(f"{dotted}: {_yaml_value(value)}")
    return ", ".join(parts)


def _plan_evidence(matching: list[tuple[ConfigFile, str, str]], gpu: Optional[dict], what: str) -> dict:
    """Evidence over the matching files: (config, the setting's text, the intent of its remedy)."""
    first, setting, _intent = matching[0]
    remedies = []
    for config, _setting, intent in matching:
        edit = _edit_text(config, intent)
        remedies.append(f"in {config.path}: {edit}" if edit else f"in {config.path}: {_manual(config, intent)}")
    evidence = dict(gpu or {})
    evidence.update(
        config=first.path,
        config_files=[c.path for c, _s, _i in matching],
        framework=framework_label(first.kind),
        setting=setting,
        more_configs=f" (and {len(matching) - 1} more)" if len(matching) > 1 else "",
        what=what,
        intents={c.path: i for c, _s, i in matching},
        intent=matching[0][2],
        edit="; ".join(remedies)[:1].upper() + "; ".join(remedies)[1:],
    )
    return evidence


def _manual(config, intent: str) -> str:
    """A remedy the file's own keys cannot write, in words that do not promise a setting it lacks: the
    framework chose the value in its code (no key), or has no key for the change."""
    from ...probes.configs.readers import label

    if intent == "attention=sdpa":
        return (f"{label(config.kind)} has no setting here that selects PyTorch SDPA: run it on a GPU the attention "
                "kernel supports, or change the model's attention code")
    if intent.startswith("precision=") and config.kind == "transformers":
        # the checkpoint's saved dtype is not the job's precision: a float16 there loads pure fp16 weights
        return ("a model's config.json records the dtype its weights were saved in, not how a job trains: leave it; "
                "load the weights in float32 (from_pretrained(..., dtype=torch.float32)) and %s with the trainer's "
                "own setting (TrainingArguments fp16=True)" % _MANUAL[intent])
    if intent.startswith("precision="):
        return (f"{label(config.kind)} has no setting here to {_MANUAL[intent]} (its code chooses the dtype): run it on "
                "a GPU with native bf16, or change the training code")
    return _MANUAL.get(intent, intent)


_MANUAL = {"precision=fp16": "train in fp16 mixed precision", "precision=fp32": "train in fp32", "attention=sdpa": "use PyTorch SDPA",
           "weights=fp32": "load the weights in fp32 (the model's dtype argument: float32, or none)",
           "tf32=off": "turn TF32 off", "fp8=off": "turn fp8 off"}


def config_bf16_no_native(facts: Facts, data: dict) -> Optional[dict]:
    """A training plan computes (or keeps its weights) in bf16 on a GPU without native bf16: every
    framework's gate (torch.cuda.is_bf16_supported()) lets it through by emulation."""
    configs = _plans(facts)
    gpu = _weakest(facts)
    if gpu is None or bf16_native(gpu["capability"]):
        return None
    matching = []
    for config in configs:
        if config.conflicts:
            continue  # bf16 and fp16 both on: AD504 says it, and its remedy keeps the one this GPU runs natively
        compute, params = config.plan.get("compute_dtype"), config.plan.get("param_dtype")
        if not ((compute and compute.value == "bfloat16") or (params and params.value == "bfloat16")):
            continue
        name = "compute_dtype" if compute and compute.value == "bfloat16" else "param_dtype"
        intent = "precision=fp16" if "precision=fp16" in config.edits or "precision=fp32" not in config.edits else "precision=fp32"
        matching.append((config, _setting_text(config, name), intent))
    if not matching:
        return None
    config = matching[0][0]
    pure = config.plan.get("param_dtype") is not None and config.plan["param_dtype"].value == "bfloat16"
    what = ("pure bf16 (the weights in bf16 too, no fp32 master copy)" if pure else "bf16 mixed precision")
    adapter = config.plan.get("adapter")
    if adapter is not None:  # only adapters train: say what is stored, computed and trained in what
        quant = config.plan.get("quantization")
        kept = config.plan.get("adapter_dtype")
        base = f"stored in {quant.value} and computing in bf16" if quant is not None else "computing in bf16"
        what = f"bf16 {adapter.value} training (the frozen base {base}, the {adapter.value} adapters in " \
               f"{kept.value if kept is not None else 'the framework’s dtype'})"
    evidence = _plan_evidence(matching, gpu, what)
    note = config.plan[("compute_dtype" if config.plan.get("compute_dtype") else "param_dtype")].note
    evidence["how"] = note or "the framework's bf16 check (torch.cuda.is_bf16_supported()) is True there by emulation"
    attention = config.plan.get("attention")
    evidence["fa2"] = ("; the FlashAttention-2 it asks for does not run there in any dtype, fp16 included (AD502)"
                       if attention is not None and isinstance(attention.value, str)
                       and _attention_floor(attention.value) is not None else "")
    evidence["instead"] = "fp32 (this framework has no fp16 here)" if matching[0][2] == "precision=fp32" else "fp16 mixed precision, native on it"
    compute = config.plan.get("compute_dtype")
    if compute is not None and compute.source == "default" and not any(k.startswith("precision=") for k in config.edits):
        # the framework computes in bf16 with no key for another precision (prime-rl, open-instruct)
        evidence["instead"] = ("fp16 with another trainer, or on a GPU with native bf16 (Ampere, sm80, or newer): "
                               "this framework has no setting for another precision")
    if any(c.kind == "llamafactory" for c, _s, _i in matching):
        evidence["packages"] = "llamafactory"
    return evidence


def _floor(kernel_id: str) -> tuple[str, str]:
    """A kernel's lowest NVIDIA architecture in the support matrix (recipes/support/matrix.toml):
    ("8.0", "Ampere (sm80)")."""
    from ...support import matrix, sm_name

    low = matrix().kernel(kernel_id).nvidia_range()[0]
    name = {(7, 0): "Volta", (7, 5): "Turing", (8, 0): "Ampere", (8, 9): "Ada", (9, 0): "Hopper", (10, 0): "Blackwell"}.get(low)
    return "%d.%d" % low, (f"{name} ({sm_name(low)})" if name else sm_name(low))


@lru_cache(maxsize=None)
def _attention_floors() -> dict:
    """Attention implementations with an architecture floor: (lowest capability, highest or None,
    what it is). Read from the support matrix when a rule first needs it (not at import: commands
    that judge no config never parse the matrix)."""
    fa2_floor, fa2_arch = _floor("flash-attn-2")
    sage_floor, sage_arch = _floor("sageattention-2")
    return {
        "flash_attention_2": (fa2_floor, None, f"FlashAttention-2 needs {fa2_arch} or newer and raises 'FlashAttention only supports Ampere GPUs or newer.'"),
        "flash_attention_3": ("9.0", "9.0", "FlashAttention-3 runs on Hopper (sm90) only."),
        "sage": (sage_floor, None, f"SageAttention's CUDA kernels need {sage_arch.split(' (')[-1].rstrip(')')} or newer ('Unsupported CUDA architecture')."),
        "fp8": ("9.0", None, "axolotl's fp8 attention needs Hopper (sm90) or newer."),
    }


def _attention_floor(attention: str) -> Optional[tuple]:
    floors = _attention_floors()
    if attention in floors:
        return floors[attention]
    from ...probes.configs.plan import flash_generation

    generation = flash_generation(attention)
    if generation == 3:
        return ("9.0", "9.0", f"{attention} is FlashAttention-3, which runs on Hopper (sm90) only.")
    if generation == 2:
        fa2_floor, fa2_arch = _floor("flash-attn-2")
        return (fa2_floor, None, f"{attention} is FlashAttention-2, which needs {fa2_arch} or newer.")
    return None


def config_attention_gpu_too_old(facts: Facts, data: dict) -> Optional[dict]:
    """A training plan asks for an attention implementation the GPU's architecture cannot run
    (FlashAttention-2 before Ampere, FlashAttention-3 off Hopper, SageAttention...)."""
    configs = _plans(facts)
    gpu = _weakest(facts)
    if gpu is None:
        return None
    matching, reason = [], None
    for config in configs:
        attention = config.plan.get("attention")
        floor = _attention_floor(attention.value) if attention is not None and isinstance(attention.value, str) else None
        if floor is None:
            continue
        low, high, why = floor
        cap = _cap(gpu["capability"])
        if cap < _cap(low) or (high is not None and cap[0] > _cap(high)[0]):
            matching.append((config, _setting_text(config, "attention"), "attention=sdpa"))
            reason = reason or why
    if not matching:
        return None
    evidence = _plan_evidence(matching, gpu, "")
    evidence["reason"] = reason
    if any(c.kind == "llamafactory" for c, _s, _i in matching):
        version = facts.version_of("llamafactory")
        evidence["suggested"] = _yaml_value(llamafactory_flash_attn_value(version, "sdpa"))
        evidence["packages"] = "flash-attn llamafactory"
    else:
        evidence["packages"] = "flash-attn"
    return evidence


# The package each implementation needs, and the module that shows it imports.
_ATTENTION_PACKAGES = {"flash_attention_2": ("flash-attn", "flash_attn"), "flash_attention_3": ("flash-attn-3", "flash_attn_interface"),
                       "xformers": ("xformers", "xformers"), "sage": ("sageattention", None)}


def config_attention_unavailable(facts: Facts, data: dict) -> Optional[dict]:
    """A training plan asks for an attention implementation whose library this environment lacks or
    cannot import (LLaMA-Factory's own handling is AD508's); a GPU too old for it is AD502's."""
    configs = [c for c in _plans(facts) if c.kind != "llamafactory"]
    if not configs:
        raise SkipRule("no config other than LLaMA-Factory's among the --config files")
    if not facts.packages:
        raise SkipRule("the installed packages were not read")
    gpu = _weakest(facts)
    matching, reasons, severity = [], [], "error"
    transformers = facts.version_of("transformers")
    for config in configs:
        attention = config.plan.get("attention")
        if attention is None or not isinstance(attention.value, str):
            continue
        value = attention.value
        floor = _attention_floor(value)
        if gpu is not None and floor is not None and _cap(gpu["capability"]) < _cap(floor[0]):
            continue  # AD502 says it
        reason = None
        if "/" in value:
            if not facts.version_of("kernels"):
                reason = f"{value} is a Hugging Face kernels-hub build, and the `kernels` package is not installed"
        elif value == "flex_attention":
            if _torch_below(facts, "2.5"):
                reason = f"flex_attention needs torch 2.5 or newer (torch {facts.version_of('torch')} is installed)"
        elif value in _ATTENTION_PACKAGES:
            package, module = _ATTENTION_PACKAGES[value]
            if not facts.version_of(package) and not (module and facts.module_installed(module)):
                reason = f"{package} is not installed in the target environment"
                if value == "flash_attention_2" and facts.version_of("kernels") and _at_least(transformers, "4.56"):
                    reason += (f": transformers {transformers} downloads kernels-community/flash-attn from the Hugging Face Hub "
                               "instead (the kernels package is installed)")
                    severity = "warning"
            elif module and _import_failure(facts, module):
                reason = f"{package} {facts.version_of(package) or ''} does not import ({_import_failure(facts, module)})".replace("  ", " ")
        if reason:
            matching.append((config, _setting_text(config, "attention"), "attention=sdpa"))
            reasons.append(reason)
    if not matching:
        return None
    evidence = _plan_evidence(matching, gpu, "")
    elsewhere = _elsewhere(facts)
    evidence["reason"] = reasons[0] + elsewhere
    # A CUDA library has no build for a CPU-only torch: where this torch is one, the install belongs to
    # the job's environment.
    evidence["what_to_do"] = ("Install it built for this torch, or use PyTorch SDPA" if facts.torch.cuda or facts.torch.hip
                              else "Install it in the environment the job runs in (with a CUDA build of torch), or use PyTorch SDPA")
    evidence["severity"] = "info" if elsewhere else severity
    if elsewhere:
        evidence["elsewhere"] = True  # fix changes nothing for it: the job's environment may have the package
    return evidence


def _elsewhere(facts: Facts) -> str:
    """Why this environment may not be the one the job runs in ("" when it is): a torch that is
    not a CUDA (or ROCm) build on a machine without a GPU (a login node), or any environment judged
    for a GPU by name (check --gpu: the job's node may have its own). What is missing here is then
    said as a note, not as the job's failure, and fix changes nothing for it."""
    if facts.torch.status != "ok":
        return ""
    if not (facts.torch.cuda or facts.torch.hip) and (facts.assumed_gpu is not None or facts.gpu_capabilities() == []):
        return (" (this environment's torch is not a CUDA build, so it is not the one the job runs in: "
                "check that the GPU node's environment has it)")
    if facts.assumed_gpu is not None:
        return (f" (judged for {facts.assumed_gpu.name} by name, --gpu: if the job's node runs this "
                "environment, install it here; else check that the node's environment has it)")
    return ""


def _torch_below(facts: Facts, floor: str) -> bool:
    version = facts.version_of("torch")
    return version is not None and not _at_least(version, floor)


def config_tf32_before_ampere(facts: Facts, data: dict) -> Optional[dict]:
    """A training plan asks for TF32 on a GPU before Ampere: transformers' TrainingArguments raise
    (`--tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7`); elsewhere it does nothing."""
    configs = _plans(facts)
    gpu = _weakest(facts)
    if gpu is None or _cap(gpu["capability"]) >= (8, 0):
        return None
    # A framework that turns TF32 on by itself (Composer's DeviceGPU, SimpleTuner) sets a flag that is a
    # no-op before Ampere; only an explicit request goes to code that raises there.
    matching = [(c, _setting_text(c, "tf32"), "tf32=off") for c in configs
                if c.plan.get("tf32") is not None and c.plan["tf32"].value is True and c.plan["tf32"].source != "default"]
    if not matching:
        return None
    evidence = _plan_evidence(matching, gpu, "")
    raises = matching[0][0].kind in _TRAINING_ARGUMENTS or matching[0][0].settings.get("trainer") == "transformers.TrainingArguments"
    evidence["consequence"] = ("transformers' TrainingArguments raise 'ValueError: --tf32 requires Ampere or a newer GPU arch, "
                               "cuda>=11 and torch>=1.7' before training starts" if raises else "TF32 does not exist there: the setting does nothing")
    if not raises:
        evidence["severity"] = "warning"
    return evidence


_FP8_PACKAGES = {"te": ("transformer-engine", "transformer-engine-torch", "transformer_engine"), "torchao": ("torchao",),
                 "msamp": ("ms-amp", "msamp")}


def config_fp8_unsupported(facts: Facts, data: dict) -> Optional[dict]:
    """A training plan asks for fp8 matrix multiplies on a GPU below compute capability 8.9 (or below
    the framework's own floor), or without the fp8 backend it needs installed."""
    configs = _plans(facts)
    gpu = _weakest(facts)
    matching, reasons, remedies = [], [], []
    for config in configs:
        fp8 = config.plan.get("fp8")
        if fp8 is None or fp8.value is not True:
            continue
        floor = fp8.requires or "8.9"
        if gpu is not None and _cap(gpu["capability"]) < _cap(floor):
            reasons.append(f"fp8 matrix multiplies need compute capability {floor} or newer"
                           + (f" ({framework_label(config.kind)} refuses it below {floor})" if fp8.requires else
                              " (Ada, Hopper, Blackwell)"))
            matching.append((config, _setting_text(config, "fp8"), "fp8=off"))
            continue
        backend = config.plan.get("fp8_backend")
        wanted = backend.value if backend is not None else "auto"
        if not facts.packages:
            continue
        names = _FP8_PACKAGES.get(wanted) or tuple(n for group in _FP8_PACKAGES.values() for n in group)
        if not any(facts.version_of(n) for n in names):
            which = {"te": "Transformer Engine", "torchao": "torchao", "msamp": "MS-AMP"}.get(wanted, "an fp8 backend (Transformer Engine, torchao or MS-AMP)")
            reasons.append(f"{which} is not installed in the target environment" + _elsewhere(facts))
            matching.append((config, _setting_text(config, "fp8"), "fp8=off"))
    if not matching:
        return None
    evidence = _plan_evidence(matching, gpu, "")
    evidence["reason"] = reasons[0]
    if matching[0][0].kind == "accelerate" and "compute capability" in reasons[0]:
        evidence["severity"] = "warning"
        evidence["reason"] += ": accelerate warns and trains without fp8"
    elif _elsewhere(facts) and "compute capability" not in reasons[0]:
        evidence["severity"] = "info"
        evidence["elsewhere"] = True
    return evidence


# What to do about a refused key that no setting of a plan value fixes: (framework, key) -> the change.
_REFUSAL_FIXES = {("trl", "torch_dtype"): "rename `torch_dtype:` to `dtype:` (same value)",
                  ("mmengine", "loss_scale"): "write the loss scale as a float (`loss_scale=512.0`) or 'dynamic': "
                                              "AmpOptimWrapper takes no integer"}


def config_value_refused(facts: Facts, data: dict) -> Optional[dict]:
    """A config holds a value its framework rejects when it reads it (torchtune's fp16, a dtype
    spelling it does not take, a precision Lightning does not know, a key a newer release removed)."""
    configs = _plans(facts)
    gpu = None
    try:
        gpu = _weakest(facts)
    except SkipRule:
        pass
    found, refusals, manual = [], [], {}
    for config in configs:
        for key, message in config.refused.items():
            requirement = config.refused_by.get(key)
            if requirement is not None and not _installed_matches(facts, requirement):
                continue  # only some releases refuse it, and the installed one is not among them (or is unknown)
            fix = _REFUSAL_FIXES.get((config.kind, key)) or _REFUSAL_FIXES.get((config.kind, key.rsplit(".", 1)[-1]))
            native = gpu is not None and bf16_native(gpu["capability"]) and "precision=bf16" in config.edits
            intent = "precision=bf16" if native else "precision=fp32"
            if fix is not None:
                intent = f"manual:{key}"
                manual[config.path] = fix
            value = config.settings.get(key.split(".")[-1], config.settings.get(key))
            found.append((config, f"`{key}: {_yaml_value(value)}`" if value is not None else f"`{key}`", intent))
            refusals.append(message + (f" ({requirement.replace('>=', ' ')} and later)" if requirement else ""))
            break
    if not found:
        return None
    evidence = _plan_evidence(found, gpu, "")
    if manual:
        evidence["edit"] = "; ".join(f"in {c.path}: {manual[c.path]}" if c.path in manual else
                                     f"in {c.path}: {_edit_text(c, i) or _manual(c, i)}" for c, _s, i in found)
        evidence["edit"] = evidence["edit"][:1].upper() + evidence["edit"][1:]
    evidence["refusal"] = refusals[0]
    return evidence


def _installed_matches(facts: Facts, requirement: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return False
    version = facts.version_of(req.name)
    try:
        return version is not None and req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def config_unreadable(facts: Facts, data: dict) -> Optional[dict]:
    """A --config file that cannot be read as YAML, JSON or TOML (or is not a file, or not a mapping)."""
    if not facts.configs:
        raise SkipRule("no config file given (--config FILE)")
    bad = [c for c in facts.configs if c.status == "error"]
    if not bad:
        return None
    return {"config": bad[0].path, "config_files": [c.path for c in bad], "error": bad[0].error or "unreadable",
            "more_configs": f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""}


def config_not_recognised(facts: Facts, data: dict) -> Optional[dict]:
    """A --config file that no framework reader recognises: its settings were not judged."""
    if not facts.configs:
        raise SkipRule("no config file given (--config FILE)")
    unknown = [c for c in facts.configs if c.status == "ok" and c.kind == "unknown"]
    if not unknown:
        return None
    looks = unknown[0].unread
    evidence = {"config": unknown[0].path, "config_files": [c.path for c in unknown], "why": unknown[0].why or "",
                "more_configs": f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "",
                "looks": f"; keys that look like precision or attention settings: {', '.join(looks)}" if looks else ""}
    if all(" suggest " in (c.why or "") and not c.unread for c in unknown):
        # half-recognised, and nothing in it asks for a precision or an attention kernel: said, not a finding
        evidence["severity"] = "info"
    return evidence


# The checks recipes name (the registry in __init__.py collects them).
CHECKS = (
    config_bf16_no_native,
    config_attention_gpu_too_old,
    config_attention_unavailable,
    config_tf32_before_ampere,
    config_fp8_unsupported,
    config_value_refused,
    config_unreadable,
    config_not_recognised,
)
