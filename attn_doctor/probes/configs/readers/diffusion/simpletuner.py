"""A SimpleTuner config: config.json / config.toml (keys are the `--arguments`, the leading `--` optional;
simpletuner/helpers/configuration/json_file.py, toml_file.py, cli_utils.mapping_to_cli_args) or a shell-style
config.env (env_file.py: `export MIXED_PRECISION=bf16` ..., env_to_args_map, TRAINER_EXTRA_ARGS).

Read from bghira/SimpleTuner bc8e6ab7738ce457a2ed8eb2d26cadd91c6442cb (2026-08-22); the defaults are the field
registry's (simpletuner_sdk/server/services/field_registry/sections/*.py), which builds the argparse parser
(helpers/configuration/cmd_args.py _populate_parser_from_field_registry):

- `mixed_precision` bf16 (default) | fp16 | no | fp8 goes to Accelerator(mixed_precision=...) explicitly
  (helpers/training/trainer.py), so the launcher's `accelerate launch --mixed_precision` (from MIXED_PRECISION
  in config.env) does not override a config.json's value. "fp8" adds accelerate's AORecipeKwargs: torchao
  Float8Linear training (fp8 compute); refused with a quantised base other than fp8-torchao.
- cmd_args.py: weight_dtype = bf16 if mixed_precision is bf16 (or a quantised LoRA base with
  `base_model_default_dtype` bf16, the default), fp16 if fp16, else fp32; the trained component (with its
  PEFT / LyCORIS adapters) is moved `.to(weight_dtype)` (trainer.py): bf16 weights, no fp32 master copy. The
  adamw_bf16 optimizer casts what it trains to bf16 whatever the precision ("AdamW_BF16 requires bf16 weights").
- `base_model_precision` (no_change by default; LoRA only) quantises the frozen base
  (helpers/training/quantisation/__init__.py): int2/int4/int8/fp8/fp8uz-quanto (optimum.quanto weights),
  int8-torchao (int8_weight_only_quantized_training), fp8wo-torchao (Float8WeightOnlyConfig), nf4-bnb,
  int4-torchao, *-sdnq: storage, computed in weight_dtype. fp8-torchao is Float8DynamicActivationFloat8WeightConfig
  (fp8 activations *and* weights: torch._scaled_mm, SM 8.9+), int8dq-torchao int8 activations and weights,
  fp8-native / fp8-transformerengine fp8 matmuls too: compute, not only storage.
- `attention_mechanism` (default "diffusers": PyTorch SDPA) through helpers/training/attention_backend.py:
  diffusers' dispatcher backends (flash-attn -> flash, flash-attn-2 / -varlen -> flash_varlen (flash-attn
  package), flash-attn-3 -> _flash_3 (flash_attn_interface), *-hub -> the Hugging Face kernels hub
  (kernels-community/flash-attn2 / flash-attn3 / flash-attn4), native-flash / native-efficient / native-math /
  cudnn -> SDPA pinned to one backend, flex), "xformers" (enable_xformers_memory_efficient_attention on the
  trained component; cmd_args refuses it on compute capability 9.0+), "sageattention*" (only while training when
  `sageattention_usage` says so: by default "inference", training keeps SDPA), metal-flash-attention (MPS), sla.
- TF32 is on unless `disable_tf32` (cmd_args._configure_tf32). `dynamo_backend` (default "no") compiles.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Optional

from ...plan import Reading, truthy

NAME = "simpletuner"
LABEL = "SimpleTuner"
FORMATS = ("json", "toml", "env")
MARKERS = {"model_family": 5, "base_model_precision": 4, "data_backend_config": 4, "quantize_via": 3, "lora_type": 2,
           "validation_resolution": 2, "validation_guidance": 2, "checkpoint_step_interval": 3, "checkpointing_steps": 2,
           "flow_schedule_shift": 3, "model_flavour": 3, "base_model_default_dtype": 4, "text_encoder_1_precision": 3,
           "tracker_project_name": 2, "tracker_run_name": 2, "validation_prompt": 1, "validation_steps": 1,
           "validation_num_inference_steps": 1, "resolution_type": 2, "aspect_bucket_rounding": 3, "minimum_image_size": 2,
           "caption_dropout_probability": 2, "attention_mechanism": 1, "mixed_precision": 1, "model_type": 1,
           # config.env
           "MODEL_FAMILY": 5, "MODEL_TYPE": 2, "MIXED_PRECISION": 1, "BASE_MODEL_PRECISION": 4, "DATALOADER_CONFIG": 4,
           "TRAINER_EXTRA_ARGS": 4, "TRAINING_NUM_PROCESSES": 3, "TRAINING_NUM_MACHINES": 2, "TRAINING_DYNAMO_BACKEND": 3,
           "CONFIG_BACKEND": 3, "CONFIG_TYPE": 2, "ACCELERATE_EXTRA_ARGS": 3, "TRACKER_PROJECT_NAME": 2, "VALIDATION_PROMPT": 1,
           "USE_XFORMERS": 2, "ALLOW_TF32": 1, "LORA_TYPE": 2, "RESOLUTION_TYPE": 2, "VALIDATION_RESOLUTION": 2}
DISTINCT = ("model_family", "base_model_precision", "data_backend_config", "base_model_default_dtype", "model_flavour",
            "quantize_via", "flow_schedule_shift", "text_encoder_1_precision", "aspect_bucket_rounding",
            # config.env's variables (train.sh reads them)
            "TRAINER_EXTRA_ARGS", "DATALOADER_CONFIG", "TRAINING_NUM_PROCESSES", "TRAINING_DYNAMO_BACKEND", "CONFIG_BACKEND")


def distinct(doc: dict) -> list[str]:
    """The same arguments spelt `--key` (config.json written from the CLI, config.env)."""
    return [k for k in doc if isinstance(k, str) and k.startswith("--") and k[2:] in DISTINCT][:2]
# config.env variables (env_file.env_to_args_map) that the plan reads
_ENV = {"MIXED_PRECISION": "mixed_precision", "BASE_MODEL_PRECISION": "base_model_precision", "QUANTIZE_VIA": "quantize_via",
        "MODEL_TYPE": "model_type", "MODEL_FAMILY": "model_family", "LORA_TYPE": "lora_type", "USE_DORA": "use_dora",
        "OPTIMIZER": "optimizer", "TRAINING_NUM_PROCESSES": "num_processes", "TRAINING_DYNAMO_BACKEND": "dynamo_backend",
        "TRAINER_DYNAMO_BACKEND": "dynamo_backend", "USE_XFORMERS": "enable_xformers_memory_efficient_attention",
        "ALLOW_TF32": "allow_tf32", "MODEL_NAME": "pretrained_model_name_or_path"}
_REMOVED = {"allow_tf32": "TF32 is on unless --disable_tf32",
            "enable_xformers_memory_efficient_attention": "--attention_mechanism=xformers replaced it"}
_ENV_RAW = "__simpletuner_env__"


def parse_env(text: str) -> dict:
    """A config.env as a shell sources it: `[export ]KEY=value` / `KEY+=value` lines, quotes and inline
    comments handled by shlex (no $VAR expansion). Where SimpleTuner's own parse_env_file reads a value
    differently (it keeps an unquoted inline comment), that reading is kept under __simpletuner_env__."""
    out: dict[str, Any] = {}
    theirs: dict[str, str] = {}
    line_re = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(\+?=)(.*)$")
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = line_re.match(stripped)
        if not match:
            raise ValueError(f"line {number}: {stripped[:80]!r} is not KEY=VALUE")
        key, op, rest = match.groups()
        try:
            value = " ".join(shlex.split(rest, comments=True, posix=True))
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
        out[key] = (str(out.get(key, "")) + " " + value).strip() if op == "+=" else value
        raw = rest.strip()  # env_file.parse_env_file: strip one pair of matching quotes, else keep it all
        if (raw.startswith('"') and raw.endswith('"') or raw.startswith("'") and raw.endswith("'")) and len(raw) >= 2:
            raw = raw[1:-1]
        raw = " ".join(raw.split())
        if op == "=" and raw != value:
            theirs[key] = raw
    if theirs:
        out[_ENV_RAW] = theirs
    return out


def _canonical(doc: dict) -> tuple[dict, dict, bool, bool]:
    """(settings by argument name, argument name -> the file's key, is config.env, the file writes `--` keys)."""
    env = any(k.isupper() for k in doc if k != _ENV_RAW) and not any(k.startswith("--") for k in doc)
    args: dict[str, Any] = {}
    keys: dict[str, str] = {}
    dashed = False
    if env:
        for var, name in _ENV.items():
            if var in doc:
                args[name] = doc[var]
                keys[name] = var
        extra = doc.get("TRAINER_EXTRA_ARGS")
        if isinstance(extra, str) and extra.strip():
            tokens = extra.split()
            i = 0
            while i < len(tokens):
                token = tokens[i]
                if token.startswith("--"):
                    name, eq, value = token[2:].partition("=")
                    if not eq:
                        value = tokens[i + 1] if i + 1 < len(tokens) and not tokens[i + 1].startswith("--") else "true"
                        i += 0 if value == "true" else 1
                    args[name] = value
                    keys[name] = f"TRAINER_EXTRA_ARGS --{name}"
                i += 1
        return args, keys, True, False
    for key, value in doc.items():
        if not isinstance(key, str):
            continue
        name = key.lstrip("-")
        dashed = dashed or key.startswith("--")
        args[name] = value
        keys[name] = key
    return args, keys, False, dashed


def recognise_extra(doc: dict) -> int:
    """`--key` spellings count like bare ones."""
    score = sum(MARKERS.get(k[2:], 0) for k in doc if isinstance(k, str) and k.startswith("--"))
    if any(k in doc for k in ("LoRA_type", "training_method", "train_dtype", "dit", "network_module")):
        score -= 8
    return score


def _text(value: Any) -> Optional[str]:
    if value is None or value == "":
        return None
    return str(value).strip().strip("'\"").strip().lower()


_ATTENTION = {
    "diffusers": ("sdpa", "PyTorch SDPA (AttentionBackendController.restore_default)"),
    "native": ("sdpa", "diffusers' native backend: F.scaled_dot_product_attention"),
    "xformers": ("xformers", "enable_xformers_memory_efficient_attention on the trained component (trainer.py); cmd_args "
                              "refuses it on compute capability 9.0+ (\"xformers is not supported on GPUs with compute capability "
                              "9.0+\"), and a model without it falls back to SDPA"),
    "flash-attn": ("flash_attention_2", "diffusers' \"flash\" backend: the flash-attn package"),
    "flash": ("flash_attention_2", "diffusers' \"flash\" backend: the flash-attn package"),
    "flash-attn-2": ("flash_attention_2", "diffusers' \"flash_varlen\" backend: the flash-attn package's varlen kernel"),
    "flash-attn-varlen": ("flash_attention_2", "diffusers' \"flash_varlen\" backend: the flash-attn package's varlen kernel"),
    "flash-varlen": ("flash_attention_2", "diffusers' \"flash_varlen\" backend: the flash-attn package's varlen kernel"),
    "flash-attn-hub": ("kernels-community/flash-attn2", "diffusers' \"flash_hub\" backend: FlashAttention-2 from the kernels hub "
                                                         "(the repository is diffusers' choice)"),
    "flash-hub": ("kernels-community/flash-attn2", "diffusers' \"flash_hub\" backend: FlashAttention-2 from the kernels hub"),
    "flash-attn-varlen-hub": ("kernels-community/flash-attn2", "diffusers' \"flash_varlen_hub\": kernels-community/flash-attn2"),
    "flash-varlen-hub": ("kernels-community/flash-attn2", "diffusers' \"flash_varlen_hub\": kernels-community/flash-attn2"),
    "flash-attn-3": ("flash_attention_3", "diffusers' \"_flash_3\" backend: FlashAttention-3's flash_attn_interface (Hopper)"),
    "flash3": ("flash_attention_3", "diffusers' \"_flash_3\" backend: FlashAttention-3's flash_attn_interface (Hopper)"),
    "flash-attn-3-varlen": ("flash_attention_3", "diffusers' \"_flash_varlen_3\": FlashAttention-3's flash_attn_interface"),
    "flash3-varlen": ("flash_attention_3", "diffusers' \"_flash_varlen_3\": FlashAttention-3's flash_attn_interface"),
    "flash-attn-3-hub": ("kernels-community/flash-attn3", "diffusers' \"_flash_3_hub\": FlashAttention-3 from the kernels hub"),
    "flash3-hub": ("kernels-community/flash-attn3", "diffusers' \"_flash_3_hub\": FlashAttention-3 from the kernels hub"),
    "flash-attn-3-varlen-hub": ("kernels-community/flash-attn3", "diffusers' \"_flash_3_varlen_hub\": FlashAttention-3 from the kernels hub"),
    "flash3-varlen-hub": ("kernels-community/flash-attn3", "diffusers' \"_flash_3_varlen_hub\": FlashAttention-3 from the kernels hub"),
    "flash-attn-4-hub": ("kernels-community/flash-attn4", "diffusers' \"flash_4_hub\": FlashAttention-4 (CuTe DSL, Hopper / Blackwell) "
                                                          "from the kernels hub"),
    "flash4-hub": ("kernels-community/flash-attn4", "diffusers' \"flash_4_hub\": FlashAttention-4 from the kernels hub"),
    "flex": ("flex_attention", "diffusers' \"flex\" backend: torch flex_attention"),
    "flex-attn": ("flex_attention", "diffusers' \"flex\" backend: torch flex_attention"),
    "cudnn": ("sdpa", "diffusers' \"_native_cudnn\": SDPA pinned to cuDNN attention"),
    "native-cudnn": ("sdpa", "diffusers' \"_native_cudnn\": SDPA pinned to cuDNN attention"),
    "native-flash": ("sdpa", "diffusers' \"_native_flash\": SDPA pinned to PyTorch's own FlashAttention-2 kernel (SM 8.0+, "
                             "fp16/bf16), no fallback"),
    "native-efficient": ("sdpa", "diffusers' \"_native_efficient\": SDPA pinned to the memory-efficient kernel"),
    "native-math": ("sdpa", "diffusers' \"_native_math\": SDPA's math fallback (an eager matmul + softmax)"),
}


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    args, keys, env, dashed = _canonical(doc)
    theirs = doc.get(_ENV_RAW) if isinstance(doc.get(_ENV_RAW), dict) else {}
    r.understood(_ENV_RAW, *(keys[n] for n in ("mixed_precision", "base_model_precision", "base_model_default_dtype",
                                              "attention_mechanism", "sageattention_usage", "disable_tf32", "quantize_via",
                                              "text_encoder_1_precision", "text_encoder_2_precision", "text_encoder_3_precision",
                                              "text_encoder_4_precision", "dynamo_backend", "fsdp_enable", "fsdp_version",
                                              "deepspeed_config", "use_dora", "lora_type", "validation_torch_compile",
                                              "quantize_activations", "enable_xformers_memory_efficient_attention", "allow_tf32",
                                              "gradient_precision", "optimizer")
                             if n in keys))
    if env:
        r.understood("PURE_BF16", "TRAINER_EXTRA_ARGS", "CONFIG_BACKEND", "CONFIG_TYPE")

    def key(name: str) -> str:
        return keys.get(name, f"--{name}" if dashed else name)

    backend = _text(doc.get("CONFIG_BACKEND") or doc.get("CONFIG_TYPE") or doc.get("SIMPLETUNER_CONFIG_BACKEND")) if env else None
    launcher_only = env and backend in ("json", "toml", "cmd")
    launcher_note = ""

    # -- values SimpleTuner's own config.env parser mangles (an unquoted inline comment kept in the value)
    for var, raw in theirs.items():
        name = _ENV.get(var)
        if name in ("mixed_precision", "base_model_precision", "model_type"):  # TRAINING_DYNAMO_BACKEND only reaches the launcher
            r.refused[var] = (f"argument --{name}: invalid choice: {raw!r} (env_file.parse_env_file keeps the inline comment; "
                              "a shell's `source` drops it)")
    for name, why in _REMOVED.items():
        if name in args and truthy(args[name]):
            r.refused[key(name)] = f"unrecognized arguments: --{name} ({why})"
            r.refused_by[key(name)] = "simpletuner>=2.0"

    if launcher_only:
        _launcher(doc, args, key, backend, r)
        return r
    model_type = _text(args.get("model_type")) or "full"
    lora = model_type == "lora"
    mp_raw = args.get("mixed_precision")
    mp = _text(mp_raw) or "bf16"
    mp_key = key("mixed_precision") if mp_raw not in (None, "") else None
    base_precision = _text(args.get("base_model_precision")) or "no_change"
    model_path = str(args.get("pretrained_model_name_or_path") or "")
    quantized = lora and (base_precision != "no_change" or model_path.endswith(".gguf") or args.get("quantization_config") is not None)
    bdd_raw = args.get("base_model_default_dtype")
    bdd = _text(bdd_raw) or "bf16"
    if bdd not in ("bf16", "fp32"):
        r.refused[key("base_model_default_dtype")] = (f"argument --base_model_default_dtype: invalid choice: {bdd_raw!r} "
                                                      "(choose from bf16, fp32)")
    if mp not in ("bf16", "fp16", "no", "fp8"):
        r.refused.setdefault(mp_key or "mixed_precision",
                             f"argument --mixed_precision: invalid choice: {mp_raw!r} (choose from no, fp16, bf16, fp8)")
    # cmd_args.py: args.weight_dtype
    weight = "bfloat16" if mp == "bf16" or (bdd == "bf16" and quantized) else "float16" if mp == "fp16" else "float32"
    optimizer = _text(args.get("optimizer"))

    src = "file" if mp_key else "default"
    default_note = "mixed_precision defaults to bf16 (field registry); " if not mp_key else ""
    if mp in ("bf16", "fp16"):
        r.set("compute_dtype", "bfloat16" if mp == "bf16" else "float16", source=src, key=mp_key, raw=mp_raw or "bf16",
              note=f"{default_note}Accelerator(mixed_precision={mp}) autocast{launcher_note}")
    elif mp == "fp8":
        r.set("compute_dtype", "bfloat16", key=mp_key, raw=mp_raw,
              note="accelerate fp8 through torchao (AORecipeKwargs): fp8 Float8Linear matmuls, the rest in bf16" + launcher_note)
        r.set("fp8", True, key=mp_key, raw=mp_raw, note="torchao Float8Linear: compute capability 8.9+")
        r.set("fp8_backend", "torchao", source="default", note="trainer.py passes AORecipeKwargs() to Accelerator")
        if quantized and base_precision != "fp8-torchao":
            r.refused[mp_key or "mixed_precision"] = ("You cannot use --mixed_precision=fp8 with a quantized base model. Please use "
                                                      "bf16 or remove base_model_precision option from your configuration.")
    elif mp == "no":
        r.set("compute_dtype", weight, key=mp_key, raw=mp_raw,
              note="no autocast: the model runs in its weight dtype"
                   + (" (a quantised LoRA base keeps base_model_default_dtype bf16)" if weight == "bfloat16" else "") + launcher_note)
    if mp == "fp16":
        r.set("loss_scaling", True, source=src, key=mp_key, raw=mp_raw,
              note="accelerate's GradScaler" + ("; the trained weights are fp16 too (moved .to(weight_dtype)), and torch's GradScaler "
                                                 "refuses to unscale fp16 gradients" if not lora and optimizer != "adamw_bf16" else ""))

    # -- the weights
    if quantized:
        _quantization(args, key, base_precision, weight, r)
    else:
        if base_precision != "no_change" and not lora:
            r.refused[key("base_model_precision")] = (f"base_model_precision {base_precision} is for LoRA training "
                                                      "(is_quantized needs --model_type=lora): a full fine-tune is not quantised")
        trained_bf16 = optimizer == "adamw_bf16" and not lora
        value = "bfloat16" if trained_bf16 else weight
        r.set("param_dtype", value, source="default",
              note=("adamw_bf16: \"AdamW_BF16 requires bf16 weights\", the trained weights are cast to bf16" if trained_bf16 else
                    "the model is moved .to(weight_dtype) (trainer.py)" + ("; LoRA: the frozen base" if lora else
                                                                           "; full training: no fp32 master copy" if value != "float32" else "")))
    if lora:
        lora_type = _text(args.get("lora_type")) or "standard"
        if lora_type == "lycoris":
            adapter, adapter_note = "lycoris", "LyCORIS; the algorithm is in --lycoris_config"
        else:
            adapter = "dora" if truthy(args.get("use_dora")) else "lora"
            adapter_note = "PEFT LoraConfig" + (" with use_dora" if adapter == "dora" else "")
        r.set("adapter", adapter, key=key("lora_type") if "lora_type" in args else key("model_type"),
              raw=args.get("lora_type") or args.get("model_type"), note=adapter_note)
        if quantized:
            r.set("adapter_dtype", "bfloat16" if bdd == "bf16" else "float32", source="default",
                  note="the adapters are created in the base layers' dtype (base_model_default_dtype) and not cast after quantisation")
        else:
            r.set("adapter_dtype", "bfloat16" if optimizer == "adamw_bf16" else weight, source="default",
                  note="the trained component, adapters included, is moved .to(weight_dtype) (trainer.py)")

    _attention(args, key, r)

    if truthy(args.get("disable_tf32")):
        r.set("tf32", False, key=key("disable_tf32"), raw=args.get("disable_tf32"))
    else:
        r.set("tf32", True, source="default", note="SimpleTuner enables TF32 unless --disable_tf32 (cmd_args._configure_tf32)")
    dynamo = _text(args.get("dynamo_backend"))
    if dynamo is not None:
        r.set("compile", dynamo != "no", key=key("dynamo_backend"), raw=args.get("dynamo_backend"))
    if truthy(args.get("fsdp_enable")):
        version = str(args.get("fsdp_version") or 2)
        r.set("distributed", "fsdp2" if version == "2" else "fsdp", key=key("fsdp_enable"), raw=args.get("fsdp_enable"),
              note="fsdp_version defaults to 2")
    elif args.get("deepspeed_config"):
        r.set("distributed", "deepspeed", key=key("deepspeed_config"), raw=args.get("deepspeed_config"))
    else:
        try:
            processes = int(str(args.get("num_processes") or 1))
        except ValueError:
            processes = 1
        if processes > 1:
            r.set("distributed", "ddp", key=key("num_processes"), raw=args.get("num_processes"), note="accelerate launch --multi_gpu")

    r.settings = {n: args[n] for n in ("mixed_precision", "base_model_precision", "base_model_default_dtype", "attention_mechanism",
                                       "model_type", "lora_type", "optimizer", "disable_tf32") if n in args}
    if not env:
        _edits(args, key, r, mp, base_precision)
    return r


def _launcher(doc: dict, args: dict, key, backend: str, r: Reading) -> None:
    """A config.env beside a config.json / config.toml: it only sets `accelerate launch`'s flags (trainer.py's
    launcher: --mixed_precision, --num_processes, --dynamo_backend); the trainer's own settings, mixed precision
    included (Accelerator(mixed_precision=config.mixed_precision), explicit), come from config.{backend}."""
    if "mixed_precision" in args:
        r.understood(key("mixed_precision"))
    dynamo = _text(args.get("dynamo_backend"))
    if dynamo is not None:
        r.set("compile", dynamo != "no", key=key("dynamo_backend"), raw=args.get("dynamo_backend"),
              note="accelerate launch --dynamo_backend")
    try:
        processes = int(str(args.get("num_processes") or 1))
    except ValueError:
        processes = 1
    if processes > 1:
        r.set("distributed", "ddp", key=key("num_processes"), raw=args.get("num_processes"), note="accelerate launch --multi_gpu")
    r.settings = {"CONFIG_BACKEND": backend, **({"MIXED_PRECISION": doc["MIXED_PRECISION"]} if "MIXED_PRECISION" in doc else {})}


def _quantization(args: dict, key, precision: str, weight: str, r: Reading) -> None:
    k = key("base_model_precision")
    raw = args.get("base_model_precision")
    compute_ops = {"fp8-torchao": ("fp8-w8a8", "torchao Float8DynamicActivationFloat8WeightConfig: fp8 activations and weights, "
                                                "torch._scaled_mm"),
                   "fp8-native": ("fp8-w8a8", "fp8-native: Linear layers swapped for torch._scaled_mm ones (activations scaled "
                                              "inside _scaled_mm)"),
                   "fp8-transformerengine": ("fp8-w8a8", "Transformer Engine Linear layers under te.fp8_autocast"),
                   "int8dq-torchao": ("int8-w8a8", "torchao Int8DynamicActivationInt8WeightConfig: int8 activations and weights"),
                   "int8dq-int4-torchao": ("int4-w-int8-a", "torchao Int8DynamicActivationIntxWeightConfig(int4)"),
                   "fp8-int4-torchao": ("int4-w-fp8-a", "torchao Float8DynamicActivationInt4WeightConfig")}
    storage = {"int8-quanto": "int8", "int4-quanto": "int4", "int2-quanto": "int2", "fp8-quanto": "fp8-weights",
               "fp8uz-quanto": "fp8-weights", "int8-torchao": "int8", "fp8wo-torchao": "fp8-weights", "nf4-bnb": "nf4",
               "int4-torchao": "int4"}
    if precision in compute_ops:
        value, note = compute_ops[precision]
        r.set("quantization", value, key=k, raw=raw, note=note + ": compute, not only storage")
        if value == "fp8-w8a8":
            backend = "te" if "transformerengine" in precision else "torchao" if "torchao" in precision else "scaled_mm"
            r.set("fp8", True, key=k, raw=raw, requires="8.9",
                  note=f"{precision}: fp8 matrix multiplies in the frozen base's forward (compute capability 8.9+)")
            r.set("fp8_backend", backend, source="default", note=f"{precision}: the fp8 matrix multiplies go through {backend}")
    elif precision in storage or precision.endswith("-sdnq"):
        value = storage.get(precision) or precision.replace("-sdnq", "") + "-sdnq"
        notes = {"fp8-quanto": "optimum.quanto qfloat8 weights, dequantised (or Marlin fp8 kernels) per matmul",
                 "fp8uz-quanto": "optimum.quanto qfloat8_e4m3fnuz weights",
                 "fp8wo-torchao": "torchao Float8WeightOnlyConfig: fp8 weights, bf16 activations",
                 "int8-torchao": "torchao int8_weight_only_quantized_training: int8 weights, dequantised per matmul",
                 "nf4-bnb": "bitsandbytes NF4 (pipeline quantisation), bnb_4bit_compute_dtype = weight_dtype"}
        note = notes.get(precision) or (f"optimum.quanto {precision.split('-')[0]} weights" if "quanto" in precision else
                                        f"SDNQ {precision}: quantised weights (quantised matmuls only where sdnq_use_quantized_matmul)"
                                        if precision.endswith("-sdnq") else precision)
        r.set("quantization", value, key=k, raw=raw, note=note + ": storage")
        if precision.startswith("fp8"):
            r.set("fp8", False, key=k, raw=raw, note="fp8 weight storage, not fp8 matrix multiplies")
    elif precision == "no_change":
        r.set("quantization", "gguf", key=key("pretrained_model_name_or_path"), raw=args.get("pretrained_model_name_or_path"),
              note="a .gguf checkpoint")
    else:
        r.set("quantization", precision, key=k, raw=raw)
    r.set("quant_compute_dtype", weight, source="default",
          note="the base computes in weight_dtype (bf16 with base_model_default_dtype bf16 on a quantised LoRA base)")


def _attention(args: dict, key, r: Reading) -> None:
    raw = args.get("attention_mechanism")
    text = (_text(raw) or "diffusers").replace("_", "-")
    if "attention_mechanism" not in args and truthy(args.get("enable_xformers_memory_efficient_attention")):
        r.set("attention", "xformers", key=key("enable_xformers_memory_efficient_attention"),
              raw=args.get("enable_xformers_memory_efficient_attention"),
              note="USE_XFORMERS: SimpleTuner before v2.0's --enable_xformers_memory_efficient_attention")
        return
    if raw in (None, ""):
        r.set("attention", "sdpa", source="default",
              note="attention_mechanism defaults to \"diffusers\": PyTorch SDPA (attention_backend.py restore_default)")
        return
    if text.startswith("sageattention"):
        usage = _text(args.get("sageattention_usage")) or "inference"
        if usage in ("training", "training+inference"):
            r.set("attention", "sage", key=key("attention_mechanism"), raw=raw,
                  note=f"{text} while training too (sageattention_usage={usage}): SimpleTuner calls it unsupported and experimental")
        else:
            r.set("attention", "sdpa", key=key("attention_mechanism"), raw=raw,
                  note=f"{text} is used for validation only (sageattention_usage defaults to inference): training keeps SDPA")
        return
    if text in _ATTENTION:
        value, note = _ATTENTION[text]
        r.set("attention", value, key=key("attention_mechanism"), raw=raw, note=note)
        return
    r.set("attention", text, key=key("attention_mechanism"), raw=raw,
          note="metal-flash-attention is Apple MPS only" if text.startswith("metal") else
          "Sparse-Linear Attention (trainable)" if text == "sla" else "FlashAttention-4 (flash_attn.cute)" if "4" in text else None)


def _edits(args: dict, key, r: Reading, mp: str, base_precision: str) -> None:
    r.edits["precision=fp16"] = {key("mixed_precision"): "fp16"}
    r.edits["precision=bf16"] = {key("mixed_precision"): "bf16"}
    r.edits["precision=fp32"] = {key("mixed_precision"): "no"}
    attention = r.plan.get("attention")
    if attention is not None and attention.source == "file" and (attention.value != "sdpa" or _text(args.get("attention_mechanism")) not in
                                                                 (None, "diffusers", "native")):
        r.edits["attention=sdpa"] = {key("attention_mechanism"): "diffusers"}
    tf32 = r.plan.get("tf32")
    if tf32 is not None and tf32.value is True:
        r.edits["tf32=off"] = {key("disable_tf32"): True}
    fp8 = r.plan.get("fp8")
    if fp8 is not None and fp8.value is True:
        edit: dict[str, Any] = {}
        if mp == "fp8":
            edit[key("mixed_precision")] = "bf16"
        if base_precision in ("fp8-torchao", "fp8-native", "fp8-transformerengine"):
            edit[key("base_model_precision")] = "int8-quanto"  # weight-only storage, no fp8 matmuls
        r.edits["fp8=off"] = edit
