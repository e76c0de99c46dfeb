"""A nanotron training YAML (`run_train.py --config-file x.yaml`; src/nanotron/config/config.py Config:
`general`, `parallelism`, `model`, `tokenizer`, `checkpoints`, `logging`, `tokens`, `optimizer`,
`data_stages`, ..., read by dacite with strict=True).

Read from huggingface/nanotron at 2411b022a75fb7f7561a1bb4166706da5e1b76de:

- `model.dtype` (ModelArgs, config/config.py): the dtype the model is built in (trainer.py
  DistributedTrainer._init_model -> build_model(dtype=config.model.dtype)); None/absent is bfloat16 (ModelArgs.__post_init__).
  Only the exact names of config/utils_config.py str_to_dtype are taken ("bfloat16", "float16",
  "float32", ...); anything else raises "dtype should be a string selected in ...". There is no
  autocast and no loss scaling anywhere in src/nanotron: the forward and backward run in model.dtype.
- `optimizer.accumulate_grad_in_fp32` (required): helpers.py init_optimizer_and_grad_accumulator wraps
  the optimizer in OptimizerFromGradientAccumulator(FP32GradientAccumulator), which keeps an fp32 copy
  of the parameters and fp32 gradient buffers (optim/gradient_accumulator.py: "We make a fp32 copy of
  parameters"): an fp32 master copy. false: the optimizer steps the bf16 weights themselves.
- Attention is chosen in code, not by a key, for most models: models/llama.py CoreAttention (LlamaConfig,
  `is_llama_config: true`, the union's first member) and models/starcoder2.py always call flash-attn's
  flash_attn_varlen_func; model_config._attn_implementation is not read there. Qwen2Config
  (`is_qwen2_config: true`, models/qwen.py) dispatches on `model_config._attn_implementation`, default
  "flash_attention_2" (config/models_config.py DEFAULT_ATTENTION_IMPLEMENTATION), one of
  nn/attention.py ALL_ATTENTION_FUNCTIONS: flash_attention_2, flex_attention, sdpa, ring (flash-attn's
  varlen kernels over the context-parallel ring), ring_flash_triton (Triton kernels), llama3_ring_attention
  (flash-attn varlen). flash-attn is imported at module load by nn/attention.py (via nn/ring_attention.py)
  and models/qwen.py, so it must be installed whatever the choice. The examples' models are registered
  by their own scripts: examples/moe/llamoe.py (is_llamoe_config) calls flash_attn_varlen_func,
  examples/mamba (is_mamba_config) has no attention.
- flash-attn runs in fp16/bf16 only, so a float32 `model.dtype` fails in those models.
- `parallelism.dp` > 1: the model is wrapped in torch DDP (trainer.py DistributedTrainer._init_model, make_ddp);
  `optimizer.zero_stage` 1 shards the optimizer states (ZeroDistributedOptimizer).
"""

from __future__ import annotations

from typing import Any, Optional

from ...plan import Reading, dtype_of

NAME = "nanotron"
LABEL = "nanotron"
FORMATS = ("yaml", "json")
MARKERS = {"general": 2, "parallelism": 1, "tokens": 2, "data_stages": 3, "checkpoints": 1, "lighteval": 2, "s3_upload": 2,
           "profiler": 1, "model": 1, "optimizer": 1, "logging": 1, "tokenizer": 1}
DISTINCT = ("data_stages", "model.init_method", "optimizer.accumulate_grad_in_fp32", "general.ignore_sanity_checks",
            "tokens.batch_accumulation_per_replica", "parallelism.tp_mode")

_STR_TO_DTYPE = ("float32", "float64", "complex64", "complex128", "float16", "bfloat16", "uint8", "int8", "int16", "int32",
                 "int64", "bool")
_ATTENTION = {"flash_attention_2": ("flash_attention_2", None),
              "sdpa": ("sdpa", None),
              "flex_attention": ("flex_attention", None),
              "ring": ("flash_attention_2", "ring attention over flash-attn's varlen kernels (nn/ring_attention.py)"),
              "llama3_ring_attention": ("flash_attention_2",
                                        "Llama-3-style ring attention over flash-attn's varlen kernels (nn/llama3_ring_attention.py)"),
              "ring_flash_triton": ("ring_flash_triton", "ring attention with Triton flash kernels (nn/ring_attention_lucidrain.py)")}
