"""axolotl's YAML (src/axolotl/utils/schemas/config.py, utils/config/__init__.py resolve_dtype,
core/builders/base.py, v0.18).

- `bf16` defaults to "auto": bf16 where transformers' is_torch_bf16_gpu_available() says so, which is
  torch.cuda.is_bf16_supported(), True by emulation on sm70/sm75; `fp16: true` wins over "auto".
  `bfloat16: true` / `float16: true` load the weights in that dtype (no fp32 copy); the weights are
  otherwise loaded in the dtype of bf16 / fp16 (resolve_dtype's torch_dtype).
- `tf32` defaults to "auto" (on where transformers says TF32 is available); `tf32: true` goes to
  TrainingArguments, which raises below Ampere.
- `attn_implementation` (eager, sdpa, flash_attention_2, flash_attention_3, flex_attention, xformers,
  sage, fp8, or a kernels-hub repository); the deprecated flags flash_attention, sdp_attention,
  xformers_attention, flex_attention, sage_attention, eager_attention map onto it.
- `fp8: true` trains fp8 through torchao (accelerate's AORecipeKwargs); axolotl refuses it below
  compute capability 9.0 ("fp8 requested, but fp8 is not supported on this GPU").
"""

from __future__ import annotations

from ...plan import Reading, attention_of, truthy

NAME = "axolotl"
LABEL = "axolotl"
FORMATS = ("yaml", "json")
MARKERS = {"base_model": 3, "base_model_config": 3, "sequence_len": 3, "micro_batch_size": 3, "datasets": 2, "adapter": 2,
           "sample_packing": 2, "pad_to_sequence_len": 2, "num_epochs": 2, "val_set_size": 2, "lora_target_linear": 2,
           "tokenizer_type": 2, "special_tokens": 1, "wandb_project": 1, "strict": 1, "flash_attention": 1, "plugins": 1,
           "load_in_8bit": 1}
# axolotl's own argument names (AxolotlInputConfig); base_model and datasets are everyone's.
DISTINCT = ("sequence_len", "sample_packing", "pad_to_sequence_len", "lora_target_linear", "base_model_config", "eval_sample_packing",
            "lora_model_dir", "dataset_prepared_path")
_LEGACY = (("xformers_attention", "xformers"), ("sage_attention", "sage"), ("flex_attention", "flex_attention"),
           ("flash_attention", "flash_attention_2"), ("sdp_attention", "sdpa"), ("eager_attention", "eager"))
GATE = ("bf16: auto resolves with torch.cuda.is_bf16_supported() (transformers' is_torch_bf16_gpu_available), "
        "True by emulation on sm70/sm75")


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("bf16", "fp16", "bfloat16", "float16", "float32", "tf32", "torch_compile", "torch_compile_backend",
                 "torch_compile_mode", "fp8", "fp8_enable_fsdp_float8_all_gather", "attn_implementation", "fsdp_version",
                 "fsdp_config", "deepspeed", "load_in_8bit", "load_in_4bit", "fp32_norms",
                 *(flag for flag, _ in _LEGACY), "s2_attention")
    bf16_raw, fp16 = doc.get("bf16", "auto"), truthy(doc.get("fp16"))
    bf16 = truthy(bf16_raw)
    pure_bf16, pure_fp16 = truthy(doc.get("bfloat16")), truthy(doc.get("float16"))
    if pure_bf16 or bf16:
        key = "bf16" if bf16 else "bfloat16"
        r.set("compute_dtype", "bfloat16", key=key, raw=doc.get(key))
    elif fp16 or pure_fp16:
        key = "fp16" if fp16 else "float16"
        r.set("compute_dtype", "float16", key=key, raw=doc.get(key))
        if fp16:
            r.set("loss_scaling", True, key="fp16", note="the Trainer's GradScaler")
    elif str(bf16_raw).strip().lower() == "auto":
        if "bf16" in doc:
            r.set("compute_dtype", "bfloat16", key="bf16", raw="auto", note=GATE)
        else:
            r.set("compute_dtype", "bfloat16", source="default", raw="auto", note="axolotl's bf16 defaults to auto: " + GATE)
    else:
        r.set("compute_dtype", "float32", key="bf16", raw=bf16_raw, note="bf16 and fp16 off: fp32 matrix multiplies")
    # resolve_dtype: the weights load in bf16 / fp16 (bf16, bfloat16 / fp16, float16, load_in_8bit), else fp32
    compute = r.plan["compute_dtype"]
    if pure_bf16 or pure_fp16:
        key = "bfloat16" if pure_bf16 else "float16"
        r.set("param_dtype", compute.value, key=key, raw=doc.get(key), note="loaded in it, no AMP master copy")
    else:
        r.set("param_dtype", compute.value, source="default" if compute.source == "default" else "file", key=compute.key,
              raw=compute.raw, note="resolve_dtype loads the weights in the training dtype")
    tf32 = doc.get("tf32", "auto")
    if truthy(tf32) is not None:
        r.set("tf32", truthy(tf32), key="tf32", raw=tf32,
              note="passed to TrainingArguments, which raises below compute capability 8.0" if truthy(tf32) else None)
    else:
        r.set("tf32", "auto", source="default" if "tf32" not in doc else "file", key="tf32" if "tf32" in doc else None,
              note="auto: on where transformers says TF32 is available (Ampere and newer)")
    if truthy(doc.get("fp8")):
        r.set("fp8", True, key="fp8", note="torchao through accelerate; axolotl refuses it below compute capability 9.0",
              requires="9.0")
        r.set("fp8_backend", "torchao", source="default", note="axolotl's fp8 is torchao's Float8Linear")
    _attention(doc, r)
    _adapters(doc, r)
    if truthy(doc.get("torch_compile")) is not None:
        r.set("compile", truthy(doc.get("torch_compile")), key="torch_compile", raw=doc.get("torch_compile"))
    fsdp_config = doc.get("fsdp_config") if isinstance(doc.get("fsdp_config"), dict) else {}
    fsdp_version = doc.get("fsdp_version", fsdp_config.get("fsdp_version", fsdp_config.get("version")))
    if doc.get("deepspeed"):
        r.set("distributed", "deepspeed", key="deepspeed", raw=doc.get("deepspeed"), note="precision then also comes from the DeepSpeed JSON")
    elif isinstance(doc.get("fsdp_config"), dict) or doc.get("fsdp"):
        r.set("distributed", "fsdp2" if str(fsdp_version) == "2" else "fsdp", key="fsdp_config" if "fsdp_config" in doc else "fsdp")
    r.settings = {k: doc[k] for k in ("bf16", "fp16", "bfloat16", "float16", "tf32", "fp8", "attn_implementation") if k in doc}
    _edits(doc, r)
    return r


