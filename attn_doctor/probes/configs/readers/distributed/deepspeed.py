"""A DeepSpeed JSON (deepspeed/runtime/config.py, precision_config.py).

`bf16` (alias `bfloat16`) and `fp16` blocks, each with `enabled`: the engine keeps the model in that
dtype and an fp32 master copy in the optimizer (ZeRO's fp32 partitions) — mixed precision done by
casting the weights, not by autocast; "auto" is filled in by the HF Trainer from its own bf16 / fp16
(transformers/integrations/deepspeed.py). fp16 has dynamic loss scaling (`loss_scale: 0`).
`torch_autocast: {enabled, dtype}` (DeepSpeed >= 0.16) runs autocast over fp32 weights instead.
Both bf16 and fp16 enabled raises "bfloat16 and fp16 modes cannot be simultaneously enabled".
"""

from __future__ import annotations

from ...plan import Reading, dtype_of, truthy

NAME = "deepspeed"
LABEL = "DeepSpeed"
FORMATS = ("json", "yaml")
MARKERS = {"zero_optimization": 4, "train_batch_size": 3, "train_micro_batch_size_per_gpu": 3, "zero_allow_untested_optimizer": 3,
           "steps_per_print": 2, "wall_clock_breakdown": 2, "communication_data_type": 2, "data_types": 2, "gradient_clipping": 1,
           "activation_checkpointing": 1, "torch_autocast": 2, "amp": 1, "flops_profiler": 2, "zero_force_ds_cpu_optimizer": 3}
# DeepSpeed's own config keys. A gpt-neox YAML holds them too (NeoX hands them to DeepSpeed): its reader
# says more, so the DeepSpeed reader gives way to it (SUBSUMED_BY).
DISTINCT = ("zero_optimization", "train_micro_batch_size_per_gpu", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
            "steps_per_print", "wall_clock_breakdown")
SUBSUMED_BY = ("gpt-neox",)


# deepspeed/runtime/config.py (DeepSpeedConfig._initialize_params) asserts these are not both on.
EXCLUSIVE = ((("bf16.enabled", "fp16.enabled"), "bfloat16 and fp16 modes cannot be simultaneously enabled"),
             (("bfloat16.enabled", "fp16.enabled"), "bfloat16 and fp16 modes cannot be simultaneously enabled"))


def recognise_extra(doc: dict) -> int:
    return sum(2 for block in ("bf16", "bfloat16", "fp16") if isinstance(doc.get(block), dict))


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    r.understood("bf16", "bfloat16", "fp16", "torch_autocast", "communication_data_type", "data_types", "amp")
    bf16_key = next((k for k in ("bf16", "bfloat16") if isinstance(doc.get(k), dict) and "enabled" in doc[k]), None)
    bf16 = doc[bf16_key]["enabled"] if bf16_key else None
    fp16 = doc["fp16"].get("enabled") if isinstance(doc.get("fp16"), dict) else None
    autocast = doc.get("torch_autocast") if isinstance(doc.get("torch_autocast"), dict) else {}
    r.exclusive(doc, EXCLUSIVE)
    if truthy(bf16):
        r.set("compute_dtype", "bfloat16", key=f"{bf16_key}.enabled", raw=bf16)
        r.set("param_dtype", "float32", source="default", note="the engine runs a bf16 copy of the model; the optimizer keeps the fp32 master weights")
    elif truthy(fp16):
        r.set("compute_dtype", "float16", key="fp16.enabled", raw=fp16)
        r.set("param_dtype", "float32", source="default", note="the engine runs an fp16 copy of the model; the optimizer keeps the fp32 master weights")
        r.set("loss_scaling", True, key="fp16.loss_scale" if "loss_scale" in doc["fp16"] else "fp16.enabled",
              note="dynamic loss scaling" if not doc["fp16"].get("loss_scale") else f"static loss scale {doc['fp16'].get('loss_scale')}")
    elif truthy(autocast.get("enabled")):
        dtype = dtype_of(str(autocast.get("dtype", "bfloat16")).replace("torch.", "")) or "bfloat16"
        r.set("compute_dtype", dtype, key="torch_autocast.enabled", note="torch.autocast over fp32 weights")
        r.set("param_dtype", "float32", source="default", note="torch_autocast keeps the weights in fp32")
    elif str(bf16).lower() == "auto" or str(fp16).lower() == "auto":
        key = f"{bf16_key}.enabled" if str(bf16).lower() == "auto" else "fp16.enabled"
        r.set("compute_dtype", "auto", key=key, raw="auto", note="the HF Trainer fills it in from its own bf16 / fp16")
    elif bf16_key or "fp16" in doc:
        r.set("compute_dtype", "float32", key=f"{bf16_key}.enabled" if bf16_key else "fp16.enabled", raw=False)
    else:
        r.set("compute_dtype", "float32", source="default", note="DeepSpeed trains in fp32 without a bf16 or fp16 block")
    comm = dtype_of(doc.get("communication_data_type"))
    grad = dtype_of((doc.get("data_types") or {}).get("grad_accum_dtype")) if isinstance(doc.get("data_types"), dict) else None
    if comm or grad:
        r.set("reduce_dtype", comm or grad, key="communication_data_type" if comm else "data_types.grad_accum_dtype")
    r.set("distributed", "deepspeed", source="default", note=f"ZeRO stage {_stage(doc)}")
    r.settings = {}
    for name, aliases in (("bf16", ("bf16", "bfloat16")), ("fp16", ("fp16",))):
        for alias in aliases:
            block = doc.get(alias)
            if isinstance(block, dict) and "enabled" in block:
                r.settings[f"{name}.enabled"] = block["enabled"]
                break
    off_bf16 = {f"{alias}.enabled": False for alias in ("bf16", "bfloat16")
                if isinstance(doc.get(alias), dict) and doc[alias].get("enabled") not in (False,)}
    r.edits["precision=fp16"] = {"fp16.enabled": True, **off_bf16}
    fp32 = dict(off_bf16)
    if isinstance(doc.get("fp16"), dict) and doc["fp16"].get("enabled") not in (False,):
        fp32["fp16.enabled"] = False
    r.edits["precision=fp32"] = fp32
    if truthy(bf16) and truthy(fp16):
        r.edits["precision=bf16"] = {"fp16.enabled": False}
    return r


def _stage(doc: dict):
    zero = doc.get("zero_optimization")
    return zero.get("stage", 0) if isinstance(zero, dict) else 0
