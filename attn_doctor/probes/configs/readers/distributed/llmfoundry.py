"""An LLM Foundry training or eval YAML (`composer scripts/train/train.py x.yaml`, `llmfoundry.command_utils`),
run by MosaicML Composer's Trainer; also a MosaicML platform run file (`mcli run -f x.yaml`) whose
`parameters:` block is that YAML.

Read from mosaicml/llm-foundry 8c8dd48f72168c5d51e2f7b151595892a8fba43d (v0.21.0+) and
mosaicml/composer 6405188805a0054b4551ec49e4919c54c971d0e8, with older releases where they differ:

- `precision` (llmfoundry/utils/config_utils.py TrainConfig / EvalConfig: default "amp_bf16"; Composer's own
  default, AMP_FP16 on a GPU, never applies since LLM Foundry always passes one) is Composer's Precision
  (composer/core/precision.py get_precision_context): fp32 = autocast off; amp_fp16 = torch.autocast
  fp16 with a GradScaler (ShardedGradScaler under FSDP); amp_bf16 = torch.autocast bf16; amp_fp8 =
  Transformer Engine's te.fp8_autocast only (DelayedScaling HYBRID), no torch.autocast, and
  "AMP_FP8 precision is used but current device does not support it." below compute capability 8.9.
  fp8 reaches only te layers: `model.fc_type: te` or an `ffn_config.ffn_type` with "te"
  (llmfoundry/command_utils/train.py warns "fp8 only supported for te.Linear layers" otherwise).
  Composer < 0.12 spelled it amp / bf16 / fp16 (fp16 = DeepSpeed only); 0.12 and later refuse those.
- The weights: HF models are built with torch_dtype=float32 (_MASTER_WEIGHTS_PRECISION,
  llmfoundry/models/consts.py), MPT in fp32; `model.master_weights_dtype` (bf16 | bfloat16 | f16 |
  float16) casts the model to it (llmfoundry/utils/builders.py build_composer_model) and sets FSDP's
  mixed_precision to {param_dtype: None, keep_low_precision_grads: True} (config_utils.py process_init_device).
- `fsdp_config.mixed_precision` (composer/distributed/mosaic_parallelism.py get_mixed_precision; default
  DEFAULT, composer/utils/parallelism.py FSDPConfig): FULL = no casts, fp32 reduce; DEFAULT = params cast
  to the precision's dtype, fp32 reduce; PURE = params and gradient reduction in the precision's dtype
  (amp_fp8 counts as bfloat16); a dict names param_dtype / reduce_dtype / buffer_dtype. FSDP2 where
  FSDP_VERSION=2 (composer/trainer/trainer.py). On one GPU LLM Foundry drops FSDP ("Reverting to DDP").
- TF32: Composer's DeviceGPU(allow_tf32=True) turns TF32 matmuls on (composer/devices/device_gpu.py); no key.
- Attention. MPT (`model.name: mpt_causal_lm`): `model.attn_config.attn_impl` flash (flash-attn's varlen
  kernels; the default from v0.7.0, llmfoundry/models/utils/config_defaults.py) | torch (its own matmul +
  softmax, scaled_multihead_dot_product_attention: eager) | triton (the default before v0.7.0; removed
  in v0.7.0: "Unknown attn_impl=triton"). HF models (`hf_causal_lm`, `hf_t5`): `use_flash_attention_2`
  (wins over attn_implementation), `attn_implementation` (v0.20.0+), else "eager"
  (llmfoundry/models/hf/hf_base.py build_inner_model: attn_implementation = 'eager' when neither is given).
  `config_overrides.attn_config` is an MPT config attribute; other models' configs have none and
  set_config_overrides raises 'config does not have attribute ...' (config_utils.py).
- `model.load_in_8bit`: bitsandbytes LLM.int8 weights; `model.peft_config` (peft_type LORA, use_dora):
  adapters; `compile_config`: torch.compile.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

from ...plan import Reading, attention_of, truthy

NAME = "llm-foundry"
LABEL = "LLM Foundry / Composer"
FORMATS = ("yaml", "json")
# Only keys LLM Foundry's TrainConfig / EvalConfig spell that way; model / optimizer / scheduler / tokenizer /
# seed / precision / fsdp_config are everyone's, and recognise_extra reads their values instead.
MARKERS = {"device_train_microbatch_size": 4, "global_train_batch_size": 3, "device_eval_batch_size": 3, "train_loader": 3,
           "max_duration": 3, "console_log_interval": 3, "eval_subset_num_batches": 3, "icl_tasks": 3, "eval_gauntlet": 3,
           "save_num_checkpoints_to_keep": 2, "eval_first": 2, "dist_timeout": 2, "log_to_console": 2, "expandable_segments": 2,
           "icl_seq_len": 2, "device_train_grad_accum": 2, "eval_loader": 1, "tp_config": 1,
           # a MosaicML platform run file (mcli): its `parameters` are the LLM Foundry config (recognise_extra)
           "parameters": 1, "integrations": 1}
# Only LLM Foundry writes these: its eval harness, its model and data loader names (Composer's Trainer
# arguments, device_train_microbatch_size and max_duration, are every Composer script's: composer.py).
DISTINCT = ("icl_tasks", "eval_gauntlet", "icl_seq_len", "eval_subset_num_batches", "global_train_batch_size",
            ("model.name", ("mpt_causal_lm", "hf_causal_lm", "hf_t5", "hf_seq2seq", "hf_embedding")),
            ("train_loader.name", ("text", "finetuning")))


def distinct(doc: dict) -> list[str]:
    """The same evidence inside an mcli run file's `parameters`."""
    root, prefix = _train_doc(doc)
    if not prefix:
        return []
    from types import SimpleNamespace

    from ..distinct import evidence

    return [prefix + item for item in evidence(SimpleNamespace(DISTINCT=DISTINCT), root)]
