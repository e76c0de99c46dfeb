"""The long tail: a YAML, JSON or TOML file that no framework reader recognises, read for the idioms
every framework shares, anywhere in its tree (six levels down at most).

- Precision, as a value: keys such as `precision`, `mixed_precision`, `amp`, `compute_dtype`,
  `train_dtype`, `mixed_precision_dtype`, `autocast_dtype` say what the matrix multiplies run in; keys
  such as `dtype`, `torch_dtype`, `torch_dtype_str`, `param_dtype`, `weight_dtype`, `model_dtype`,
  `backbone_dtype` what the weights are kept in. Their values in every spelling met in the wild:
  `bf16`, `bfloat16`, `torch.bfloat16`, `BFLOAT_16`, `bf16-mixed`, `bf16-true`, `amp_bf16`, `fp16`,
  `16-mixed`, `amp_fp16`, `FLOAT_16`, `half`, `fp32`, `32-true`, `no` (an accelerate-style "no mixed
  precision"). `*-mixed` and `amp*` keep the weights in fp32; `*-true` keeps them in the half dtype.
  An fp8 value under a compute key is fp8 compute; under a weight key it is storage (`FLOAT_8` base
  weights computed in a half dtype), never fp8 compute.
- Precision, as a switch: `bf16: true`, `fp16: true`, `tf32: true`, `fp8: true` / `use_fp8`.
- Attention: `attn_implementation`, `attn_impl`, `attention_implementation`, `attention_backend`,
  `attention_mechanism`, `attn_type` with transformers' names and the usual spellings (`fa2`, `flash`,
  `flash_attn`, `xformers`, `sdpa`, `torch`, `eager`, `flex`); switches `use_flash_attention(_2)`,
  `flash_attn`, `flash_attention`, `use_flash_attn`, `xformers`, `use_xformers`,
  `enable_xformers_memory_efficient_attention`, `sdpa`, `use_sdpa`.
- `torch_compile` / `compile: true`; `load_in_4bit` / `load_in_8bit` (a quantised base).

The first key of each kind in the file's order wins, the precision keys of a section named like the
trainer (`trainer`, `training`, `train`) before the others. The plan says every value was read
generically, with its key; no framework default is assumed (a framework that has one gets a reader).
"""

from __future__ import annotations

import re

from typing import Any, Iterator, Optional

from ..plan import Reading, attention_of, truthy

NAME = "generic"
LABEL = "read generically"
FORMATS = ("yaml", "json", "toml")
MAX_DEPTH = 6

COMPUTE_KEYS = ("precision", "mixed_precision", "mixed_precision_dtype", "mixed_precision_mode", "amp", "amp_dtype",
                "compute_dtype", "train_dtype", "training_precision", "autocast_dtype", "train_precision", "mp_dtype",
                "amp_precision")
WEIGHT_KEYS = ("dtype", "torch_dtype", "torch_dtype_str", "param_dtype", "params_dtype", "weight_dtype", "model_dtype",
               "backbone_dtype", "default_dtype", "weights_dtype", "base_model_precision")
ATTENTION_KEYS = ("attn_implementation", "attn_impl", "attention_implementation", "attention_backend", "attention_mechanism",
                  "attn_type", "_attn_implementation", "attention_impl", "attn_backend")
FLASH_SWITCHES = ("use_flash_attention", "use_flash_attention_2", "flash_attn", "flash_attention", "use_flash_attn",
                  "use_flash_attn_2", "flash_attention_2")
XFORMERS_SWITCHES = ("xformers", "use_xformers", "enable_xformers_memory_efficient_attention", "xformers_attention")
SDPA_SWITCHES = ("sdpa", "use_sdpa", "sdp_attention")
TRAINER_SECTIONS = ("trainer", "training", "train", "training_args", "trainer_args")

# value (lower case, separators unified) -> (dtype, kept in fp32 under autocast?)
_HALF = {"bfloat16": "bfloat16", "bf16": "bfloat16", "torch.bfloat16": "bfloat16", "bfloat_16": "bfloat16", "bfloat": "bfloat16",
         "float16": "float16", "fp16": "float16", "half": "float16", "torch.float16": "float16", "float_16": "float16",
         "torch.half": "float16", "16": "float16", "f16": "float16"}
