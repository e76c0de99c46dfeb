"""An ms-swift YAML or JSON (`swift sft x.yaml`; swift/arguments/base_args/model_args.py,
sft_args.py, swift/model/utils.py; Megatron-SWIFT: swift/megatron/arguments/megatron_args.py).

`torch_dtype` (bfloat16 | float16 | float32; default: the checkpoint's config.json dtype, else bf16
where the GPU takes it) is the dtype the weights load in, and `bf16` / `fp16`, when not given, follow
it: bfloat16 -> bf16 autocast, float16 or float32 -> fp16 autocast. `attn_impl` (flash_attn ->
flash_attention_2, sdpa, eager, flex_attention, flash_attention_2/3/4; default: transformers' own).
Megatron: `attention_backend` (flash by default, through Transformer Engine), fp8 by `fp8_format`.
`quant_method: fp8` is fp8 weight quantization, not fp8 training. v3 wrote `train_type`, v2 `sft_type`
with `dtype` (AUTO | bf16 | fp16 | fp32) and `use_flash_attn`.
"""

from __future__ import annotations

from ...plan import Reading, attention_of, dtype_of, truthy
from .. import _hf

NAME = "ms-swift"
LABEL = "ms-swift"
FORMATS = ("yaml", "json")
MARKERS = {"tuner_type": 4, "train_type": 4, "sft_type": 4, "attn_impl": 3, "rlhf_type": 4, "model_author": 3,
           "split_dataset_ratio": 3, "model_id_or_path": 3, "dataset_num_proc": 2, "use_hf": 2, "attention_backend": 2,
           "tuner_backend": 3, "target_modules": 1, "model": 1, "torch_dtype": 1, "system": 1, "max_length": 1,
           "ENV": 2, "use_flash_attn": 1, "global_batch_size": 1, "recompute_granularity": 2, "tensor_model_parallel_size": 2,
           # ms-swift 1.x / 2.x
           "train_dataset_sample": 4, "template_type": 3, "check_dataset_strategy": 3, "lora_target_modules": 2, "model_type": 1}
DISTINCT = ("tuner_type", "train_type", "sft_type", "rlhf_type", "model_author", "split_dataset_ratio", "model_id_or_path",
            "tuner_backend", "train_dataset_sample", "template_type", "check_dataset_strategy", "attn_impl", "model_name_or_path_swift")
# 2.x's `dtype` (swift/llm/utils/argument.py): AUTO, the default, is bf16 where torch.cuda.is_bf16_supported()
_V2_KEYS = ("sft_type", "model_id_or_path", "train_dataset_sample", "template_type", "check_dataset_strategy")
_V2_AUTO = "dtype AUTO (2.x's default): bf16 where torch.cuda.is_bf16_supported(), True by emulation on sm70/sm75, else fp16"
_MEGATRON_FLASH = {"flash": "flash_attention_2", "flash_2": "flash_attention_2", "flash_3": "flash_attention_3",
                   "fused": "te-fused", "unfused": "eager", "local": "eager", "auto": "auto"}


