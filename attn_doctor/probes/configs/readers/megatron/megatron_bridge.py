"""A Megatron-Bridge YAML: an override file for a recipe's ConfigContainer (`--config-file x.yaml` of
the examples' pretrain / finetune scripts and scripts/training/run_recipe.py, merged with
OmegaConf.merge over the recipe and applied by training/utils/omegaconf_utils.py apply_overrides), or
the full ConfigContainer a run logs and saves (`_target_: megatron.bridge.training.config.ConfigContainer`).

Read from NVIDIA-NeMo/Megatron-Bridge 067f987df03b8355b03192d88d70f1709fedf51a:
- src/megatron/bridge/training/config.py ConfigContainer: model, train, optimizer, ddp, scheduler,
  dataset, logger, tokenizer, checkpoint, dist, peft, comm_overlap, mixed_precision (a
  MixedPrecisionConfig or a recipe name, None by default), rng, profiling...; at setup a recipe name
  goes through get_mixed_precision_config and MixedPrecisionConfig.setup writes every field it shares
  with the model, optimizer and DDP configs over theirs (bf16, fp16, params_dtype, pipeline_dtype,
  grad_reduce_in_fp32, fp8...). With mixed_precision None the model config's own bf16 / fp16 /
  params_dtype stand (Megatron Core's defaults: False, False, float32; a bridge from a Hugging Face
  checkpoint sets them from its torch_dtype: models/conversion/model_bridge.py).
- src/megatron/bridge/recipes/common.py: _pretrain_common, _sft_common and _peft_common set
  mixed_precision="bf16_mixed" (and _peft_common peft=LoRA(...)), which every recipe starts from: an
  override file that leaves mixed_precision out trains in bf16.
- src/megatron/bridge/training/mixed_precision.py: the recipes (bf16_mixed: bf16, params bf16,
  autocast off, grad_reduce_in_fp32 True; fp16_mixed: grad_reduce_in_fp32 False;
  bf16_with_fp8_delayed_scaling_mixed, bf16_with_fp8_current_scaling_mixed (tensorwise, first / last
  layers bf16), bf16_with_fp8_subchannel_scaling_mixed (blockwise), bf16_with_mxfp8_mixed (mxfp8),
  bf16_with_nvfp4_mixed (fp4), their fp16 twins, nemotron_h_ / nanov2_ variants); names take "-" or
  "_"; an unknown one raises "Unknown mixed-precision recipe 'X'. Available recipes: ...".
  MixedPrecisionConfig defaults: fp8_recipe "tensorwise", grad_reduce_in_fp32 True, autocast off.
- omegaconf_utils._apply_overrides: a key the target dataclass lacks is skipped with a warning
  ("Key 'X' in overrides not found in config object Y. Skipping.").
- Attention: model.attention_backend (Megatron Core AttnBackend, auto by default;
  models/gemma/gemma_provider.py, gemma3_provider.py, hybrid/hybrid_provider.py default to flash,
  falcon_h1 to unfused); dist.use_torch_fsdp2 / dist.use_megatron_fsdp / ddp.use_megatron_fsdp.
- peft: LoRA (peft/lora.py: lora_dtype None = the model's dtype), DoRA.
"""

from __future__ import annotations


from ...plan import Reading, get, truthy
from .. import _megatron as mg

NAME = "megatron-bridge"
LABEL = "Megatron-Bridge"
FORMATS = ("yaml", "json")
MARKERS = {"rng": 2, "ddp": 3, "dist": 2, "scheduler": 1, "train": 1, "optimizer": 1, "checkpoint": 1, "logger": 1,
           "dataset": 1, "mixed_precision": 1, "comm_overlap": 3, "rerun_state_machine": 4, "ft": 1, "straggler": 2,
           "nvrx_straggler": 3, "inprocess_restart": 3, "tensor_inspect": 3, "peft": 1, "profiling": 1}
DISTINCT = ("rerun_state_machine", "comm_overlap", "nvrx_straggler", "inprocess_restart", "tensor_inspect",
            ("_target_", ("megatron.bridge.*",)), "ddp.grad_reduce_in_fp32", "ddp.overlap_grad_reduce", "ddp.use_distributed_optimizer",
            "train.train_iters", "train.exit_duration_in_mins")


