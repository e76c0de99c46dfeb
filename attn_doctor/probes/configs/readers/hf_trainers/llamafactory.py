"""A LLaMA-Factory training YAML or JSON (src/llamafactory/hparams/: model_args.py, finetuning_args.py,
parser.py; model/model_utils/attention.py).

Precision: TrainingArguments' `bf16` / `fp16`, and `pure_bf16` (FinetuningArguments: the weights in
bf16, no AMP master copy; refused where the GPU has no bf16, by the permissive torch check). The
weights load in the compute dtype (bf16 / pure_bf16 -> bfloat16, fp16 -> float16) and the trainable
ones are upcast to fp32 unless pure_bf16; without any key there is no autocast and the weights load
in the checkpoint's dtype (infer_optim_dtype, which trusts torch.cuda.is_bf16_supported()). `flash_attn` (auto | disabled | sdpa | fa2 | fa3; a boolean
up to 0.6) defaults to auto: LLaMA-Factory then leaves attn_implementation to transformers.
`fp8` / `fp8_backend` (auto | torchao | te | msamp) train fp8 matrix multiplies through accelerate.
"""

from __future__ import annotations

import os
from pathlib import Path

from ... import shapes
from ...plan import Reading, truthy
from .. import _hf

NAME = "llamafactory"
LABEL = "LLaMA-Factory"
FORMATS = ("yaml", "json")
MARKERS = {"stage": 3, "finetuning_type": 3, "template": 2, "flash_attn": 4, "cutoff_len": 2, "lora_target": 2, "pure_bf16": 3,
           "dataset_dir": 1, "model_name_or_path": 1, "dataset": 1, "overwrite_cache": 1, "preprocessing_num_workers": 1,
           "plot_loss": 2, "ddp_timeout": 1, "booster": 1, "enable_liger_kernel": 1}
# Keys and values only LLaMA-Factory's hparams dataclasses write (pure_bf16 is llama-recipes' too).
DISTINCT = ("finetuning_type", "cutoff_len", "lora_target", "plot_loss",
            ("flash_attn", ("fa2", "fa3", "sdpa", "auto", "disabled", "flashattn2")), ("stage", ("pt", "sft", "rm", "ppo", "dpo", "kto")))
_FLASH = {"fa2": "flash_attention_2", "fa3": "flash_attention_3", "sdpa": "sdpa", "disabled": "eager", "off": "eager",
          "auto": "auto", "flashattn2": "flash_attention_2"}
