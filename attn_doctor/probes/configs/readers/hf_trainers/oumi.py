"""An Oumi training config (`oumi train -c x.yaml`; TrainingConfig with `model`, `data`, `training`,
`peft`, `fsdp`, `deepspeed` sections, merged over the dataclasses by OmegaConf).

Read from oumi-ai/oumi at d8ed07778d7931565798ad45a859cafb54d4fc58:

- `model.torch_dtype_str` (src/oumi/core/configs/params/model_params.py; default "auto") is the dtype
  from_pretrained loads the weights in (builders/models.py build_huggingface_model passes
  `dtype=model_params.torch_dtype or "auto"`); "auto" is the checkpoint's config.json dtype. Spellings
  (utils/torch_utils.py get_torch_dtype): f64/float64/double, f32/float32/float, bf16/bfloat16,
  f16/float16/half; anything else raises "Unsupported torch dtype: ...".
- `training.mixed_precision_dtype` (params/training_params.py, MixedPrecisionDtype; default NONE): an
  OmegaConf enum, so only the member names NONE | FP16 | BF16 are taken (a lower-case "bf16" raises
  "Invalid value 'bf16', expected one of [NONE, FP16, BF16]"). TrainingParams.to_hf passes
  fp16=/bf16= to TrainingArguments (torch.autocast, fp16 with a GradScaler); the OUMI trainer
  (core/trainers/oumi_trainer.py) runs torch.amp.autocast and a GradScaler for FP16. TrainingConfig
  (core/configs/training_config.py __post_init__) refuses FP16/BF16 unless the model loads in float32:
  "Model must be loaded in fp32 to enable mixed precision training." -- with torch_dtype_str left at
  "auto" too. NONE: no autocast, everything runs in the loaded dtype (pure bf16 / fp16 training; a pure
  fp16 model gets no GradScaler since fp16=False).
- `fsdp.mixed_precision` ("bf16" | "fp16", with `fsdp.enable_fsdp`): HF/TRL trainers get it as
  ACCELERATE_MIXED_PRECISION (core/distributed.py prepare_accelerate_fsdp_run); the OUMI trainer wraps
  with FSDP MixedPrecision(param_dtype=reduce_dtype=buffer_dtype=that dtype) (core/distributed.py).
- `model.attn_implementation` (default None: transformers' own choice, SDPA) goes to from_pretrained;
  ModelParams.__finalize_and_validate__ raises "Flash attention 2 was requested but it is not
  supported..." when flash-attn is not installed (is_flash_attn_2_available, no GPU check).
  Distillation trainers (TRL_GKD / TRL_GOLD) load a teacher with
  `training.<gkd|gold>.teacher_model_init_kwargs.attn_implementation`.
- `training.compile` -> TrainingArguments.torch_compile; `model.compile` is refused for training
  ("Use `training.compile` instead of `model.compile` ...").
- The OUMI trainer turns TF32 on unconditionally (torch.backends.cuda.matmul.allow_tf32 = True);
  HF/TRL trainers leave it to `training.trainer_kwargs.tf32`.
- PEFT only with `training.use_peft` (train.py: use_peft = training.use_peft and config.peft): LoRA
  from params/peft_params.py to_lora (no DoRA switch); `peft.q_lora` loads the base through
  bitsandbytes (to_bits_and_bytes): `q_lora_bits` 4 (default) or 8, `bnb_4bit_quant_type` default
  "fp4" (not nf4), `bnb_4bit_compute_dtype` default "float32"; builders/models.py build_peft_model runs
  peft's prepare_model_for_kbit_training (non-quantised base params upcast to fp32). PEFT's
  get_peft_model keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype, on by default).
- `model.model_kwargs.quantization_config.quant_method: mxfp4` is dequantised for training
  (builders/models.py _get_quantization_config_for_training: Mxfp4Config(dequantize=True)).
"""

from __future__ import annotations