def distinct(doc: dict) -> list[str]:
    mp = doc.get("mixed_precision")
    return [f"mixed_precision: {mp}"] if isinstance(mp, str) and mp.replace("-", "_") in _RECIPES else []
_CONTAINER = ("train", "model", "optimizer", "ddp", "scheduler", "dataset", "logger", "tokenizer", "checkpoint", "dist",
              "rng", "peft", "comm_overlap", "mixed_precision", "profiling", "validation", "ft", "straggler")

# name -> (compute, fp8 format, fp8 recipe, fp8 params, fp4, grad_reduce_in_fp32)
_RECIPES: dict[str, tuple] = {
    "bf16_mixed": ("bfloat16", None, None, False, None, True),
    "fp16_mixed": ("float16", None, None, False, None, False),
    "bf16_with_fp8_delayed_scaling_mixed": ("bfloat16", "hybrid", "delayed", True, None, True),
    "fp16_with_fp8_delayed_scaling_mixed": ("float16", "hybrid", "delayed", True, None, False),
    "bf16_with_mxfp8_mixed": ("bfloat16", "e4m3", "mxfp8", True, None, True),
    "fp16_with_mxfp8_mixed": ("float16", "e4m3", "mxfp8", True, None, False),
    "bf16_with_fp8_current_scaling_mixed": ("bfloat16", "hybrid", "tensorwise", True, None, True),
    "nemotron_h_bf16_with_fp8_current_scaling_mixed": ("bfloat16", "hybrid", "tensorwise", True, None, True),
    "nanov2_bf16_with_fp8_current_scaling_mixed": ("bfloat16", "hybrid", "blockwise", True, None, True),
    "fp16_with_fp8_current_scaling_mixed": ("float16", "hybrid", "tensorwise", True, None, False),
    "bf16_with_fp8_subchannel_scaling_mixed": ("bfloat16", "hybrid", "blockwise", False, None, True),
    "fp16_with_fp8_subchannel_scaling_mixed": ("float16", "hybrid", "blockwise", False, None, False),
    "bf16_with_nvfp4_mixed": ("bfloat16", None, None, False, "e2m1", True),
    "nemotron_3_super_bf16_with_nvfp4_mixed": ("bfloat16", None, None, False, "e2m1", True),
}
_MP_FIELDS = ("fp32", "fp16", "bf16", "params_dtype", "pipeline_dtype", "autocast_dtype", "autocast_enabled", "grad_reduce_in_fp32",
              "fp8", "fp8_recipe", "first_last_layers_bf16", "fp8_margin", "fp8_amax_history_len", "fp8_amax_compute_algo", "fp8_wgrad",
              "fp8_dot_product_attention", "fp8_multi_head_attention", "fp8_param", "fp8_param_gather", "fp4", "fp4_recipe", "fp4_param",
              "fp4_param_gather", "loss_scale", "initial_loss_scale", "min_loss_scale", "loss_scale_window", "hysteresis",
              "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16", "reuse_grad_buf_for_mxfp8_param_ag")
RECIPE_DEFAULT = ("Megatron-Bridge's recipes start from _pretrain_common / _sft_common / _peft_common "
                  "(src/megatron/bridge/recipes/common.py), which set mixed_precision='bf16_mixed'")


