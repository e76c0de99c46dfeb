"""An NVIDIA NeMo YAML: a NeMo 1.x Megatron config (`megatron_gpt_pretraining.py --config-name ...`,
examples/nlp/language_modeling/conf/, the NeMo Framework Launcher's launcher_scripts/conf/), a NeMo 2.x
YAML of `_target_` objects (a NeMo-Run / fiddle serialisation, a checkpoint's context/model.yaml, the
speechlm SALM configs), or another NeMo collection's Lightning config (ASR, speechlm2: exp_manager +
trainer.precision).

NeMo 1.x (NVIDIA/NeMo 8cfedd7203462cb251a914e700e5605444277561):
- nemo/collections/nlp/parts/megatron_trainer_builder.py MegatronTrainerBuilder._plugins:
  `trainer.precision` in [16, '16', '16-mixed'] -> fp16 with NeMo's GradScaler (init_scale
  model.native_amp_init_scale = 2**32, hysteresis); in ['bf16', 'bf16-mixed'] -> bf16; with
  `model.megatron_amp_O2` (default False) and no distributed optimizer: MegatronHalfPrecisionPlugin,
  else PipelineMixedPrecisionPlugin (torch.autocast) / FSDPMixedPrecisionPlugin; `model.fsdp` turns O2
  off ("Torch FSDP is not compatible with O2 precision recipe. Setting O2 `False`."). Without
  trainer.precision, Lightning's Trainer default 32-true.
- nemo/collections/nlp/models/language_modeling/megatron_base_model.py: model.precision defaults to
  trainer.precision; utils_funcs.torch_dtype_from_precision takes bf16, bf16-mixed, 16, '16', 16-mixed,
  32, '32', 32-true and raises "Could not parse the precision of `X` to a valid torch.dtype" for any
  other (bf16-true, 16-true, transformer-engine...); params_dtype is the half dtype only with
  megatron_amp_O2 (Float16Module, no autocast: enable_autocast = not megatron_amp_O2), the optimizer
  then keeps fp32 main params (MainParamsOptimizerWrapper / distributed_fused_adam /
  mcore_distributed_optim); configure_optimizers raises "fp16 training is not yet supported with O2."
  for fp16 + O2 without a distributed optimizer; "Torch FSDP does not support FP8."; with
  `use_flash_attention: True` it raises ImportError "flash_attn was not found." unless flash_attn
  imports, whatever the layer spec; `attention_backend` (default "auto") -> Megatron Core's AttnBackend.
- nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py: `mcore_gpt` (default False)
  picks Megatron Core's GPTModel, else NeMo's legacy GPTModel; get_specs(model.name,
  ..., use_te=model.transformer_engine (default False)): no name and no Transformer Engine is
  Megatron's local spec (its own DotProductAttention); te_gpt / megatron_gpt_full_te_layer_autocast /
  megatron_falcon_gpt / megatron_gemma2 are Transformer Engine layers; `fp8` needs fp8_e4m3 or
  fp8_hybrid ("fp8 enabled but fp8_format (fp8_e4m3 | fp8_hybrid) is not set."), `fp8_params` builds
  the weights under TE's fp8_model_init (fp8 weights, the distributed optimizer stores fp32 params).
  The legacy model uses `use_flash_attention` (nemo/collections/nlp/modules/common/megatron/
  attention.py: flash_attn's flash_attn_func / varlen, else torch_attention: matmul + fused softmax).
- Fine-tuning (model.restore_from_path): NLPAdapterModelMixin.merge_cfg_with (nemo/collections/nlp/
  parts/mixins/nlp_adapter_mixins.py at 25db8620c5f85f32a2c352388cc7d15ab428ac6e) starts from the
  .nemo checkpoint's own model config, lays the file's model keys over it and sets model.precision =
  trainer.precision: keys the file leaves out (mcore_gpt, transformer_engine) are the checkpoint's.
- nemo/collections/nlp/parts/peft_config.py PEFT_CONFIG_MAP: model.peft.peft_scheme adapter | ia3 |
  ptuning | lora | mlp_head | qlora | selective | sdlora | none; qlora keeps the base linear weights
  in NF4 (modules/common/megatron/adapters/qlora.py NF4Weight, modelopt; dequantised to the model's
  dtype for each matmul).

NeMo 2.x (same commit): nemo/lightning/pytorch/plugins/mixed_precision.py MegatronMixedPrecision:
`precision` "bf16"/"bf16-mixed" -> bf16, "16"/"16-mixed"/"fp16"/"fp16-mixed" -> fp16, "32"/"fp32" ->
fp32 and any other spelling (bf16-true...) sets no flag and trains in 32-true; convert_module wraps
the model in Megatron's Float16Module (weights in the half dtype), the Megatron optimizer keeps fp32
main params; autocast_enabled defaults False; grad_reduce_in_fp32 True; fp8 (None | "e4m3" |
"hybrid") with fp8_recipe ("delayed" by default; "tensorwise", "mxfp8", "blockwise"), fp8_params /
fp8_param_gather; fp4 ("nvfp4"). nemo/collections/llm/gpt/model/base.py: default_layer_spec is
Transformer Engine's where it is installed, Megatron Core's attention_backend (auto); GemmaConfig
(gemma.py), Gemma3Config (gemma3.py), HyenaConfig (hyena.py), SSMConfig / Mamba / NemotronH (ssm.py)
default attention_backend to AttnBackend.flash, GPTOSSConfig (gpt_oss.py) to AttnBackend.local.
nemo.collections.llm.peft: LoRA, CanonicalLoRA, DoRA.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ...plan import Reading, dtype_of, get, truthy
from .. import _megatron as mg

NAME = "nemo"
LABEL = "NVIDIA NeMo"
FORMATS = ("yaml", "json")
MARKERS = {"exp_manager": 4, "trainer": 1, "model": 1, "plugins": 2, "optim": 1, "run": 1, "hydra": 1, "strategy": 1}
DISTINCT = ("exp_manager",)


def distinct(doc: dict) -> list[str]:
    """NeMo 1.x Megatron model keys, NeMo 2's run configs, NeMo's inference keys."""
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    strong = [f"model.{k}" for k in _V1_STRONG if k in model]
    if strong and (strong != ["model.use_flash_attention"] or "trainer" in doc):
        return strong[:2]
    if _is_v2_megatron(doc):
        return ["a NeMo 2 recipe (nemo.collections.llm)"]
    return [k for k in _V1_INFERENCE_KEYS if k in doc][:1]

# model keys only NeMo 1.x Megatron configs carry (the strong ones say it alone)
_V1_STRONG = ("megatron_amp_O2", "mcore_gpt", "mcore_bert", "use_flash_attention", "native_amp_init_scale",
              "encoder_seq_length", "fp16_lm_cross_entropy")
_V1_MODEL_KEYS = _V1_STRONG + ("transformer_engine", "tensor_model_parallel_size", "pipeline_model_parallel_size",
                               "native_amp_growth_interval", "restore_from_path")
# top-level keys of NeMo 1.x Megatron inference / evaluation configs (megatron_gpt_eval.py, the Launcher's evaluation/)
_V1_INFERENCE_KEYS = ("gpt_model_file", "megatron_amp_O2", "nemo_model", "adapter_model_file")
_TE_SPECS = {"te_gpt", "megatron_gpt_full_te_layer_autocast", "megatron_falcon_gpt", "megatron_gemma2", "te_gpt_hyena"}
_DIST_OPTIM = ("distributed_fused_adam", "mcore_distributed_optim")
_V1_PRECISION = {"bf16": "bfloat16", "bf16-mixed": "bfloat16", "16": "float16", "16-mixed": "float16",
                 "32": "float32", "32-true": "float32"}
_V2_PRECISION = {"bf16": "bfloat16", "bf16-mixed": "bfloat16", "16": "float16", "16-mixed": "float16", "fp16": "float16",
                 "fp16-mixed": "float16", "32": "float32", "fp32": "float32"}
_PEFT_V1 = {"lora": "lora", "qlora": "qlora", "adapter": "adapter", "ia3": "ia3", "ptuning": "p-tuning",
            "mlp_head": "mlp-head", "selective": "selective", "sdlora": "sdlora"}
_PEFT_V2 = {"LoRA": "lora", "CanonicalLoRA": "lora", "DoRA": "dora", "QLoRA": "qlora"}
_FLASH_CONFIGS = ((re.compile(r"^(Code)?GemmaConfig"), "gemma.py GemmaConfig"), (re.compile(r"^Gemma3Config"), "gemma3.py Gemma3Config"),
                  (re.compile(r"^Hyena"), "hyena.py HyenaConfig"),
                  (re.compile(r"^(SSMConfig|BaseMambaConfig|NVIDIAMamba|NemotronH|NemotronNano\d+Bv2)"), "ssm.py SSMConfig"))


def _targets(node: Any, depth: int = 0):
    """Every `_target_` string in the top levels of the file."""
    if depth > 3:
        return
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            yield node["_target_"]
        for value in node.values():
            yield from _targets(value, depth + 1)
    elif isinstance(node, list):
        for value in node[:16]:
            yield from _targets(value, depth + 1)


_V2_MEGATRON = ("nemo.collections.llm", "nemo.collections.vlm", "nemo.lightning", "megatron.core", "MegatronStrategy",
                "MegatronMixedPrecision", "nemo.collections.speechlm.")


def _is_v2_megatron(doc: dict) -> bool:
    """A NeMo 2.x file of the Megatron stack (llm / vlm models, nemo.lightning's Megatron trainer); other
    `_target_` files (ASR, TTS, speechlm2) are plain Lightning."""
    return any(any(mark in target for mark in _V2_MEGATRON) for target in _targets(doc))


def recognise_extra(doc: dict) -> int:
    score = 0
    model = doc.get("model")
    strong = [k for k in _V1_STRONG if isinstance(model, dict) and k in model]
    # use_flash_attention alone is any model's switch (picotron has it): it says NeMo with another of them
    if strong and (strong != ["use_flash_attention"] or "trainer" in doc or "exp_manager" in doc):
        score += 5
    elif isinstance(model, dict) and "exp_manager" in doc and any(k in model for k in _V1_MODEL_KEYS):
        score += 2
    if str(doc.get("name", "")).startswith("megatron_"):
        score += 2
    if _is_v2_megatron(doc):
        score += 6
    if any(k in doc for k in _V1_INFERENCE_KEYS):
        score += 6
    return score


def read(doc: dict, ctx) -> Reading:
    r = Reading()
    if _is_v2_megatron(doc):
        return _read_v2(doc, r)
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    if any(k in model for k in _V1_MODEL_KEYS) or str(doc.get("name", "")).startswith("megatron_"):
        return _read_v1(doc, model, r)
    if any(k in doc for k in _V1_INFERENCE_KEYS):
        return _read_v1_inference(doc, r)
    return _read_lightning(doc, r)


def _read_v1_inference(doc: dict, r: Reading) -> Reading:
    """A NeMo 1.x Megatron inference / evaluation config (examples/nlp/language_modeling/megatron_gpt_eval.py):
    trainer.precision as the training configs take it, top-level megatron_amp_O2 casts the restored
    weights to it (no optimizer, no fp32 copy); the architecture is the restored .nemo's."""
    r.understood("trainer.precision", "megatron_amp_O2")
    raw = get(doc, "trainer.precision")
    if raw is None:
        r.set("compute_dtype", "float32", source="default", note="no trainer.precision: Lightning's Trainer default 32-true")
    else:
        compute = _V1_PRECISION.get(str(raw).strip().lower(), "invalid")
        if compute == "invalid":
            r.refused["trainer.precision"] = (f"ValueError: Could not parse the precision of `{raw}` to a valid torch.dtype "
                                              "(nemo/collections/nlp/parts/utils_funcs.py torch_dtype_from_precision)")
        r.set("compute_dtype", compute, key="trainer.precision", raw=raw)
        if compute in ("bfloat16", "float16"):
            if truthy(doc.get("megatron_amp_O2")):
                r.set("param_dtype", compute, key="megatron_amp_O2", raw=doc.get("megatron_amp_O2"),
                      note="inference with megatron_amp_O2: the weights are cast to it (Float16Module), no fp32 copy")
            else:
                r.set("param_dtype", "float32", source="default", note="the weights stay fp32 under autocast")
    r.set("attention", "auto", source="default",
          note="inference: the restored .nemo checkpoint's architecture decides (Transformer Engine's choice on a Megatron Core "
               "checkpoint with Transformer Engine)")
    r.settings = {k: v for k, v in (("trainer.precision", raw), ("megatron_amp_O2", doc.get("megatron_amp_O2"))) if v is not None}
    r.edits["precision=fp16"] = {"trainer.precision": 16}
    r.edits["precision=fp32"] = {"trainer.precision": 32}
    r.edits["precision=bf16"] = {"trainer.precision": "bf16"}
    return r


# ---------------------------------------------------------------- NeMo 1.x (Megatron)


def _read_v1(doc: dict, model: dict, r: Reading) -> Reading:
    trainer = doc.get("trainer") if isinstance(doc.get("trainer"), dict) else {}
    r.understood("trainer.precision", "model.precision", "model.megatron_amp_O2", "model.mcore_gpt", "model.transformer_engine",
                 "model.use_flash_attention", "model.attention_backend", "model.fp8", "model.fp8_e4m3", "model.fp8_hybrid",
                 "model.fp8_margin", "model.fp8_interval", "model.fp8_amax_history_len", "model.fp8_amax_compute_algo",
                 "model.fp8_wgrad", "model.fp8_params", "model.fsdp", "model.fsdp_grad_reduce_dtype", "model.peft.peft_scheme",
                 "model.native_amp_init_scale", "model.native_amp_growth_interval", "model.hysteresis", "model.name",
                 "model.attention_type", "model.optim.grad_sync_dtype")
    finetune = model.get("restore_from_path") not in (None, "")
    t_raw, t_via = mg.resolve(doc, trainer.get("precision"))
    m_raw, m_via = mg.resolve(doc, model.get("precision"))
    if m_raw is not None and not finetune and not _unresolved(m_raw):
        key, raw, via = m_via or "model.precision", m_raw, m_via and "model.precision"
    elif t_raw is not None and not _unresolved(t_raw):
        key, raw, via = t_via or "trainer.precision", t_raw, t_via and "trainer.precision"
    else:
        key, raw, via = None, None, None
    o2_written = truthy(model.get("megatron_amp_O2"))
    fsdp = bool(truthy(model.get("fsdp")))
    o2 = bool(o2_written) and not fsdp
    optim = model.get("optim") if isinstance(model.get("optim"), dict) else {}
    dist_optim = optim.get("name") in _DIST_OPTIM
    if raw is None:
        compute = "float32"
        r.set("compute_dtype", "float32", source="default",
              note="no trainer.precision: Lightning's Trainer default 32-true (MegatronTrainerBuilder adds no precision plugin)")
    else:
        compute = _V1_PRECISION.get(str(raw).strip().lower(), "invalid")
        note = None
        if compute == "invalid":
            r.refused[key] = (f"ValueError: Could not parse the precision of `{raw}` to a valid torch.dtype "
                              "(nemo/collections/nlp/parts/utils_funcs.py torch_dtype_from_precision)")
        elif compute != "float32":
            note = (f"megatron_amp_O2: Megatron's Float16Module casts the weights to {compute}, no autocast; the optimizer keeps "
                    "fp32 main params" if o2 else
                    f"O1: torch.autocast({compute}) over fp32 weights ({'FSDPMixedPrecisionPlugin' if fsdp else 'PipelineMixedPrecisionPlugin'})")
        if via and via != key:
            note = (note + "; " if note else "") + f"{via}: {_show(doc, via)} refers to it"
        if finetune:
            note = (note + "; " if note else "") + "fine-tuning: merge_cfg_with sets model.precision = trainer.precision"
        r.set("compute_dtype", compute, key=key, raw=raw, note=note)
        r.read.add(key)
        if key == "model.precision" and t_raw is not None and not _unresolved(t_raw) and \
                _V1_PRECISION.get(str(t_raw).strip().lower()) not in (None, compute):
            r.plan["compute_dtype"].note = (r.plan["compute_dtype"].note or "") + \
                f"; trainer.precision {t_raw!r} differs: the precision plugin runs that, the model is built for {raw!r}"
    if compute in ("bfloat16", "float16"):
        if o2:
            r.set("param_dtype", "float32", key="model.megatron_amp_O2", raw=model.get("megatron_amp_O2"),
                  note=f"O2: the model's copy is {compute}, the optimizer keeps the fp32 main params")
        else:
            note = "O1: the weights stay fp32 under autocast"
            if o2_written and fsdp:
                note += " (model.fsdp turns megatron_amp_O2 off)"
            r.set("param_dtype", "float32", source="default", note=note)
    elif compute == "float32":
        r.set("param_dtype", "float32", source="default" if raw is None else "file", key=key, raw=raw)
    if compute == "float16":
        r.set("loss_scaling", True, key=key, raw=raw,
              note="NeMo's GradScaler (init_scale model.native_amp_init_scale = 2**32, hysteresis 2)"
              if not fsdp else "FSDP's sharded GradScaler")
        if o2 and not dist_optim and "optim" in model:  # configure_optimizers: training only
            r.refused["model.megatron_amp_O2"] = ("ValueError: fp16 training is not yet supported with O2.Please set "
                                                  "megatron_amp_O2 to False in the model config.")
    _v1_fp8(model, fsdp, r)
    _v1_attention(doc, model, finetune, r)
    if fsdp:
        r.set("distributed", "fsdp", key="model.fsdp", raw=model.get("fsdp"), note="NLPFSDPStrategy (torch FSDP)")
        reduce_raw = model.get("fsdp_grad_reduce_dtype", 32)
        reduce = {"32": "float32", "fp32": "float32", "16": "float16", "fp16": "float16", "bf16": "bfloat16"}.get(str(reduce_raw).lower())
        if reduce:
            r.set("reduce_dtype", reduce, key="model.fsdp_grad_reduce_dtype" if "fsdp_grad_reduce_dtype" in model else None,
                  source="file" if "fsdp_grad_reduce_dtype" in model else "default", raw=reduce_raw,
                  note="NLPFSDPStrategy grad_reduce_dtype (model.fsdp_grad_reduce_dtype, 32 by default)")
    sync = optim.get("grad_sync_dtype")
    if dist_optim and "reduce_dtype" not in r.plan and compute in ("bfloat16", "float16"):
        note = ("the distributed optimizer's gradient reduce-scatter dtype (megatron_gpt_model.py: DDP "
                "grad_reduce_in_fp32 = optim.grad_sync_dtype == 'fp32', its default)")
        if dtype_of(sync):
            r.set("reduce_dtype", dtype_of(sync), key="model.optim.grad_sync_dtype", raw=sync, note=note)
        else:
            r.set("reduce_dtype", "float32", source="default", note=note)
    _v1_peft(model, r)
    r.settings = {k: v for k, v in (("trainer.precision", trainer.get("precision")), ("model.precision", model.get("precision")),
                                     ("model.megatron_amp_O2", model.get("megatron_amp_O2")), ("model.mcore_gpt", model.get("mcore_gpt")),
                                     ("model.transformer_engine", model.get("transformer_engine")),
                                     ("model.use_flash_attention", model.get("use_flash_attention")),
                                     ("model.fp8", model.get("fp8"))) if v is not None}
    _v1_edits(doc, model, r, o2=o2, dist_optim=dist_optim)
    return r


def _v1_fp8(model: dict, fsdp: bool, r: Reading) -> None:
    if not truthy(model.get("fp8")):
        return
    fmt = "e4m3" if truthy(model.get("fp8_e4m3")) else "hybrid" if truthy(model.get("fp8_hybrid")) else None
    if fmt is None and truthy(model.get("mcore_gpt")):
        r.refused["model.fp8"] = "ValueError: fp8 enabled but fp8_format (fp8_e4m3 | fp8_hybrid) is not set."
    if fsdp:
        r.refused["model.fp8"] = "ValueError: Torch FSDP does not support FP8."
    mg.set_fp8(r, fmt or "(no fp8_e4m3 / fp8_hybrid)", None, key="model.fp8", recipe_default="delayed")
    r.plan["fp8"].note += " (NeMo 1.x: DelayedScaling, model.fp8_amax_history_len)"
    if truthy(model.get("fp8_params")):
        r.set("quantization", "fp8-weights", key="model.fp8_params", raw=model.get("fp8_params"),
              note="Transformer Engine's fp8_model_init keeps the GEMM weights in fp8; the distributed optimizer stores fp32 params")


def _v1_attention(doc: dict, model: dict, finetune: bool, r: Reading) -> None:
    mcore = truthy(model.get("mcore_gpt"))
    te = truthy(model.get("transformer_engine"))
    spec = str(model.get("name") or "")
    te_layers = bool(te) or spec in _TE_SPECS
    use_fa = truthy(model.get("use_flash_attention"))
    fa_note = ("; use_flash_attention: True still needs flash_attn to import (megatron_base_model.py raises "
               "ImportError 'flash_attn was not found.')") if use_fa else ""
    if finetune and "mcore_gpt" not in model:
        r.set("attention", "auto", source="default",
              note="fine-tuning: mcore_gpt / transformer_engine come from the .nemo checkpoint's config (merge_cfg_with); "
                   "a Megatron Core checkpoint with Transformer Engine: " + mg.ATTENTION_NOTES["auto"] + fa_note)
        return
    if mcore:
        if not te_layers:
            r.set("attention", "eager", source="default",
                  note="mcore_gpt with transformer_engine False: Megatron Core's local layer spec (megatron_gpt_model.py "
                       "get_specs), Megatron's own DotProductAttention (baddbmm + softmax + bmm)" + fa_note)
            if "attention_backend" in model:
                r.understood("model.attention_backend")
            return
        if "attention_backend" in model and mg.set_attention(r, model.get("attention_backend"), "model.attention_backend"):
            r.plan["attention"].note += fa_note
            return
        r.set("attention", "auto", source="default",
              note="Transformer Engine layers (" + (f"model.name {spec}" if spec in _TE_SPECS else "transformer_engine: True")
                   + "), attention_backend auto (megatron_base_model.py): " + mg.ATTENTION_NOTES["auto"] + fa_note)
        return
    # NeMo's legacy (non Megatron Core) GPT model
    if te:
        r.set("attention", "auto", source="default",
              note="legacy model with transformer_engine: Transformer Engine's TransformerLayer: " + mg.ATTENTION_NOTES["auto"] + fa_note)
    elif use_fa:
        r.set("attention", "flash_attention_2", key="model.use_flash_attention", raw=model.get("use_flash_attention"),
              note="NeMo's legacy CoreAttention calls flash_attn (flash_attn_func / varlen; the Triton kernel with an "
                   "attention bias); ImportError 'flash_attn was not found.' without it")
    else:
        r.set("attention", "eager", source="default",
              note="mcore_gpt False (NeMo's default): the legacy CoreAttention.torch_attention, matmul + fused softmax")


def _v1_peft(model: dict, r: Reading) -> None:
    peft = model.get("peft") if isinstance(model.get("peft"), dict) else None
    if peft is None:
        return
    scheme = peft.get("peft_scheme")
    if scheme is None or str(scheme).strip().lower() in ("none", ""):
        return
    text = str(scheme).strip().lower()
    r.set("adapter", _PEFT_V1.get(text, text), key="model.peft.peft_scheme", raw=scheme)
    if text == "qlora":
        r.set("quantization", "nf4", key="model.peft.peft_scheme", raw=scheme,
              note="NeMo's NF4LinearWrapper (modelopt TensorQuantizer, 4-bit blocks of 64)")
        compute = r.plan.get("compute_dtype")
        if compute is not None and compute.value in ("bfloat16", "float16", "float32"):
            r.set("quant_compute_dtype", compute.value, source="default",
                  note="the NF4 weight is dequantised to the model's dtype for each matmul (adapters/qlora.py _LinearNF4)")


def _v1_edits(doc: dict, model: dict, r: Reading, o2: bool, dist_optim: bool) -> None:
    literal_model_precision = model.get("precision") is not None and mg.resolve(doc, model.get("precision"))[1] is None \
        and model.get("restore_from_path") in (None, "")

    def precision(value):
        edit = {"trainer.precision": value}
        if literal_model_precision:
            edit["model.precision"] = value
        return edit

    fp16 = precision(16)
    if o2 and not dist_optim:
        fp16["model.megatron_amp_O2"] = False
    r.edits["precision=fp16"] = fp16
    r.edits["precision=fp32"] = precision(32)
    r.edits["precision=bf16"] = precision("bf16")
    attention = r.plan.get("attention")
    if attention is not None and attention.key == "model.use_flash_attention":
        r.edits["attention=sdpa"] = {"model.use_flash_attention": False}
    elif attention is not None and attention.key == "model.attention_backend" and attention.value in ("flash_attention_2", "flash_attention_3"):
        r.edits["attention=sdpa"] = {"model.attention_backend": "auto"}
    if r.plan.get("fp8") is not None:
        r.edits["fp8=off"] = {"model.fp8": False}


# ---------------------------------------------------------------- NeMo 2.x (`_target_` objects)


def _find_plugin(doc: dict) -> tuple[Optional[dict], Optional[str]]:
    for prefix, node in (("plugins", doc.get("plugins")), ("trainer.plugins", get(doc, "trainer.plugins"))):
        items = node if isinstance(node, list) else [node]
        for i, item in enumerate(items):
            if isinstance(item, dict) and "MixedPrecision" in mg.target_name(item):
                return item, prefix if not isinstance(node, list) else f"{prefix}.{i}"
    return None, None


def _find_model_config(doc: dict) -> tuple[Optional[dict], Optional[str]]:
    for dotted in ("model.config", "config", "model.llm.config", "model.language_model.config", "model.model_config"):
        node = get(doc, dotted)
        if isinstance(node, dict):
            return node, dotted
    return None, None


def _read_v2(doc: dict, r: Reading) -> Reading:
    plugin, pkey = _find_plugin(doc)
    config, ckey = _find_model_config(doc)
    config = config or {}
    if pkey:
        r.understood(pkey)
    if ckey:
        r.understood(*(f"{ckey}.{k}" for k in ("bf16", "fp16", "params_dtype", "pipeline_dtype", "autocast_dtype", "enable_autocast",
                                                "attention_backend", "flash_attention_version", "fp8", "fp8_recipe", "fp8_param",
                                                "fp8_margin", "fp8_amax_history_len", "fp8_amax_compute_algo", "fp8_wgrad",
                                                "fp8_dot_product_attention", "fp8_multi_head_attention", "fp8_interval",
                                                "activation_func_fp8_input_store", "fp16_lm_cross_entropy", "attention_softmax_in_fp32",
                                                "fp4", "fp4_recipe", "fp4_param")))
    r.understood("optim.config.bf16", "optim.config.fp16", "optim.config.params_dtype", "trainer.precision")
    compute = None
    if plugin is not None:
        raw = plugin.get("precision")
        text = str(raw).strip().lower() if raw is not None else ""
        compute = _V2_PRECISION.get(text)
        if raw is None:
            r.refused[f"{pkey}.precision"] = "TypeError: MegatronMixedPrecision.__init__() missing 1 required positional argument: 'precision'"
            compute = "invalid"
            r.set("compute_dtype", "invalid", key=pkey)
        elif compute is None:
            compute = "float32"
            r.set("compute_dtype", "float32", key=f"{pkey}.precision", raw=raw,
                  note=f"MegatronMixedPrecision sets neither bf16 nor fp16 for {raw!r} (it takes bf16, bf16-mixed, 16, 16-mixed, "
                       "fp16, fp16-mixed, 32, fp32): it trains in 32-true")
        else:
            autocast = truthy(plugin.get("autocast_enabled"))
            note = (f"torch.autocast({compute}) on top" if autocast else
                    f"Megatron's Float16Module casts the weights to {compute}, no autocast") if compute != "float32" else None
            r.set("compute_dtype", compute, key=f"{pkey}.precision", raw=raw, note=note)
        if compute in ("bfloat16", "float16"):
            r.set("param_dtype", "float32", source="default",
                  note=f"the model's copy is {compute} (params_dtype {mg.torch_dtype(plugin.get('params_dtype')) or 'float32, then cast'}); "
                       "the Megatron optimizer keeps fp32 main params")
            reduce32 = truthy(plugin.get("grad_reduce_in_fp32"))
            reduce32 = True if reduce32 is None else reduce32
            r.set("reduce_dtype", "float32" if reduce32 else compute, key=f"{pkey}.grad_reduce_in_fp32" if "grad_reduce_in_fp32" in plugin else None,
                  source="file" if "grad_reduce_in_fp32" in plugin else "default", raw=plugin.get("grad_reduce_in_fp32"),
                  note="MegatronMixedPrecision's grad_reduce_in_fp32 (True by default) goes to the DDP config")
        elif compute == "float32":
            r.set("param_dtype", "float32", source="default", note="fp32 training")
        if compute == "float16":
            r.set("loss_scaling", True, source="default",
                  note="the Megatron optimizer's loss scaler (dynamic unless fp16_loss_scale; initial 2**32)")
        if plugin.get("fp4"):
            mg.set_fp4(r, plugin.get("fp4"), key=f"{pkey}.fp4")
        elif plugin.get("fp8"):
            mg.set_fp8(r, plugin.get("fp8"), plugin.get("fp8_recipe"), key=f"{pkey}.fp8", recipe_key=f"{pkey}.fp8_recipe")
            fp8_params = plugin.get("fp8_param_gather", plugin.get("fp8_params"))
            if truthy(fp8_params):
                r.set("quantization", "fp8-weights", key=f"{pkey}.fp8_param_gather" if "fp8_param_gather" in plugin else f"{pkey}.fp8_params",
                      raw=fp8_params, note="fp8 parameters (Transformer Engine fp8 weights, fp8 all-gather); fp32 main params in the optimizer")
    elif "bf16" in config or "fp16" in config:
        bf16, fp16 = truthy(config.get("bf16")), truthy(config.get("fp16"))
        compute = "bfloat16" if bf16 else "float16" if fp16 else "float32"
        k = f"{ckey}.bf16" if bf16 or not fp16 else f"{ckey}.fp16"
        r.set("compute_dtype", compute, key=k, raw=config.get(k.rsplit(".", 1)[1]),
              note="the model config as recorded; at run time the trainer's MegatronMixedPrecision plugin sets config.bf16 / fp16")
        params = mg.torch_dtype(config.get("params_dtype")) or "float32"
        r.set("param_dtype", "float32" if compute != "float32" else params, key=f"{ckey}.params_dtype" if "params_dtype" in config else None,
              source="file" if "params_dtype" in config else "default", raw=params,
              note="Megatron's optimizer keeps fp32 main params" if compute != "float32" else None)
    elif isinstance(get(doc, "trainer.precision"), (str, int)):
        _lightning_precision(doc, r)
    else:
        r.set("compute_dtype", "float32", source="default",
              note="no MegatronMixedPrecision plugin: nl.Trainer's Lightning default, 32-true")
        r.set("param_dtype", "float32", source="default", note="fp32 training")
    if "fp8" not in r.plan and config.get("fp8"):
        mg.set_fp8(r, config.get("fp8"), config.get("fp8_recipe"), key=f"{ckey}.fp8", recipe_key=f"{ckey}.fp8_recipe")
    _v2_attention(config, ckey, r)
    _v2_peft(doc, r)
    r.settings = {}
    if plugin is not None:
        r.settings.update({f"{pkey}.{k}": plugin[k] for k in ("precision", "autocast_enabled", "fp8", "fp8_recipe") if plugin.get(k) is not None})
    if ckey:
        r.settings.update({f"{ckey}.{k}": _plain(config[k]) for k in ("bf16", "fp16", "attention_backend") if k in config})
    if plugin is not None:
        r.edits["precision=fp16"] = {f"{pkey}.precision": "16-mixed"}
        r.edits["precision=fp32"] = {f"{pkey}.precision": "32"}
        r.edits["precision=bf16"] = {f"{pkey}.precision": "bf16-mixed"}
        if plugin.get("fp8"):
            r.edits["fp8=off"] = {f"{pkey}.fp8": None}
    attention = r.plan.get("attention")
    if ckey and attention is not None and attention.value in ("flash_attention_2", "flash_attention_3"):
        r.edits["attention=sdpa"] = {f"{ckey}.attention_backend": "auto"}
    return r


def _v2_attention(config: dict, ckey: Optional[str], r: Reading) -> None:
    if ckey and "attention_backend" in config and mg.set_attention(
            r, config["attention_backend"], f"{ckey}.attention_backend", config.get("flash_attention_version"),
            f"{ckey}.flash_attention_version"):
        return
    name = mg.target_name(config)
    for pattern, where in _FLASH_CONFIGS:
        if pattern.search(name):
            r.set("attention", "flash_attention_2", source="default",
                  note=f"{name}: nemo/collections/llm/gpt/model/{where} defaults attention_backend to AttnBackend.flash: "
                       + mg.ATTENTION_NOTES["flash"])
            return
    if name.startswith("GPTOSSConfig"):
        r.set("attention", "eager", source="default",
              note=f"{name}: gpt_oss.py defaults attention_backend to AttnBackend.local: " + mg.ATTENTION_NOTES["local"])
        return
    r.set("attention", "auto", source="default",
          note="default_layer_spec: Transformer Engine layers where it is installed; " + mg.AUTO_NOTE)


def _v2_peft(doc: dict, r: Reading) -> None:
    for dotted in ("peft", "model.peft", "model_transform", "model.model_transform"):
        node = get(doc, dotted)
        name = mg.target_name(node)
        if name and (".peft." in str(node.get("_target_")) or name in _PEFT_V2):
            r.set("adapter", _PEFT_V2.get(name, name.lower()), key=f"{dotted}._target_", raw=node.get("_target_"))
            dtype = mg.torch_dtype(node.get("lora_dtype"))
            if dtype:
                r.set("adapter_dtype", dtype, key=f"{dotted}.lora_dtype", raw=node.get("lora_dtype"))
            return


# ---------------------------------------------------------------- other NeMo collections (plain Lightning)


def _read_lightning(doc: dict, r: Reading) -> Reading:
    r.understood("trainer.precision")
    if isinstance(get(doc, "trainer.precision"), (str, int)):
        _lightning_precision(doc, r)
    else:
        r.set("compute_dtype", "float32", source="default", note="no trainer.precision: Lightning's Trainer default 32-true")
        r.set("param_dtype", "float32", source="default", note="fp32 training")
    raw = get(doc, "trainer.precision")
    r.settings = {"trainer.precision": raw} if raw is not None else {}
    r.edits["precision=fp16"] = {"trainer.precision": "16-mixed"}
    r.edits["precision=fp32"] = {"trainer.precision": "32-true"}
    r.edits["precision=bf16"] = {"trainer.precision": "bf16-mixed"}
    return r


def _lightning_precision(doc: dict, r: Reading) -> None:
    from ..distributed.litgpt import _PRECISIONS

    raw = get(doc, "trainer.precision")
    text = str(raw).strip().lower()
    compute, params = _PRECISIONS.get(text, ("invalid", None))
    r.set("compute_dtype", compute, key="trainer.precision", raw=raw,
          note="Lightning's precision plugin (a NeMo collection that is not Megatron)")
    if params:
        r.set("param_dtype", params, key="trainer.precision", raw=raw, note="true: the weights in it, no fp32 copy" if "true" in text else None)
    if compute == "invalid":
        r.refused["trainer.precision"] = f"Precision {raw!r} is invalid (Lightning's _PRECISION_INPUT)"
    if text.startswith("16") and text != "16-true":
        r.set("loss_scaling", True, key="trainer.precision", raw=raw, note="Lightning's GradScaler")
    if text.startswith("transformer-engine"):
        r.set("fp8", True, key="trainer.precision", raw=raw, note="Lightning's TransformerEnginePrecision")
        r.set("fp8_backend", "te", key="trainer.precision", raw=raw)


def _unresolved(value: Any) -> bool:
    return isinstance(value, str) and "${" in value


def _show(doc: dict, key: str) -> Any:
    return get(doc, key)


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)[:120]