from typing import Any, Optional

from ...plan import Reading, attention_of, truthy

NAME = "oumi"
LABEL = "Oumi"
FORMATS = ("yaml", "json")
# TrainingConfig's sections; alone they say little (h2o-llmstudio has `training`, torchtune `model`),
# recognise_extra scores the keys inside them.
MARKERS = {"model": 1, "data": 1, "training": 1, "peft": 1, "fsdp": 1}
DISTINCT = ("model.torch_dtype_str", "training.trainer_type", "training.mixed_precision_dtype", "fsdp.enable_fsdp")

_TORCH_DTYPES = {"f64": "float64", "float64": "float64", "double": "float64", "f32": "float32", "float32": "float32",
                 "float": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16", "f16": "float16", "float16": "float16",
                 "half": "float16"}
_MIXED = {"NONE": None, "FP16": "float16", "BF16": "bfloat16"}


def _section(doc: dict, name: str) -> dict:
    value = doc.get(name)
    return value if isinstance(value, dict) else {}


def recognise_extra(doc: dict) -> int:
    model, training, data, peft = (_section(doc, k) for k in ("model", "training", "data", "peft"))
    score = 0
    if "model_name" in model:
        score += 2
    if "torch_dtype_str" in model:
        score += 3
    if "trainer_type" in training:
        score += 2
    if "mixed_precision_dtype" in training:
        score += 2
    if any(k in training for k in ("enable_gradient_checkpointing", "use_peft", "enable_wandb", "include_performance_metrics")):
        score += 1
    train = data.get("train") if isinstance(data.get("train"), dict) else {}
    if isinstance(train.get("datasets"), list):
        score += 2
    if any(k in peft for k in ("q_lora", "lora_r", "lora_target_modules")):
        score += 1
    if isinstance(doc.get("fsdp"), dict) and "enable_fsdp" in doc["fsdp"]:
        score += 1
    if score >= 3:
        return score
    # bare section names alone never make an Oumi file: cancel what they scored
    return -sum(w for k, w in MARKERS.items() if k in doc)