_FP8 = {"te": "te", "torchao": "torchao", "msamp": "msamp", "auto": "auto"}


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("flash_attn", "pure_bf16", "fp8", "fp8_backend", "fp8_enable_fsdp_float8_all_gather", "deepspeed",
                 "enable_liger_kernel", "use_unsloth", "infer_dtype", "upcast_layernorm", "upcast_lmhead_output")
    pure = truthy(doc.get("pure_bf16"))
    _hf.training_arguments(doc, r, bf16_default=None)
    if pure:
        r.set("compute_dtype", "bfloat16", key="pure_bf16", raw=doc.get("pure_bf16"))
        r.set("param_dtype", "bfloat16", key="pure_bf16", raw=doc.get("pure_bf16"),
              note="pure bf16: the weights in bf16, no fp32 master copy")
    elif "compute_dtype" in r.plan and r.plan["compute_dtype"].value != "float32":
        r.set("param_dtype", "float32", source="default",
              note=f"the frozen weights load in {r.plan['compute_dtype'].value}, the trainable ones are upcast to fp32 (no pure_bf16)")
    if r.plan.get("compute_dtype") is None or r.plan["compute_dtype"].source == "default" and not pure:
        r.set("compute_dtype", "auto", source="default",
              note="no bf16 / fp16 / pure_bf16: no autocast; the weights load in the checkpoint's dtype (infer_optim_dtype: "
                   "bf16 for a bf16 checkpoint wherever torch.cuda.is_bf16_supported(), True by emulation before Ampere)")
    value = doc.get("flash_attn", "auto")
    if isinstance(value, bool):
        impl = "flash_attention_2" if value else "auto"
    else:
        impl = _FLASH.get(str(value).strip().lower(), str(value))
    if "flash_attn" in doc:
        r.set("attention", impl, key="flash_attn", raw=value)
    else:
        r.set("attention", "auto", source="default", note="flash_attn defaults to auto: transformers' default (SDPA)")
    if truthy(doc.get("fp8")):
        r.set("fp8", True, key="fp8")
        backend = doc.get("fp8_backend", "auto")
        r.set("fp8_backend", _FP8.get(str(backend).lower(), str(backend)), key="fp8_backend" if "fp8_backend" in doc else None,
              source="file" if "fp8_backend" in doc else "default", raw=backend)
    _adapters(doc, r, pure)
    if doc.get("deepspeed"):
        r.set("distributed", "deepspeed", key="deepspeed", raw=doc.get("deepspeed"),
              note="the DeepSpeed JSON's bf16 / fp16 blocks, \"auto\", follow bf16 / fp16 here")
    r.settings = {k: doc[k] for k in ("flash_attn", "bf16", "fp16", "pure_bf16") if k in doc}
    model_config = shapes.local_model_config(doc.get("model_name_or_path"), ctx.base or Path.cwd())
    if model_config is not None:
        head_dim = shapes.head_dim_of_file(model_config)
        if head_dim:
            r.settings.update(head_dim=head_dim, model_config=os.path.abspath(model_config))
    _hf.precision_edits(doc, r)
    if truthy(doc.get("fp8")):
        r.edits["fp8=off"] = {"fp8": False}
    if "flash_attn" in doc:
        r.edits["attention=sdpa"] = {"flash_attn": "sdpa"}
    return r


def _adapters(doc: dict, r: Reading, pure: bool) -> None:
    """finetuning_args.py: `finetuning_type` defaults to lora (full, freeze, lora, oft); model/adapter.py
    casts the trainable parameters to fp32 unless pure_bf16 (cast_trainable_params_to_fp32), and
    model_args.py's `quantization_bit` (4 or 8) loads the base through bitsandbytes (quantization_type
    nf4 by default) computing in the training dtype."""
    r.understood("finetuning_type", "quantization_bit", "quantization_method", "quantization_type", "use_dora")
    kind = str(doc.get("finetuning_type", "lora")).strip().lower()
    if kind not in ("lora", "oft"):
        return
    name = "dora" if truthy(doc.get("use_dora")) else kind
    if "finetuning_type" in doc:
        r.set("adapter", name, key="finetuning_type", raw=doc.get("finetuning_type"))
    else:
        r.set("adapter", name, source="default", note="finetuning_type defaults to lora")
    r.set("adapter_dtype", "bfloat16" if pure else "float32", source="default",
          note="pure_bf16: the adapters in bf16" if pure else "the trainable (adapter) weights are cast to fp32 (model/adapter.py)")
    compute = r.plan.get("compute_dtype")
    if not pure and compute is not None and compute.value in ("bfloat16", "float16"):
        r.set("param_dtype", compute.value, source="default",
              note=f"the frozen base loads in {compute.value}; only the adapters train (in fp32)")
    bits = doc.get("quantization_bit")
    if bits in (4, 8, "4", "8"):
        method = str(doc.get("quantization_method", "bnb")).lower()
        qtype = str(doc.get("quantization_type", "nf4")).lower()
        r.set("quantization", qtype if str(bits) == "4" else "int8", key="quantization_bit", raw=bits,
              note=f"{method}: the frozen base stored in {qtype if str(bits) == '4' else 'int8'}")
        compute = r.plan.get("compute_dtype")
        if compute is not None and compute.value in ("bfloat16", "float16"):
            r.set("quant_compute_dtype", compute.value, source="default", note="bnb_4bit_compute_dtype is the compute dtype")