def recognise_extra(doc: dict) -> int:
    score = 0
    if str(doc.get("_target_", "")).startswith("megatron.bridge."):
        score += 8
    train = doc.get("train")
    # Megatron's iteration keys: eval_interval alone is everybody's (a VITS train block has it)
    if isinstance(train, dict) and any(k in train for k in ("train_iters", "exit_duration_in_mins", "global_batch_size")):
        score += 3
    model = doc.get("model")
    if isinstance(model, dict) and any(k in model for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                            "context_parallel_size", "expert_model_parallel_size", "seq_length")) \
            and not any(k in model for k in ("megatron_amp_O2", "mcore_gpt", "micro_batch_size")):
        score += 2
    mp = doc.get("mixed_precision")
    if isinstance(mp, str) and mp.replace("-", "_") in _RECIPES:
        score += 3
    return score


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    r.understood("mixed_precision", "model.bf16", "model.fp16", "model.params_dtype", "model.pipeline_dtype", "model.autocast_dtype",
                 "model.attention_backend", "model.flash_attention_version", "model.fp8", "model.fp8_recipe", "model.fp8_param",
                 "model.fp4", "ddp.grad_reduce_in_fp32", "optimizer.bf16", "optimizer.fp16", "optimizer.params_dtype",
                 "dist.use_torch_fsdp2", "dist.use_megatron_fsdp", "ddp.use_megatron_fsdp", "peft")
    has_mp = "mixed_precision" in doc
    mp = doc.get("mixed_precision")
    state = None  # (compute, fp8, fp8_recipe, fp8_params, fp4, grad_reduce_in_fp32, key, source, note)
    if has_mp and mp is None:
        _from_model(doc, model, r)
    elif isinstance(mp, str):
        name = mp.strip().replace("-", "_")
        if name in _RECIPES:
            state = (*_RECIPES[name], "mixed_precision", "file", f"the {name} recipe (training/mixed_precision.py)")
        else:
            r.refused["mixed_precision"] = (f"ValueError: Unknown mixed-precision recipe '{name}'. Available recipes: "
                                            + ", ".join(sorted(_RECIPES)) + ", ...")
            r.set("compute_dtype", "invalid", key="mixed_precision", raw=mp)
    elif isinstance(mp, dict):
        state = _from_dict(mp, r)
    else:
        state = (*_RECIPES["bf16_mixed"], None, "default", RECIPE_DEFAULT)
    if state is not None:
        _apply(state, mp if isinstance(mp, dict) else {}, doc, r)
    _attention(model, r)
    _distributed(doc, r)
    _peft(doc, r)
    r.settings = {k: v for k, v in (("mixed_precision", mp if not isinstance(mp, dict) else str(mp)[:200]),
                                     ("model.bf16", model.get("bf16")), ("model.params_dtype", model.get("params_dtype")),
                                     ("model.attention_backend", model.get("attention_backend")),
                                     ("ddp.grad_reduce_in_fp32", get(doc, "ddp.grad_reduce_in_fp32"))) if v is not None}
    _edits(doc, r)
    return r


def _from_dict(mp: dict, r: Reading) -> tuple:
    """A mixed_precision mapping: a MixedPrecisionConfig (`_target_`), else fields laid over the recipe's
    (bf16_mixed) MixedPrecisionConfig; fields it does not have are skipped."""
    unknown = [k for k in mp if k not in _MP_FIELDS and not k.startswith("_")]
    if unknown:
        r.understood(*(f"mixed_precision.{k}" for k in unknown))
    targeted = "_target_" in mp
    if targeted:
        compute = "bfloat16" if truthy(mp.get("bf16")) else "float16" if truthy(mp.get("fp16")) else "float32"
        note = "MixedPrecisionConfig as written"
        key = "mixed_precision.bf16" if truthy(mp.get("bf16")) or not truthy(mp.get("fp16")) else "mixed_precision.fp16"
        source = "file"
    else:
        compute, note, key, source = "bfloat16", RECIPE_DEFAULT + "; this mapping is laid over it", None, "default"
        if truthy(mp.get("bf16")) or truthy(mp.get("fp16")) or truthy(mp.get("fp32")):
            compute = "bfloat16" if truthy(mp.get("bf16")) else "float16" if truthy(mp.get("fp16")) else "float32"
            key = "mixed_precision." + ("bf16" if truthy(mp.get("bf16")) else "fp16" if truthy(mp.get("fp16")) else "fp32")
            source, note = "file", None
        if unknown:
            note = (note + "; " if note else "") + (f"{', '.join(unknown)}: not MixedPrecisionConfig fields, skipped with a warning "
                                                    "(omegaconf_utils._apply_overrides)")
    fp8 = mp.get("fp8")
    recipe = mp.get("fp8_recipe", "tensorwise")
    params = truthy(mp.get("fp8_param_gather", mp.get("fp8_param")))
    reduce32 = truthy(mp.get("grad_reduce_in_fp32"))
    return (compute, fp8, recipe if fp8 else None, bool(params), mp.get("fp4"),
            True if reduce32 is None else reduce32, key, source, note)