def _read_v2(doc: dict, r: Reading) -> Reading:
    """ms-swift 1.x / 2.x: `dtype` (AUTO | bf16 | fp16 | fp32, AUTO by default) and `use_flash_attn`."""
    raw = doc.get("dtype", "AUTO")
    text = str(raw).strip().lower()
    if text == "auto":
        r.set("compute_dtype", "bfloat16", key="dtype" if "dtype" in doc else None, source="file" if "dtype" in doc else "default",
              raw=raw, note=_V2_AUTO)
    else:
        r.set("compute_dtype", dtype_of(text) or str(raw), key="dtype", raw=raw)
    compute = r.plan["compute_dtype"]
    r.set("param_dtype", compute.value, key=compute.key, source=compute.source, raw=compute.raw, note="the model loads in that dtype")
    if truthy(doc.get("use_flash_attn")):
        r.set("attention", "flash_attention_2", key="use_flash_attn", raw=doc.get("use_flash_attn"))
    else:
        r.set("attention", "auto", source="default", note="use_flash_attn not set: the model's own default")
    r.settings = {k: doc[k] for k in ("dtype", "use_flash_attn") if k in doc}
    r.edits["precision=fp16"] = {"dtype": "fp16"}
    r.edits["precision=fp32"] = {"dtype": "fp32"}
    if truthy(doc.get("use_flash_attn")):
        r.edits["attention=sdpa"] = {"use_flash_attn": False}
    return r


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("torch_dtype", "dtype", "attn_impl", "attention_backend", "use_flash_attn", "quant_method", "quant_bits",
                 "fp8_format", "fp8_recipe", "fp8_param_gather", "bnb_4bit_compute_dtype", "vit_attn_impl", "deepspeed", "fsdp")
    key = "torch_dtype" if doc.get("torch_dtype") is not None else "dtype" if doc.get("dtype") is not None else None
    loaded = dtype_of(doc.get(key)) if key else None
    if key != "torch_dtype" and any(k in doc for k in _V2_KEYS) and truthy(doc.get("bf16")) is None and truthy(doc.get("fp16")) is None:
        return _read_v2(doc, r)
    bf16, fp16 = truthy(doc.get("bf16")), truthy(doc.get("fp16"))
    if bf16 is not None or fp16 is not None:
        _hf.training_arguments(doc, r, bf16_default=None, loaded_dtype=loaded, loaded_key=key)
    elif loaded:
        compute = "bfloat16" if loaded == "bfloat16" else "float16"
        r.set("compute_dtype", compute, key=key, raw=doc.get(key),
              note=f"bf16 / fp16 not given: ms-swift derives {'bf16' if compute == 'bfloat16' else 'fp16'} autocast from {key}")
        r.set("param_dtype", loaded, key=key, raw=doc.get(key))
        if compute == "float16":
            r.set("loss_scaling", True, source="default", note="the Trainer's GradScaler")
        _hf.training_arguments({k: v for k, v in doc.items() if k not in ("bf16", "fp16")}, r, bf16_default=None)
    else:
        r.set("compute_dtype", "auto", source="default",
              note="no torch_dtype: the checkpoint's config.json dtype (else bf16 where torch says the GPU has it), "
                   "and bf16 / fp16 autocast to match")
        _hf.training_arguments({k: v for k, v in doc.items() if k not in ("bf16", "fp16")}, r, bf16_default=None)
    impl = doc.get("attn_impl")
    if isinstance(impl, str) and impl.strip():
        r.set("attention", attention_of(impl) or impl.strip(), key="attn_impl", raw=impl)
    elif isinstance(doc.get("attention_backend"), str):
        value = doc["attention_backend"].strip().lower()
        r.set("attention", _MEGATRON_FLASH.get(value, value), key="attention_backend", raw=doc["attention_backend"],
              note="Megatron's attention through Transformer Engine")
    elif truthy(doc.get("use_flash_attn")):
        r.set("attention", "flash_attention_2", key="use_flash_attn", raw=doc.get("use_flash_attn"))
    else:
        r.set("attention", "auto", source="default", note="attn_impl not given: the model's config (transformers' default, SDPA)")
    if doc.get("fp8_format"):
        r.set("fp8", True, key="fp8_format", raw=doc.get("fp8_format"))
        r.set("fp8_backend", "te", source="default", note="Megatron's fp8 runs through Transformer Engine")
    if doc.get("deepspeed"):
        r.set("distributed", "deepspeed", key="deepspeed", raw=doc.get("deepspeed"))
    elif doc.get("fsdp"):
        r.set("distributed", "fsdp2" if "2" in str(doc.get("fsdp")) else "fsdp", key="fsdp", raw=doc.get("fsdp"))
    r.settings = {k: doc[k] for k in ("torch_dtype", "bf16", "fp16", "attn_impl", "attention_backend") if k in doc}
    # Remedies: ms-swift's own switch is torch_dtype (bf16 / fp16 follow it unless set).
    edit16 = {"torch_dtype": "float16"} if key == "torch_dtype" or key is None else {key: "fp16"}
    edit32 = {"torch_dtype": "float32"} if key == "torch_dtype" or key is None else {key: "fp32"}
    for edit, fp16_on in ((edit16, True), (edit32, True)):
        if "bf16" in doc:
            edit["bf16"] = False
        if "fp16" in doc:
            edit["fp16"] = fp16_on
    r.edits["precision=fp16"] = edit16
    r.edits["precision=fp32"] = edit32
    if truthy(doc.get("tf32")):
        r.edits["tf32=off"] = {"tf32": False}
    if "attn_impl" in doc:
        r.edits["attention=sdpa"] = {"attn_impl": "sdpa"}
    elif "attention_backend" in doc:
        r.edits["attention=sdpa"] = {"attention_backend": "unfused"}  # Megatron's plain PyTorch attention
    return r