_FULL = {"float32": "float32", "fp32": "float32", "float": "float32", "torch.float32": "float32", "float_32": "float32",
         "32": "float32", "no": "float32", "full": "float32", "tf32": "float32", "f32": "float32"}
_FP8 = ("fp8", "float8", "float_8", "amp_fp8", "fp8_e4m3", "fp8_e5m2", "float8_e4m3fn", "e4m3", "fp8-mixed")
# a half dtype's spelling -> float32 in the same style (the weights under fp16 mixed precision)
_TO_FP32 = {"bfloat16": "float32", "torch.bfloat16": "torch.float32", "bf16": "fp32", "float16": "float32",
            "torch.float16": "torch.float32", "fp16": "fp32"}
# a value's spelling -> the same spelling for fp16 (fix's precision=fp16 in the file's own style)
_TO_FP16 = {"bf16": "fp16", "bfloat16": "float16", "torch.bfloat16": "torch.float16", "BFLOAT_16": "FLOAT_16",
            "bf16-mixed": "16-mixed", "bf16-true": "16-true", "amp_bf16": "amp_fp16", "bf16_mixed": "16_mixed",
            "BF16": "FP16", "bfloat": "half"}


def parse_precision(value: Any) -> Optional[tuple[str, Optional[bool]]]:
    """(dtype, mixed) for a precision value in any spelling: mixed is True for autocast over fp32
    weights (`bf16-mixed`, `amp_bf16`), False for weights in that dtype (`bf16-true`), None where the
    spelling does not say; None for a value that is no precision. dtype "fp8" for fp8."""
    if isinstance(value, bool) or value is None:
        return None
    text = str(value).strip().lower().replace(" ", "")
    if not text or len(text) > 40:
        return None
    mixed: Optional[bool] = None
    if text.startswith("amp_") or text.startswith("amp-"):
        text, mixed = text[4:], True
    for suffix, kind in (("-mixed", True), ("_mixed", True), ("-true", False), ("_true", False)):
        if text.endswith(suffix):
            text, mixed = text[: -len(suffix)], kind
    if text in _FP8 or text.startswith("fp8") or text.startswith("float8"):
        return "fp8", mixed
    if text in _HALF:
        return _HALF[text], mixed
    if text in _FULL:
        return "float32", mixed
    return None


_OFF_SWITCHES = ("use", "enabled", "enable", "active")


def _walk(doc: Any, prefix: str = "", depth: int = MAX_DEPTH) -> Iterator[tuple[str, str, Any]]:
    """(dotted key, leaf name, value) over the tree, the trainer-like sections first; a section
    switched off (`fsdp: {use: false, ...}`, `amp: {enabled: false}`) says nothing about the run."""
    if depth <= 0 or not isinstance(doc, dict):
        return
    if any(truthy(doc.get(k)) is False for k in _OFF_SWITCHES if k in doc):
        return
    keys = sorted(doc, key=lambda k: str(k).lower() not in TRAINER_SECTIONS)
    for key in keys:
        value = doc[key]
        dotted = f"{prefix}{key}"
        yield dotted, str(key).lower(), value
        if isinstance(value, dict):
            yield from _walk(value, dotted + ".", depth - 1)


