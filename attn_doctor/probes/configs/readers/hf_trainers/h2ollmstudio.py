"""An H2O LLM Studio experiment YAML (the cfg.yaml an experiment saves, or one given to
`python llm_studio/train.py -Y cfg.yaml`; llm_studio/src/utils/config_utils.py load_config_yaml):
sections `architecture`, `augmentation`, `dataset`, `environment`, `logging`, `prediction`,
`tokenizer`, `training`, and top-level `llm_backbone`, `problem_type`, `experiment_name`, `output_directory`.

Read from h2oai/h2o-llmstudio at a4971c11ed2c93e531607670df7ae9cb673936b4
(llm_studio/python_configs/text_causal_language_modeling_config.py for the defaults,
llm_studio/src/utils/modeling_utils.py create_nlp_backbone, llm_studio/train.py):

- `architecture.backbone_dtype` (float32 | bfloat16 | float16 | int8 | int4; default "int4"): the
  dtype from_pretrained loads the backbone in. int4: BitsAndBytesConfig(load_in_4bit, nf4,
  bnb_4bit_compute_dtype=torch.float16) with torch_dtype float16; int8: load_in_8bit
  (llm_int8_threshold=0.0) with torch_dtype float16. With LoRA on a k-bit backbone every fp16/bf16
  parameter left is cast to fp32 ("cast all non INT8 parameters to fp32"). Without GPUs
  (`environment.gpus` empty) int4/int8 fall back to float32. DeepSpeed refuses int4/int8: "Deepspeed
  do not support backbone type int4. Please set backbone type to float16 or bfloat16 for using deepspeed."
- `environment.mixed_precision` (default true) and `environment.mixed_precision_dtype` (bfloat16 |
  float16, default bfloat16; the key exists since 19224612, 2024-04-22 -- before it mixed precision was
  fp16 autocast): train.py runs torch autocast in it, with a GradScaler enabled for float16. Full
  fine-tuning (`training.lora: false`) of a non-float32 backbone turns mixed precision off ("Disabling
  mixed precision as dtype not set to float32.") and trains the weights in the backbone dtype.
- `training.attention_implementation` (auto | eager | flash_attention_2 | sdpa, default auto: not
  passed, transformers' default). Before c6f95e77 (2024-07-23) `training.use_flash_attention_2: true`
  set flash_attention_2 where flash_attn imports.
- `training.lora` (default true), `training.use_dora`: PEFT LoraConfig(use_dora=...); get_peft_model
  keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype, on by default).
- `environment.compile_model`: torch.compile (skipped under DeepSpeed); `environment.use_deepspeed`:
  DeepSpeed with fp16 / bf16 enabled by the backbone dtype (modeling_utils.py get_ds_config).
"""

from __future__ import annotations

from typing import Any

from ...plan import Reading, attention_of, truthy

NAME = "h2o-llmstudio"
LABEL = "H2O LLM Studio"
FORMATS = ("yaml", "json")
MARKERS = {"llm_backbone": 5, "problem_type": 2, "architecture": 2, "environment": 2, "augmentation": 2, "output_directory": 2,
           "experiment_name": 1, "prediction": 1, "tokenizer": 1, "dataset": 1, "training": 1, "logging": 1}
DISTINCT = ("llm_backbone", "architecture.backbone_dtype", "environment.use_deepspeed", "problem_type")
_FLOATS = ("float32", "bfloat16", "float16")
_SRC = "llm_studio/src/utils/modeling_utils.py create_nlp_backbone"


def _section(doc: dict, name: str) -> dict:
    value = doc.get(name)
    return value if isinstance(value, dict) else {}