def _enum_name(value: Any) -> Optional[str]:
    """OmegaConf's EnumNode: the member name, optionally prefixed with the class name."""
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith("MixedPrecisionDtype."):
        text = text[len("MixedPrecisionDtype."):]
    return text


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    model, training, peft, fsdp, deepspeed = (_section(doc, k) for k in ("model", "training", "peft", "fsdp", "deepspeed"))
    r.understood("model.torch_dtype_str", "model.attn_implementation", "model.compile", "model.model_kwargs.quantization_config",
                 "training.mixed_precision_dtype", "training.compile", "training.trainer_type", "training.trainer_kwargs.tf32",
                 "training.trainer_kwargs.bf16", "training.trainer_kwargs.fp16", "training.use_peft", "peft", "fsdp.mixed_precision",
                 "fsdp.enable_fsdp", "deepspeed.enable_deepspeed", "deepspeed.precision",
                 "training.gkd.teacher_model_init_kwargs", "training.gold.teacher_model_init_kwargs")
    trainer = str(training.get("trainer_type") or "HF").strip()
    trainer = trainer[len("TrainerType."):] if trainer.startswith("TrainerType.") else trainer

    # the dtype the weights load in
    dtype_raw = model.get("torch_dtype_str", "auto")
    # ModelParams.__post_init__ compares with "auto" as written, then get_torch_dtype lower-cases
    dtype_text = str(dtype_raw).lower() if dtype_raw is not None else "auto"
    loaded = "auto" if dtype_raw in (None, "auto") else _TORCH_DTYPES.get(dtype_text)
    dtype_key = "model.torch_dtype_str" if "torch_dtype_str" in model else None
    if loaded is None:
        r.refused["model.torch_dtype_str"] = f"Unsupported torch dtype: {dtype_text}"

    # mixed precision
    mp_raw = training.get("mixed_precision_dtype")
    mp_name = _enum_name(mp_raw)
    mixed = None
    if mp_name is not None and mp_name not in _MIXED:
        r.refused["training.mixed_precision_dtype"] = f"Invalid value '{mp_raw}', expected one of [NONE, FP16, BF16]"
        mixed = {"bf16": "bfloat16", "fp16": "float16"}.get(mp_name.lower())  # what it meant to ask
    elif mp_name is not None:
        mixed = _MIXED[mp_name]
    fsdp_on = truthy(fsdp.get("enable_fsdp")) is True
    fsdp_mp = str(fsdp.get("mixed_precision") or "").strip().lower() if fsdp_on else ""

    if mixed:
        r.set("compute_dtype", mixed, key="training.mixed_precision_dtype", raw=mp_raw,
              note="torch.autocast over the loaded weights (TrainingArguments fp16/bf16; the OUMI trainer's torch.amp.autocast)")
        if loaded != "float32":
            r.refused.setdefault("training.mixed_precision_dtype",
                                 "Model must be loaded in fp32 to enable mixed precision training.")
        r.set("param_dtype", loaded or str(dtype_raw), key=dtype_key, source="file" if dtype_key else "default", raw=dtype_raw,
              note=None if loaded == "float32" else
              "TrainingConfig refuses mixed precision unless model.torch_dtype_str is float32 (training_config.py)")
        if mixed == "float16":
            r.set("loss_scaling", True, key="training.mixed_precision_dtype", raw=mp_raw,
                  note="the Trainer's GradScaler (the OUMI trainer's torch.amp.GradScaler)")
    elif fsdp_mp in ("bf16", "fp16"):
        value = "bfloat16" if fsdp_mp == "bf16" else "float16"
        how = ("FSDP MixedPrecision(param_dtype=reduce_dtype=buffer_dtype) in the OUMI trainer (core/distributed.py)"
               if trainer == "OUMI" else
               "exported as ACCELERATE_MIXED_PRECISION for the HF/TRL trainer (core/distributed.py prepare_accelerate_fsdp_run): "
               "accelerate's autocast and FSDP mixed precision")
        r.set("compute_dtype", value, key="fsdp.mixed_precision", raw=fsdp.get("mixed_precision"), note=how)
        r.set("param_dtype", loaded or str(dtype_raw), key=dtype_key, source="file" if dtype_key else "default", raw=dtype_raw,
              note="the weights load in it; FSDP casts them for compute")
        if trainer == "OUMI":
            r.set("reduce_dtype", value, key="fsdp.mixed_precision", raw=fsdp.get("mixed_precision"),
                  note="Oumi's FSDP MixedPrecision reduces in the same dtype")
        if value == "float16":
            r.set("loss_scaling", True, key="fsdp.mixed_precision", raw=fsdp.get("mixed_precision"))
    else:
        note = ("mixed_precision_dtype NONE (the default): no autocast, everything runs in the loaded dtype"
                + ("" if loaded != "auto" else "; torch_dtype_str auto: the checkpoint's config.json dtype"))
        r.set("compute_dtype", loaded or str(dtype_raw), key=dtype_key, source="file" if dtype_key else "default", raw=dtype_raw,
              note=note)
        r.set("param_dtype", loaded or str(dtype_raw), key=dtype_key, source="file" if dtype_key else "default", raw=dtype_raw,
              note="from_pretrained(dtype=...) (builders/models.py); no fp32 master copy")
        if loaded == "float16":
            r.set("loss_scaling", False, source="default",
                  note="pure fp16 weights with mixed_precision_dtype NONE: TrainingArguments fp16=False, no GradScaler")

    # tf32
    kwargs = training.get("trainer_kwargs") if isinstance(training.get("trainer_kwargs"), dict) else {}
    if trainer == "OUMI":
        r.set("tf32", True, source="default", note="the OUMI trainer sets torch.backends.cuda.matmul.allow_tf32 = True "
                                                   "(src/oumi/core/trainers/oumi_trainer.py)")
    elif truthy(kwargs.get("tf32")) is not None:
        r.set("tf32", truthy(kwargs.get("tf32")), key="training.trainer_kwargs.tf32", raw=kwargs.get("tf32"),
              note="passed to TrainingArguments, which raises below compute capability 8.0" if truthy(kwargs.get("tf32")) else None)

    # attention
    impl = model.get("attn_implementation")
    if isinstance(impl, str) and impl.strip():
        note = ("Oumi raises 'Flash attention 2 was requested but it is not supported' where flash-attn is not installed "
                "(a package check, not a GPU check)") if impl.strip() == "flash_attention_2" else None
        r.set("attention", attention_of(impl) or impl.strip(), key="model.attn_implementation", raw=impl, note=note)
    else:
        r.set("attention", "auto", source="default",
              note="model.attn_implementation not given: transformers' default (SDPA where the model has it)")
    for name in ("gkd", "gold"):
        teacher = training.get(name) if isinstance(training.get(name), dict) else {}
        init = teacher.get("teacher_model_init_kwargs") if isinstance(teacher.get("teacher_model_init_kwargs"), dict) else {}
        if isinstance(init.get("attn_implementation"), str):
            r.settings[f"training.{name}.teacher_model_init_kwargs.attn_implementation"] = init["attn_implementation"]
            r.settings["teacher_attention"] = attention_of(init["attn_implementation"]) or init["attn_implementation"]

    # compile
    if truthy(training.get("compile")) is not None:
        r.set("compile", truthy(training.get("compile")), key="training.compile", raw=training.get("compile"))
    if truthy(model.get("compile")):
        r.refused["model.compile"] = "Use `training.compile` instead of `model.compile` to enable model compilation during training."

    # distributed
    if truthy(deepspeed.get("enable_deepspeed")):
        precision = deepspeed.get("precision")
        r.set("distributed", "deepspeed", key="deepspeed.enable_deepspeed",
              note=(f"deepspeed.precision {precision}: the DeepSpeed config's {str(precision).lower()} block, enabled \"auto\" "
                    "for bf16 (follows TrainingArguments)") if precision else None)
    elif fsdp_on:
        r.set("distributed", "fsdp", key="fsdp.enable_fsdp")

    _peft(doc, model, training, peft, r, loaded)

    r.settings.update({k: v for k, v in (("model.torch_dtype_str", model.get("torch_dtype_str")),
                                          ("model.attn_implementation", model.get("attn_implementation")),
                                          ("training.mixed_precision_dtype", mp_raw),
                                          ("training.trainer_type", training.get("trainer_type")),
                                          ("fsdp.mixed_precision", fsdp.get("mixed_precision") if fsdp_on else None))
                       if v is not None})
    _edits(r, model, training, fsdp_on and bool(fsdp_mp), loaded)
    return r


