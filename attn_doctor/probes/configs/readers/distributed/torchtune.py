"""A torchtune recipe config (`tune run RECIPE --config x.yaml`; torchtune/training/precision.py,
recipes/*.py).

- `dtype`: fp32 | bf16 (| fp16, which every training recipe refuses: "full fp16 training is not
  supported with this recipe" / "fp16 precision is not supported in this recipe"); other spellings
  (bfloat16, float32) raise "Dtype ... must be one of fp16, bf16, fp32, fp64". The whole run is in that
  dtype: weights, activations, gradients and optimizer states, no fp32 master copy, no autocast. bf16
  is refused where verify_bf16_support() is False, which uses torch.cuda.is_bf16_supported() (True by
  emulation on sm70/sm75).
- `compile`: bool (or a dict of parts); `enable_fp8_training` (full_finetune_distributed only) trains
  fp8 through torchao. Attention is SDPA (flex_attention for packed data), with no key.
"""

from __future__ import annotations

from ...plan import Reading, truthy

NAME = "torchtune"
LABEL = "torchtune"
FORMATS = ("yaml", "json")
MARKERS = {"checkpointer": 2, "enable_activation_checkpointing": 2, "max_steps_per_epoch": 2, "enable_activation_offloading": 2,
           "fsdp_cpu_offload": 2, "optimizer_in_bwd": 2, "log_every_n_steps": 1, "epochs": 1, "batch_size": 1, "tokenizer": 1,
           "loss": 1, "compile": 1, "dtype": 1, "device": 1, "shuffle": 1, "metric_logger": 2, "profiler": 1}
DISTINCT = ("optimizer_in_bwd", "enable_activation_offloading", "max_steps_per_epoch")


def distinct(doc: dict) -> list[str]:
    """A `_component_: torchtune....` block: torchtune's config system."""
    return [f"{k}._component_: {v['_component_']}" for k, v in doc.items()
            if isinstance(v, dict) and str(v.get("_component_", "")).startswith("torchtune.")][:1]
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}


def recognise_extra(doc: dict) -> int:
    """torchtune's `_component_: torchtune....` blocks say it outright."""
    return 5 if any(isinstance(v, dict) and str(v.get("_component_", "")).startswith("torchtune.") for v in doc.values()) else 0


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("dtype", "compile", "enable_fp8_training", "fp8_recipe_name", "fsdp_cpu_offload", "device")
    raw = doc.get("dtype")
    if "dtype" not in doc:
        r.set("compute_dtype", "unset", source="default",
              note="no dtype: the training recipes read cfg.dtype and stop (\"Missing key dtype\")")
    else:
        text = "fp32" if raw is None else str(raw).strip()
        dtype = _DTYPES.get(text)
        if dtype is None:
            r.refused["dtype"] = f"Dtype {text} must be one of fp16, bf16, fp32, fp64 for finetuning."
            r.set("compute_dtype", "invalid", key="dtype", raw=raw)
        else:
            r.set("compute_dtype", dtype, key="dtype", raw=raw, note="the whole run in this dtype: no autocast, no fp32 master copy")
            r.set("param_dtype", dtype, key="dtype", raw=raw)
            if dtype == "float16":
                r.refused["dtype"] = ("full fp16 training is not supported with this recipe. Please use bf16 or fp32 instead. "
                                      "(single-device LoRA, QAT and distillation recipes: fp16 precision is not supported in this recipe.)")
    compile_ = doc.get("compile")
    if isinstance(compile_, dict):
        r.set("compile", any(truthy(v) for v in compile_.values()), key="compile")
    elif truthy(compile_) is not None:
        r.set("compile", truthy(compile_), key="compile", raw=compile_)
    if truthy(doc.get("enable_fp8_training")):
        r.set("fp8", True, key="enable_fp8_training")
        r.set("fp8_backend", "torchao", source="default", note="torchao's float8 training (full_finetune_distributed)")
    r.set("attention", "sdpa", source="default",
          note="torchtune's attention is SDPA (compiled flex_attention for packed data); no key chooses it")
    r.settings = {k: doc[k] for k in ("dtype", "compile", "enable_fp8_training") if k in doc}
    if "dtype" in doc:
        r.edits["precision=fp32"] = {"dtype": "fp32"}
        r.edits["precision=bf16"] = {"dtype": "bf16"}
    if truthy(doc.get("enable_fp8_training")):
        r.edits["fp8=off"] = {"enable_fp8_training": False}
    return r