def _apply(state: tuple, mp: dict, doc: dict, r: Reading) -> None:
    compute, fp8, recipe, params, fp4, reduce32, key, source, note = state
    if compute != "float32":
        note = (note + "; " if note else "") + f"Megatron's Float16Module runs the model in {compute}, no autocast" \
            if not truthy(mp.get("autocast_enabled")) else (note or "") + f"; torch.autocast({compute})"
    r.set("compute_dtype", compute, key=key, source=source, raw=doc.get("mixed_precision") if key == "mixed_precision" else None, note=note)
    if compute in ("bfloat16", "float16"):
        r.set("param_dtype", "float32", source="default", note=f"the model's weights are {compute}; Megatron's optimizer keeps fp32 main params")
        r.set("reduce_dtype", "float32" if reduce32 else compute, source="default" if "grad_reduce_in_fp32" not in mp else "file",
              key="mixed_precision.grad_reduce_in_fp32" if "grad_reduce_in_fp32" in mp else None,
              note="mixed_precision's grad_reduce_in_fp32 is written over ddp.grad_reduce_in_fp32 (MixedPrecisionConfig.setup)"
              + ("; this file's ddp.grad_reduce_in_fp32 does not count" if get(doc, "ddp.grad_reduce_in_fp32") is not None else ""))
    else:
        r.set("param_dtype", "float32", source="default", note="fp32 training")
    if compute == "float16":
        r.set("loss_scaling", True, source="default", note="Megatron's optimizer: dynamic loss scaling from 2**32 (MixedPrecisionConfig)")
    fp_key = key if key == "mixed_precision" else "mixed_precision.fp4" if fp4 else "mixed_precision.fp8"
    fp_source = "file" if key == "mixed_precision" or (fp4 or fp8) and (mp.get("fp4") or mp.get("fp8")) else "default"
    if fp4:
        mg.set_fp4(r, fp4, key=fp_key, source=fp_source)
    elif fp8:
        mg.set_fp8(r, fp8, recipe, key=fp_key, source=fp_source, recipe_default="tensorwise")
        if params:
            r.set("quantization", "fp8-weights", key=fp_key, source=fp_source,
                  note="fp8_param_gather: fp8 parameters (Transformer Engine) all-gathered in fp8; fp32 main params in the optimizer")


def _from_model(doc: dict, model: dict, r: Reading) -> None:
    """mixed_precision: null: the model config's own bf16 / fp16 / params_dtype."""
    bf16, fp16 = truthy(model.get("bf16")), truthy(model.get("fp16"))
    params = mg.torch_dtype(model.get("params_dtype"))
    if bf16 or fp16:
        compute = "bfloat16" if bf16 else "float16"
        r.set("compute_dtype", compute, key="model.bf16" if bf16 else "model.fp16", raw=True,
              note="mixed_precision: null leaves the model config's own bf16 / fp16 (Float16Module)")
        r.set("param_dtype", "float32", source="default",
              note=f"the model's weights are {params or compute}; Megatron's optimizer keeps fp32 main params")
        if fp16:
            r.set("loss_scaling", truthy(get(doc, "optimizer.fp16")) is True, key="optimizer.fp16" if get(doc, "optimizer.fp16") is not None else None,
                  source="file" if get(doc, "optimizer.fp16") is not None else "default",
                  note="Megatron's optimizer scales the loss only with optimizer.fp16")
        reduce32 = truthy(get(doc, "ddp.grad_reduce_in_fp32"))
        if reduce32 is not None:
            r.set("reduce_dtype", "float32" if reduce32 else compute, key="ddp.grad_reduce_in_fp32", raw=reduce32)
    elif params:
        r.set("compute_dtype", params if params == "float32" else params, key="model.params_dtype", raw=model.get("params_dtype"),
              note="mixed_precision: null and no bf16 / fp16 flag: the weights' dtype")
        r.set("param_dtype", params, key="model.params_dtype", raw=model.get("params_dtype"))
    else:
        r.set("compute_dtype", "auto", key="mixed_precision", raw=None,
              note="mixed_precision: null: the model provider's bf16 / fp16 / params_dtype (a Hugging Face bridge takes the "
                   "checkpoint's torch_dtype; Megatron Core's own default is fp32)")
    if model.get("fp8"):
        mg.set_fp8(r, model.get("fp8"), model.get("fp8_recipe"), key="model.fp8", recipe_key="model.fp8_recipe")