def _peft(doc: dict, model: dict, training: dict, peft: dict, r: Reading, loaded: Optional[str]) -> None:
    quant = model.get("model_kwargs", {}).get("quantization_config") if isinstance(model.get("model_kwargs"), dict) else None
    if isinstance(quant, dict) and quant.get("quant_method"):
        r.settings["model.model_kwargs.quantization_config.quant_method"] = quant.get("quant_method")
        if str(quant.get("quant_method")).lower() == "mxfp4":
            r.settings["mxfp4"] = "dequantized for training (Mxfp4Config(dequantize=True), builders/models.py)"
    if truthy(training.get("use_peft")) is not True:
        if truthy(peft.get("q_lora")):
            r.settings["peft.q_lora"] = "ignored: training.use_peft is not true (train.py builds no PEFT model)"
        return
    q_lora = truthy(peft.get("q_lora")) is True
    r.set("adapter", "qlora" if q_lora else "lora", key="peft.q_lora" if q_lora else "training.use_peft",
          raw=peft.get("q_lora") if q_lora else training.get("use_peft"))
    r.set("adapter_dtype", "float32", source="default",
          note="PEFT's get_peft_model keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype, on by default)")
    if not q_lora:
        return
    bits = peft.get("q_lora_bits", 4)
    if str(bits) == "8":
        r.set("quantization", "int8", key="peft.q_lora_bits", raw=bits, note="bitsandbytes LLM.int8() (load_in_8bit)")
    else:
        qtype = str(peft.get("bnb_4bit_quant_type", "fp4")).strip().lower()
        r.set("quantization", qtype, key="peft.bnb_4bit_quant_type" if "bnb_4bit_quant_type" in peft else "peft.q_lora",
              source="file" if "bnb_4bit_quant_type" in peft else "default", raw=peft.get("bnb_4bit_quant_type"),
              note=None if "bnb_4bit_quant_type" in peft else "PeftParams.bnb_4bit_quant_type defaults to fp4, not nf4")
        cdt_raw = peft.get("bnb_4bit_compute_dtype", "float32")
        cdt = _TORCH_DTYPES.get(str(cdt_raw).strip().lower(), str(cdt_raw))
        r.set("quant_compute_dtype", cdt, key="peft.bnb_4bit_compute_dtype" if "bnb_4bit_compute_dtype" in peft else None,
              source="file" if "bnb_4bit_compute_dtype" in peft else "default", raw=cdt_raw,
              note=None if "bnb_4bit_compute_dtype" in peft else "PeftParams.bnb_4bit_compute_dtype defaults to float32")
    base = r.plan.get("param_dtype")
    if base is not None:
        note = (f"loaded in {base.value}, then every fp16/bf16 parameter outside the quantised layers upcast to fp32 by peft's "
                "prepare_model_for_kbit_training (builders/models.py build_peft_model)")
        r.set("param_dtype", "float32", key="peft.q_lora", raw=peft.get("q_lora"), note=f"{base.note}; {note}" if base.note else note)