_MCLI = ("integrations", "command", "image", "compute", "gpu_num", "gpu_type", "cluster", "scheduling")
# composer/distributed/mosaic_parallelism.py _get_torch_dtype
_TORCH_DTYPE = {"float32": "float32", "torch.float32": "float32", "fp32": "float32",
                "float16": "float16", "torch.float16": "float16", "half": "float16", "fp16": "float16", "amp": "float16",
                "amp_fp16": "float16", "bfloat16": "bfloat16", "bfloat": "bfloat16", "torch.bfloat16": "bfloat16",
                "bf16": "bfloat16", "amp_bf16": "bfloat16", "float8": "bfloat16", "torch.float8": "bfloat16",
                "fp8": "bfloat16", "amp_fp8": "bfloat16"}
# llmfoundry/utils/builders.py build_composer_model str_dtype_to_torch_dtype
_MASTER = {"f16": "float16", "float16": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16"}
_HF_MODELS = ("hf_causal_lm", "hf_t5", "hf_seq2seq", "hf_embedding")
DEFAULT_PRECISION = "amp_bf16: LLM Foundry's TrainConfig / EvalConfig default (llmfoundry/utils/config_utils.py)"


def _train_doc(doc: dict) -> tuple[dict, str]:
    """(the LLM Foundry config, the key prefix it sits under): an mcli run file carries it in `parameters`."""
    params = doc.get("parameters")
    if isinstance(params, dict) and any(k in doc for k in _MCLI):
        return params, "parameters."
    return doc, ""


def recognise_extra(doc: dict) -> int:
    root, prefix = _train_doc(doc)
    score = 0
    if prefix:  # an mcli run file: its parameters speak for it
        score += 1 + sum(MARKERS.get(k, 0) for k in root)
    precision = root.get("precision")
    if isinstance(precision, str) and precision.strip().lower() in ("amp_fp16", "amp_bf16", "amp_fp8"):
        score += 3  # Composer's own spellings
    model = root.get("model")
    if isinstance(model, dict) and str(model.get("name", "")) in ("mpt_causal_lm", *_HF_MODELS):
        score += 3
    models = root.get("models")
    if isinstance(models, list) and models and isinstance(models[0], dict) and "model_name" in models[0]:
        score += 2  # an eval config
    fsdp = root.get("fsdp_config")
    if isinstance(fsdp, dict) and str(fsdp.get("mixed_precision", "")).upper() in ("PURE", "DEFAULT", "FULL"):
        score += 2
    return score


def _resolve(root: dict, value: Any, depth: int = 0) -> Any:
    """OmegaConf's `${a.b}` interpolation, for a value that is one reference to the config's own keys."""
    if isinstance(value, str) and depth < 5:
        match = re.fullmatch(r"\$\{([\w.]+)\}", value.strip())
        if match:
            node: Any = root
            for part in match.group(1).split("."):
                if not isinstance(node, dict) or part not in node:
                    return value
                node = node[part]
            return _resolve(root, node, depth + 1)
    return value


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    root, prefix = _train_doc(doc)
    p = prefix
    r.understood(*(p + k for k in ("precision", "fsdp_config", "compile_config", "model.attn_config", "model.attn_implementation",
                                   "model.use_flash_attention_2", "model.master_weights_dtype", "model.load_in_8bit",
                                   "model.peft_config", "model.config_overrides.attn_config", "model.fc_type",
                                   "model.ffn_config", "callbacks.hf_checkpointer.precision", "algorithms.low_precision_layernorm",
                                   "algorithms.low_precision_groupnorm", "tp_config")))
    model, model_key = root.get("model"), p + "model"
    models = root.get("models")
    if not isinstance(model, dict) and isinstance(models, list) and models and isinstance(models[0], dict):
        model, model_key = models[0].get("model"), p + "models[0].model"
        r.understood(p + "models")
    model = model if isinstance(model, dict) else {}
    model = {k: _resolve(root, v) for k, v in model.items()}

    raw = _resolve(root, root.get("precision"))
    text = str(raw).strip().lower() if raw is not None else "amp_bf16"
    if raw is None:
        key, source = None, "default"
    else:
        key, source = p + "precision", "file"
    master = _MASTER.get(str(model.get("master_weights_dtype")).strip().lower()) if model.get("master_weights_dtype") else None
    fsdp = root.get("fsdp_config") if isinstance(root.get("fsdp_config"), dict) else None
    cast, reduce_, mp_raw = _fsdp_dtypes(fsdp, text, master)

    def setp(name, value, note=None, **kw):
        if source == "default":
            r.set(name, value, source="default", raw="amp_bf16" if name == "compute_dtype" else None,
                  note=DEFAULT_PRECISION + (f"; {note}" if note else ""))
        else:
            r.set(name, value, key=key, raw=raw, note=note, **kw)

    if text == "fp32":
        setp("compute_dtype", "float32", note="Composer's fp32: torch.autocast off")
    elif text == "amp_fp16":
        setp("compute_dtype", "float16", note="Composer's amp_fp16: torch.autocast(float16)")
        setp("loss_scaling", True, note="Composer's GradScaler (ShardedGradScaler under FSDP)")
    elif text == "amp_bf16":
        setp("compute_dtype", "bfloat16", note="Composer's amp_bf16: torch.autocast(bfloat16)")
    elif text == "amp_fp8":
        te = _te_layers(model)
        if master or cast:
            dtype = master or cast
            why = (f"model.master_weights_dtype {model.get('master_weights_dtype')}" if master
                   else f"FSDP mixed_precision {mp_raw} casts the weights to {dtype} (amp_fp8 counts as bfloat16)")
            setp("compute_dtype", dtype, note=f"amp_fp8 runs no torch.autocast; the rest of the model computes in its weights' dtype: {why}")
        else:
            setp("compute_dtype", "float32", note="amp_fp8 runs no torch.autocast and nothing casts the fp32 weights: "
                                                  "everything outside Transformer Engine layers computes in fp32")
        setp("fp8", True, requires="8.9",
             note=("Transformer Engine's fp8_autocast (DelayedScaling, HYBRID); Composer raises 'AMP_FP8 precision is used but "
                   "current device does not support it.' below compute capability 8.9"
                   + ("" if te else "; no te layers here (model.fc_type: te / ffn_type te_ln_mlp), so no matmul runs in fp8 "
                                    "(LLM Foundry warns 'fp8 only supported for te.Linear layers')")))
        setp("fp8_backend", "te")
    elif text in ("amp", "bf16", "fp16"):
        dtype = {"amp": "float16", "bf16": "bfloat16", "fp16": "float16"}[text]
        setp("compute_dtype", dtype, note="Composer < 0.12's spelling" + (" (fp16 was DeepSpeed-only)" if text == "fp16" else ""))
        if key:
            r.refused[key] = f"'{raw}' is not a valid Precision (Composer 0.12 renamed it: fp32, amp_fp16, amp_bf16, amp_fp8)"
            r.refused_by[key] = "composer>=0.12"
    else:
        setp("compute_dtype", "invalid")
        if key:
            r.refused[key] = f"'{raw}' is not a valid Precision"

    # The weights
    if master:
        r.set("param_dtype", master, key=model_key + ".master_weights_dtype", raw=model.get("master_weights_dtype"),
              note="build_composer_model casts the model to it; FSDP keeps it (param_dtype None, keep_low_precision_grads)")
    else:
        r.set("param_dtype", "float32", source="default",
              note="LLM Foundry builds the model in fp32 (_MASTER_WEIGHTS_PRECISION, llmfoundry/models/consts.py); "
                   "FSDP's casts are for compute, the sharded weights stay fp32")

    # Distribution
    if fsdp is not None:
        env = ctx.env if ctx is not None and ctx.env is not None else os.environ
        v2 = str(env.get("FSDP_VERSION", "1")) == "2"
        r.set("distributed", "fsdp2" if v2 else "fsdp", key=p + "fsdp_config",
              note=("FSDP_VERSION=2: Composer's FSDP2Config" if v2 else "Composer's FSDP (FSDP_VERSION=2 selects FSDP2)")
              + "; LLM Foundry reverts to DDP on a single GPU")
        mp_key = p + "fsdp_config.mixed_precision" if "mixed_precision" in fsdp else None
        how = {"PURE": "PURE: weights cast and gradients reduced in the precision's dtype",
               "DEFAULT": "DEFAULT: weights cast to the precision's dtype, gradients reduced in fp32",
               "FULL": "FULL: no casts, fp32 reduction"}.get(str(mp_raw).upper(), "as written (param_dtype / reduce_dtype / buffer_dtype)")
        if master:
            how = "master_weights_dtype replaces it: {param_dtype: None, keep_low_precision_grads: True}"
        r.set("reduce_dtype", reduce_, key=mp_key, source="file" if mp_key else "default", raw=mp_raw if mp_key else None,
              note=how if mp_key else "fsdp_config.mixed_precision defaults to DEFAULT (composer/utils/parallelism.py): fp32 reduction")
    elif isinstance(root.get("tp_config"), dict):
        r.set("distributed", "ddp", source="default", note="tp_config without fsdp_config: tensor parallelism over DDP")

    r.set("tf32", True, source="default",
          note="Composer's DeviceGPU(allow_tf32=True) sets torch.backends.cuda.matmul.allow_tf32 (composer/devices/device_gpu.py); "
               "no LLM Foundry key turns it off")
    if root.get("compile_config") is not None:
        r.set("compile", True, key=p + "compile_config", note="the Trainer's compile_config: torch.compile")

    _attention(model, model_key, r)
    _quant_and_adapter(model, model_key, r)

    r.settings = {k: v for k, v in (("precision", raw), ("fsdp_mixed_precision", mp_raw if fsdp is not None else None),
                                    ("model_name", model.get("name")), ("master_weights_dtype", model.get("master_weights_dtype")))
                  if v is not None}
    hf_precision = ((root.get("callbacks") or {}).get("hf_checkpointer") or {}).get("precision") \
        if isinstance(root.get("callbacks"), dict) and isinstance((root.get("callbacks") or {}).get("hf_checkpointer"), dict) else None
    if hf_precision is not None:
        r.settings["hf_checkpoint_precision"] = hf_precision  # the dtype the HF checkpoint is saved in, not a training dtype
    attention = r.plan.get("attention")
    if attention is not None:
        r.settings["attention"] = attention.value

    # Remedies, in LLM Foundry's keys
    r.edits["precision=fp16"] = {p + "precision": "amp_fp16"}
    r.edits["precision=fp32"] = {p + "precision": "fp32"}
    r.edits["precision=bf16"] = {p + "precision": "amp_bf16"}
    if text == "amp_fp8":
        r.edits["fp8=off"] = {p + "precision": "amp_bf16"}
    mpt_key = attention is not None and attention.key is not None and ".attn_config." in attention.key
    if attention is not None and attention.value not in ("sdpa",) and model_key == p + "model" and not mpt_key:
        name = str(model.get("name", ""))
        if name in _HF_MODELS or "use_flash_attention_2" in model or "attn_implementation" in model:
            edit: dict[str, Any] = {model_key + ".attn_implementation": "sdpa"}
            if truthy(model.get("use_flash_attention_2")):
                edit[model_key + ".use_flash_attention_2"] = False  # it wins over attn_implementation
            r.edits["attention=sdpa"] = edit
    elif mpt_key and attention.value in ("flash_attention_2", "triton"):
        # MPT has no SDPA path: its attn_impl `torch` (attention written out in torch) runs on any GPU
        r.edits["attention=sdpa"] = {attention.key: "torch"}
    return r


def _te_layers(model: dict) -> bool:
    fc = model.get("fc_type")
    fc_name = fc.get("name") if isinstance(fc, dict) else fc
    ffn = model.get("ffn_config") if isinstance(model.get("ffn_config"), dict) else {}
    return str(fc_name) == "te" or "te" in str(ffn.get("ffn_type", "mptmlp"))


def _fsdp_dtypes(fsdp: Optional[dict], precision: str, master: Optional[str]) -> tuple[Optional[str], str, Any]:
    """(the dtype FSDP casts the weights to for compute, or None; the gradient reduction dtype; the
    mixed_precision setting as written), as get_mixed_precision makes them."""
    if fsdp is None:
        return None, "float32", None
    raw = fsdp.get("mixed_precision", "DEFAULT")
    prec = _TORCH_DTYPE.get(precision, "float32")
    if master:  # process_init_device: {param_dtype: None, reduce_dtype / buffer_dtype from a dict, else None}
        reduce_ = _TORCH_DTYPE.get(str(raw.get("reduce_dtype")).lower()) if isinstance(raw, dict) and raw.get("reduce_dtype") else None
        return None, reduce_ or master, raw
    if isinstance(raw, dict):
        param = _TORCH_DTYPE.get(str(raw.get("param_dtype")).lower()) if raw.get("param_dtype") is not None else None
        reduce_ = _TORCH_DTYPE.get(str(raw.get("reduce_dtype")).lower()) if raw.get("reduce_dtype") is not None else None
        return param, reduce_ or param or "float32", raw
    mode = str(raw).upper()
    if mode == "FULL":
        return None, "float32", raw
    if mode == "PURE":
        return prec, prec, raw
    return prec, "float32", raw  # DEFAULT


def _attention(model: dict, model_key: str, r: Reading) -> None:
    name = str(model.get("name", ""))
    attn_config = model.get("attn_config") if isinstance(model.get("attn_config"), dict) else None
    overrides = model.get("config_overrides") if isinstance(model.get("config_overrides"), dict) else {}
    override_attn = overrides.get("attn_config") if isinstance(overrides.get("attn_config"), dict) else None
    path = str(model.get("pretrained_model_name_or_path", ""))
    if path.startswith("mosaicml/mpt"):
        r.refused[model_key + ".pretrained_model_name_or_path"] = (
            "The MPT series of models on the Hugging Face Hub is no longer supported by LLM Foundry. Please use an older "
            "version of LLM Foundry (<0.18) or use a different model.")
        r.refused_by[model_key + ".pretrained_model_name_or_path"] = "llm-foundry>=0.18"
    if name == "mpt_causal_lm" or (attn_config is not None and name not in _HF_MODELS):
        impl = attn_config.get("attn_impl") if attn_config else None
        key = model_key + ".attn_config.attn_impl" if impl is not None else None
        _mpt_attention(impl, key, r, default_note="attn_config.attn_impl defaults to flash (llmfoundry/models/utils/config_defaults.py, "
                                                  "v0.7.0+; triton before)")
        return
    if name in _HF_MODELS or not name:
        if override_attn is not None and "attn_impl" in override_attn:
            key = model_key + ".config_overrides.attn_config.attn_impl"
            if "mpt" in path.lower():
                _mpt_attention(override_attn.get("attn_impl"), key, r, default_note="")
                return
            r.refused[model_key + ".config_overrides.attn_config"] = (
                f'config does not have attribute "attn_config" to override (attn_config: {override_attn}). '
                "attn_config.attn_impl is an MPT setting; this model's attention is model.attn_implementation")
        if truthy(model.get("use_flash_attention_2")):
            note = "wins over attn_implementation" if model.get("attn_implementation") not in (None, "flash_attention_2") else None
            r.set("attention", "flash_attention_2", key=model_key + ".use_flash_attention_2", raw=model.get("use_flash_attention_2"),
                  note=note)
        elif isinstance(model.get("attn_implementation"), str) and model["attn_implementation"].strip():
            impl = model["attn_implementation"]
            r.set("attention", attention_of(impl) or impl.strip(), key=model_key + ".attn_implementation", raw=impl,
                  note="LLM Foundry takes model.attn_implementation from v0.20.0")
            r.refused_by[model_key + ".attn_implementation"] = "llm-foundry<0.20"
            r.refused[model_key + ".attn_implementation"] = ("__init__() got an unexpected keyword argument 'attn_implementation' "
                                                             "(LLM Foundry before 0.20 takes only use_flash_attention_2)")
        else:
            r.set("attention", "eager", source="default",
                  note="no use_flash_attention_2 / attn_implementation: LLM Foundry asks transformers for eager "
                       "(llmfoundry/models/hf/hf_base.py build_inner_model), not transformers' SDPA default")


def _mpt_attention(impl: Any, key: Optional[str], r: Reading, default_note: str) -> None:
    if impl is None:
        r.set("attention", "flash_attention_2", source="default", note=default_note + "; flash-attn's varlen kernels")
        return
    text = str(impl).strip().lower()
    if text == "flash":
        r.set("attention", "flash_attention_2", key=key, raw=impl, note="MPT's flash: flash-attn's varlen kernels (flash-attn 2; 1.x before v0.5)")
    elif text == "torch":
        r.set("attention", "eager", key=key, raw=impl, note="MPT's torch: its own matmul + softmax (scaled_multihead_dot_product_attention)")
    elif text == "triton":
        r.set("attention", "triton", key=key, raw=impl,
              note="LLM Foundry's Triton flash-attention kernel (triton-pre-mlir); deprecated in v0.6.0, removed in v0.7.0")
        r.refused[key] = "Unknown attn_impl=triton"
        r.refused_by[key] = "llm-foundry>=0.7"
    else:
        r.set("attention", "invalid", key=key, raw=impl)
        r.refused[key] = f"Unknown attn_impl={impl}"


def _quant_and_adapter(model: dict, model_key: str, r: Reading) -> None:
    if truthy(model.get("load_in_8bit")):
        r.set("quantization", "int8", key=model_key + ".load_in_8bit", raw=model.get("load_in_8bit"),
              note="from_pretrained(load_in_8bit=True): bitsandbytes LLM.int8 weights")
        r.set("quant_compute_dtype", "float16", source="default",
              note="LLM.int8 matmuls run in fp16; transformers' bitsandbytes quantizer loads the rest in float16 when no torch_dtype "
                   "is passed to from_pretrained")
    peft = model.get("peft_config")
    if isinstance(peft, dict):
        kind = str(peft.get("peft_type", "LORA")).strip().lower()
        adapter = "dora" if kind == "lora" and truthy(peft.get("use_dora")) else kind
        r.set("adapter", adapter, key=model_key + ".peft_config" + (".peft_type" if "peft_type" in peft else ""),
              raw=peft.get("peft_type"))
        master = _MASTER.get(str(model.get("master_weights_dtype")).strip().lower()) if model.get("master_weights_dtype") else None
        r.set("adapter_dtype", master or "float32", source="default",
              note="PEFT creates the adapters in the base layers' dtype: the fp32 model"
                   + (f", cast to {master} by master_weights_dtype" if master else ""))