def idioms(doc: dict) -> dict[str, tuple[str, Any]]:
    """The shared idioms the file holds: kind -> (dotted key, value), the first of each kind."""
    found: dict[str, tuple[str, Any]] = {}
    switches: list[tuple[str, str, bool, Any]] = []

    def keep(kind: str, dotted: str, value: Any) -> None:
        found.setdefault(kind, (dotted, value))

    for dotted, leaf, value in _walk(doc):
        if isinstance(value, (dict, list)):
            continue
        if leaf in COMPUTE_KEYS and parse_precision(value):
            keep("compute", dotted, value)
        elif leaf in WEIGHT_KEYS and parse_precision(value):
            keep("weights", dotted, value)
        elif leaf in ("bf16", "fp16", "fp16_run", "bf16_run", "use_fp16", "use_bf16") and truthy(value):
            keep("switch_" + ("bf16" if "bf16" in leaf else "fp16"), dotted, value)
        elif leaf == "mp" and isinstance(value, str) and "c=" in value:
            keep("jmp", dotted, value)  # jmp's policy string (levanter): p=f32,c=bfloat16
        elif leaf == "tf32" and truthy(value) is not None:
            keep("tf32", dotted, value)
        elif leaf in ("fp8", "use_fp8", "enable_fp8", "fp8_training") and truthy(value):
            keep("fp8", dotted, value)
        elif leaf in ATTENTION_KEYS and _attention(value) and not _engine_section(dotted):
            keep("attention", dotted, value)
        elif leaf in FLASH_SWITCHES + XFORMERS_SWITCHES + SDPA_SWITCHES and truthy(value) is not None:
            switches.append((dotted, leaf, truthy(value), value))
        elif leaf in ("torch_compile", "compile", "use_torch_compile") and truthy(value) is not None:
            keep("compile", dotted, value)
        elif leaf in ("load_in_4bit", "load_in_8bit") and truthy(value):
            keep("quantization", dotted, value)
    # An attention switch is judged where the file says one thing: one preset's `use_flash_attention:
    # true` beside the defaults' `false` does not say which one the run takes.
    on = [sw for sw in switches if sw[2]]
    if on:
        kind = _switch_kind(on[0][1])
        if not any(_switch_kind(leaf) == kind and not value for _d, leaf, value, _raw in switches):
            keep("attention_switch", on[0][0], on[0][3])
    return found


# An inference engine's attention backend (SGLang's, vLLM's) is named in the engine's own words: SGLang's
# "fa3" is its sgl-kernel build, which runs on sm80 as on sm90, not transformers' flash_attention_3 (Hopper
# only). Under such a section the value is not read as a training attention implementation ("not understood").
_ENGINE_PARTS = re.compile(r"(^|[._])(sglang|vllm|rollout|inference_engine\w*|engine_kwargs|engine_init_kwargs)($|[._])", re.IGNORECASE)


def _engine_section(dotted: str) -> bool:
    return bool(_ENGINE_PARTS.search(dotted.rsplit(".", 1)[0])) if "." in dotted else False


def _switch_kind(leaf: str) -> str:
    return "flash_attention_2" if leaf in FLASH_SWITCHES else "xformers" if leaf in XFORMERS_SWITCHES else "sdpa"