_FLASH_ALWAYS = {
    "llama": "LlamaForTraining's CoreAttention always calls flash_attn_varlen_func (src/nanotron/models/llama.py); "
             "no key chooses another attention",
    "starcoder2": "Starcoder2's CoreAttention always calls flash_attn_varlen_func (src/nanotron/models/starcoder2.py)",
    "llamoe": "the LlaMoE example always calls flash_attn_varlen_func (examples/moe/llamoe.py)",
}
_IMPORTS = "flash-attn is imported at module load (src/nanotron/nn/attention.py, models/qwen.py) whatever the choice"


def _section(doc: dict, name: str) -> dict:
    value = doc.get(name)
    return value if isinstance(value, dict) else {}


def recognise_extra(doc: dict) -> int:
    model, parallelism, optimizer, general, tokens = (_section(doc, k) for k in ("model", "parallelism", "optimizer", "general", "tokens"))
    score = 0
    if isinstance(model.get("model_config"), dict) and "init_method" in model:
        score += 3
    if all(k in parallelism for k in ("dp", "tp", "pp")):
        score += 2
    if "accumulate_grad_in_fp32" in optimizer:
        score += 2
    if "project" in general and "run" in general:
        score += 1
    if "sequence_length" in tokens:
        score += 1
    if score >= 3:
        return score
    # section names alone never make a nanotron file: cancel what the bare names scored
    return -sum(w for k, w in MARKERS.items() if k in doc)