def _attention(model: dict, r: Reading) -> None:
    if "attention_backend" in model and mg.set_attention(r, model["attention_backend"], "model.attention_backend",
                                                         model.get("flash_attention_version"), "model.flash_attention_version"):
        return
    r.set("attention", "auto", source="default",
          note="no model.attention_backend: the recipe's model provider decides (" + mg.AUTO_NOTE
               + "; the Gemma, Gemma 3 and hybrid / Nemotron-H providers default to flash)")


def _distributed(doc: dict, r: Reading) -> None:
    if truthy(get(doc, "dist.use_torch_fsdp2")):
        r.set("distributed", "fsdp2", key="dist.use_torch_fsdp2", raw=True)
    elif truthy(get(doc, "dist.use_megatron_fsdp")) or truthy(get(doc, "ddp.use_megatron_fsdp")):
        k = "dist.use_megatron_fsdp" if truthy(get(doc, "dist.use_megatron_fsdp")) else "ddp.use_megatron_fsdp"
        r.set("distributed", "megatron-fsdp", key=k, raw=True,
              note=f"Megatron FSDP, sharding {get(doc, 'ddp.data_parallel_sharding_strategy') or 'per the recipe'}")


def _peft(doc: dict, r: Reading) -> None:
    peft = doc.get("peft")
    if peft is None or "peft" not in doc:
        return
    if isinstance(peft, dict):
        name = mg.target_name(peft)
        kind = {"LoRA": "lora", "DoRA": "dora", "CanonicalLoRA": "lora", "VLMLoRA": "lora"}.get(name, name.lower() if name else "lora")
        r.set("adapter", kind, key="peft._target_" if name else "peft", raw=peft.get("_target_") if name else None,
              note=None if name else "peft fields over the recipe's LoRA (_peft_common: peft=LoRA(...))")
        dtype = mg.torch_dtype(peft.get("lora_dtype"))
        compute = r.plan.get("compute_dtype")
        if dtype:
            r.set("adapter_dtype", dtype, key="peft.lora_dtype", raw=peft.get("lora_dtype"))
        elif compute is not None and compute.value in ("bfloat16", "float16", "float32"):
            r.set("adapter_dtype", compute.value, source="default", note="lora_dtype None: the model's dtype (peft/lora.py)")
    elif isinstance(peft, str) and peft.strip().lower() in ("lora", "dora"):
        r.set("adapter", peft.strip().lower(), key="peft", raw=peft)


def _edits(doc: dict, r: Reading) -> None:
    r.edits["precision=fp16"] = {"mixed_precision": "fp16_mixed"}
    r.edits["precision=bf16"] = {"mixed_precision": "bf16_mixed"}
    r.edits["precision=fp32"] = {"mixed_precision": None, "model.bf16": False, "model.fp16": False, "model.params_dtype": "torch.float32",
                                 "optimizer.bf16": False, "optimizer.fp16": False}
    attention = r.plan.get("attention")
    if attention is not None and attention.value in ("flash_attention_2", "flash_attention_3"):
        r.edits["attention=sdpa"] = {"model.attention_backend": "auto"}
    fp8 = r.plan.get("fp8")
    if fp8 is not None and fp8.value:
        compute = r.plan.get("compute_dtype")
        r.edits["fp8=off"] = {"mixed_precision": "fp16_mixed" if compute is not None and compute.value == "float16" else "bf16_mixed"}