def _adapters(doc: dict, r: Reading) -> None:
    """loaders/model.py _set_quantization_config: `adapter: qlora` with `load_in_4bit` loads the base
    through bitsandbytes in NF4 (double quant, storage bf16) computing in the training dtype
    (bnb_4bit_compute_dtype = cfg.torch_dtype); `load_in_8bit` with lora in int8. The adapters come
    from PEFT's get_peft_model, whose autocast_adapter_dtype (on by default) keeps bf16/fp16 adapter
    weights in fp32."""
    r.understood("adapter", "peft_use_dora", "lora_r", "lora_alpha")
    adapter = str(doc.get("adapter") or "").strip().lower()
    if not adapter:
        return
    name = "dora" if truthy(doc.get("peft_use_dora")) else adapter
    r.set("adapter", name, key="adapter" if name == adapter else "peft_use_dora", raw=doc.get("adapter"))
    r.set("adapter_dtype", "float32", source="default",
          note="PEFT's get_peft_model keeps bf16/fp16 adapter weights in fp32 (autocast_adapter_dtype)")
    compute = r.plan.get("compute_dtype")
    if truthy(doc.get("load_in_4bit")):
        r.set("quantization", "nf4", key="load_in_4bit", raw=doc.get("load_in_4bit"),
              note="bitsandbytes NF4, double quant, stored in bf16 (axolotl's bnb config for qlora)")
        if compute is not None:
            r.set("quant_compute_dtype", compute.value, source="default", raw=compute.raw,
                  note="bnb_4bit_compute_dtype is the training dtype (cfg.torch_dtype)")
    elif truthy(doc.get("load_in_8bit")):
        r.set("quantization", "int8", key="load_in_8bit", raw=doc.get("load_in_8bit"), note="bitsandbytes LLM.int8()")
    base = r.plan.get("param_dtype")
    if base is not None and base.value in ("bfloat16", "float16"):
        r.set("param_dtype", base.value, source=base.source, key=base.key, raw=base.raw,
              note="the frozen base loads in the training dtype (resolve_dtype); only the adapters train")


def _attention(doc: dict, r: Reading) -> None:
    value = doc.get("attn_implementation")
    if isinstance(value, str) and value.strip():
        impl = value.strip() if value.strip() in ("sage", "fp8") else attention_of(value)
        r.set("attention", impl or value.strip(), key="attn_implementation", raw=value)
        return
    for flag, impl in _LEGACY:
        if truthy(doc.get(flag)):
            r.set("attention", impl, key=flag, raw=doc.get(flag), note=f"deprecated flag: attn_implementation: {impl}")
            return
    r.set("attention", "auto", source="default", note="no attention key: transformers' default (SDPA where the model has it)")


def _edits(doc: dict, r: Reading) -> None:
    fp16 = {"fp16": True, "bf16": False}
    for key in ("bfloat16",):
        if truthy(doc.get(key)):
            fp16[key] = False
            fp16["float16"] = True
    r.edits["precision=fp16"] = fp16
    fp32 = {"bf16": False, "fp16": False}
    fp32.update({k: False for k in ("bfloat16", "float16") if truthy(doc.get(k))})
    r.edits["precision=fp32"] = fp32
    if truthy(doc.get("tf32")):
        r.edits["tf32=off"] = {"tf32": False}
    if truthy(doc.get("fp8")):
        r.edits["fp8=off"] = {"fp8": False}
    attention = r.plan.get("attention")
    if attention is not None and attention.source == "file":
        if attention.key == "attn_implementation":
            r.edits["attention=sdpa"] = {"attn_implementation": "sdpa"}
        else:
            r.edits["attention=sdpa"] = {attention.key: False, "sdp_attention": True}
