"""A MosaicML Composer config outside LLM Foundry: a Hydra YAML whose `trainer._target_` is Composer's
Trainer (mosaicml/diffusion and projects like it; under `parameters:` in an mcli run file), or
Composer's own YAML of Trainer arguments (mosaicml/examples' recipes: `algorithms`, `scale_schedule_ratio`,
Composer's optimizers).

Read from mosaicml/composer (composer/core/precision.py, composer/trainer/trainer.py):
- `precision`: fp32 = no autocast; amp_fp16 = torch.autocast(float16) with a GradScaler; amp_bf16 =
  torch.autocast(bfloat16); amp_fp8 = Transformer Engine's fp8_autocast (compute capability 8.9);
  Composer < 0.12 spelt amp (= fp16 autocast), fp16 (DeepSpeed only), bf16.
- Without it the Trainer picks `Precision.AMP_FP16 if isinstance(device, DeviceGPU) else Precision.FP32`:
  fp16 autocast on a GPU (asserted only for a file that is Composer's beyond doubt).
- The weights stay fp32 (autocast); `algorithms.low_precision_layernorm` / `low_precision_groupnorm` run
  those norms in the precision's dtype. DeviceGPU turns TF32 matmuls on (allow_tf32=True).
LLM Foundry's YAMLs are Composer Trainer configs too: llmfoundry.py reads them (SUBSUMED_BY).
"""

from __future__ import annotations

from ...plan import Reading

NAME = "composer"
LABEL = "Composer"
FORMATS = ("yaml", "json")
MARKERS = {"max_duration": 2, "device_train_microbatch_size": 2, "algorithms": 2, "scale_schedule_ratio": 3, "grad_accum": 2,
           "eval_interval": 1, "save_interval": 1, "run_name": 1, "precision": 1, "trainer": 1, "parameters": 1}
SUBSUMED_BY = ("llm-foundry",)
_TRAINERS = ("composer.Trainer", "composer.trainer.Trainer", "composer.trainer.trainer.Trainer")
# Composer's own algorithms and optimizers (composer/algorithms, composer/optim): the names its YAMLs key by
_ALGORITHMS = ("blurpool", "channels_last", "label_smoothing", "progressive_resizing", "low_precision_layernorm",
               "low_precision_groupnorm", "ema", "squeeze_excite", "mixup", "cutmix", "colout", "layer_freezing", "sam", "swa",
               "stochastic_depth", "selective_backprop", "gradient_clipping", "gated_linear_units", "alibi", "fused_layernorm",
               "weight_standardization", "seq_length_warmup", "augmix", "randaugment", "factorize", "ghost_batchnorm")
_OPTIMIZERS = ("decoupled_sgdw", "decoupled_adamw")
_PRECISIONS = {"fp32": ("float32", None), "amp_fp16": ("float16", True), "amp_bf16": ("bfloat16", None),
               "amp_fp8": ("bfloat16", None), "amp": ("float16", True), "fp16": ("float16", None), "bf16": ("bfloat16", None)}
DEFAULT = ("Composer's Trainer without `precision`: Precision.AMP_FP16 on a GPU (composer/trainer/trainer.py), "
           "torch.autocast(float16) with a GradScaler")


def _root(doc: dict) -> tuple[dict, str]:
    params = doc.get("parameters")
    if isinstance(params, dict) and ("command" in doc or "integrations" in doc or "compute" in doc):
        return params, "parameters."
    return doc, ""


def distinct(doc: dict) -> list[str]:
    root, p = _root(doc)
    found = []
    trainer = root.get("trainer")
    if isinstance(trainer, dict) and str(trainer.get("_target_", "")) in _TRAINERS:
        found.append(f"{p}trainer._target_: {trainer['_target_']}")
    if "scale_schedule_ratio" in root:
        found.append(p + "scale_schedule_ratio")
    algorithms = root.get("algorithms")
    if isinstance(algorithms, dict) and sum(k in _ALGORITHMS for k in algorithms) >= 2:
        found.append(f"{p}algorithms ({', '.join(k for k in algorithms if k in _ALGORITHMS)[:80]})")
    optimizer = root.get("optimizer") if isinstance(root.get("optimizer"), dict) else root.get("optimizers")
    if isinstance(optimizer, dict) and any(k in _OPTIMIZERS for k in optimizer):
        found.append(f"{p}optimizer.{next(k for k in optimizer if k in _OPTIMIZERS)}")
    return found


def recognise_extra(doc: dict) -> int:
    return 3 * len(distinct(doc))


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    root, p = _root(doc)
    trainer = root.get("trainer") if isinstance(root.get("trainer"), dict) else {}
    # the Trainer's own block where the file has one (Hydra instantiates it), else the top level
    in_trainer = "precision" in trainer or str(trainer.get("_target_", "")) in _TRAINERS
    key = p + ("trainer.precision" if in_trainer else "precision")
    raw = trainer.get("precision", root.get("precision"))
    r.understood(p + "precision", p + "trainer.precision", p + "algorithms.low_precision_layernorm",
                 p + "algorithms.low_precision_groupnorm", p + "trainer.fsdp_config", p + "fsdp_config")
    if raw is None:
        r.set("compute_dtype", "float16", source="default", raw="amp_fp16", note=DEFAULT)
        r.set("param_dtype", "float32", source="default", note="autocast keeps the weights in fp32")
        r.set("loss_scaling", True, source="default", note="amp_fp16's GradScaler")
    else:
        text = str(raw).strip().lower()
        compute, scaled = _PRECISIONS.get(text, ("invalid", None))
        r.set("compute_dtype", compute, key=key, raw=raw, note="Composer < 0.12's spelling" if text in ("amp", "fp16", "bf16") else None)
        if compute != "invalid":
            r.set("param_dtype", "float32", source="default", note="autocast keeps the weights in fp32")
        else:
            r.refused[key] = f"'{raw}' is not a valid Precision (fp32, amp_fp16, amp_bf16, amp_fp8)"
        if scaled:
            r.set("loss_scaling", True, key=key, raw=raw, note="Composer's GradScaler")
        if text == "amp_fp8":
            r.set("fp8", True, key=key, raw=raw, requires="8.9",
                  note="Transformer Engine's fp8_autocast; Composer refuses it below compute capability 8.9")
            r.set("fp8_backend", "te", key=key, raw=raw)
    r.set("tf32", True, source="default", note="Composer's DeviceGPU(allow_tf32=True) turns TF32 matmuls on; a no-op before Ampere")
    style = "amp" if str(raw).strip().lower() == "amp" else None
    r.edits = {"precision=fp16": {key: "AMP" if style and str(raw).isupper() else "amp" if style else "amp_fp16"},
               "precision=fp32": {key: "fp32"}, "precision=bf16": {key: "amp_bf16"}}
    if r.plan.get("fp8") is not None:
        r.edits["fp8=off"] = {key: "amp_bf16"}
    r.settings = {key: raw} if raw is not None else {}
    return r