def _attention(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    spelled = {"flash": "flash_attention_2", "flash2": "flash_attention_2", "flash_attention": "flash_attention_2",
               "flashattention": "flash_attention_2", "flashattention2": "flash_attention_2", "torch": "sdpa",
               "pytorch": "sdpa", "native": "sdpa", "sdp": "sdpa", "flash3": "flash_attention_3",
               "flashattention3": "flash_attention_3", "mem_efficient": "sdpa", "math": "eager"}
    return attention_of(value) or spelled.get(text)


def recognise(doc: dict) -> Optional[str]:
    """The keys that make a file readable generically ("keys a, b"), or None."""
    found = idioms(doc)
    if not found:
        return None
    keys = [dotted for dotted, _value in found.values()]
    return "keys " + ", ".join(keys[:5]) + (", ..." if len(keys) > 5 else "")


# Said once, on the file's line ("read generically"): no framework default is known for such a file.
NOTE = None


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    found = idioms(doc)
    r.understood(*(dotted for dotted, _value in found.values()))
    compute = found.get("compute")
    weights = found.get("weights")
    if compute is not None:
        dtype, mixed = parse_precision(compute[1])
        if dtype == "fp8":
            r.set("fp8", True, key=compute[0], raw=compute[1], note=NOTE)
            r.set("compute_dtype", "bfloat16", key=compute[0], raw=compute[1], note="fp8 matrix multiplies; the rest in bf16")
        else:
            r.set("compute_dtype", dtype, key=compute[0], raw=compute[1], note=NOTE)
            if mixed is True:
                r.set("param_dtype", "float32", key=compute[0], raw=compute[1], note="mixed precision keeps the weights in fp32")
            elif mixed is False:
                r.set("param_dtype", dtype, key=compute[0], raw=compute[1], note="the weights in it, no fp32 copy")
            if dtype == "float16" and mixed is not False:
                r.set("loss_scaling", True, key=compute[0], raw=compute[1], note="fp16 mixed precision scales the loss")
    for switch, dtype in (("switch_bf16", "bfloat16"), ("switch_fp16", "float16")):
        if switch in found and "compute_dtype" not in r.plan:
            r.set("compute_dtype", dtype, key=found[switch][0], raw=found[switch][1], note=NOTE)
            if dtype == "float16" and truthy(found[switch][1]):
                r.set("loss_scaling", True, key=found[switch][0], raw=found[switch][1],
                      note="fp16 mixed precision scales the loss (a GradScaler)")
    if weights is not None:
        dtype, mixed = parse_precision(weights[1])
        if dtype == "fp8":
            r.set("quantization", "fp8-weights", key=weights[0], raw=weights[1],
                  note="fp8 is how the weights are stored; they compute in a half dtype, not fp8")
        elif weights[0].rsplit(".", 1)[-1] == "torch_dtype" and dtype in ("bfloat16", "float16", "float32"):
            # transformers' from_pretrained(torch_dtype=...): the dtype the weights are loaded, and
            # trained, in (a mixed precision switch beside it runs autocast over those weights); a
            # bare `dtype` is not (Parler-TTS's is the Accelerator's mixed precision): the readers of
            # the frameworks whose `dtype` is from_pretrained's (TRL's ModelConfig) say so
            r.set("param_dtype", dtype, key=weights[0], raw=weights[1], note="from_pretrained loads the weights in it")
            if "compute_dtype" not in r.plan:
                r.set("compute_dtype", dtype, key=weights[0], raw=weights[1], note=NOTE)
        elif "compute_dtype" not in r.plan:
            # `dtype`, `model_dtype`, FSDP's `param_dtype` are most often the dtype the model computes
            # in (autocast, FSDP's mixed precision) over fp32 master weights: said as compute, and the
            # weights' dtype left unknown unless the spelling says (`bf16-true`)
            r.set("compute_dtype", dtype, key=weights[0], raw=weights[1], note=NOTE)
            if mixed is False:
                r.set("param_dtype", dtype, key=weights[0], raw=weights[1], note="the weights in it, no fp32 copy")
    if "jmp" in found and "compute_dtype" not in r.plan:
        key, value = found["jmp"]
        policy = dict(part.split("=", 1) for part in str(value).replace(" ", "").split(",") if "=" in part)
        compute = parse_precision(policy.get("c"))
        params = parse_precision(policy.get("p"))
        if compute:
            r.set("compute_dtype", compute[0], key=key, raw=value, note="jmp policy: c= is the compute dtype")
        if params:
            r.set("param_dtype", params[0], key=key, raw=value, note="jmp policy: p= is the parameters' dtype")
    if "switch_bf16" in found and "switch_fp16" in found:
        bf16_key, fp16_key = found["switch_bf16"][0], found["switch_fp16"][0]
        if bf16_key.rpartition(".")[0] == fp16_key.rpartition(".")[0]:
            # both on in one section: no framework's rule is known here, so no message of its own
            r.conflicts[f"{bf16_key}, {fp16_key}"] = ""
    if "tf32" in found:
        r.set("tf32", truthy(found["tf32"][1]), key=found["tf32"][0], raw=found["tf32"][1], note=NOTE)
    if "fp8" in found and "fp8" not in r.plan:
        r.set("fp8", True, key=found["fp8"][0], raw=found["fp8"][1], note=NOTE)
    if "attention" in found:
        key, value = found["attention"]
        r.set("attention", _attention(value), key=key, raw=value, note=NOTE)
    elif "attention_switch" in found:
        key, value = found["attention_switch"]
        r.set("attention", _switch_kind(key.rsplit(".", 1)[-1].lower()), key=key, raw=value, note=NOTE)
    if "compile" in found:
        r.set("compile", truthy(found["compile"][1]), key=found["compile"][0], raw=found["compile"][1])
    if "quantization" in found:
        key = found["quantization"][0]
        r.set("quantization", "nf4" if key.endswith("4bit") else "int8", key=key, raw=found["quantization"][1],
              note="a bitsandbytes-quantised base (4-bit NF4 by transformers' default, or 8-bit)")
    fields = [k for k in _TRAINING_ARGUMENTS_FIELDS if k in doc] if isinstance(doc, dict) else []
    if len(fields) >= 3:
        # TrainingArguments' own field names at the top: a file HfArgumentParser reads into them (TRL,
        # the alignment handbook, a plain transformers script), whose checks then run (tf32 raises
        # before Ampere)
        r.settings["trainer"] = "transformers.TrainingArguments"
    r.edits = _edits(r, found)
    return r


_TRAINING_ARGUMENTS_FIELDS = ("output_dir", "per_device_train_batch_size", "per_device_eval_batch_size",
                              "gradient_accumulation_steps", "num_train_epochs", "max_steps", "logging_steps", "save_steps",
                              "lr_scheduler_type", "warmup_ratio", "warmup_steps", "eval_strategy", "evaluation_strategy",
                              "save_strategy", "report_to", "optim", "gradient_checkpointing", "learning_rate", "weight_decay")


def _edits(r: Reading, found: dict[str, tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each remedy in the file's own keys and spelling, where the file's spelling shows how."""
    edits: dict[str, dict[str, Any]] = {}
    compute = r.plan.get("compute_dtype")
    if compute is not None and compute.value == "bfloat16" and compute.key:
        raw = compute.raw if compute.raw is not None else compute.value
        if isinstance(raw, bool) or compute.key.rsplit(".", 1)[-1].lower() == "bf16":
            parent = compute.key.rsplit(".", 1)[0] + "." if "." in compute.key else ""
            edits["precision=fp16"] = {compute.key: False, parent + "fp16": True}
            params = r.plan.get("param_dtype")
            if params is not None and params.key and params.key != compute.key and params.value == "bfloat16":
                # fp16 mixed precision scales the loss over float32 weights: half weights would
                # reach the GradScaler
                spelt = str(params.raw if params.raw is not None else params.value)
                edits["precision=fp16"][params.key] = _TO_FP32.get(spelt, "float32")
        elif str(raw) in _TO_FP16:
            change = {compute.key: _TO_FP16[str(raw)]}
            params = r.plan.get("param_dtype")
            if params is not None and params.key and params.key != compute.key and str(params.raw or params.value) in _TO_FP16:
                change[params.key] = _TO_FP16[str(params.raw or params.value)]
            edits["precision=fp16"] = change
    params = r.plan.get("param_dtype")
    if params is not None and params.key and params.value in ("float16", "bfloat16") and params.key != (compute.key if compute else None):
        # half weights under a loss scaler: the weights' own key loads them in fp32 (the mixed
        # precision switch keeps its half compute)
        spelt = str(params.raw if params.raw is not None else params.value)
        edits["weights=fp32"] = {params.key: _TO_FP32.get(spelt, "float32")}
    attention = r.plan.get("attention")
    if attention is not None and attention.key and attention.value in ("flash_attention_2", "flash_attention_3", "xformers"):
        raw = found.get("attention", found.get("attention_switch", (None, None)))[1]
        edits["attention=sdpa"] = {attention.key: False} if isinstance(raw, bool) or truthy(raw) is True else {attention.key: "sdpa"}
    tf32 = r.plan.get("tf32")
    if tf32 is not None and tf32.value and tf32.key:
        edits["tf32=off"] = {tf32.key: False}
    fp8 = r.plan.get("fp8")
    if fp8 is not None and fp8.value and fp8.key and isinstance(found.get("fp8", (None, None))[1], bool):
        edits["fp8=off"] = {fp8.key: False}
    return edits