def _edits(r: Reading, model: dict, training: dict, fsdp_mixed: bool, loaded: Optional[str]) -> None:
    """Oumi's own way to fp16 / fp32: load in float32, autocast in FP16 (the only mixed precision it takes)."""
    fp16 = {"model.torch_dtype_str": "float32", "training.mixed_precision_dtype": "FP16"}
    if fsdp_mixed:
        fp16["fsdp.mixed_precision"] = "fp16"
    r.edits["precision=fp16"] = fp16
    if not fsdp_mixed:  # fsdp.mixed_precision would have to be removed (null): left to the user
        r.edits["precision=fp32"] = {"model.torch_dtype_str": "float32", "training.mixed_precision_dtype": "NONE"}
    r.edits["precision=bf16"] = {"model.torch_dtype_str": "float32", "training.mixed_precision_dtype": "BF16",
                                 **({"fsdp.mixed_precision": "bf16"} if fsdp_mixed else {})}
    quant = r.plan.get("quant_compute_dtype")
    if quant is not None:  # QLoRA's 4-bit matmuls compute in bnb_4bit_compute_dtype, whatever the autocast
        for intent, value in (("precision=fp16", "float16"), ("precision=fp32", "float32"), ("precision=bf16", "bfloat16")):
            if intent in r.edits:
                r.edits[intent]["peft.bnb_4bit_compute_dtype"] = value
    if isinstance(model.get("attn_implementation"), str):
        r.edits["attention=sdpa"] = {"model.attn_implementation": "sdpa"}
    kwargs = training.get("trainer_kwargs") if isinstance(training.get("trainer_kwargs"), dict) else {}
    if truthy(kwargs.get("tf32")):
        r.edits["tf32=off"] = {"training.trainer_kwargs.tf32": False}