def _model_kind(config: dict) -> Optional[str]:
    for flag, kind in (("is_llama_config", "llama"), ("is_qwen2_config", "qwen2"), ("is_starcoder2_config", "starcoder2"),
                       ("is_llamoe_config", "llamoe"), ("is_mamba_config", "mamba")):
        if config.get(flag) is True:
            return kind
    flags = [k for k in config if isinstance(k, str) and k.startswith("is_") and k.endswith("_config") and config[k] is True]
    if flags:
        return flags[0][3:-7]
    return "llama" if config else None  # dacite tries LlamaConfig first in the NanotronConfigs union


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    model, optimizer, parallelism = _section(doc, "model"), _section(doc, "optimizer"), _section(doc, "parallelism")
    config = model.get("model_config") if isinstance(model.get("model_config"), dict) else {}
    r.understood("model.dtype", "model.model_config._attn_implementation", "model.model_config.dtype",
                 "optimizer.accumulate_grad_in_fp32", "optimizer.zero_stage", "parallelism", "model.model_config.is_llama_config",
                 "model.model_config.residual_in_fp32")

    raw = model.get("dtype")
    if raw is None:
        dtype = "bfloat16"
        r.set("compute_dtype", dtype, source="default",
              note="model.dtype absent: bfloat16 (ModelArgs.__post_init__, src/nanotron/config/config.py); no autocast")
    else:
        text = str(raw)
        dtype = text if text in _STR_TO_DTYPE else None
        if dtype is None:
            r.refused["model.dtype"] = (f"dtype should be a string selected in dict_keys({list(_STR_TO_DTYPE)!r}) and not {text}")
        r.set("compute_dtype", dtype or dtype_of(text) or text, key="model.dtype", raw=raw,
              note="the model is built in it (trainer.py _init_model); no autocast, forward and backward run in it")
    fp32_master = optimizer.get("accumulate_grad_in_fp32")
    if fp32_master is True and dtype != "float32":
        r.set("param_dtype", "float32", key="optimizer.accumulate_grad_in_fp32", raw=True,
              note="FP32GradientAccumulator keeps an fp32 master copy of the weights and fp32 gradients "
                   "(src/nanotron/optim/gradient_accumulator.py); the forward runs on the model.dtype copy")
    elif "accumulate_grad_in_fp32" in optimizer:
        r.set("param_dtype", dtype or dtype_of(raw) or str(raw), key="optimizer.accumulate_grad_in_fp32", raw=fp32_master,
              note="no fp32 master copy: the optimizer steps the model.dtype weights" if dtype != "float32" else None)
    else:
        r.set("param_dtype", dtype or dtype_of(raw) or str(raw), key="model.dtype" if raw is not None else None,
              source="file" if raw is not None else "default",
              note="optimizer.accumulate_grad_in_fp32 not given (a required key): no fp32 master copy")
    if dtype == "float16":
        r.set("loss_scaling", False, source="default", note="nanotron has no loss scaling: fp16 gradients are not scaled")

    kind = _model_kind(config)
    impl = config.get("_attn_implementation")
    if kind in _FLASH_ALWAYS:
        note = _FLASH_ALWAYS[kind]
        if impl is not None and impl != "flash_attention_2":
            note += f"; model_config._attn_implementation {impl!r} is not read by this model"
        r.set("attention", "flash_attention_2", source="default", note=note)
    elif kind == "qwen2":
        if impl is None and "_attn_implementation" not in config:
            r.set("attention", "flash_attention_2", source="default",
                  note="Qwen2Config._attn_implementation defaults to flash_attention_2 "
                       "(DEFAULT_ATTENTION_IMPLEMENTATION, src/nanotron/config/models_config.py)")
        elif impl is None:
            r.set("attention", "flash_attention_2", key="model.model_config._attn_implementation", raw=None,
                  note="null: Qwen2Attention looks None up in ALL_ATTENTION_FUNCTIONS and fails; flash_attention_2 is the default")
            r.refused["model.model_config._attn_implementation"] = "KeyError: None (ALL_ATTENTION_FUNCTIONS has no None entry)"
        elif impl in _ATTENTION:
            value, note = _ATTENTION[impl]
            if value in ("sdpa", "flex_attention"):
                note = _IMPORTS
            r.set("attention", value, key="model.model_config._attn_implementation", raw=impl, note=note)
        else:
            r.set("attention", str(impl), key="model.model_config._attn_implementation", raw=impl)
            r.refused["model.model_config._attn_implementation"] = (
                f"Invalid attention implementation: {impl}. Available options are: dict_keys({list(_ATTENTION)!r})")
    elif kind == "mamba":
        r.settings["attention"] = "none: the Mamba example has no attention layers (examples/mamba/mamba.py)"
    if kind:
        r.settings["model_config"] = kind
    attention = r.plan.get("attention")
    if dtype == "float32" and attention is not None and attention.value == "flash_attention_2":
        r.refused["model.dtype"] = "FlashAttention only support fp16 and bf16 data type"  # flash-attn's check, at the first forward
    if "residual_in_fp32" in config:
        r.settings["model.model_config.residual_in_fp32"] = config["residual_in_fp32"]  # the Mamba example's fp32 residual stream

    dp = parallelism.get("dp")
    if isinstance(dp, int) and dp > 1:
        zero = optimizer.get("zero_stage")
        r.set("distributed", "ddp", key="parallelism.dp", raw=dp,
              note="nanotron wraps the model in torch DDP (trainer.py _init_model)"
                   + ("; ZeRO-1 shards the optimizer states (optimizer.zero_stage 1)" if zero else ""))
    for key in ("dp", "tp", "pp", "context_parallel_size", "expert_parallel_size"):
        if key in parallelism:
            r.settings[f"parallelism.{key}"] = parallelism[key]
    r.settings.update({k: v for k, v in (("model.dtype", raw), ("optimizer.accumulate_grad_in_fp32", fp32_master),
                                          ("model.model_config._attn_implementation", impl)) if v is not None})
    _edits(r, kind, impl)
    return r


def _edits(r: Reading, kind: Optional[str], impl: Any) -> None:
    """nanotron's one precision switch is model.dtype: float16 runs natively on pre-Ampere GPUs and in
    flash-attn, but nanotron has no loss scaling (the plan says so once it is applied). fp32 and SDPA
    are only open to Qwen2Config, whose attention is a key; flash-attn refuses fp32."""
    r.edits["precision=fp16"] = {"model.dtype": "float16"}
    if kind != "qwen2":
        return
    r.edits["attention=sdpa"] = {"model.model_config._attn_implementation": "sdpa"}
    fp32: dict[str, Any] = {"model.dtype": "float32"}
    if impl not in ("sdpa", "flex_attention"):
        fp32["model.model_config._attn_implementation"] = "sdpa"  # flash-attn runs in fp16/bf16 only
    r.edits["precision=fp32"] = fp32