def recognise_extra(doc: dict) -> int:
    architecture, environment = _section(doc, "architecture"), _section(doc, "environment")
    score = 3 if "backbone_dtype" in architecture else 0
    if "mixed_precision" in environment or "use_deepspeed" in environment:
        score += 1
    if score == 0 and "llm_backbone" not in doc:
        # its section names (training, dataset, tokenizer, ...) are everyone's: without llm_backbone or
        # architecture.backbone_dtype the file is not H2O LLM Studio's
        return -sum(w for k, w in MARKERS.items() if k in doc)
    return score


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    arch, env, training = _section(doc, "architecture"), _section(doc, "environment"), _section(doc, "training")
    r.understood("architecture.backbone_dtype", "environment.mixed_precision", "environment.mixed_precision_dtype",
                 "environment.compile_model", "environment.use_deepspeed", "environment.deepspeed_method", "environment.gpus",
                 "training.attention_implementation", "training.use_flash_attention_2", "training.lora", "training.use_dora")
    bd_raw = arch.get("backbone_dtype", "int4")
    bd = str(bd_raw).strip().lower()
    bd_key = "architecture.backbone_dtype" if "backbone_dtype" in arch else None
    bd_src = "file" if bd_key else "default"
    asked = bd  # train.py checks DeepSpeed against the configured dtype, before any CPU fallback
    gpus = env.get("gpus")
    if isinstance(gpus, list) and not gpus and bd in ("int4", "int8"):
        r.settings["backbone_dtype_fallback"] = "no GPUs: int4/int8 fall back to float32 ('Quantization is not supported on CPU')"
        bd = "float32"
    lora = truthy(training.get("lora", True)) is not False
    mixed_raw = env.get("mixed_precision", True)
    mixed = truthy(mixed_raw) is not False
    mpd_raw = env.get("mixed_precision_dtype", "bfloat16")
    mpd = "float16" if str(mpd_raw).strip().lower() == "float16" else "bfloat16"
    mpd_key = "environment.mixed_precision_dtype" if "mixed_precision_dtype" in env else None
    disabled = mixed and not lora and bd != "float32"

    # the dtype of the weights
    quantized = bd in ("int4", "int8")
    if quantized and lora:
        r.set("param_dtype", "float32", key=bd_key, source=bd_src, raw=bd_raw,
              note=f"loaded with torch_dtype float16, then every fp16/bf16 parameter outside the {'4' if bd == 'int4' else '8'}-bit "
                   f"layers cast to fp32 for LoRA on a k-bit backbone ({_SRC})")
    elif quantized:
        r.set("param_dtype", "float16", key=bd_key, source=bd_src, raw=bd_raw, note=f"loaded with torch_dtype float16 ({_SRC})")
    elif bd in _FLOATS:
        r.set("param_dtype", bd, key=bd_key, source=bd_src, raw=bd_raw,
              note=None if bd == "float32" else ("the frozen backbone, only the adapters train" if lora else
                                                 "full fine-tuning in it: no fp32 master copy"))
    else:
        r.set("param_dtype", bd, key=bd_key, source=bd_src, raw=bd_raw)
        r.refused["architecture.backbone_dtype"] = f"module 'torch' has no attribute '{bd_raw}'"
    if bd_key is None:
        plan = r.plan["param_dtype"]
        r.set("param_dtype", plan.value, source="default", raw="int4",
              note="architecture.backbone_dtype defaults to int4 (python_configs/text_causal_language_modeling_config.py); "
                   + (plan.note or ""))

    # what the matrix multiplies run in
    if mixed and not disabled:
        note = "torch autocast in it (llm_studio/train.py)"
        if mpd_key is None:
            note += ("; mixed_precision_dtype absent: bfloat16 by default since 19224612 (2024-04-22), fp16 autocast before")
        r.set("compute_dtype", mpd, key=mpd_key or ("environment.mixed_precision" if "mixed_precision" in env else None),
              source="file" if (mpd_key or "mixed_precision" in env) else "default", raw=mpd_raw, note=note)
        if mpd == "float16":
            r.set("loss_scaling", True, key=mpd_key or "environment.mixed_precision", raw=mpd_raw,
                  note="train.py's GradScaler(enabled=mixed_precision_dtype == 'float16')")
    else:
        compute = "float16" if quantized else bd
        note = ("mixed precision turned off by create_nlp_backbone for full fine-tuning of a non-float32 backbone: "
                "'Disabling mixed precision as dtype not set to float32.'") if disabled else "mixed_precision off: no autocast"
        r.set("compute_dtype", compute, key=bd_key, source=bd_src, raw=bd_raw, note=note)
        if compute == "float16":
            r.set("loss_scaling", False, source="default", note="no GradScaler without mixed precision (train.py)")
    if quantized:
        r.set("quantization", "nf4" if bd == "int4" else "int8", key=bd_key, source=bd_src, raw=bd_raw,
              note="bitsandbytes 4-bit NF4" if bd == "int4" else "bitsandbytes LLM.int8() (llm_int8_threshold=0.0)")
        if bd == "int4":
            r.set("quant_compute_dtype", "float16", source="default",
                  note=f"bnb_4bit_compute_dtype=torch.float16, hard-coded ({_SRC})")

    # attention
    impl = training.get("attention_implementation")
    if isinstance(impl, str) and impl.strip() and impl.strip().lower() != "auto":
        r.set("attention", attention_of(impl) or impl.strip(), key="training.attention_implementation", raw=impl)
    elif truthy(training.get("use_flash_attention_2")):
        r.set("attention", "flash_attention_2", key="training.use_flash_attention_2", raw=training.get("use_flash_attention_2"),
              note="releases before c6f95e77 (2024-07-23): flash_attention_2 where flash_attn imports, else a warning and the default")
    else:
        r.set("attention", "auto", key="training.attention_implementation" if "attention_implementation" in training else None,
              source="file" if "attention_implementation" in training else "default",
              raw=impl, note="auto (the default): no attn_implementation is passed, transformers' default (SDPA where the model has it)")

    # adapters
    if lora:
        dora = truthy(training.get("use_dora")) is True
        name = "dora" if dora else ("qlora" if bd == "int4" else "lora")
        key = "training.use_dora" if dora else ("training.lora" if "lora" in training else None)
        r.set("adapter", name, key=key, source="file" if key else "default", raw=training.get("use_dora") if dora else training.get("lora"),
              note=None if key else "training.lora defaults to true")
        r.set("adapter_dtype", "float32", source="default",
              note="PEFT's get_peft_model keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype, on by default)")

    deepspeed = truthy(env.get("use_deepspeed")) is True
    if truthy(env.get("compile_model")) is not None:
        r.set("compile", truthy(env.get("compile_model")) and not deepspeed, key="environment.compile_model", raw=env.get("compile_model"),
              note="skipped under DeepSpeed (train.py)" if deepspeed and truthy(env.get("compile_model")) else None)
    if deepspeed:
        r.set("distributed", "deepspeed", key="environment.use_deepspeed", raw=env.get("use_deepspeed"),
              note=f"DeepSpeed {env.get('deepspeed_method', 'ZeRO2')} with fp16 / bf16 enabled by the backbone dtype (get_ds_config)")
        if asked in ("int4", "int8"):
            r.refused["environment.use_deepspeed"] = (f"Deepspeed do not support backbone type {asked}. Please set backbone type to "
                                                      "float16 or bfloat16 for using deepspeed.")
    r.settings.update({k: v for k, v in (("architecture.backbone_dtype", arch.get("backbone_dtype")),
                                          ("environment.mixed_precision", env.get("mixed_precision")),
                                          ("environment.mixed_precision_dtype", env.get("mixed_precision_dtype")),
                                          ("training.attention_implementation", training.get("attention_implementation")),
                                          ("training.lora", training.get("lora"))) if v is not None})
    _edits(r, bd, lora, training)
    return r


def _edits(r: Reading, bd: str, lora: bool, training: dict) -> None:
    """H2O LLM Studio's own switches: autocast dtype, and a float backbone that mixed precision can run over
    (full fine-tuning needs a float32 backbone for autocast to stay on)."""
    fp16: dict[str, Any] = {"environment.mixed_precision": True, "environment.mixed_precision_dtype": "float16"}
    if bd == "bfloat16":
        fp16["architecture.backbone_dtype"] = "float16" if lora else "float32"
    elif bd == "float16" and not lora:
        fp16["architecture.backbone_dtype"] = "float32"
    r.edits["precision=fp16"] = fp16
    fp32: dict[str, Any] = {"environment.mixed_precision": False}
    if bd != "float32":  # int4 / int8 compute in float16 (bnb_4bit_compute_dtype, torch_dtype) whatever the autocast
        fp32["architecture.backbone_dtype"] = "float32"
    r.edits["precision=fp32"] = fp32
    if "attention_implementation" in training or truthy(training.get("use_flash_attention_2")):
        r.edits["attention=sdpa"] = {"training.attention_implementation": "sdpa"}
